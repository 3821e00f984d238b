#include "httprequestfollower.h"

#include "httphead.h"

#include <algorithm>
#include <utility>

namespace AgentDeck {

namespace {

// A chunk-size or trailer line longer than this is not HTTP any client sends.
constexpr qsizetype MaxLineBytes = 4096;

bool isNamed(QByteArrayView name, QByteArrayView wanted)
{
    return name.compare(wanted, Qt::CaseInsensitive) == 0;
}

// A number of digits only (RFC 9112: Content-Length is 1*DIGIT, a chunk size 1*HEXDIG), or -1.
// toLongLong() takes a sign and, in base 16, "0x", which a proxy in front may read otherwise.
qint64 parseDigits(QByteArrayView text, int base)
{
    const auto isDigit = [base](char c) {
        return (c >= '0' && c <= '9') ||
               (base == 16 && ((c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')));
    };
    if (text.isEmpty() || !std::all_of(text.begin(), text.end(), isDigit))
        return -1;
    bool ok = false;
    const qint64 value = text.toLongLong(&ok, base);
    return ok ? value : -1;
}

} // namespace

HttpRequestFollower::HttpRequestFollower(qint64 maxBodyBytes)
    : m_maxBodyBytes(maxBodyBytes)
{}

bool HttpRequestFollower::inRequest() const
{
    switch (m_state) {
    case State::Head:
        return !m_pending.isEmpty();
    case State::Lost:
        return false;
    default:
        return true;
    }
}

HttpRequestFollower::News HttpRequestFollower::follow(QByteArrayView bytes)
{
    News news;
    qsizetype at = 0;
    while (at < bytes.size() && m_state != State::Lost) {
        const QByteArrayView rest = bytes.sliced(at);
        const int ended = news.requestsEnded;
        switch (m_state) {
        case State::Head:
            at += inHead(rest, news);
            break;
        case State::Body:
        case State::ChunkData: {
            const qint64 taken = std::min<qint64>(m_remaining, rest.size());
            m_request.body.append(rest.first(taken));
            m_remaining -= taken;
            at += taken;
            if (m_remaining > 0)
                break;
            if (m_state == State::ChunkData) {
                m_state = State::ChunkEnd;
                m_remaining = 2; // the CRLF after a chunk's data
            } else {
                endRequest(news);
            }
            break;
        }
        case State::ChunkEnd: {
            // Exactly CRLF: a proxy in front that takes a bare LF too would end the chunks
            // elsewhere, and smuggle a request past it.
            const QByteArrayView expected = QByteArrayView("\r\n").last(m_remaining);
            const qsizetype taken = std::min<qsizetype>(m_remaining, rest.size());
            if (rest.first(taken) != expected.first(taken)) {
                fail(news, Problem::Malformed);
                break;
            }
            m_remaining -= taken;
            at += taken;
            if (m_remaining == 0)
                m_state = State::ChunkSize;
            break;
        }
        case State::ChunkSize:
        case State::Trailers:
            at += inLine(rest, news);
            if (m_state != State::Lost && m_pending.endsWith('\n'))
                endLine(news);
            break;
        case State::Lost:
            break;
        }
        if (news.requestsEnded > ended) {
            m_requestStart = m_followed + at;
            news.requestEnds.append(m_requestStart);
        }
    }
    m_followed += bytes.size();
    if (m_expectsContinue) {
        news.expectsContinue = news.problem == Problem::None;
        m_expectsContinue = false;
    }
    return news;
}

qsizetype HttpRequestFollower::inHead(QByteArrayView bytes, News &news)
{
    qsizetype skipped = 0;
    if (m_pending.isEmpty()) {
        // Empty lines before a request line are allowed (RFC 9112, 2.2).
        while (skipped < bytes.size() && (bytes[skipped] == '\r' || bytes[skipped] == '\n'))
            ++skipped;
        bytes = bytes.sliced(skipped);
    }
    const qsizetype before = m_pending.size();
    m_pending.append(bytes.first(std::min(bytes.size(), MaxHeadBytes + 1 - before)));
    const qsizetype taken = skipped + (m_pending.size() - before); // unless the head ends here
    // One pass over the new bytes. Lines end in CRLF: a head with a bare LF is refused (RFC
    // 9112, 2.2 allows either, and a proxy in front may read such a head otherwise), as is a
    // bare CR. The head ends at its first empty line; the bytes after it (a body, the next
    // request) are not the head's.
    const char *pending = std::as_const(m_pending).constData();
    qsizetype end = -1;
    qsizetype requestLineEnd = -1;
    for (qsizetype i = std::max<qsizetype>(before, 1); i < m_pending.size(); ++i) {
        if ((pending[i] == '\n') != (pending[i - 1] == '\r')) {
            fail(news, Problem::MalformedHead);
            return taken;
        }
        if (pending[i] != '\n')
            continue;
        if (requestLineEnd < 0)
            requestLineEnd = i - 1;
        if (i >= 3 && pending[i - 2] == '\n') { // CRLF CRLF, as each LF follows a CR
            end = i - 3;
            break;
        }
    }
    if (!m_requestLineChecked && requestLineEnd >= 0) {
        m_requestLineChecked = true;
        switch (checkRequestLine(QByteArrayView(m_pending).first(requestLineEnd))) {
        case RequestLineFault::None:
            break;
        case RequestLineFault::Malformed:
            fail(news, Problem::MalformedHead);
            return taken;
        case RequestLineFault::Version:
            fail(news, Problem::VersionNotSupported);
            return taken;
        }
    }
    if (end < 0) {
        if (m_pending.size() > MaxHeadBytes)
            fail(news, Problem::HeadTooLarge);
        return taken;
    }
    m_request = {std::exchange(m_pending, {}), {}, false};
    m_request.head.truncate(end);
    m_requestLineChecked = false;
    if (!headerLinesAreWellFormed(m_request.head)) {
        fail(news, Problem::MalformedHead);
        return skipped + (end + 4 - before);
    }
    startBody(m_request.head, news);
    return skipped + (end + 4 - before);
}

void HttpRequestFollower::startBody(QByteArrayView head, News &news)
{
    qint64 length = 0;
    bool hasLength = false;
    bool chunked = false;
    bool hasTransferEncoding = false;
    bool readable = true;
    bool expectsContinue = false;
    // HTTP/1.1 keeps a connection unless told to close it; HTTP/1.0 closes it unless told to
    // keep it (RFC 9112, 9.3).
    const qsizetype lineEnd = head.indexOf('\r');
    const QByteArrayView requestLine = lineEnd < 0 ? head : head.first(lineEnd);
    const bool http10 = requestLine.trimmed().endsWith("HTTP/1.0");
    bool close = http10;
    forEachHeader(head, [&](QByteArrayView name, QByteArrayView value) {
        // Framing that a proxy in front could read otherwise is refused (RFC 9112, 6.1 and
        // 6.3): two lengths that differ, a coding other than "chunked" alone, both.
        if (isNamed(name, "content-length")) {
            const qint64 parsed = parseDigits(value.trimmed(), 10);
            readable = readable && parsed >= 0 && (!hasLength || parsed == length);
            length = parsed;
            hasLength = true;
        } else if (isNamed(name, "transfer-encoding")) {
            // Only "chunked" is spoken, and only once.
            readable = readable && !hasTransferEncoding && isNamed(value.trimmed(), "chunked");
            chunked = hasTransferEncoding = true;
        } else if (isNamed(name, "expect")) {
            expectsContinue = isNamed(value, "100-continue");
        } else if (isNamed(name, "connection")) {
            close =
                headerHasToken(value, "close") || (http10 && !headerHasToken(value, "keep-alive"));
        }
    });
    m_request.closeAfter = close;
    if (!readable || (hasLength && hasTransferEncoding)) {
        fail(news, Problem::Malformed);
        return;
    }
    if (chunked) {
        m_state = State::ChunkSize;
        m_bodyBytes = 0;
        m_trailerBytes = 0;
    } else if (length > m_maxBodyBytes) {
        fail(news, Problem::BodyTooLarge);
        return;
    } else if (length > 0) {
        m_state = State::Body;
        m_remaining = length;
    } else {
        endRequest(news); // no body: the next head follows
        return;
    }
    m_expectsContinue = expectsContinue;
}

qsizetype HttpRequestFollower::inLine(QByteArrayView bytes, News &news)
{
    const qsizetype newline = bytes.indexOf('\n');
    const qsizetype taken = newline < 0 ? bytes.size() : newline + 1;
    m_pending.append(bytes.first(taken));
    if (m_pending.size() > MaxLineBytes)
        fail(news, Problem::Malformed);
    return taken;
}

void HttpRequestFollower::endRequest(News &news)
{
    m_state = State::Head;
    m_expectsContinue = false;
    ++news.requestsEnded;
    news.requests.append(std::exchange(m_request, {}));
}

void HttpRequestFollower::fail(News &news, Problem problem)
{
    news.problem = problem;
    m_requestLineChecked = false;
    m_state = State::Lost;
    m_pending.clear();
    m_request = {};
}

void HttpRequestFollower::endLine(News &news)
{
    const QByteArray line = std::exchange(m_pending, {});
    // Lines end in CRLF, with no CR before (as in the head): with a bare LF, a proxy in front
    // and this parser could end the chunks at different bytes.
    if (!line.endsWith("\r\n") || line.indexOf('\r') != line.size() - 2) {
        fail(news, Problem::Malformed);
        return;
    }
    if (m_state == State::Trailers) {
        if (line.trimmed().isEmpty()) // the end of the request
            endRequest(news);
        else if ((m_trailerBytes += line.size()) > MaxHeadBytes) // headers after all
            fail(news, Problem::HeadTooLarge);
        return;
    }
    qsizetype end = line.indexOf(';'); // chunk extensions
    if (end < 0)
        end = line.size();
    const qint64 size = parseDigits(QByteArrayView(line).first(end).trimmed(), 16);
    if (size < 0) {
        fail(news, Problem::Malformed);
        return;
    }
    m_bodyBytes += size;
    if (m_bodyBytes > m_maxBodyBytes) {
        fail(news, Problem::BodyTooLarge);
    } else if (size == 0) {
        m_state = State::Trailers;
    } else {
        m_state = State::ChunkData;
        m_remaining = size;
    }
}

} // namespace AgentDeck
