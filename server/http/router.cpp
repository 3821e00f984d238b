#include "router.h"

#include <QVarLengthArray>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {
bool isPlaceholder(const QString &segment)
{
    return segment.startsWith(u'{') && segment.endsWith(u'}');
}

Router::Route makeRoute(Router::Method method, const QString &pattern)
{
    Router::Route route;
    route.method = method;
    route.pattern = pattern;
    route.segments = pattern.split(u'/', Qt::SkipEmptyParts);
    for (const QString &segment : route.segments) {
        route.placeholders.append(isPlaceholder(segment));
        route.literals += route.placeholders.last() ? 0 : 1;
    }
    return route;
}

// A path's segments, looked at in place.
using Segments = QVarLengthArray<QStringView, 8>;

Segments segmentsOf(QStringView path)
{
    Segments segments;
    qsizetype start = 0;
    while (start < path.size()) {
        qsizetype end = path.indexOf(u'/', start);
        if (end < 0)
            end = path.size();
        if (end > start)
            segments.append(path.sliced(start, end - start));
        start = end + 1;
    }
    return segments;
}

bool matches(const Router::Route &route, const Segments &segments)
{
    if (route.segments.size() != segments.size())
        return false;
    for (qsizetype i = 0; i < segments.size(); ++i) {
        if (!route.placeholders[i] && route.segments[i] != segments[i])
            return false;
    }
    return true;
}
} // namespace

void Router::add(Method method, const QString &pattern, SyncHandler handler)
{
    Route route = makeRoute(method, pattern);
    route.sync = std::move(handler);
    index(std::move(route));
}

void Router::addOpen(Method method, const QString &pattern, SyncHandler handler)
{
    Route route = makeRoute(method, pattern);
    route.access = Access::Open;
    route.sync = std::move(handler);
    index(std::move(route));
}

void Router::addAsync(Method method, const QString &pattern, AsyncHandler handler)
{
    Route route = makeRoute(method, pattern);
    route.async = std::move(handler);
    index(std::move(route));
}

void Router::audit(Method method, const QString &pattern, const QString &action)
{
    for (Route &route : m_routes) {
        if (route.method == method && route.pattern == pattern) {
            route.auditAction = action;
            return;
        }
    }
    Q_ASSERT_X(false, "Router::audit", "no such route");
}

void Router::index(Route route)
{
    const qsizetype count = route.segments.size();
    if (m_bySegmentCount.size() <= count)
        m_bySegmentCount.resize(count + 1);
    m_bySegmentCount[count].append(m_routes.size());
    m_routes.append(std::move(route));
}

Router::Match Router::match(Method method, const QString &path) const
{
    // The path names the resource of its most literal pattern (/conversations/search, not
    // /conversations/{id}); that pattern's routes decide which methods the path allows. Every
    // request comes here: nothing is copied until the route is known (this was a tenth of the
    // server's work for a GET by id).
    const Segments segments = segmentsOf(path);
    Match match;
    if (segments.size() >= m_bySegmentCount.size())
        return match;
    const QList<qsizetype> &candidates = m_bySegmentCount[segments.size()];
    int bestLiterals = -1;
    const Route *chosen = nullptr;
    for (const qsizetype index : candidates) {
        const Route &route = m_routes[index];
        if (route.literals < bestLiterals || !matches(route, segments))
            continue;
        if (route.literals > bestLiterals) {
            bestLiterals = route.literals;
            chosen = nullptr;
        }
        // Of two equally literal patterns, the first registered wins.
        if (!chosen && route.method == method)
            chosen = &route;
    }
    if (chosen) {
        match.route = chosen;
        for (qsizetype i = 0; i < segments.size(); ++i) {
            if (chosen->placeholders[i])
                match.args.append(segments[i].toString());
        }
    } else if (bestLiterals >= 0) {
        for (const qsizetype index : candidates) {
            const Route &route = m_routes[index];
            if (route.literals == bestLiterals && matches(route, segments) &&
                !match.allowedMethods.contains(methodName(route.method)))
                match.allowedMethods.append(methodName(route.method));
        }
        // HEAD is answered wherever GET is (see ApiServer).
        if (match.allowedMethods.contains(methodName(Method::Get)))
            match.allowedMethods.append(methodName(Method::Head));
    }
    return match;
}

QByteArray Router::methodName(Method method)
{
    // Literals: asked at every request (its metrics), and a QByteArray made from a char array
    // would be an allocation each time.
    switch (method) {
    case Method::Get:
        return QByteArrayLiteral("GET");
    case Method::Put:
        return QByteArrayLiteral("PUT");
    case Method::Delete:
        return QByteArrayLiteral("DELETE");
    case Method::Post:
        return QByteArrayLiteral("POST");
    case Method::Head:
        return QByteArrayLiteral("HEAD");
    case Method::Options:
        return QByteArrayLiteral("OPTIONS");
    case Method::Patch:
        return QByteArrayLiteral("PATCH");
    case Method::Connect:
        return QByteArrayLiteral("CONNECT");
    case Method::Trace:
        return QByteArrayLiteral("TRACE");
    default:
        return QByteArrayLiteral("UNKNOWN");
    }
}

} // namespace AgentDeck
