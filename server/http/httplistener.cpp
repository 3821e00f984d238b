#include "httplistener.h"

#include "answerline.h"
#include "apierror.h"
#include "httphead.h"
#include "httprequestfollower.h"
#include "httptypes.h"
#include "logging.h"
#include "metrics.h"
#include "openfiles.h"

#include <QDeadlineTimer>
#include <QElapsedTimer>
#include <QMetaMethod>
#include <QPointer>
#include <QTcpSocket>
#include <QTimer>

#include <deque>
#include <fcntl.h>
#include <functional>
#include <map>
#include <memory>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace Qt::StringLiterals;

namespace AgentDeck {

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

    quint64 add(RequestGate *gate)
    {
        const quint64 key = m_next++;
        m_gates.emplace(key, Waiting{gate, m_clock.elapsed()});
        return key;
    }
    void remove(quint64 key) { m_gates.erase(key); }
    // The one that has waited longest, if that is long enough to evict it.
    RequestGate *evictable() const
    {
        if (m_gates.empty() || m_clock.elapsed() - m_gates.begin()->second.since < MinWaitMs)
            return nullptr;
        return m_gates.begin()->second.gate;
    }

private:
    struct Waiting
    {
        RequestGate *gate;
        qint64 since; // m_clock's time
    };
    std::map<quint64, Waiting> m_gates;
    quint64 m_next = 1;
    QElapsedTimer m_clock = [] {
        QElapsedTimer clock;
        clock.start();
        return clock;
    }();
};

// Follows the requests of one HTTP connection (see HttpRequestFollower) and acts on what it
// finds before the HTTP server reads them. Every byte is followed once: before the server's
// readyRead slot it takes what came since it last looked, and after that slot it notes what
// the server left unread.
class RequestGate : public QObject
{
public:
    RequestGate(QTcpSocket *socket, const HttpLimits &limits, Metrics &metrics,
                std::shared_ptr<HeadWaiters> waiters)
        : QObject(socket)
        , m_socket(socket)
        , m_limits(limits)
        , m_metrics(metrics)
        , m_follower(limits.maxBodyBytes)
        , m_waiters(std::move(waiters))
    {
        m_waitingKey = m_waiters->add(this);
        m_idle.setSingleShot(true);
        m_idle.callOnTimeout(this, [this] {
            m_metrics.httpConnectionClosed("idle");
            m_socket->disconnectFromHost();
        });
        m_idle.start(m_limits.idleTimeout);
        m_requestDue.setSingleShot(true);
        m_requestDue.callOnTimeout(this, [this] {
            refuse(ApiError{408, QStringLiteral("request_timeout"),
                            QStringLiteral("The request stalled: its head did not arrive whole, "
                                           "or its body paused, for %1 ms")
                                .arg(m_limits.requestTimeout.count())});
        });
        // An answer being written is activity too: a slow handler does not make a connection
        // idle.
        connect(m_socket, &QTcpSocket::bytesWritten, this, [this] {
            if (m_idle.isActive())
                m_idle.start(m_limits.idleTimeout);
            noteWaiting(); // an asynchronous answer may have been the last one owed
        });
        connect(m_socket, &QTcpSocket::disconnected, this, [this] { stopWaiting(); });
    }

    ~RequestGate() override { stopWaiting(); }

    // Closes the connection to make room for another, if it still has a descriptor; false if
    // not (it was closed already).
    bool evict()
    {
        stopWaiting();
        if (m_socket->state() == QAbstractSocket::UnconnectedState)
            return false;
        m_metrics.httpConnectionClosed("evicted");
        if (m_follower.inHead()) {
            // Said, in case a real client is behind it; the descriptor goes now regardless.
            m_socket->write(
                HttpResponse::error(ApiError{503, QStringLiteral("server_busy"),
                                             QStringLiteral("The server is at its limit of open "
                                                            "files and this request head did not "
                                                            "arrive whole in time")})
                    .closingAnswer());
            m_socket->flush();
        }
        disconnect(m_socket, &QTcpSocket::readyRead, nullptr, nullptr);
        if (m_socket->bytesToWrite() == 0)
            m_socket->disconnectFromHost(); // closes at once
        if (m_socket->state() != QAbstractSocket::UnconnectedState)
            m_socket->abort();
        return true;
    }

