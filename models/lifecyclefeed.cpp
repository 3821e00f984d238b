#include "lifecyclefeed.h"

#include "serverconnection.h"
#include "wiretypes.h"

#include <QDateTime>
#include <QJsonDocument>
#include <QNetworkRequest>
#include <QTimer>
#include <QUrlQuery>
#include <QWebSocket>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {
constexpr int MaxBackoffMs = 10'000;
} // namespace

LifecycleFeed::LifecycleFeed(const QUrl &url, const QString &apiKey, std::optional<qint64> after,
                             std::chrono::milliseconds silenceTimeout, QObject *parent)
    : QObject(parent)
    , m_url(url)
    , m_apiKey(apiKey)
    , m_lastId(after)
    , m_reconnectTimer(new QTimer(this))
    , m_silenceTimeout(silenceTimeout)
    , m_aliveTimer(new QTimer(this))
{
    m_reconnectTimer->setSingleShot(true);
    connect(m_reconnectTimer, &QTimer::timeout, this, &LifecycleFeed::connectSocket);
    connect(m_aliveTimer, &QTimer::timeout, this, &LifecycleFeed::checkAlive);
    m_aliveTimer->start(m_silenceTimeout / 3);
    connectSocket();
}

LifecycleFeed::~LifecycleFeed()
{
    m_closing = true;
    if (m_socket)
        m_socket->abort();
}

QUuid LifecycleFeed::conversationOf(const QJsonObject &record)
{
    return parseWireId(record.value(u"conversation_id"_s).toString()).value_or(QUuid());
}

bool LifecycleFeed::isConnected() const
{
    return m_socket && m_socket->state() == QAbstractSocket::ConnectedState;
}

void LifecycleFeed::close()
{
    m_closing = true;
    m_reconnectTimer->stop();
    if (m_socket)
        m_socket->close();
}

void LifecycleFeed::checkAlive()
{
    if (!m_socket || m_socket->state() == QAbstractSocket::UnconnectedState)
        return;
    if (QDateTime::currentMSecsSinceEpoch() - m_lastHeardMs > m_silenceTimeout.count()) {
        m_socket->abort(); // disconnected() reconnects with backoff
        return;
    }
    if (isConnected())
        m_socket->ping();
}

void LifecycleFeed::connectSocket()
{
    if (m_socket)
        m_socket->deleteLater();
    m_socket = new QWebSocket(QString(), QWebSocketProtocol::VersionLatest, this);
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
    connect(m_socket, &QWebSocket::textMessageReceived, this, &LifecycleFeed::onTextMessage);
    connect(m_socket, &QWebSocket::disconnected, this, &LifecycleFeed::onDisconnected);
    connect(m_socket, &QWebSocket::pong, this,
            [this] { m_lastHeardMs = QDateTime::currentMSecsSinceEpoch(); });
    QUrl url = m_url;
    QUrlQuery query(url);
    query.removeAllQueryItems(u"after"_s);
    if (m_lastId)
        query.addQueryItem(u"after"_s, QString::number(*m_lastId));
    url.setQuery(query);
    QNetworkRequest request(url);
    request.setHeader(QNetworkRequest::UserAgentHeader, ServerConnection::userAgent());
    m_socket->open(request);
}

void LifecycleFeed::onTextMessage(const QString &message)
{
    m_lastHeardMs = QDateTime::currentMSecsSinceEpoch();
    const QJsonObject record = QJsonDocument::fromJson(message.toUtf8()).object();
    const auto id = parseWireCount(record.value(u"id"_s).toString());
    // A record already delivered (none is sent twice; this guards a consumer all the same).
    if (!id || (m_lastId && *id <= *m_lastId))
        return;
    m_lastId = *id;
    Q_EMIT recordArrived(record);
}

void LifecycleFeed::onDisconnected()
{
    const int code = m_socket->closeCode();
    if (m_closing) {
        Q_EMIT disconnected();
        return;
    }
    // A wrong key or a bad cursor will not get better by retrying.
    if (code == 4001 || code == 4022) {
        Q_EMIT closedByServer(code, m_socket->closeReason());
        return;
    }
    Q_EMIT disconnected();
    m_reconnectTimer->start(m_backoffMs);
    m_backoffMs = std::min(m_backoffMs * 2, MaxBackoffMs);
}

} // namespace AgentDeck
