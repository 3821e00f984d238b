#include "httpconnection.h"

#include "samples.h"

#include <QCoroAbstractSocket>
#include <QCoroSignal>

using namespace Qt::StringLiterals;

namespace AgentDeck::Bench {

HttpConnection::HttpConnection(Endpoint endpoint, QObject *parent)
    : QObject(parent)
    , m_endpoint(std::move(endpoint))
    , m_hostHeader(m_endpoint.host.toLatin1() + ':' + QByteArray::number(m_endpoint.port))
{
    connect(&m_socket, &QTcpSocket::readyRead, this, &HttpConnection::onReadyRead);
    connect(&m_socket, &QTcpSocket::disconnected, this, &HttpConnection::fail);
    connect(&m_socket, &QTcpSocket::errorOccurred, this, &HttpConnection::fail);
}

QCoro::Task<bool> HttpConnection::open(std::chrono::milliseconds timeout)
{
    m_socket.setSocketOption(QAbstractSocket::LowDelayOption, 1);
    // One full expression: the wrapper qCoro() returns must outlive the awaited call.
    const bool connected = co_await qCoro(m_socket).connectToHost(
        QHostAddress(m_endpoint.host), m_endpoint.port, QIODevice::ReadWrite, timeout);
    co_return connected;
}

QByteArray makeHttpRequest(QByteArrayView hostHeader, QByteArrayView method, QByteArrayView target,
                           QByteArrayView jsonBody)
{
    QByteArray request;
    request.reserve(128 + jsonBody.size());
    request.append(method).append(' ').append(target).append(" HTTP/1.1\r\nHost: ");
    request.append(hostHeader).append("\r\n");
    if (!jsonBody.isEmpty() || method == "POST") {
        request.append("Content-Type: application/json\r\nContent-Length: ");
        request.append(QByteArray::number(jsonBody.size())).append("\r\n");
    }
    request.append("\r\n").append(jsonBody);
    return request;
}

HttpResponseReader::Progress HttpResponseReader::feed(QByteArrayView bytes)
{
    m_buffer.append(bytes);
    return progress();
}

HttpResponseReader::Progress HttpResponseReader::progress()
{
    if (m_bodyStart < 0) {
        const qsizetype end = m_buffer.indexOf("\r\n\r\n");
        if (end < 0)
            return Progress::Incomplete;
        const QByteArrayView header(m_buffer.constData(), end);
        // "HTTP/1.1 200 OK"
        m_status = header.size() > 12 ? header.sliced(9, 3).toInt() : 0;
        m_contentLength = -1;
        qsizetype lineStart = header.indexOf('\n') + 1;
        while (lineStart > 0 && lineStart < header.size()) {
            qsizetype lineEnd = header.indexOf('\n', lineStart);
            if (lineEnd < 0)
                lineEnd = header.size();
            const QByteArrayView line = header.sliced(lineStart, lineEnd - lineStart).trimmed();
            const qsizetype colon = line.indexOf(':');
            if (colon > 0 &&
                line.first(colon).trimmed().compare("content-length", Qt::CaseInsensitive) == 0)
                m_contentLength = line.sliced(colon + 1).trimmed().toLongLong();
            lineStart = lineEnd + 1;
        }
        if (m_status == 0 || m_contentLength < 0)
            return Progress::Invalid;
        m_bodyStart = end + 4;
    }
    return m_buffer.size() < m_bodyStart + m_contentLength ? Progress::Incomplete
                                                           : Progress::Complete;
}

HttpResult HttpResponseReader::take()
{
    HttpResult result;
    result.status = m_status;
    result.body = m_buffer.mid(m_bodyStart, m_contentLength);
    m_buffer.remove(0, m_bodyStart + m_contentLength);
    m_bodyStart = -1;
    return result;
}

void HttpResponseReader::reset()
{
    m_buffer.clear();
    m_bodyStart = -1;
}

QByteArray HttpConnection::makeRequest(QByteArrayView method, QByteArrayView target,
                                       QByteArrayView jsonBody) const
{
    return makeHttpRequest(m_hostHeader, method, target, jsonBody);
}

void HttpConnection::send(const QByteArray &request)
{
    Q_ASSERT(!m_busy);
    m_busy = true;
    m_sentNs = nowNs();
    if (m_socket.write(request) != request.size())
        fail();
}

QCoro::Task<HttpResult> HttpConnection::request(QByteArray request,
                                                std::chrono::milliseconds timeout)
{
    if (!isOpen()) {
        auto opening = open(timeout);
        const bool opened = co_await std::move(opening);
        if (!opened)
            co_return HttpResult{};
    }
    auto answered = qCoro(this, &HttpConnection::responded, timeout);
    send(request);
    const auto result = co_await std::move(answered);
    if (!result) {
        // A late answer would be taken for the next request's; this connection is done.
        m_socket.abort();
        m_busy = false;
        co_return HttpResult{};
    }
    co_return *result;
}

void HttpConnection::onReadyRead()
{
    const QByteArray bytes = m_socket.readAll();
    if (!m_busy) {
        m_reader.reset(); // nothing was asked: not an answer to us
        return;
    }
    switch (m_reader.feed(bytes)) {
    case HttpResponseReader::Progress::Incomplete:
        return;
    case HttpResponseReader::Progress::Invalid:
        fail();
        return;
    case HttpResponseReader::Progress::Complete:
        break;
    }
    HttpResult result = m_reader.take();
    result.latencyNs = nowNs() - m_sentNs;
    m_busy = false;
    Q_EMIT responded(result);
}

void HttpConnection::fail()
{
    if (!m_busy)
        return;
    m_busy = false;
    m_reader.reset();
    m_socket.abort();
    Q_EMIT responded(HttpResult{});
}

} // namespace AgentDeck::Bench
