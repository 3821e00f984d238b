#pragma once

#include "httptypes.h"

#include <QDeadlineTimer>
#include <QTcpServer>
#include <QTimer>

#include <memory>

class QTcpSocket;

namespace AgentDeck {

class HeadWaiters; // the connections waiting for a request head; httplistener.cpp
class Metrics;
class RequestGate; // follows one connection's requests; httplistener.cpp

// The listening socket of the HTTP API. It looks at the first request head of each connection:
// a WebSocket upgrade is taken out of the stream and handed to upgradeRequested; any other
// connection goes, with nothing read from it, to the QAbstractHttpServer bound to this listener.
// On those it follows every request as it arrives (HttpRequestFollower): a body over the limit
// is answered 413 and the connection closed before it is read, `Expect: 100-continue` is
// answered, an incomplete request is acknowledged at once, and the limits' timeouts apply (408
// for a request that does not arrive whole in time; an idle connection is closed).
// (Qt 6.4's QAbstractHttpServer would make QWebSockets of upgrades, and a QWebSocket cannot
// send one pre-built frame to many subscribers; see docs/ARCHITECTURE.md.)
class HttpListener : public QTcpServer
{
    Q_OBJECT
public:
    // `metrics` counts what the listener answers or closes itself; it must outlive the listener.
    HttpListener(const HttpLimits &limits, Metrics &metrics, QObject *parent = nullptr);
    ~HttpListener() override;

    // A head (request line and headers) larger than this is left to the HTTP server to refuse.
    static constexpr qsizetype MaxHeadBytes = 16 * 1024;

    // Whether a request head (without its final empty line) asks for a WebSocket upgrade.
    static bool isWebSocketUpgrade(QByteArrayView head);

    // The HTTP server took a request of `socket` (its handler is called now). Qt's parser takes
    // a chunked request as ended before its trailer fields, and before its final LF when that
    // comes with the next request; the listener then keeps those bytes from it.
    static void requestTaken(QTcpSocket *socket);

    // Descriptors kept free for what the server opens itself (database files, sandbox sockets,
    // commands' pipes), an eighth of the limit at most. With fewer left, each new connection
    // evicts the one that has waited longest for a request head (see HeadWaiters); with none
    // waiting, no connection is accepted until some close. At the limit, Qt's accept failed
    // and was tried again at once, a core busy for as long as it lasted.
    static constexpr int ReservedDescriptors = 32;

Q_SIGNALS:
    // `head` has been read from `socket`, up to and including its empty line. A receiver takes
    // the socket over (reparents it); without a receiver it is closed.
    void upgradeRequested(QTcpSocket *socket, const QByteArray &head);

protected:
    void incomingConnection(qintptr handle) override;

private:
    void inspect(QTcpSocket *socket, RequestGate *gate);
    void handToHttp(QTcpSocket *socket, RequestGate *gate);
    // Whether fewer than the reserved descriptors are free below the limit.
    bool nearDescriptorLimit() const;
    // Closes the connection that has waited longest for a request head; false when none does.
    bool evictOldestWaiting();

    HttpLimits m_limits;
    Metrics &m_metrics;
    qint64 m_descriptorLimit;
    qint64 m_reservedDescriptors;
    QTimer m_resume; // while accepting is paused at the limit: looks again
    int m_maxPending = 30;
    std::shared_ptr<HeadWaiters> m_waiters; // shared with the connections' gates
    QDeadlineTimer m_evictionLog;
    int m_evictionsUnlogged = 0;
};

} // namespace AgentDeck
