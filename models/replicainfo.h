#pragma once

#include <QDateTime>
#include <QJsonValue>
#include <QString>

#include <optional>

namespace AgentDeck {

// One server sharing the catalog, as `GET /api/replicas` lists it.
struct ReplicaInfo
{
    QString id;
    QString advertiseUrl;
    QDateTime startedAt;
    QDateTime lastHeartbeatAt;
    std::optional<QDateTime> stoppedAt;
    bool alive = false;
    bool isSelf = false; // the server that answered
    qint64 ownedConversations = 0;

    // "stopped" (a clean stop), "alive" (its heartbeat is recent) or "silent" (it went quiet:
    // killed, frozen, cut off), as ctl and the console say it.
    QString state() const;
    static ReplicaInfo fromJson(const QJsonValue &value);
};

} // namespace AgentDeck
