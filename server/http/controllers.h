#pragma once

#include <QJsonObject>
#include <QString>

namespace AgentDeck {

class ApiServer;
class ConversationService;
class ConversationStore;
class EventLog;
class Metrics;
class Router;

struct ServerIdentity
{
    QString version;
    QString replicaId;
    qint64 startedAtMs = 0;
};

// One controller per resource; each adds its routes to the shared table.
namespace HealthController {
void registerRoutes(Router &router, const ApiServer &server, const ServerIdentity &identity);
}
namespace MetricsController {
void registerRoutes(Router &router, const Metrics &metrics, ConversationStore &store,
                    const EventLog &log, const ConversationService &service);
}
namespace ConversationController {
void registerRoutes(Router &router, ConversationService &service);
}
namespace RuntimeController {
void registerRoutes(Router &router, ConversationService &service);
}
// GET /openapi.json: the OpenAPI 3.1 description, generated from the route table itself.
namespace OpenApiController {
QJsonObject document(const Router &router, const QString &version);
void registerRoutes(Router &router, const QString &version);
} // namespace OpenApiController
namespace EventController {
void registerRoutes(Router &router, ConversationService &service, ConversationStore &store);
}

} // namespace AgentDeck
