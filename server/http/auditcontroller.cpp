#include "apierror.h"
#include "controllers.h"
#include "router.h"
#include "storage/auditlog.h"
#include "wiretypes.h"

#include <QJsonArray>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {

// The changes clients make to a conversation or its runtime, by route: each call is recorded,
// done or refused.
void markAuditedRoutes(Router &router)
{
    using Method = Router::Method;
    const QString item = u"/api/conversations/{id}"_s;
    const QString runtime = item + u"/runtime"_s;
    const std::initializer_list<std::tuple<Method, QString, QString>> audited{
        {Method::Post, u"/api/conversations"_s, u"create"_s},
        {Method::Patch, item, u"update"_s},
        {Method::Delete, item, u"delete"_s},
        {Method::Post, item + u"/confirmation_policy"_s, u"set_confirmation_policy"_s},
        {Method::Post, item + u"/run"_s, u"run"_s},
        {Method::Post, item + u"/pause"_s, u"pause"_s},
        {Method::Post, item + u"/interrupt"_s, u"interrupt"_s},
        {Method::Post, item + u"/fork"_s, u"fork"_s},
        {Method::Post, item + u"/secrets"_s, u"set_secrets"_s},
        {Method::Post, item + u"/events/respond_to_confirmation"_s, u"respond_to_confirmation"_s},
        {Method::Post, item + u"/archive"_s, u"archive"_s},
        {Method::Post, item + u"/unarchive"_s, u"unarchive"_s},
        {Method::Post, item + u"/recover"_s, u"recover"_s},
        {Method::Post, item + u"/outcome/dismiss"_s, u"dismiss"_s},
        {Method::Post, item + u"/outcome/retry"_s, u"retry"_s},
        {Method::Post, runtime + u"/resume"_s, u"resume_runtime"_s},
        {Method::Post, runtime + u"/reprovision"_s, u"reprovision"_s},
        {Method::Post, runtime + u"/start_fresh"_s, u"start_fresh"_s},
        {Method::Delete, runtime, u"stop_runtime"_s},
    };
    for (const auto &[method, pattern, action] : audited)
        router.audit(method, pattern, action);
}

AuditLog::Query queryOf(const HttpRequest &request)
{
    AuditLog::Query query;
    query.fromMs = request.timeParam(u"timestamp__gte"_s);
    query.beforeMs = request.timeParam(u"timestamp__lt"_s);
    query.actor = request.stringParam(u"actor"_s);
    query.client = request.stringParam(u"client"_s);
    query.action = request.stringParam(u"action"_s);
    if (const QString result = request.stringParam(u"result"_s); result == u"done"_s)
        query.results = AuditLog::Query::Results::Done;
    else if (result == u"refused"_s)
        query.results = AuditLog::Query::Results::Refused;
    else if (!result.isEmpty())
        throw ApiError::invalidParameter(u"result must be done or refused"_s);
    if (const QString id = request.stringParam(u"conversation_id"_s); !id.isEmpty()) {
        const auto parsed = parseWireId(id);
        if (!parsed)
            throw ApiError::invalidParameter(u"conversation_id must be a UUID"_s);
        query.conversationId = *parsed;
    }
    const QString order = request.stringParam(u"sort_order"_s);
    if (!order.isEmpty() && order != u"TIMESTAMP"_s && order != u"TIMESTAMP_DESC"_s)
        throw ApiError::invalidParameter(u"sort_order must be TIMESTAMP or TIMESTAMP_DESC"_s);
    query.descending = order != u"TIMESTAMP"_s;
    if (const QString page = request.stringParam(u"page_id"_s); !page.isEmpty()) {
        const auto after = parseWireCount(page);
        if (!after)
            throw ApiError::invalidParameter(u"page_id must be a next_page_id of this search"_s);
        query.after = *after;
    }
    query.limit = request.intParam(u"limit"_s, 100, 1, 100);
    return query;
}

} // namespace

void AuditController::registerRoutes(Router &router, AuditLog &log)
{
    markAuditedRoutes(router);
    router.add(Router::Method::Get, u"/api/audit"_s, [&log](const HttpRequest &request) {
        const AuditLog::Query query = queryOf(request);
        const auto [records, more] = log.search(query);
        QJsonArray items;
        for (const AuditRecord &record : records)
            items.append(record.toJson());
        return HttpResponse::json(QJsonObject{
            {u"items"_s, items},
            {u"next_page_id"_s,
             more ? QJsonValue(QString::number(records.constLast().number)) : QJsonValue::Null}});
    });
}

} // namespace AgentDeck
