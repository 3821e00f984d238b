#include "controllers.h"
#include "conversationservice.h"
#include "router.h"

#include <QJsonArray>
#include <QJsonObject>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {
// Runtime actions answer with the conversation, whose runtime_info says what they did.
using Action = QCoro::Task<ConversationInfo> (ConversationService::*)(QUuid, ChangeCause);

Router::AsyncHandler conversationAction(ConversationService &service, Action action)
{
    return [&service, action](HttpRequest request) -> QCoro::Task<HttpResponse> {
        auto acting = (service.*action)(request.idArg(0), request.cause());
        const ConversationInfo info = co_await std::move(acting);
        co_return HttpResponse::json(info.toJson());
    };
}
} // namespace

void RuntimeController::registerRoutes(Router &router, ConversationService &service)
{
    using Method = Router::Method;
    const QString item = u"/api/conversations/{id}"_s;
    const QString runtime = item + u"/runtime"_s;

    // The runtime info, with what only this one conversation's read tells (RuntimeDetails).
    router.add(Method::Get, runtime, [&service](const HttpRequest &request) {
        const QUuid id = request.idArg(0);
        QJsonObject body = service.get(id).runtime.toJson();
        body.insert(u"details"_s, service.runtimeDetails(id).toJson());
        return HttpResponse::json(body);
    });
    router.addAsync(Method::Post, runtime + u"/resume"_s,
                    conversationAction(service, &ConversationService::resumeRuntime));
    router.addAsync(Method::Post, runtime + u"/reprovision"_s,
                    conversationAction(service, &ConversationService::reprovisionRuntime));
    router.addAsync(Method::Post, runtime + u"/start_fresh"_s,
                    conversationAction(service, &ConversationService::startFresh));
    router.addAsync(Method::Delete, runtime,
                    conversationAction(service, &ConversationService::stopRuntime));
    // The conversation, and beside its fields what the recovery did (`actions`): a client
    // that reads a conversation from the answer reads it as before.
    router.addAsync(Method::Post, item + u"/recover"_s,
                    [&service](HttpRequest request) -> QCoro::Task<HttpResponse> {
                        auto recovering = service.recover(request.idArg(0), request.cause());
                        const Recovery recovery = co_await std::move(recovering);
                        QJsonObject body = recovery.conversation.toJson();
                        body.insert(u"actions"_s, QJsonArray::fromStringList(recovery.actions));
                        co_return HttpResponse::json(body);
                    });
    router.addAsync(Method::Post, item + u"/archive"_s,
                    conversationAction(service, &ConversationService::archive));
    router.add(Method::Post, item + u"/unarchive"_s, [&service](const HttpRequest &request) {
        return HttpResponse::json(service.unarchive(request.idArg(0), request.cause()).toJson());
    });
    router.add(Method::Post, item + u"/outcome/dismiss"_s, [&service](const HttpRequest &request) {
        return HttpResponse::json(
            service.dismissOutcome(request.idArg(0), request.cause()).toJson());
    });
    router.addAsync(Method::Post, item + u"/outcome/retry"_s,
                    conversationAction(service, &ConversationService::retry));
}

} // namespace AgentDeck
