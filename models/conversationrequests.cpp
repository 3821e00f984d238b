#include "conversationrequests.h"

#include "openhandsagent.h"

#include <QJsonArray>

using namespace Qt::StringLiterals;

namespace AgentDeck {

QJsonObject CreateConversationRequest::toJson() const
{
    QJsonObject agent = agentConfig;
    agent.insert(u"kind"_s, agentKind);
    QJsonObject body{
        {u"agent"_s, agent},
        {u"confirmation_policy"_s,
         QJsonObject{{u"kind"_s, alwaysConfirm ? u"AlwaysConfirm"_s : u"NeverConfirm"_s}}}};
    if (id)
        body.insert(u"conversation_id"_s, toWireId(*id));
    if (!title.isEmpty())
        body.insert(u"title"_s, title);
    if (!tags.isEmpty())
        body.insert(u"tags"_s, toWireTags(tags));
    if (!workingDir.isEmpty())
        body.insert(u"workspace"_s, QJsonObject{{u"working_dir"_s, workingDir}});
    if (initialMessage)
        body.insert(u"initial_message"_s, initialMessage->toJson());
    if (sandbox)
        body.insert(u"sandbox"_s, *sandbox);
    return body;
}

std::optional<ForkConversationRequest> ForkConversationRequest::fromJson(const QJsonObject &object,
                                                                         QString *error)
{
    ForkConversationRequest request;
    if (const QJsonValue id = object.value(u"id"_s); !id.isUndefined() && !id.isNull()) {
        request.id = parseWireId(id.toString());
        if (!request.id) {
            *error = u"id must be a UUID other than the nil one"_s;
            return std::nullopt;
        }
    }
    const auto labels = ConversationLabels::fromJson(object, error);
    if (!labels)
        return std::nullopt;
    request.labels = *labels;
    if (const QJsonValue reset = object.value(u"reset_metrics"_s);
        !reset.isUndefined() && !reset.isNull()) {
        if (!reset.isBool()) {
            *error = u"reset_metrics must be true or false"_s;
            return std::nullopt;
        }
        request.resetMetrics = reset.toBool();
    }
    return request;
}

std::optional<bool> alwaysConfirmFromPolicy(const QJsonValue &policy, QString *error)
{
    const QString kind = policy.toObject().value(u"kind"_s).toString();
    if (kind == u"AlwaysConfirm"_s || kind == u"NeverConfirm"_s)
        return kind == u"AlwaysConfirm"_s;
    *error = kind.isEmpty() ? u"confirmation_policy must be an object with a kind"_s
                            : u"confirmation_policy.kind must be NeverConfirm or AlwaysConfirm, "
                              "not %1 (risk-based policies need a security analyzer, which "
                              "AgentDeck does not offer)"_s.arg(kind);
    return std::nullopt;
}

std::optional<CreateConversationRequest>
CreateConversationRequest::fromJson(const QJsonObject &object, QString *error)
{
    CreateConversationRequest request;
    const auto fail = [error](const QString &sentence) {
        *error = sentence;
        return std::nullopt;
    };
    if (const QJsonValue id = object.value(u"conversation_id"_s);
        !id.isUndefined() && !id.isNull()) {
        request.id = parseWireId(id.toString());
        if (!request.id)
            return fail(u"conversation_id must be a UUID other than the nil one"_s);
    }
    QString labelError;
    const auto labels = ConversationLabels::fromJson(object, &labelError);
    if (!labels)
        return fail(labelError);
    request.title = labels->title.value_or(QString());
    request.tags = labels->tags.value_or(QMap<QString, QString>());
    // As OpenHands does, a conversation is created with its agent: without one it was a shell
    // conversation, which no OpenHands client meant.
    const QJsonValue agent = object.value(u"agent"_s);
    if (!agent.isObject())
        return fail(u"agent is required: {\"kind\": \"llm\" | \"shell\" | \"echo\", ...}, or "
                    "OpenHands' {\"kind\": \"Agent\", \"llm\": {...}, \"tools\": [...]}"_s);
    const QJsonValue kind = agent.toObject().value(u"kind"_s);
    if (!kind.isUndefined() && !kind.isNull() && !kind.isString())
        return fail(u"agent.kind must be a string"_s);
    request.agentConfig = agent.toObject();
    request.agentConfig.remove(u"kind"_s);
    // OpenHands' spec, whose kind may be left out, runs on the llm agent.
    if (kind.isString() && kind.toString() != OpenHandsAgent::Kind) {
        request.agentKind = kind.toString();
    } else {
        QString specError;
        const auto config = OpenHandsAgent::toLlmConfig(request.agentConfig, object, &specError);
        if (!config)
            return fail(specError);
        request.agentKind = u"llm"_s;
        request.agentConfig = *config;
    }
    if (const QJsonValue workspace = object.value(u"workspace"_s);
        !workspace.isUndefined() && !workspace.isNull()) {
        if (!workspace.isObject())
            return fail(u"workspace must be {\"working_dir\": string}"_s);
        const QJsonValue dir = workspace.toObject().value(u"working_dir"_s);
        if (!dir.isUndefined() && !dir.isNull() && !dir.isString())
            return fail(u"workspace.working_dir must be a string"_s);
        request.workingDir = dir.toString();
    }
    if (const QJsonValue policy = object.value(u"confirmation_policy"_s);
        !policy.isUndefined() && !policy.isNull()) {
        const std::optional<bool> alwaysConfirm = alwaysConfirmFromPolicy(policy, error);
        if (!alwaysConfirm)
            return std::nullopt;
        request.alwaysConfirm = *alwaysConfirm;
    }
    if (const QJsonValue message = object.value(u"initial_message"_s);
        !message.isUndefined() && !message.isNull()) {
        QString messageError;
        request.initialMessage = MessageRequest::fromJson(message.toObject(), &messageError);
        if (!request.initialMessage)
            return fail(u"initial_message: "_s + messageError);
    }
    if (const QJsonValue sandbox = object.value(u"sandbox"_s);
        !sandbox.isUndefined() && !sandbox.isNull()) {
        if (!sandbox.isObject())
            return fail(u"sandbox must be an object such as {\"network\": \"none\", "
                        "\"memory_bytes\": 268435456}"_s);
        request.sandbox = sandbox.toObject();
    }
    return request;
}

} // namespace AgentDeck
