#include "auditentry.h"

#include "wiretypes.h"

using namespace Qt::StringLiterals;

namespace AgentDeck {

std::optional<AuditEntry> AuditEntry::fromJson(const QJsonObject &object)
{
    const auto number = parseWireCount(object.value(u"id"_s).toString());
    const auto at = parseWireTime(object.value(u"timestamp"_s).toString());
    if (!number || !at)
        return std::nullopt;
    AuditEntry entry;
    entry.number = *number;
    entry.at = *at;
    entry.actor = object.value(u"actor"_s).toString();
    entry.client = object.value(u"client"_s).toString();
    entry.actorDisplay = object.value(u"actor_display"_s).toString();
    if (entry.actorDisplay.isEmpty())
        entry.actorDisplay = entry.actor;
    entry.action = object.value(u"action"_s).toString();
    entry.conversationId =
        parseWireId(object.value(u"conversation_id"_s).toString()).value_or(QUuid());
    entry.replica = object.value(u"replica"_s).toString();
    entry.reason = object.value(u"reason"_s).toString();
    entry.status = object.value(u"status"_s).toInt(200);
    entry.done = object.contains(u"result"_s) ? object.value(u"result"_s) == u"done"_s
                                              : entry.status >= 200 && entry.status < 300;
    return entry;
}

void AuditQuery::writeTo(QUrlQuery &query) const
{
    if (!actor.isEmpty())
        query.addQueryItem(u"actor"_s, actor);
    if (!action.isEmpty())
        query.addQueryItem(u"action"_s, action);
    if (!conversationId.isNull())
        query.addQueryItem(u"conversation_id"_s, toWireId(conversationId));
    query.addQueryItem(u"limit"_s, QString::number(limit));
}

bool AuditQuery::matches(const AuditEntry &entry) const
{
    return (actor.isEmpty() || entry.actor == actor) &&
           (action.isEmpty() || entry.action == action) &&
           (conversationId.isNull() || entry.conversationId == conversationId);
}

QStringList knownAuditActions()
{
    return {u"create"_s,
            u"update"_s,
            u"delete"_s,
            u"archive"_s,
            u"unarchive"_s,
            u"recover"_s,
            u"dismiss"_s,
            u"retry"_s,
            u"fork"_s,
            u"run"_s,
            u"pause"_s,
            u"interrupt"_s,
            u"set_confirmation_policy"_s,
            u"set_secrets"_s,
            u"respond_to_confirmation"_s,
            u"stop_runtime"_s,
            u"resume_runtime"_s,
            u"pause_runtime"_s,
            u"reprovision"_s,
            u"start_fresh"_s,
            u"expire_runtime"_s,
            u"take_over_run"_s,
            u"resolve_stale_run"_s};
}

} // namespace AgentDeck
