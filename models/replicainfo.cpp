#include "replicainfo.h"

#include "wiretypes.h"

#include <QJsonObject>

using namespace Qt::StringLiterals;

namespace AgentDeck {

QString ReplicaInfo::state() const
{
    return stoppedAt ? u"stopped"_s : alive ? u"alive"_s : u"silent"_s;
}

ReplicaInfo ReplicaInfo::fromJson(const QJsonValue &value)
{
    const QJsonObject object = value.toObject();
    ReplicaInfo replica;
    replica.id = object.value(u"id"_s).toString();
    replica.advertiseUrl = object.value(u"advertise_url"_s).toString();
    replica.startedAt =
        parseWireTime(object.value(u"started_at"_s).toString()).value_or(QDateTime());
    replica.lastHeartbeatAt =
        parseWireTime(object.value(u"last_heartbeat_at"_s).toString()).value_or(QDateTime());
    replica.stoppedAt = parseWireTime(object.value(u"stopped_at"_s).toString());
    replica.alive = object.value(u"alive"_s).toBool();
    replica.isSelf = object.value(u"is_self"_s).toBool();
    replica.ownedConversations = object.value(u"owned_conversations"_s).toInteger();
    return replica;
}

} // namespace AgentDeck