    void beforeServer()
    {
        if (m_refused) {
            drop();
            return;
        }
        if (m_closing) {
            m_socket->skip(m_socket->bytesAvailable()); // nothing after the last request
            return;
        }
        // Every request makes an answer, and a client that keeps sending requests without
        // reading the answers would have them all held in memory: 20 s of pipelined searches
        // took the server to 745 MB. The HTTP server answers every request of a read at once,
        // so both the backlog and the requests one read may add to it are bounded. Only when
        // the client sent more: the requests of one read come back here one by one, and the
        // answers to the first of them (unsent yet, in the same turn) closed the connection
        // with none of them sent.
        if (m_socket->bytesAvailable() > m_seen &&
            m_socket->bytesToWrite() > m_limits.maxUnsentBytes) {
            closeUnread(u"does not read its answers"_s);
            return;
        }
        const qint64 available = m_socket->bytesAvailable();
        const qint64 arrivedBefore = m_arrived;
        m_arrived += available - m_seen;
        HttpRequestFollower::News news;
        if (available > m_seen && !m_follower.lost())
            news = m_follower.follow(QByteArrayView(m_socket->peek(available)).sliced(m_seen));
        m_requestEnds.insert(m_requestEnds.end(), news.requestEnds.cbegin(),
                             news.requestEnds.cend());
        if (news.requestsEnded > 0)
            stopWaiting(); // it waits anew, from now, once the requests are answered
        skipWhatTakenRequestsLeft();
        m_seen = m_socket->bytesAvailable();
        if (news.requestsEnded > MaxRequestsPerRead) {
            closeUnread(u"sent more than %1 requests without waiting for answers"_s.arg(
                MaxRequestsPerRead));
            return;
        }
        if (news.closeAfter >= 0 && !m_closeDue) {
            // Qt 6.4 kept the connection open, and a client reading to the end (an HTTP/1.0
            // one, say) waited for the idle timeout. The close takes its turn after the answers
            // to that request and the ones before it.
            m_closeDue = true;
            onceServerHasRead(arrivedBefore + news.closeAfter, [this] {
                m_closing = true;
                stopWaiting();
                m_idle.stop();
                m_requestDue.stop();
                AnswerLine::writeInTurn(m_socket, [socket = QPointer(m_socket)] {
                    if (socket)
                        socket->disconnectFromHost();
                });
            });
        }
        // What concerns the request being followed waits until the HTTP server has read the
        // ones before it, and then takes its turn after their answers: a refusal, and
        // `100 Continue`.
        if (news.problem != HttpRequestFollower::Problem::None) {
            onceServerHasRead(m_follower.requestStart(),
                              [this, refusal = refusalFor(news.problem)] { refuse(refusal); });
            runDue();
            return;
        }
        if (news.expectsContinue) {
            onceServerHasRead(m_follower.requestStart(), [this] {
                AnswerLine::writeInTurn(m_socket, [socket = QPointer(m_socket)] {
                    if (socket)
                        socket->write("HTTP/1.1 100 Continue\r\n\r\n");
                });
            });
        }
        if (m_follower.inRequest()) {
            // A head must come whole within the limit; a body may take longer, but not pause
            // for longer (a 4 MiB upload on a slow link is slow, not stuck).
            if (!m_follower.inHead() || !m_requestDue.isActive())
                m_requestDue.start(m_limits.requestTimeout);
            // Linux delays the ACK of what came (up to 40 ms once the connection has answered
            // a request), and a client with Nagle's algorithm on holds its last small piece
            // until that ACK: QNetworkAccessManager's POST of a 20 kB body took 45 ms, not 2.
            const int on = 1;
            ::setsockopt(int(m_socket->socketDescriptor()), IPPROTO_TCP, TCP_QUICKACK, &on,
                         sizeof on);
        } else {
            m_requestDue.stop();
        }
        m_idle.start(m_limits.idleTimeout);
        runDue();
        m_readBefore = readSoFar();
        noteWaiting();
    }

