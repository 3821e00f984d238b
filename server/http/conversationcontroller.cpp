#include "apierror.h"
#include "controllers.h"
#include "conversationservice.h"
#include "router.h"

#include <QJsonArray>
#include <QJsonObject>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {

struct SearchParameters
{
    ConversationFilter filter;
    ConversationSort sort = ConversationSort::CreatedAtDesc;
    QString pageId;
    int limit = 100;
};

ConversationFilter filterFrom(const HttpRequest &request)
{
    QString error;
    auto filter = ConversationFilter::fromQuery(request.query, &error);
    if (!filter)
        throw ApiError::invalidParameter(error);
    return *filter;
}

SearchParameters searchParameters(const HttpRequest &request)
{
    SearchParameters parameters;
    parameters.filter = filterFrom(request);
    if (request.query.hasQueryItem(u"sort_order"_s)) {
        const auto sort = conversationSortFromString(request.stringParam(u"sort_order"_s));
        if (!sort)
            throw ApiError::invalidParameter(
                u"sort_order must be CREATED_AT, CREATED_AT_DESC, UPDATED_AT or UPDATED_AT_DESC"_s);
        parameters.sort = *sort;
    }
    parameters.pageId = request.stringParam(u"page_id"_s);
    parameters.limit = request.intParam(u"limit"_s, 100, 1, 100);
    return parameters;
}

ConversationUpdate updateFrom(const QJsonObject &body)
{
    QString error;
    auto labels = ConversationLabels::fromJson(body, &error);
    if (!labels)
        throw ApiError::invalidParameter(error);
    return {std::move(labels->title), std::move(labels->tags)};
}

} // namespace

void ConversationController::registerRoutes(Router &router, ConversationService &service)
{
    using Method = Router::Method;
    const QString item = u"/api/conversations/{id}"_s;

    router.addAsync(Method::Post, u"/api/conversations"_s,
                    [&service](HttpRequest request) -> QCoro::Task<HttpResponse> {
                        QString error;
                        const auto create =
                            CreateConversationRequest::fromJson(request.jsonObject(), &error);
                        if (!create)
                            throw ApiError::invalidParameter(error);
                        auto creating = service.create(*create, request.cause());
                        const auto [info, created] = co_await std::move(creating);
                        co_return HttpResponse::json(info.toJson(), created ? 201 : 200);
                    });

    router.add(Method::Get, u"/api/conversations/search"_s, [&service](const HttpRequest &request) {
        const SearchParameters p = searchParameters(request);
        const ConversationPageResult page = service.search(p.filter, p.sort, p.pageId, p.limit);
        QByteArray json;
        json.reserve(64 + 1024 * page.items.size());
        json += "{\"items\":[";
        for (const ConversationInfo &info : page.items) {
            if (json.size() > 10)
                json += ',';
            json += info.toJsonBytes();
        }
        json += "],\"next_page_id\":";
        json += page.nextPageId.isEmpty() ? "null"_ba : '"' + page.nextPageId.toUtf8() + '"';
        json += '}';
        return HttpResponse::rawJson(std::move(json));
    });

    router.add(Method::Get, u"/api/conversations/count"_s, [&service](const HttpRequest &request) {
        return HttpResponse::json(QJsonValue(service.count(filterFrom(request))));
    });

    router.add(Method::Get, u"/api/conversations"_s, [&service](const HttpRequest &request) {
        QList<QByteArray> items;
        for (const auto &info : service.getMany(request.idsParam(u"ids"_s)))
            items.append(info ? info->toJsonBytes() : "null"_ba);
        return HttpResponse::rawJson(joinJsonArray(items));
    });

    router.add(Method::Get, item, [&service](const HttpRequest &request) {
        return HttpResponse::rawJson(service.getJson(request.idArg(0)));
    });

    router.add(Method::Patch, item, [&service](const HttpRequest &request) {
        const QUuid id = request.idArg(0);
        return HttpResponse::json(service.update(id, updateFrom(request.jsonObject())).toJson());
    });

    // OpenHands' `{"policy": {"kind": ...}}`; a run going on follows it from its next action.
    router.add(Method::Post, item + u"/confirmation_policy"_s,
               [&service](const HttpRequest &request) {
                   const QUuid id = request.idArg(0);
                   QString error;
                   const auto alwaysConfirm =
                       alwaysConfirmFromPolicy(request.jsonObject().value(u"policy"_s), &error);
                   if (!alwaysConfirm)
                       throw ApiError::invalidParameter(u"policy: "_s + error);
                   ConversationUpdate update;
                   update.alwaysConfirm = *alwaysConfirm;
                   service.update(id, update);
                   return HttpResponse::json(QJsonObject{{u"success"_s, true}});
               });

    router.addAsync(Method::Delete, item,
                    [&service](HttpRequest request) -> QCoro::Task<HttpResponse> {
                        auto removing = service.remove(request.idArg(0));
                        co_await std::move(removing);
                        co_return HttpResponse::json(QJsonObject{{u"success"_s, true}});
                    });

    router.addAsync(Method::Post, item + u"/run"_s,
                    [&service](HttpRequest request) -> QCoro::Task<HttpResponse> {
                        auto running = service.run(request.idArg(0), request.cause());
                        const ConversationInfo info = co_await std::move(running);
                        co_return HttpResponse::json(info.toJson());
                    });

    router.add(Method::Post, item + u"/pause"_s, [&service](const HttpRequest &request) {
        return HttpResponse::json(service.pause(request.idArg(0), request.cause()).toJson());
    });

    router.add(Method::Post, item + u"/interrupt"_s, [&service](const HttpRequest &request) {
        return HttpResponse::json(service.interrupt(request.idArg(0), request.cause()).toJson());
    });

    router.addAsync(Method::Post, item + u"/fork"_s,
                    [&service](HttpRequest request) -> QCoro::Task<HttpResponse> {
                        QString error;
                        const auto fork =
                            ForkConversationRequest::fromJson(request.jsonObject(), &error);
                        if (!fork)
                            throw ApiError::invalidParameter(error);
                        auto forking = service.fork(request.idArg(0), *fork);
                        const ConversationInfo info = co_await std::move(forking);
                        co_return HttpResponse::json(info.toJson(), 201);
                    });

    router.add(Method::Post, item + u"/secrets"_s, [&service](const HttpRequest &request) {
        QString error;
        const auto secrets = ConversationSecrets::fromRequest(request.jsonObject(), &error);
        if (!secrets)
            throw ApiError::invalidParameter(error);
        service.updateSecrets(request.idArg(0), *secrets);
        return HttpResponse::json(QJsonObject{{u"success"_s, true}});
    });

    router.add(Method::Get, item + u"/agent_final_response"_s,
               [&service](const HttpRequest &request) {
                   return HttpResponse::json(
                       QJsonObject{{u"response"_s, service.finalResponse(request.idArg(0))}});
               });
}

} // namespace AgentDeck
