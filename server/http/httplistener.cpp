#include "httplistener.h"

#include "httpconnection.h"
#include "httphead.h"
#include "logging.h"
#include "metrics.h"
#include "openfiles.h"

#include <QDeadlineTimer>
#include <QMetaMethod>
#include <QTcpSocket>
#include <QTimer>

#include <fcntl.h>
#include <memory>
#include <unistd.h>

using namespace Qt::StringLiterals;

namespace AgentDeck {

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
    while (HttpConnection *connection = m_waiters->evictable()) {
        if (connection->evict())
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
        // Not pauseAccepting(): QTcpServer accepts on in a loop after it. With no room for
        // pending connections it takes none, each time it looks.
        m_maxPending = std::max(maxPendingConnections(), 1);
        setMaxPendingConnections(0);
        m_resume.start();
    }
    auto *socket = new QTcpSocket(this);
    if (!socket->setSocketDescriptor(handle)) {
        delete socket;
        return;
    }
    // An answer is one write; without this a large one's last segment waited for the client's
    // delayed ACK (Nagle's algorithm), 40 ms on Linux, on keep-alive connections.
    socket->setSocketOption(QAbstractSocket::LowDelayOption, 1);
    new HttpConnection(
        socket, m_limits, m_metrics, m_waiters, m_onRequest,
        [this](QTcpSocket *upgraded, const QByteArray &head) { handUpgrade(upgraded, head); });
    connect(socket, &QTcpSocket::disconnected, this, [socket] { socket->deleteLater(); });
}

void HttpListener::handUpgrade(QTcpSocket *socket, const QByteArray &head)
{
    disconnect(socket, nullptr, this, nullptr);
    static const QMetaMethod signal = QMetaMethod::fromSignal(&HttpListener::upgradeRequested);
    if (!isSignalConnected(signal)) {
        socket->abort();
        socket->deleteLater();
        return;
    }
    Q_EMIT upgradeRequested(socket, head);
}

} // namespace AgentDeck
