#pragma once

#include "httprequestfollower.h"
#include "httptypes.h"

#include <QDeadlineTimer>
#include <QElapsedTimer>
#include <QObject>
#include <QTimer>

#include <functional>
#include <memory>

class QTcpSocket;

namespace AgentDeck {

class HttpConnection;
class Metrics;
struct ApiError;

// The connections waiting for a request head (none of it yet, or part of it), by when they
// began to wait: from their accept, or from the end of their last request. Near the descriptor
// limit the one that has waited longest is evicted to make room for a new connection: 256
// connections that sent a header byte every 3 s (slowloris) locked every other client out,
// health checks included, until the head deadline, and were simply opened again.
class HeadWaiters
{
public:
    // Only a connection that has waited this long is evicted: one accepted a moment ago may
    // have its head in the kernel's buffer, not read yet.
    static constexpr qint64 MinWaitMs = 250;

    // Where a connection is in the line: a part of each connection, so that joining and
    // leaving the line (at every request) allocates nothing.
    struct Place
    {
        HttpConnection *previous = nullptr;
        HttpConnection *next = nullptr;
        qint64 since = 0; // m_clock's time
        bool inLine = false;
    };

    HeadWaiters() { m_clock.start(); }
    // `connection` waits from now: last in the line. Nothing when it waits already.
    void add(HttpConnection *connection);
    void remove(HttpConnection *connection);
    // The one that has waited longest, if that is long enough to evict it.
    HttpConnection *evictable() const;

private:
    static Place &placeOf(HttpConnection *connection);

    // Oldest first: a connection joins at the end, at the time it joins.
    HttpConnection *m_first = nullptr;
    HttpConnection *m_last = nullptr;
    QElapsedTimer m_clock;
};

// One HTTP/1.1 connection of the API, from its accept to its close: it reads the socket, has
// HttpRequestFollower parse each request once, hands every whole request to the handler, and
// keeps the connection's rules. A body over the limit is answered 413 and the connection closed
// before the body is read, `Expect: 100-continue` is answered, an incomplete request is
// acknowledged at once, a request that does not arrive whole in time is answered 408, an idle
// connection is closed, and so is one that asks to be (`Connection: close`, HTTP/1.0). Answers
// go out in the order of their requests (AnswerLine), however long each handler takes.
// A connection whose first request asks for a WebSocket upgrade is handed over instead, with
// that head read from the socket and every byte after it still there.
class HttpConnection : public QObject
{
    friend class HeadWaiters;

public:
    // Takes a whole request; it answers through ApiServer, in turn, on the socket.
    using RequestHandler = std::function<void(HttpRequest request, QTcpSocket *socket)>;
    // Takes over the socket of an upgrade, given its head up to and including the empty line.
    using UpgradeHandler = std::function<void(QTcpSocket *socket, const QByteArray &head)>;

    // A child of `socket`; `metrics` and what the handlers refer to must outlive it.
    HttpConnection(QTcpSocket *socket, const HttpLimits &limits, Metrics &metrics,
                   std::shared_ptr<HeadWaiters> waiters, RequestHandler onRequest,
                   UpgradeHandler onUpgrade);
    ~HttpConnection() override;

    // Closes the connection to make room for another, if it still has a descriptor; false if
    // not (it was closed already).
    bool evict();

    // The request a head and body make, as handlers see it. HEAD is left as it came.
    static HttpRequest toRequest(const HttpRequestFollower::Request &received);

private:
    static constexpr int MaxRequestsPerRead = 64;
    static constexpr int LingerQuietMs = 1000;
    static constexpr int LingerMaxMs = 30'000;

    void onReadyRead();
    // Whether the first request is known not to be an upgrade; hands the connection over when
    // it is one (this object is then deleted).
    bool decideUpgrade(const QByteArray &bytes, const HttpRequestFollower::News &news);
    void take(QList<HttpRequestFollower::Request> requests);
    void closeAfterAnswers();
    // The connection did something: the idle timeout counts from now.
    void noteActivity();

    // Whether the connection waits for a request head and owes nothing: no request of it is
    // being received or answered.
    bool isWaitingForHead() const;
    void noteWaiting();
    void stopWaiting();

    void closeUnread(const QString &why);
    ApiError refusalFor(HttpRequestFollower::Problem problem) const;
    void refuse(const ApiError &error);
    void drop();

    QTcpSocket *m_socket;
    HttpLimits m_limits;
    Metrics &m_metrics;
    HttpRequestFollower m_follower;
    std::shared_ptr<HeadWaiters> m_waiters;
    RequestHandler m_onRequest;
    UpgradeHandler m_onUpgrade;
    HeadWaiters::Place m_waiting; // in m_waiters' line while it waits for a request head
    bool m_decided = false;       // the first request is not an upgrade
    bool m_taking = false;        // in take(): the read's own end counts what is answered
    qint64 m_seen = 0;            // until then: bytes at the front of the socket's buffer followed
    bool m_refused = false;
    bool m_answered = false; // the refusal has been written
    bool m_closing = false;  // a request asked for the close: nothing more is read
    QTimer m_idle{this};     // closes a connection that has had nothing to do
    QElapsedTimer m_lastActivity;
    QTimer m_requestDue{this}; // answers 408 to a request that does not arrive whole in time
    QTimer m_quiet{this};      // while refused: ends the connection once the client is quiet
    QDeadlineTimer m_lingerEnd;
};

} // namespace AgentDeck