    void taken() { ++m_taken; }

    void afterServer()
    {
        // The server reads a request at a time (and comes back for the next one).
        runDue();
        if (m_refused) {
            m_seen = 0;
            return;
        }
        skipWhatTakenRequestsLeft();
        m_seen = m_socket->bytesAvailable();
        // It comes back through the event loop, and a client that shut down its side after
        // pipelined requests had Qt read that end first and close the connection: 2 of 4
        // requests were answered. The whole requests that are here are taken now, each in
        // its turn as the server takes them; only from where a request ended, as followed:
        // what Qt's parser makes of bytes from elsewhere is no request of the client's (taken
        // at once, a chunked create's trailer fields ran its handler a second time).
        if (!m_closing && readSoFar() > m_readBefore && wholeRequestNext()) {
            Q_EMIT m_socket->readyRead();
            return;
        }
        // What the server answered goes out now: a client that sent its request and then shut
        // down its side (`nc -N`) has Qt read that end next, and Qt then closes the socket
        // with whatever is still unsent.
        if (m_socket->bytesToWrite() > 0)
            m_socket->flush();
        noteWaiting();
    }

private:
    static constexpr int MaxRequestsPerRead = 64;

    // Whether the connection waits for a request head and owes nothing: no request of it is
    // being received, read or answered.
    bool isWaitingForHead() const
    {
        if (m_refused || m_closing || !m_requestEnds.empty() || m_socket->bytesToWrite() > 0 ||
            m_socket->state() != QAbstractSocket::ConnectedState)
            return false;
        if (m_follower.inRequest() && !m_follower.inHead())
            return false;
        const AnswerLine *line = AnswerLine::of(m_socket);
        return !line || line->isEmpty();
    }
    void noteWaiting()
    {
        const bool waiting = isWaitingForHead();
        if (waiting && m_waitingKey == 0)
            m_waitingKey = m_waiters->add(this);
        else if (!waiting)
            stopWaiting();
    }
    void stopWaiting()
    {
        if (m_waitingKey != 0)
            m_waiters->remove(std::exchange(m_waitingKey, 0));
    }

    void closeUnread(const QString &why)
    {
        qCInfo(lcHttp).nospace().noquote()
            << "closing a connection that " << why << " (" << m_socket->bytesToWrite()
            << " bytes of answers unsent)";
        m_metrics.httpConnectionClosed("not_reading");
        stopWaiting();
        // Nobody reads the socket after this, the HTTP server's slot that comes next included
        // (it warned that the device was not open, once per request left).
        disconnect(m_socket, &QTcpSocket::readyRead, nullptr, nullptr);
        m_socket->abort();
    }

    ApiError refusalFor(HttpRequestFollower::Problem problem) const
    {
        using Problem = HttpRequestFollower::Problem;
        switch (problem) {
        case Problem::HeadTooLarge:
            return {431, QStringLiteral("headers_too_large"),
                    QStringLiteral("The request head is larger than %1 bytes")
                        .arg(HttpRequestFollower::MaxHeadBytes)};
        case Problem::BodyTooLarge:
            return ApiError::payloadTooLarge(m_limits.maxBodyBytes);
        case Problem::MalformedHead:
            return ApiError::badRequest(QStringLiteral(
                "The request line or a header line is malformed (lines end in CRLF; a request "
                "line is `METHOD target HTTP/1.1`; one Host header at most)"));
        case Problem::VersionNotSupported:
            return {505, QStringLiteral("http_version_not_supported"),
                    QStringLiteral("Only HTTP/1.0 and HTTP/1.1 are spoken here")};
        case Problem::Malformed:
        case Problem::None:
            break;
        }
        return ApiError::badRequest(
            QStringLiteral("The request's Content-Length or chunked framing is malformed"));
    }

