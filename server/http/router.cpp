#include "router.h"

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {
bool isPlaceholder(const QString &segment)
{
    return segment.startsWith(u'{') && segment.endsWith(u'}');
}

Router::Route makeRoute(Router::Method method, const QString &pattern)
{
    Router::Route route{method, pattern, pattern.split(u'/', Qt::SkipEmptyParts), 0, {}, {}};
    for (const QString &segment : route.segments)
        route.literals += isPlaceholder(segment) ? 0 : 1;
    return route;
}

// Matches one route's segments against the path's; fills the placeholder values.
bool matches(const Router::Route &route, const QStringList &segments, QStringList *args)
{
    if (route.segments.size() != segments.size())
        return false;
    QStringList values;
    for (qsizetype i = 0; i < segments.size(); ++i) {
        if (isPlaceholder(route.segments[i]))
            values.append(segments[i]);
        else if (route.segments[i] != segments[i])
            return false;
    }
    *args = values;
    return true;
}
} // namespace

void Router::add(Method method, const QString &pattern, SyncHandler handler)
{
    Route route = makeRoute(method, pattern);
    route.sync = std::move(handler);
    m_routes.append(std::move(route));
}

void Router::addAsync(Method method, const QString &pattern, AsyncHandler handler)
{
    Route route = makeRoute(method, pattern);
    route.async = std::move(handler);
    m_routes.append(std::move(route));
}

Router::Match Router::match(Method method, const QString &path) const
{
    // The path names the resource of its most literal pattern (/conversations/search, not
    // /conversations/{id}); that pattern's routes decide which methods the path allows.
    const QStringList segments = path.split(u'/', Qt::SkipEmptyParts);
    Match best;
    int bestLiterals = -1;
    for (const Route &route : m_routes) {
        QStringList args;
        if (route.literals < bestLiterals || !matches(route, segments, &args))
            continue;
        if (route.literals > bestLiterals) {
            best = Match();
            bestLiterals = route.literals;
        }
        if (route.method == method) {
            if (best.route)
                continue; // of two equally literal patterns, the first registered wins
            best.route = &route;
            best.args = args;
        } else if (!best.allowedMethods.contains(methodName(route.method))) {
            best.allowedMethods.append(methodName(route.method));
        }
    }
    if (best.route)
        best.allowedMethods.clear();
    return best;
}

QByteArray Router::methodName(Method method)
{
    switch (method) {
    case Method::Get:
        return "GET";
    case Method::Put:
        return "PUT";
    case Method::Delete:
        return "DELETE";
    case Method::Post:
        return "POST";
    case Method::Head:
        return "HEAD";
    case Method::Options:
        return "OPTIONS";
    case Method::Patch:
        return "PATCH";
    case Method::Connect:
        return "CONNECT";
    case Method::Trace:
        return "TRACE";
    default:
        return "UNKNOWN";
    }
}

} // namespace AgentDeck
