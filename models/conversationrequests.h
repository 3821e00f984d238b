#pragma once

#include "wiretypes.h"

#include <QJsonObject>

#include <optional>

namespace AgentDeck {

// The bodies of the requests that make a conversation, as the client writes them and the server
// reads them.

// Whether an OpenHands confirmation policy (`{"kind": "AlwaysConfirm"}` or `NeverConfirm`) asks
// for every action to be confirmed; nullopt with *error for another kind (the risk-based ones
// need a security analyzer, which AgentDeck does not offer) or a value that is not a policy.
std::optional<bool> alwaysConfirmFromPolicy(const QJsonValue &policy, QString *error);

struct CreateConversationRequest
{
    std::optional<QUuid> id;
    QString title;
    QMap<QString, QString> tags;
    QString agentKind = QStringLiteral("shell");
    // The rest of the `agent` object (settings of the agent kind), checked by the server.
    QJsonObject agentConfig;
    QString workingDir;
    bool alwaysConfirm = false;
    std::optional<MessageRequest> initialMessage;
    // The `sandbox` object (see SandboxPolicy::fromRequest), checked by the server.
    std::optional<QJsonObject> sandbox;

    QJsonObject toJson() const;
    // The server's reading of a create body; names the offending field in *error.
    static std::optional<CreateConversationRequest> fromJson(const QJsonObject &object,
                                                             QString *error);
};

// POST /api/conversations/{id}/fork, as OpenHands' ForkConversationRequest: the fork's own id
// (else a new one), title (else the source's) and tags (else the source's), and whether its
// token counts start at zero (reset_metrics, the default) or from the source's.
struct ForkConversationRequest
{
    std::optional<QUuid> id;
    ConversationLabels labels;
    bool resetMetrics = true;

    // Names the offending field in *error.
    static std::optional<ForkConversationRequest> fromJson(const QJsonObject &object,
                                                           QString *error);
};

} // namespace AgentDeck
