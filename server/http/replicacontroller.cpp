#include "controllers.h"
#include "router.h"
#include "storage/replicastore.h"
#include "wiretypes.h"

#include <QJsonArray>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {
QJsonObject replicaJson(const ReplicaRecord &replica, const QString &self)
{
    return QJsonObject{
        {u"id"_s, replica.id},
        {u"advertise_url"_s,
         replica.advertiseUrl.isEmpty() ? QJsonValue() : QJsonValue(replica.advertiseUrl)},
        {u"started_at"_s, toWireTime(replica.startedAt)},
        {u"last_heartbeat_at"_s, toWireTime(replica.heartbeatAt)},
        {u"stopped_at"_s,
         replica.stoppedAt ? QJsonValue(toWireTime(*replica.stoppedAt)) : QJsonValue()},
        {u"alive"_s, replica.alive},
        {u"owned_conversations"_s, replica.ownedConversations},
        {u"is_self"_s, replica.id == self},
    };
}
} // namespace

void ReplicaController::registerRoutes(Router &router, ReplicaStore &replicas,
                                       const ServerIdentity &identity)
{
    router.add(Router::Method::Get, u"/api/replicas"_s,
               [&replicas, &identity](const HttpRequest &) {
                   QJsonArray items;
                   for (const ReplicaRecord &replica : replicas.list())
                       items.append(replicaJson(replica, identity.replicaId));
                   return HttpResponse::json(items);
               });
}

} // namespace AgentDeck
