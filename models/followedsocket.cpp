#include "followedsocket.h"

#include "serverconnection.h"

#include <QDateTime>
#include <QJsonDocument>
#include <QJsonObject>
#include <QNetworkRequest>
#include <QTimer>
#include <QWebSocket>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {
constexpr int MaxBackoffMs = 10'000;
} // namespace

FollowedSocket::FollowedSocket(const QUrl &url, const QString &apiKey,
                               std::chrono::milliseconds silenceTimeout,
                               std::function<QUrlQuery()> resume, QList<int> finalCodes,
                               QObject *parent)
    : QObject(parent)
    , m_url(url)
    , m_apiKey(apiKey)
    , m_resume(std::move(resume))
    , m_finalCodes(std::move(finalCodes))
    , m_reconnectTimer(new QTimer(this))
    , m_silenceTimeout(silenceTimeout)
    , m_aliveTimer(new QTimer(this))
{
    m_reconnectTimer->setSingleShot(true);
    connect(m_reconnectTimer, &QTimer::timeout, this, &FollowedSocket::connectSocket);
    connect(m_aliveTimer, &QTimer::timeout, this, &FollowedSocket::checkAlive);
}

FollowedSocket::~FollowedSocket()
{
    m_closing = true;
    if (m_socket)
        m_socket->abort();
}

void FollowedSocket::start()
{
    m_aliveTimer->start(m_silenceTimeout / 3);
    connectSocket();
}

void FollowedSocket::checkAlive()
{
    // A handshake the server does not answer counts as silence too.
    if (!m_socket || m_socket->state() == QAbstractSocket::UnconnectedState)
        return;
    if (QDateTime::currentMSecsSinceEpoch() - m_lastHeardMs > m_silenceTimeout.count()) {
        // abort() emits disconnected(), which reconnects with backoff.
        m_socket->abort();
        return;
    }
    if (isConnected())
        m_socket->ping();
}

bool FollowedSocket::isConnected() const
{
    return m_socket && m_socket->state() == QAbstractSocket::ConnectedState;
}

void FollowedSocket::close()
{
    m_closing = true;
    m_reconnectTimer->stop();
    if (m_socket)
        m_socket->close();
}

void FollowedSocket::reconnectNow()
{
    if (m_closing || !m_reconnectTimer->isActive())
        return;
    m_reconnectTimer->stop();
    m_backoffMs = 250;
    connectSocket();
}

void FollowedSocket::sendText(const QString &text)
{
    if (isConnected())
        m_socket->sendTextMessage(text);
}

void FollowedSocket::connectSocket()
{
    if (m_socket)
        m_socket->deleteLater();
    m_socket = new QWebSocket(QString(), QWebSocketProtocol::VersionLatest, this);
    // Qt's default is 2 GiB a message.
    m_socket->setMaxAllowedIncomingMessageSize(ServerConnection::MaxAnswerBytes);
    m_socket->setMaxAllowedIncomingFrameSize(ServerConnection::MaxAnswerBytes);
    m_lastHeardMs = QDateTime::currentMSecsSinceEpoch();
    connect(m_socket, &QWebSocket::connected, this, [this] {
        m_backoffMs = 250;
        m_lastHeardMs = QDateTime::currentMSecsSinceEpoch();
        if (!m_apiKey.isEmpty()) {
            const QJsonObject auth{{u"type"_s, u"auth"_s}, {u"session_api_key"_s, m_apiKey}};
            m_socket->sendTextMessage(
                QString::fromUtf8(QJsonDocument(auth).toJson(QJsonDocument::Compact)));
        }
        Q_EMIT connected();
    });
    connect(m_socket, &QWebSocket::textMessageReceived, this, [this](const QString &text) {
        m_lastHeardMs = QDateTime::currentMSecsSinceEpoch();
        Q_EMIT textReceived(text);
    });
    connect(m_socket, &QWebSocket::disconnected, this, &FollowedSocket::onDisconnected);
    connect(m_socket, &QWebSocket::pong, this,
            [this] { m_lastHeardMs = QDateTime::currentMSecsSinceEpoch(); });
    QUrl url = m_url;
    url.setQuery(m_resume());
    QNetworkRequest request(url);
    request.setHeader(QNetworkRequest::UserAgentHeader, ServerConnection::userAgent());
    m_socket->open(request);
}

void FollowedSocket::onDisconnected()
{
    const int code = m_socket->closeCode();
    if (m_closing) {
        Q_EMIT disconnected();
        return;
    }
    // A wrong key, an unknown conversation, a bad parameter will not get better by retrying:
    // the following ends, and says only that (a follower printed "reconnecting" first).
    if (m_finalCodes.contains(code)) {
        Q_EMIT closedByServer(code, m_socket->closeReason());
        return;
    }
    Q_EMIT disconnected();
    m_reconnectTimer->start(m_backoffMs);
    m_backoffMs = std::min(m_backoffMs * 2, MaxBackoffMs);
}

} // namespace AgentDeck
