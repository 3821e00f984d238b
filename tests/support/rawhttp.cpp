#include "rawhttp.h"

#include <QEventLoop>
#include <QTimer>

namespace AgentDeck::Testing {

namespace {
constexpr int WaitMs = 10'000;
}

bool RawHttp::connectTo(const QUrl &url)
{
    m_socket.connectToHost(url.host(), quint16(url.port()));
    return waitUntil([this] { return m_socket.state() == QAbstractSocket::ConnectedState; });
}

void RawHttp::send(const QByteArray &bytes)
{
    m_socket.write(bytes);
    m_socket.flush(); // a write of its own, now
}

bool RawHttp::waitForBytes(qsizetype count)
{
    return waitUntil([&] { return m_received.size() >= count; });
}

std::optional<RawResponse> RawHttp::nextResponse()
{
    std::optional<RawResponse> response;
    waitUntil([&] {
        if (!response)
            response = takeResponse();
        return response.has_value();
    });
    return response;
}

std::optional<QByteArray> RawHttp::nextHead()
{
    std::optional<QByteArray> head;
    waitUntil([&] {
        const qsizetype end = m_received.indexOf("\r\n\r\n");
        if (end >= 0 && !head) {
            head = m_received.first(end);
            m_received.remove(0, end + 4);
        }
        return head.has_value();
    });
    return head;
}

bool RawHttp::waitForClose()
{
    return waitUntil([this] { return !isConnected(); });
}

template<typename Predicate> bool RawHttp::waitUntil(Predicate done)
{
    const auto check = [&] {
        m_received += m_socket.readAll();
        return done() || m_socket.state() == QAbstractSocket::UnconnectedState;
    };
    if (check())
        return done();
    QEventLoop loop;
    QTimer::singleShot(WaitMs, &loop, &QEventLoop::quit);
    const auto look = [&] {
        if (check())
            loop.quit();
    };
    QObject::connect(&m_socket, &QTcpSocket::readyRead, &loop, look);
    QObject::connect(&m_socket, &QTcpSocket::stateChanged, &loop, look);
    loop.exec();
    return done();
}

std::optional<RawResponse> RawHttp::takeResponse()
{
    const qsizetype end = m_received.indexOf("\r\n\r\n");
    if (end < 0)
        return std::nullopt;
    RawResponse response;
    response.head = m_received.first(end);
    response.status = response.head.mid(9, 3).toInt();
    qsizetype length = 0;
    for (const QByteArray &line : response.head.split('\n')) {
        if (line.toLower().startsWith("content-length:"))
            length = line.mid(15).trimmed().toLongLong();
    }
    if (m_received.size() < end + 4 + length)
        return std::nullopt;
    response.body = m_received.mid(end + 4, length);
    m_received.remove(0, end + 4 + length);
    return response;
}

} // namespace AgentDeck::Testing
