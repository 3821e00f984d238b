#include "apierror.h"
#include "controllers.h"
#include "conversationfilter.h"
#include "conversationservice.h"
#include "router.h"

#include <QJsonObject>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {

EventFilter eventFilterFrom(const HttpRequest &request)
{
    EventFilter filter;
    filter.kind = request.stringParam(u"kind"_s);
    if (!filter.kind.isEmpty() && !EventKind::isKnown(filter.kind))
        throw ApiError::invalidParameter(u"kind \"%1\" is not an event kind"_s.arg(filter.kind));
    filter.source = request.stringParam(u"source"_s);
    if (!filter.source.isEmpty() && !EventSource::isKnown(filter.source))
        throw ApiError::invalidParameter(u"source must be user, agent or environment"_s);
    filter.bodyContains = request.stringParam(u"body"_s);
    if (const QString problem = searchTextProblem(u"body"_s, filter.bodyContains);
        !problem.isEmpty())
        throw ApiError::invalidParameter(problem);
    filter.timestampGteMs = request.timeParam(u"timestamp__gte"_s);
    filter.timestampLtMs = request.timeParam(u"timestamp__lt"_s);
    filter.afterSeq = request.intParam(u"after_seq"_s, 0, 0, std::numeric_limits<int>::max());
    return filter;
}

bool descendingFrom(const HttpRequest &request)
{
    const QString sort = request.stringParam(u"sort_order"_s).toUpper();
    if (sort.isEmpty() || sort == u"TIMESTAMP"_s || sort == u"SEQ"_s)
        return false;
    if (sort == u"TIMESTAMP_DESC"_s || sort == u"SEQ_DESC"_s)
        return true;
    throw ApiError::invalidParameter(u"sort_order must be TIMESTAMP or TIMESTAMP_DESC"_s);
}

QByteArray pageJson(const EventPageResult &page)
{
    QList<QByteArray> items;
    items.reserve(page.items.size());
    for (const StoredEvent &event : page.items)
        items.append(event.json);
    const QByteArray next =
        page.nextPageId.isEmpty() ? "null"_ba : '"' + page.nextPageId.toUtf8() + '"';
    return "{\"items\":" + joinJsonArray(items) + ",\"next_page_id\":" + next + '}';
}

} // namespace

void EventController::registerRoutes(Router &router, ConversationService &service,
                                     ConversationStore &store)
{
    using Method = Router::Method;
    const QString events = u"/api/conversations/{id}/events"_s;

    router.addAsync(Method::Post, events,
                    [&service](HttpRequest request) -> QCoro::Task<HttpResponse> {
                        QString error;
                        const auto message = MessageRequest::fromJson(request.jsonObject(), &error);
                        if (!message)
                            throw ApiError::invalidParameter(error);
                        const ChangeCause cause = request.cause();
                        auto sending = service.sendMessage(request.idArg(0), *message, cause);
                        const StoredEvent stored = co_await std::move(sending);
                        co_return HttpResponse::rawJson(stored.json);
                    });

    router.add(Method::Get, events + u"/search"_s, [&](const HttpRequest &request) {
        const QUuid id = request.idArg(0);
        const EventFilter filter = eventFilterFrom(request);
        const bool descending = descendingFrom(request);
        const int limit = request.intParam(u"limit"_s, 100, 1, 100);
        service.get(id);
        return HttpResponse::rawJson(pageJson(
            store.searchEvents(id, filter, descending, request.stringParam(u"page_id"_s), limit)));
    });

    router.add(Method::Get, events + u"/count"_s, [&](const HttpRequest &request) {
        const QUuid id = request.idArg(0);
        const EventFilter filter = eventFilterFrom(request);
        service.get(id);
        return HttpResponse::json(QJsonValue(store.countEvents(id, filter)));
    });

    router.add(Method::Get, events, [&](const HttpRequest &request) {
        const QUuid id = request.idArg(0);
        const QList<QUuid> ids = request.idsParam(u"event_ids"_s);
        service.get(id);
        QList<QByteArray> items;
        for (const auto &event : store.events(id, ids))
            items.append(event ? event->json : "null"_ba);
        return HttpResponse::rawJson(joinJsonArray(items));
    });

    router.add(Method::Get, events + u"/{event_id}"_s, [&](const HttpRequest &request) {
        const QUuid id = request.idArg(0);
        const QUuid eventId = request.idArg(1);
        service.get(id);
        const auto event = store.event(id, eventId);
        if (!event)
            throw ApiError::notFound(u"Event %1 does not exist"_s.arg(toWireId(eventId)));
        return HttpResponse::rawJson(event->json);
    });

    router.addAsync(Method::Post, events + u"/respond_to_confirmation"_s,
                    [&service](HttpRequest request) -> QCoro::Task<HttpResponse> {
                        const QJsonObject body = request.jsonObject();
                        const QJsonValue accept = body.value(u"accept"_s);
                        if (!accept.isBool())
                            throw ApiError::invalidParameter(u"accept must be a boolean"_s);
                        const QJsonValue reason = body.value(u"reason"_s);
                        if (!reason.isUndefined() && !reason.isNull() && !reason.isString())
                            throw ApiError::invalidParameter(u"reason must be a string"_s);
                        auto responding = service.respondToConfirmation(
                            request.idArg(0), accept.toBool(), reason.toString(), request.cause());
                        const ConversationInfo info = co_await std::move(responding);
                        co_return HttpResponse::json(info.toJson());
                    });
}

} // namespace AgentDeck
