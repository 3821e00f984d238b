#include "httpconnection.h"

#include "answerline.h"
#include "apierror.h"
#include "httphead.h"
#include "httplistener.h"
#include "logging.h"
#include "metrics.h"
#include "requestpath.h"

#include <QPointer>
#include <QTcpSocket>
#include <QUrl>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

using namespace Qt::StringLiterals;

namespace AgentDeck {

HeadWaiters::Place &HeadWaiters::placeOf(HttpConnection *connection)
{
    return connection->m_waiting;
}

void HeadWaiters::add(HttpConnection *connection)
{
    Place &place = placeOf(connection);
    if (place.inLine)
        return;
    place = Place{m_last, nullptr, m_clock.elapsed(), true};
    if (m_last)
        placeOf(m_last).next = connection;
    else
        m_first = connection;
    m_last = connection;
}

void HeadWaiters::remove(HttpConnection *connection)
{
    Place &place = placeOf(connection);
    if (!place.inLine)
        return;
    if (place.previous)
        placeOf(place.previous).next = place.next;
    else
        m_first = place.next;
    if (place.next)
        placeOf(place.next).previous = place.previous;
    else
        m_last = place.previous;
    place = Place{};
}

HttpConnection *HeadWaiters::evictable() const
{
    if (!m_first || m_clock.elapsed() - m_first->m_waiting.since < MinWaitMs)
        return nullptr;
    return m_first;
}

namespace {

HttpMethod methodOf(QByteArrayView name)
{
    using Method = HttpMethod;
    static constexpr std::pair<QByteArrayView, Method> methods[] = {
        {"GET", Method::Get},         {"POST", Method::Post},       {"PUT", Method::Put},
        {"DELETE", Method::Delete},   {"HEAD", Method::Head},       {"PATCH", Method::Patch},
        {"OPTIONS", Method::Options}, {"CONNECT", Method::Connect}, {"TRACE", Method::Trace},
    };
    for (const auto &[text, method] : methods) {
        if (name == text) // methods are case-sensitive (RFC 9110, 9.1)
            return method;
    }
    return Method::Unknown;
}

} // namespace

HttpRequest HttpConnection::toRequest(const HttpRequestFollower::Request &received)
{
    HttpRequest request;
    const QByteArrayView head(received.head);
    qsizetype lineEnd = head.indexOf('\r');
    if (lineEnd < 0)
        lineEnd = head.size();
    // The follower checked the request line: `METHOD SP target SP version`.
    const QByteArrayView line = head.first(lineEnd);
    const qsizetype methodEnd = line.indexOf(' ');
    const qsizetype targetEnd = line.lastIndexOf(' ');
    request.method = methodOf(line.first(methodEnd));
    QByteArrayView target = line.sliced(methodEnd + 1, targetEnd - methodEnd - 1);
    QByteArray absolute;
    if (!target.startsWith('/')) { // absolute-form, as a client speaking to a proxy sends it
        const QUrl url = QUrl::fromEncoded(target.toByteArray());
        absolute = url.path(QUrl::FullyEncoded).toUtf8();
        if (absolute.isEmpty())
            absolute = "/";
        if (url.hasQuery())
            absolute += '?' + url.query(QUrl::FullyEncoded).toUtf8();
        target = absolute;
    }
    const qsizetype question = target.indexOf('?');
    const RequestPath path = decodeRequestPath(question < 0 ? target : target.first(question));
    request.path = path.path;
    request.pathFault = path.fault;
    if (question >= 0) {
        // Query strings are form-encoded, as HTML forms, `curl --data-urlencode`, Python's
        // urlencode and URLSearchParams write them: '+' stands for a space, a plus is %2B.
        // QUrlQuery takes '+' as itself, and `q=fix+login` searched for "fix+login".
        QString query = QString::fromUtf8(target.sliced(question + 1));
        query.replace(u'+', u"%20"_s);
        request.query = QUrlQuery(query);
    }
    request.head = received.head;
    request.body = received.body;
    return request;
}

HttpConnection::HttpConnection(QTcpSocket *socket, const HttpLimits &limits, Metrics &metrics,
                               std::shared_ptr<HeadWaiters> waiters, RequestHandler onRequest,
                               UpgradeHandler onUpgrade)
    : QObject(socket)
    , m_socket(socket)
    , m_limits(limits)
    , m_metrics(metrics)
    , m_follower(limits.maxBodyBytes)
    , m_waiters(std::move(waiters))
    , m_onRequest(std::move(onRequest))
    , m_onUpgrade(std::move(onUpgrade))
{
    m_waiters->add(this);
    // Activity moves the deadline, not the timer: restarting a timer at every request and every
    // write was a tenth of an /alive's CPU. When it fires early, it waits for the rest.
    m_idle.setSingleShot(true);
    m_idle.callOnTimeout(this, [this] {
        const std::chrono::milliseconds idle(m_lastActivity.elapsed());
        if (idle < m_limits.idleTimeout) {
            m_idle.start(m_limits.idleTimeout - idle);
            return;
        }
        m_metrics.httpConnectionClosed("idle");
        m_socket->disconnectFromHost();
    });
    m_lastActivity.start();
    m_idle.start(m_limits.idleTimeout);
    m_requestDue.setSingleShot(true);
    m_requestDue.callOnTimeout(this, [this] {
        refuse(ApiError{408, u"request_timeout"_s,
                        u"The request stalled: its head did not arrive whole, or its body "
                        "paused, for %1 ms"_s.arg(m_limits.requestTimeout.count())});
    });
    connect(m_socket, &QTcpSocket::readyRead, this, &HttpConnection::onReadyRead);
    // An answer being written is activity too: a slow handler does not make a connection idle.
    connect(m_socket, &QTcpSocket::bytesWritten, this, [this] {
        // Answers written while the requests of a read are taken: the read ends as if they were.
        if (m_taking)
            return;
        if (m_idle.isActive())
            m_lastActivity.start();
        noteWaiting(); // an asynchronous answer may have been the last one owed
    });
    connect(m_socket, &QTcpSocket::disconnected, this, [this] { stopWaiting(); });
}

HttpConnection::~HttpConnection()
{
    stopWaiting();
}

bool HttpConnection::evict()
{
    stopWaiting();
    if (m_socket->state() == QAbstractSocket::UnconnectedState)
        return false;
    m_metrics.httpConnectionClosed("evicted");
    if (m_follower.inHead()) {
        // Said, in case a real client is behind it; the descriptor goes now regardless.
        m_socket->write(
            HttpResponse::error(ApiError{503, u"server_busy"_s,
                                         u"The server is at its limit of open files and this "
                                         "request head did not arrive whole in time"_s})
                .closingAnswer());
        m_socket->flush();
    }
    disconnect(m_socket, &QTcpSocket::readyRead, this, nullptr);
    if (m_socket->bytesToWrite() == 0)
        m_socket->disconnectFromHost(); // closes at once
    if (m_socket->state() != QAbstractSocket::UnconnectedState)
        m_socket->abort();
    return true;
}

void HttpConnection::onReadyRead()
{
    if (m_refused) {
        drop();
        return;
    }
    if (m_closing) {
        m_socket->skip(m_socket->bytesAvailable()); // nothing after the last request
        return;
    }
    // Every request makes an answer, and a client that keeps sending requests without reading
    // the answers would have them all held in memory: 20 s of pipelined searches took the
    // server to 745 MB. Every whole request of a read is taken at once, so both the backlog
    // and the requests one read may add to it are bounded.
    if (m_socket->bytesToWrite() > m_limits.maxUnsentBytes) {
        closeUnread(u"does not read its answers"_s);
        return;
    }
    // Until the first request is known not to ask for an upgrade, every byte stays in the
    // socket for whoever takes it over.
    const QByteArray bytes =
        m_decided ? m_socket->readAll() : m_socket->peek(m_socket->bytesAvailable());
    HttpRequestFollower::News news;
    if (!m_follower.lost())
        news = m_follower.follow(QByteArrayView(bytes).sliced(m_decided ? 0 : m_seen));
    if (!m_decided && !decideUpgrade(bytes, news))
        return; // undecided still, or handed over
    if (news.requests.size() > MaxRequestsPerRead) {
        closeUnread(
            u"sent more than %1 requests without waiting for answers"_s.arg(MaxRequestsPerRead));
        return;
    }
    if (!news.requests.isEmpty())
        stopWaiting(); // it waits anew, from now, once the requests are answered
    m_taking = true;
    take(std::move(news.requests));
    m_taking = false;
    if (m_closing || m_refused)
        return;
    // What concerns the request being followed takes its turn after the answers to the ones
    // before it: a refusal, and `100 Continue`.
    if (news.problem != HttpRequestFollower::Problem::None) {
        refuse(refusalFor(news.problem));
        return;
    }
    if (news.expectsContinue) {
        AnswerLine::writeInTurn(m_socket, [socket = QPointer(m_socket)] {
            if (socket)
                socket->write("HTTP/1.1 100 Continue\r\n\r\n");
        });
    }
    if (m_follower.inRequest()) {
        // A head must come whole within the limit; a body may take longer, but not pause for
        // longer (a 4 MiB upload on a slow link is slow, not stuck).
        if (!m_follower.inHead() || !m_requestDue.isActive())
            m_requestDue.start(m_limits.requestTimeout);
        // Linux delays the ACK of what came (up to 40 ms once the connection has answered a
        // request), and a client with Nagle's algorithm on holds its last small piece until
        // that ACK: QNetworkAccessManager's POST of a 20 kB body took 45 ms, not 2.
        const int on = 1;
        ::setsockopt(int(m_socket->socketDescriptor()), IPPROTO_TCP, TCP_QUICKACK, &on, sizeof on);
    } else if (m_requestDue.isActive()) {
        m_requestDue.stop();
    }
    noteActivity();
    // What was answered goes out now: a client that sent its request and then shut down its
    // side (`nc -N`) has Qt read that end next, and Qt then closes the socket with whatever is
    // still unsent.
    if (m_socket->bytesToWrite() > 0)
        m_socket->flush();
    noteWaiting();
}

bool HttpConnection::decideUpgrade(const QByteArray &bytes, const HttpRequestFollower::News &news)
{
    if (!news.requests.isEmpty() &&
        HttpListener::isWebSocketUpgrade(news.requests.constFirst().head)) {
        // A stream is long-lived and has rules of its own: no HTTP timeouts or backlog bound.
        QTcpSocket *socket = m_socket;
        const QByteArray head = socket->read(news.requestEnds.constFirst());
        const UpgradeHandler onUpgrade = std::move(m_onUpgrade);
        delete this;
        onUpgrade(socket, head);
        return false;
    }
    m_decided = !news.requests.isEmpty() || news.problem != HttpRequestFollower::Problem::None ||
                (m_follower.inRequest() && !m_follower.inHead());
    if (!m_decided) {
        m_seen = bytes.size();
        if (m_follower.inHead() && !m_requestDue.isActive())
            m_requestDue.start(m_limits.requestTimeout);
        noteActivity();
        return false;
    }
    m_socket->skip(bytes.size());
    return true;
}

void HttpConnection::take(QList<HttpRequestFollower::Request> requests)
{
    for (HttpRequestFollower::Request &received : requests) {
        if (HttpListener::isWebSocketUpgrade(received.head)) {
            // The listener hands over only a connection's first request (its streams then own
            // the socket); a later one would go unanswered.
            refuse(ApiError::badRequest(
                u"A WebSocket upgrade must be the first request of its connection"_s));
            return;
        }
        m_onRequest(toRequest(received), m_socket);
        if (received.closeAfter) {
            closeAfterAnswers();
            return;
        }
    }
}

void HttpConnection::closeAfterAnswers()
{
    m_closing = true;
    stopWaiting();
    m_idle.stop();
    m_requestDue.stop();
    m_socket->skip(m_socket->bytesAvailable());
    AnswerLine::writeInTurn(m_socket, [socket = QPointer(m_socket)] {
        if (socket)
            socket->disconnectFromHost();
    });
}

void HttpConnection::noteActivity()
{
    m_lastActivity.start();
    if (!m_idle.isActive())
        m_idle.start(m_limits.idleTimeout);
}

bool HttpConnection::isWaitingForHead() const
{
    if (m_refused || m_closing || m_socket->bytesToWrite() > 0 ||
        m_socket->state() != QAbstractSocket::ConnectedState)
        return false;
    if (m_follower.inRequest() && !m_follower.inHead())
        return false;
    const AnswerLine *line = AnswerLine::of(m_socket);
    return !line || line->isEmpty();
}

void HttpConnection::noteWaiting()
{
    const bool waiting = isWaitingForHead();
    if (waiting)
        m_waiters->add(this);
    else
        stopWaiting();
}

void HttpConnection::stopWaiting()
{
    m_waiters->remove(this);
}

void HttpConnection::closeUnread(const QString &why)
{
    qCInfo(lcHttp).nospace().noquote() << "closing a connection that " << why << " ("
                                       << m_socket->bytesToWrite() << " bytes of answers unsent)";
    m_metrics.httpConnectionClosed("not_reading");
    stopWaiting();
    disconnect(m_socket, &QTcpSocket::readyRead, this, nullptr);
    m_socket->abort();
}

ApiError HttpConnection::refusalFor(HttpRequestFollower::Problem problem) const
{
    using Problem = HttpRequestFollower::Problem;
    switch (problem) {
    case Problem::HeadTooLarge:
        return {
            431, u"headers_too_large"_s,
            u"The request head is larger than %1 bytes"_s.arg(HttpRequestFollower::MaxHeadBytes)};
    case Problem::BodyTooLarge:
        return ApiError::payloadTooLarge(m_limits.maxBodyBytes);
    case Problem::MalformedHead:
        return ApiError::badRequest(
            u"The request line or a header line is malformed (lines end in CRLF; a request line "
            "is `METHOD target HTTP/1.1`; one Host header at most)"_s);
    case Problem::VersionNotSupported:
        return {505, u"http_version_not_supported"_s,
                u"Only HTTP/1.0 and HTTP/1.1 are spoken here"_s};
    case Problem::Malformed:
    case Problem::None:
        break;
    }
    return ApiError::badRequest(u"The request's Content-Length or chunked framing is malformed"_s);
}

// Answered before the request is read whole: a whole body buffered before anything could refuse
// it (a 300 MB body took 650 MB of memory before its 413), a head without end, or a request's
// last byte awaited forever. The connection then lingers: what still comes is read and dropped,
// so that a client busy sending its body (as QNetworkAccessManager is) reads the answer
// afterwards instead of a reset. It ends when the client closes it, sends nothing for a second,
// or after 30 seconds.
void HttpConnection::refuse(const ApiError &error)
{
    m_refused = true;
    stopWaiting();
    m_metrics.httpRefused(error.status);
    m_requestDue.stop();
    m_idle.stop();
    const QByteArray answer = HttpResponse::error(error).closingAnswer();
    m_quiet.setSingleShot(true);
    m_quiet.callOnTimeout(m_socket, &QTcpSocket::disconnectFromHost);
    // After the answers to the requests before this one, which may still be in a handler; the
    // connection lingers from then on.
    AnswerLine::writeInTurn(m_socket, [connection = QPointer(this), answer] {
        if (!connection)
            return;
        connection->m_socket->write(answer);
        // Out now, not at the next write notification: a client that shut down its side after
        // the request has Qt read that end first, and close the socket unsent.
        connection->m_socket->flush();
        connection->m_answered = true;
        connection->m_lingerEnd.setRemainingTime(LingerMaxMs);
        connection->drop();
    });
    drop();
}

void HttpConnection::drop()
{
    m_socket->skip(m_socket->bytesAvailable());
    if (!m_answered)
        return;
    if (m_lingerEnd.hasExpired())
        m_socket->abort();
    else
        m_quiet.start(LingerQuietMs);
}

} // namespace AgentDeck
