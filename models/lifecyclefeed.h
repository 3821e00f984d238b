#pragma once

#include <QJsonObject>
#include <QObject>
#include <QUrl>

#include <chrono>
#include <optional>

namespace AgentDeck {

class FollowedSocket;

// Follows a server's lifecycle feed (/sockets/lifecycle): every change made on the server (and
// its replicas), one audit record at a time, as GET /api/audit gives them. Reconnects with
// backoff after a drop and resumes after the last record's id, so a consumer sees every change
// once and in order; before the first record it resumes where it began (`after`), or, begun
// with none, with only what is made from then on: connected() is when to read what that left out.
class LifecycleFeed : public QObject
{
    Q_OBJECT
public:
    // `url`: the socket's ws:// or wss:// URL (ServerConnection::openLifecycleFeed()); `after`:
    // the id of the last record already seen (0: every one the server keeps).
    LifecycleFeed(const QUrl &url, const QString &apiKey, std::optional<qint64> after,
                  std::chrono::milliseconds silenceTimeout, QObject *parent = nullptr);
    ~LifecycleFeed() override;

    // The id of the last record delivered (or given to begin after).
    std::optional<qint64> lastId() const { return m_lastId; }
    bool isConnected() const;
    void close();

    // The conversation a record is of (null for none).
    static QUuid conversationOf(const QJsonObject &record);

Q_SIGNALS:
    void connected();
    // One change: {id, timestamp, actor, client, actor_display, action, conversation_id,
    // replica, reason, result, status}.
    void recordArrived(const QJsonObject &record);
    // The server closed the feed for good (a wrong key, a bad cursor); it is not reopened.
    void closedByServer(int code, const QString &reason);
    // The connection dropped; the feed reconnects.
    void disconnected();

private:
    void onTextMessage(const QString &message);

    std::optional<qint64> m_lastId;
    FollowedSocket *m_socket;
};

} // namespace AgentDeck