    // Answered before the request is read whole. Qt's HTTP server would buffer a whole body
    // before anything could refuse it (a 300 MB body took 650 MB of memory before its 413), and
    // a head without end too; and it would wait for a request's last byte forever. The connection
    // then lingers: what still comes is read and dropped, so that a client busy sending its body
    // (as QNetworkAccessManager is) reads the answer afterwards instead of a reset. It ends when
    // the client closes it, sends nothing for a second, or after 30 seconds.
    void refuse(const ApiError &error)
    {
        m_refused = true;
        stopWaiting();
        m_seen = 0;
        m_metrics.httpRefused(error.status);
        m_requestDue.stop();
        m_idle.stop();
        const QByteArray answer = HttpResponse::error(error).closingAnswer();
        m_quiet.setSingleShot(true);
        m_quiet.callOnTimeout(m_socket, &QTcpSocket::disconnectFromHost);
        // After the answers to the requests before this one, which may still be in a handler;
        // the connection lingers from then on.
        AnswerLine::writeInTurn(m_socket, [gate = QPointer(this), answer] {
            if (!gate)
                return;
            gate->m_socket->write(answer);
            // Out now, not at the next write notification: a client that shut down its side
            // after the request has Qt read that end first, and close the socket unsent.
            gate->m_socket->flush();
            gate->m_answered = true;
            gate->m_lingerEnd.setRemainingTime(LingerMaxMs);
            gate->drop();
        });
        drop();
    }

    // Runs `action` once the HTTP server has read every byte of the connection before
    // `position` (counted from its first byte); actions run in the order they were given.
    void onceServerHasRead(qint64 position, std::function<void()> action)
    {
        m_due.push_back({position, std::move(action)});
    }

    // Bytes of the connection the HTTP server has read.
    qint64 readSoFar() const { return m_arrived - m_socket->bytesAvailable(); }

    // The last bytes of a request the HTTP server has taken as ended, and left unread: they are
    // no request of their own. Qt's parser ends a chunked request before its trailer fields,
    // and read them as the next request (the connection closed, and the requests behind went
    // unanswered). (When a chunked body's final LF comes with the next request, Qt reads one
    // byte too many instead, the first of that request, which it then answers 405: that is
    // left as it is.)
    void skipWhatTakenRequestsLeft()
    {
        const qint64 read = readSoFar();
        // Ends the server has read past; one it stands at is kept until it took that request.
        while (!m_requestEnds.empty() &&
               (m_requestEnds.front() < read ||
                (m_requestEnds.front() == read && m_taken > m_passedEnds)))
            passEnd();
        if (m_closing || m_requestEnds.empty() || m_taken <= m_passedEnds)
            return;
        m_socket->skip(m_requestEnds.front() - read);
        passEnd();
    }

    void passEnd()
    {
        m_lastPassedEnd = m_requestEnds.front();
        m_requestEnds.pop_front();
        ++m_passedEnds;
    }

    // Whether the server has taken every request up to where it read, which is where one ended,
    // and a whole request follows.
    bool wholeRequestNext() const
    {
        return readSoFar() == m_lastPassedEnd && m_taken == m_passedEnds && !m_requestEnds.empty();
    }

    void runDue()
    {
        const qint64 read = readSoFar();
        while (!m_refused && !m_due.empty() && m_due.front().first <= read) {
            const std::function<void()> action = std::move(m_due.front().second);
            m_due.pop_front();
            action();
        }
    }

    void drop()
    {
        m_socket->skip(m_socket->bytesAvailable()); // the HTTP server must not get any of it
        if (!m_answered)
            return;
        if (m_lingerEnd.hasExpired())
            m_socket->abort();
        else
            m_quiet.start(LingerQuietMs);
    }

