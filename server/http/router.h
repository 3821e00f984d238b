#pragma once

#include "httptypes.h"

#include <QCoroTask>

#include <functional>

namespace AgentDeck {

// The route table: the one place that knows which handler answers which method and path. Paths
// are patterns with {placeholders}; a literal segment wins over a placeholder.
class Router
{
public:
    using Method = HttpMethod;
    using SyncHandler = std::function<HttpResponse(const HttpRequest &)>;
    using AsyncHandler = std::function<QCoro::Task<HttpResponse>(HttpRequest)>;
    // Who may call a route. Everything asks for the key (when the server has one) and refuses
    // web pages of other sites, but for the few routes that say what the server is and whether
    // it is alive: load balancers and probes call those without a key.
    enum class Access
    {
        KeyRequired,
        Open
    };

    struct Route
    {
        Method method;
        QString pattern;
        QStringList segments;
        QList<bool> placeholders; // per segment
        int literals = 0;
        Access access = Access::KeyRequired;
        SyncHandler sync;
        AsyncHandler async;
        // The action the audit log records a call of this route as; empty: none (a read).
        QString auditAction;
    };

    struct Match
    {
        const Route *route = nullptr;
        QStringList args;
        QList<QByteArray> allowedMethods; // when the path exists but not with this method
    };

    void add(Method method, const QString &pattern, SyncHandler handler);
    // A route anyone may call (Access::Open).
    void addOpen(Method method, const QString &pattern, SyncHandler handler);
    void addAsync(Method method, const QString &pattern, AsyncHandler handler);
    // Records every call of the route (added before) in the audit log as `action`.
    void audit(Method method, const QString &pattern, const QString &action);
    Match match(Method method, const QString &path) const;
    const QList<Route> &routes() const { return m_routes; }

    static QByteArray methodName(Method method);

private:
    void index(Route route);

    QList<Route> m_routes;
    // The routes (indexes into m_routes) of each number of path segments, in the order they
    // were added: a path is matched against those of its own length only.
    QList<QList<qsizetype>> m_bySegmentCount;
};

} // namespace AgentDeck
