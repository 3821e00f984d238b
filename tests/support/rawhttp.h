#pragma once

#include <QByteArray>
#include <QTcpSocket>
#include <QUrl>

#include <optional>

namespace AgentDeck::Testing {

struct RawResponse
{
    int status = 0;
    QByteArray head;
    QByteArray body;
};

// A client that writes exactly the bytes it is given, for requests no HTTP library would send
// as they are (odd spellings, pieces, pipelines). A server in the same thread keeps running:
// every wait spins the event loop.
class RawHttp
{
public:
    bool connectTo(const QUrl &url);
    void send(const QByteArray &bytes);
    // Waits for `count` bytes or more to have arrived, or for the connection to end.
    bool waitForBytes(qsizetype count);
    // The next complete answer, which must carry a Content-Length.
    std::optional<RawResponse> nextResponse();
    // The next answer's head alone (the answer to a HEAD request has no body).
    std::optional<QByteArray> nextHead();
    bool waitForClose();
    bool isConnected() const { return m_socket.state() == QAbstractSocket::ConnectedState; }
    QByteArray received() const { return m_received; }

private:
    // Runs the event loop (the server's too) until `done` holds or the connection ends, woken
    // by the socket rather than polling: QTest::qWaitFor sleeps 10 ms between its looks, which
    // is longer than some tests measure.
    template<typename Predicate> bool waitUntil(Predicate done);
    std::optional<RawResponse> takeResponse();

    QTcpSocket m_socket;
    QByteArray m_received;
};

} // namespace AgentDeck::Testing
