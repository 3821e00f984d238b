#pragma once

#include "httptypes.h"

#include <QDeadlineTimer>
#include <QTcpServer>
#include <QTimer>

#include <functional>
#include <memory>

class QTcpSocket;

namespace AgentDeck {

class HeadWaiters;
class Metrics;

// The listening socket of the HTTP API. Each connection it accepts is an HttpConnection, which
// parses its requests once and hands them to the request handler; one whose first request asks
// for a WebSocket upgrade is handed to upgradeRequested instead. It also keeps the server's
// descriptors: near the limit it evicts the connections that have waited longest for a head.
class HttpListener : public QTcpServer
{
    Q_OBJECT
public:
    // `metrics` counts what the listener answers or closes itself; it must outlive the listener.
    HttpListener(const HttpLimits &limits, Metrics &metrics, QObject *parent = nullptr);
    ~HttpListener() override;

    // Whether a request head (without its final empty line) asks for a WebSocket upgrade.
    static bool isWebSocketUpgrade(QByteArrayView head);

    // Who answers the requests of every connection accepted from now on (ApiServer::handle).
    void setRequestHandler(std::function<void(HttpRequest request, QTcpSocket *socket)> handler)
    {
        m_onRequest = std::move(handler);
    }

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
    void handUpgrade(QTcpSocket *socket, const QByteArray &head);
    // Whether fewer than the reserved descriptors are free below the limit.
    bool nearDescriptorLimit() const;
    // Closes the connection that has waited longest for a request head; false when none does.
    bool evictOldestWaiting();

    HttpLimits m_limits;
    Metrics &m_metrics;
    std::function<void(HttpRequest, QTcpSocket *)> m_onRequest;
    qint64 m_descriptorLimit;
    qint64 m_reservedDescriptors;
    QTimer m_resume; // while accepting is paused at the limit: looks again
    int m_maxPending = 30;
    std::shared_ptr<HeadWaiters> m_waiters; // shared with the connections' gates
    QDeadlineTimer m_evictionLog;
    int m_evictionsUnlogged = 0;
};

} // namespace AgentDeck