    static constexpr int LingerQuietMs = 1000;
    static constexpr int LingerMaxMs = 30'000;

    QTcpSocket *m_socket;
    HttpLimits m_limits;
    Metrics &m_metrics;
    HttpRequestFollower m_follower;
    std::shared_ptr<HeadWaiters> m_waiters;
    quint64 m_waitingKey = 0; // in m_waiters; 0: not waiting for a head
    qint64 m_seen = 0;       // bytes at the front of the socket's buffer that were followed already
    qint64 m_arrived = 0;    // bytes that came on the connection (the end of the socket's buffer)
    qint64 m_readBefore = 0; // readSoFar() before the HTTP server's slot
    std::deque<qint64> m_requestEnds; // where the requests the server has not all read end
    qint64 m_passedEnds = 0;          // requests whose end the server has read past
    qint64 m_lastPassedEnd = 0;       // ... and where the last of them ended
    qint64 m_taken = 0;               // requests the server has taken (see requestTaken())
    bool m_refused = false;
    bool m_answered = false; // the refusal has been written
    bool m_closeDue = false; // a request asked to close the connection after its answer
    bool m_closing = false;  // that request has been read: the close is on its way
    std::deque<std::pair<qint64, std::function<void()>>> m_due; // see onceServerHasRead()
    QTimer m_idle{this};       // closes a connection that has had nothing to do
    QTimer m_requestDue{this}; // answers 408 to a request that does not arrive whole in time
    QTimer m_quiet{this};      // while refused: ends the connection once the client is quiet
    QDeadlineTimer m_lingerEnd;
};

HttpListener::HttpListener(const HttpLimits &limits, Metrics &metrics, QObject *parent)
    : QTcpServer(parent)
    , m_limits(limits)
    , m_metrics(metrics)
    , m_descriptorLimit(OpenFiles::raiseLimit())
    , m_reservedDescriptors(std::min<qint64>(ReservedDescriptors, m_descriptorLimit / 8))
    , m_waiters(std::make_shared<HeadWaiters>())
{
    m_resume.setInterval(100);
    m_resume.callOnTimeout(this, [this] {
        // A connection that now waits for a head can make room for the next one.
        if (nearDescriptorLimit() && !m_waiters->evictable())
            return;
        m_resume.stop();
        qCInfo(lcHttp) << "accepting connections again";
        setMaxPendingConnections(m_maxPending);
        resumeAccepting();
    });
}

bool HttpListener::nearDescriptorLimit() const
{
    // The lowest free descriptor: Linux hands out the lowest, so when it is this high, all
    // below it are taken.
    const int lowest = ::fcntl(int(socketDescriptor()), F_DUPFD_CLOEXEC, 0);
    if (lowest < 0)
        return true;
    ::close(lowest);
    return lowest >= m_descriptorLimit - m_reservedDescriptors;
}

void HttpListener::requestTaken(QTcpSocket *socket)
{
    for (QObject *child : socket->children()) {
        if (auto *gate = dynamic_cast<RequestGate *>(child)) {
            gate->taken();
            return;
        }
    }
}

bool HttpListener::isWebSocketUpgrade(QByteArrayView head)
{
    bool upgrade = false;
    forEachHeader(head, [&upgrade](QByteArrayView name, QByteArrayView value) {
        upgrade = upgrade || (name.compare("upgrade", Qt::CaseInsensitive) == 0 &&
                              headerHasToken(value, "websocket"));
    });
    return upgrade;
}

HttpListener::~HttpListener() = default;

bool HttpListener::evictOldestWaiting()
{
    while (RequestGate *gate = m_waiters->evictable()) {
        if (gate->evict())
            return true;
    }
    return false;
}

