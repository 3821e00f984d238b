#include "lifecyclefeed.h"

#include "followedsocket.h"
#include "wiretypes.h"

#include <QJsonDocument>

using namespace Qt::StringLiterals;

namespace AgentDeck {

LifecycleFeed::LifecycleFeed(const QUrl &url, const QString &apiKey, std::optional<qint64> after,
                             std::chrono::milliseconds silenceTimeout, QObject *parent)
    : QObject(parent)
    , m_lastId(after)
    // A wrong key or a bad cursor will not get better by retrying.
    , m_socket(new FollowedSocket(
          url, apiKey, silenceTimeout,
          [this] {
              return m_lastId ? QUrlQuery{{u"after"_s, QString::number(*m_lastId)}} : QUrlQuery();
          },
          {4001, 4022}, this))
{
    connect(m_socket, &FollowedSocket::connected, this, &LifecycleFeed::connected);
    connect(m_socket, &FollowedSocket::textReceived, this, &LifecycleFeed::onTextMessage);
    connect(m_socket, &FollowedSocket::closedByServer, this, &LifecycleFeed::closedByServer);
    connect(m_socket, &FollowedSocket::disconnected, this, &LifecycleFeed::disconnected);
    m_socket->start();
}

LifecycleFeed::~LifecycleFeed() = default;

QUuid LifecycleFeed::conversationOf(const QJsonObject &record)
{
    return parseWireId(record.value(u"conversation_id"_s).toString()).value_or(QUuid());
}

bool LifecycleFeed::isConnected() const
{
    return m_socket->isConnected();
}

void LifecycleFeed::close()
{
    m_socket->close();
}

void LifecycleFeed::onTextMessage(const QString &message)
{
    const QJsonObject record = QJsonDocument::fromJson(message.toUtf8()).object();
    const auto id = parseWireCount(record.value(u"id"_s).toString());
    // A record already delivered (none is sent twice; this guards a consumer all the same).
    if (!id || (m_lastId && *id <= *m_lastId))
        return;
    m_lastId = *id;
    Q_EMIT recordArrived(record);
}

} // namespace AgentDeck
