#include "apiserver.h"
#include "controllers.h"
#include "conversationservice.h"
#include "eventlog.h"
#include "metrics.h"
#include "wiretypes.h"

#include <QDateTime>
#include <QJsonArray>
#include <QJsonObject>

using namespace Qt::StringLiterals;

namespace AgentDeck {

void HealthController::registerRoutes(Router &router, const ApiServer &server,
                                      const ServerIdentity &identity)
{
    using Method = Router::Method;
    // Asked every few seconds by every load balancer and console: the bytes are made once.
    router.addOpen(Method::Get, u"/alive"_s, [](const HttpRequest &) {
        static const QByteArray alive = R"({"status":"ok"})";
        return HttpResponse::rawJson(alive);
    });
    // OpenHands' clients read "OK", a JSON string; /alive answers the object.
    router.addOpen(Method::Get, u"/health"_s,
                   [](const HttpRequest &) { return HttpResponse::json(QJsonValue(u"OK"_s)); });
    // What this server is, and where to look next (OpenHands' clients ask for it).
    router.addOpen(Method::Get, u"/"_s, [identity](const HttpRequest &) {
        return HttpResponse::json(QJsonObject{
            {u"name"_s, u"agentdeck"_s},
            {u"title"_s, u"AgentDeck agent server"_s},
            {u"version"_s, identity.version},
            {u"docs"_s, u"/docs"_s},
            {u"openapi"_s, u"/openapi.json"_s},
            {u"health"_s, u"/health"_s},
            {u"server_info"_s, u"/server_info"_s},
        });
    });
    router.addOpen(Method::Get, u"/ready"_s, [&server](const HttpRequest &) {
        if (!server.isReady())
            return HttpResponse::json(
                QJsonObject{{u"status"_s, server.isStopping() ? u"stopping"_s : u"starting"_s}},
                503);
        if (server.storageCorrupt())
            return HttpResponse::json(QJsonObject{{u"status"_s, u"storage_corrupt"_s}}, 503);
        return HttpResponse::json(QJsonObject{{u"status"_s, u"ready"_s}});
    });
    router.addOpen(Method::Get, u"/server_info"_s, [&server, identity](const HttpRequest &) {
        const qint64 now = QDateTime::currentMSecsSinceEpoch();
        return HttpResponse::json(QJsonObject{
            {u"name"_s, u"agentdeck"_s},
            {u"version"_s, identity.version},
            {u"replica_id"_s, identity.replicaId},
            {u"started_at"_s, toWireTime(identity.startedAtMs)},
            {u"uptime_seconds"_s, (now - identity.startedAtMs) / 1000},
            {u"ready"_s, server.isReady()},
            {u"sandbox"_s, identity.sandbox},
            {u"workspace_dir"_s, identity.workspaceDir},
            {u"workspace_roots"_s, QJsonArray::fromStringList(identity.workspaceRoots)},
            {u"webhooks"_s, identity.webhooks ? identity.webhooks() : QJsonArray()},
        });
    });
}

void MetricsController::registerRoutes(Router &router, const Metrics &metrics,
                                       ConversationStore &store, const EventLog &log,
                                       const ConversationService &service,
                                       std::function<QByteArray()> more)
{
    router.addOpen(Router::Method::Get, u"/metrics"_s, [&, more](const HttpRequest &) {
        HttpResponse response;
        response.contentType = "text/plain; version=0.0.4";
        response.body =
            metrics.render(store.countByStatus(), log.publishedCount(), service.liveCount()) +
            service.runtimeMetrics() + (more ? more() : QByteArray());
        return response;
    });
}

} // namespace AgentDeck