void HttpListener::incomingConnection(qintptr handle)
{
    if (!m_resume.isActive() && nearDescriptorLimit() && evictOldestWaiting()) {
        ++m_evictionsUnlogged;
        if (m_evictionLog.hasExpired()) { // at most one line in 10 s
            qCWarning(lcHttp).nospace()
                << "open files are near the limit (" << m_descriptorLimit << "): evicting the "
                << "connections that have waited longest for a request head ("
                << m_evictionsUnlogged << " since the last report)";
            m_evictionsUnlogged = 0;
            m_evictionLog.setRemainingTime(10'000);
        }
    }
    if (!m_resume.isActive() && nearDescriptorLimit()) {
        qCWarning(lcHttp).nospace() << "open files are near the limit (" << m_descriptorLimit
                                    << "): no new connections until some close";
        // Not pauseAccepting(): QTcpServer accepts on in a loop after it, and turns accepting
        // back on whenever the HTTP server takes a connection. With no room for pending
        // connections it takes none, each time it looks.
        m_maxPending = std::max(maxPendingConnections(), 1);
        setMaxPendingConnections(0);
        m_resume.start();
    }
    auto *socket = new QTcpSocket(this);
    if (!socket->setSocketDescriptor(handle)) {
        delete socket;
        return;
    }
    // Answers are written in pieces (head, body); with Nagle's algorithm the last piece of a
    // large answer waits for the client's delayed ACK, 40 ms on Linux, on keep-alive connections.
    socket->setSocketOption(QAbstractSocket::LowDelayOption, 1);
    // The gate's slots go around whoever reads the socket (slots run in the order they were
    // connected): this listener now, the HTTP server later.
    auto *gate = new RequestGate(socket, m_limits, m_metrics, m_waiters);
    connect(socket, &QTcpSocket::readyRead, gate, &RequestGate::beforeServer);
    connect(socket, &QTcpSocket::readyRead, this, [this, socket, gate] { inspect(socket, gate); });
    connect(socket, &QTcpSocket::readyRead, gate, &RequestGate::afterServer);
    connect(socket, &QTcpSocket::disconnected, this, [socket] { socket->deleteLater(); });
}

void HttpListener::inspect(QTcpSocket *socket, RequestGate *gate)
{
    // peek(): the HTTP server must find every byte still there.
    const QByteArray start = socket->peek(MaxHeadBytes);
    const qsizetype end = start.indexOf("\r\n\r\n");
    if (end < 0) {
        if (start.size() >= MaxHeadBytes)
            handToHttp(socket, gate);
        return; // a partial head: wait for the rest
    }
    if (!isWebSocketUpgrade(QByteArrayView(start).first(end))) {
        handToHttp(socket, gate);
        return;
    }
    // A stream is long-lived and has rules of its own: no HTTP timeouts or backlog bound.
    delete gate;
    disconnect(socket, nullptr, this, nullptr);
    const QByteArray head = socket->read(end + 4);
    static const QMetaMethod signal = QMetaMethod::fromSignal(&HttpListener::upgradeRequested);
    if (!isSignalConnected(signal)) {
        socket->abort();
        socket->deleteLater();
        return;
    }
    Q_EMIT upgradeRequested(socket, head);
}

void HttpListener::handToHttp(QTcpSocket *socket, RequestGate *gate)
{
    disconnect(socket, nullptr, this, nullptr);
    // The bound QAbstractHttpServer takes pending connections as they are added, and connects
    // to readyRead; the data that is already here is announced again (the gate has followed
    // it and takes nothing twice). The gate's second slot moves behind the server's.
    disconnect(socket, &QTcpSocket::readyRead, gate, nullptr);
    connect(socket, &QTcpSocket::readyRead, gate, &RequestGate::beforeServer);
    addPendingConnection(socket);
    connect(socket, &QTcpSocket::readyRead, gate, &RequestGate::afterServer);
    if (socket->bytesAvailable() > 0)
        Q_EMIT socket->readyRead();
}

} // namespace AgentDeck
