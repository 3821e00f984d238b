#pragma once

#include <QJsonArray>
#include <QJsonObject>
#include <QString>
#include <QStringList>

#include <functional>
#include <memory>

namespace AgentDeck {

class ApiServer;
class AuditLog;
class BashEventLog;
class ConversationService;
class ConversationStore;
class EventLog;
class Metrics;
class ReplicaStore;
class Router;
class WorkspaceRoots;
class WorkspaceSandbox;

struct ServerIdentity
{
    QString version;
    QString replicaId;
    qint64 startedAtMs = 0;
    // How commands are contained (SandboxIsolation::toJson()).
    QJsonObject sandbox;
    // The server workspace (--workspace-dir), as a real path.
    QString workspaceDir;
    // Where callers' workspaces may lie (WorkspaceRoots), as real paths.
    QStringList workspaceRoots;
    // Each --webhook's delivery (WebhookDelivery::status()); unset: none.
    std::function<QJsonArray()> webhooks;
};

// One controller per resource; each adds its routes to the shared table.
namespace HealthController {
void registerRoutes(Router &router, const ApiServer &server, const ServerIdentity &identity);
}
namespace MetricsController {
// `more`: further series (the webhooks'), appended.
void registerRoutes(Router &router, const Metrics &metrics, ConversationStore &store,
                    const EventLog &log, const ConversationService &service,
                    std::function<QByteArray()> more = {});
} // namespace MetricsController
namespace ConversationController {
void registerRoutes(Router &router, ConversationService &service);
}
namespace RuntimeController {
void registerRoutes(Router &router, ConversationService &service);
}
// GET /openapi.json: the OpenAPI 3.1 description, generated from the route table itself; GET
// /docs: a page that renders it (server/http/apidocs).
namespace OpenApiController {
QJsonObject document(const Router &router, const QString &version);
void registerRoutes(Router &router, const QString &version);
} // namespace OpenApiController
// GET /api/replicas: every replica sharing the catalog, its heartbeat and what it owns.
namespace ReplicaController {
void registerRoutes(Router &router, ReplicaStore &replicas, const ServerIdentity &identity);
}
// The remote workspace of OpenHands' clients: /api/bash/*, /api/file/upload|download and
// /api/git/changes|diff, for paths in a conversation's workspace, run in its sandbox, or under
// the server workspace, run in that one's.
namespace WorkspaceController {
// `events`: the bash events of /api/bash, which the bash-events sockets follow too.
void registerRoutes(Router &router, WorkspaceSandbox &sandbox, ConversationService &service,
                    ConversationStore &store, std::shared_ptr<BashEventLog> events,
                    qint64 maxDownloadBytes, const WorkspaceRoots &roots);
} // namespace WorkspaceController
// GET /api/audit: the audit log, searched; and which routes' calls it records (Router::audit()).
// After the routes it marks.
namespace AuditController {
void registerRoutes(Router &router, AuditLog &log);
}
namespace EventController {
void registerRoutes(Router &router, ConversationService &service, ConversationStore &store);
}

} // namespace AgentDeck
