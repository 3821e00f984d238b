#include "lifecycle.h"

using namespace Qt::StringLiterals;

namespace AgentDeck::Lifecycle {

namespace {
Availability yes()
{
    return {true, {}};
}
Availability no(const QString &reason)
{
    return {false, reason};
}
} // namespace

bool isHeldElsewhere(const ConversationInfo &info)
{
    return info.runtime.error && info.runtime.error->code == u"held_by_other_replica"_s;
}

bool runsCommands(const ConversationInfo &info)
{
    return info.agentKind != u"echo"_s;
}

bool isStale(const ConversationInfo &info)
{
    if (info.executionStatus == ExecutionStatus::Stuck)
        return true;
    // Another replica runs it: live, only not here. An echo run brings no sandbox up: ctl
    // showed every echo run it had just started as "running (stale)".
    return info.executionStatus == ExecutionStatus::Running && !isHeldElsewhere(info) &&
           runsCommands(info) && info.runtime.status != RuntimeStatus::Available &&
           info.runtime.status != RuntimeStatus::Starting;
}

bool isExpired(const ConversationInfo &info)
{
    return info.runtime.error && info.runtime.error->code == u"runtime_expired"_s;
}

bool needsAttention(const ConversationInfo &info)
{
    if (info.isArchived())
        return false;
    if (isStale(info) || info.executionStatus == ExecutionStatus::Error ||
        info.executionStatus == ExecutionStatus::WaitingForConfirmation)
        return true;
    if (isHeldElsewhere(info))
        return false;
    return (info.runtime.error.has_value() && !isExpired(info)) ||
           info.runtime.status == RuntimeStatus::OwnershipLost;
}

Availability canRecover(const ConversationInfo &info)
{
    if (info.isArchived())
        return no(u"Archived: unarchive it first"_s);
    if (isExpired(info))
        return no(u"The runtime expired; its workspace is gone"_s);
    if (isHeldElsewhere(info))
        return no(info.runtime.error->message + u"; act on it there"_s);
    if (isStale(info) || info.executionStatus == ExecutionStatus::Paused ||
        info.executionStatus == ExecutionStatus::Error)
        return yes();
    if (info.runtime.status == RuntimeStatus::Missing && info.runtime.canResume &&
        info.executionStatus != ExecutionStatus::Running)
        return yes();
    if (info.runtime.status == RuntimeStatus::Error)
        return yes();
    return no(u"Nothing to recover: the conversation is %1 and its runtime %2"_s.arg(
        executionLabel(info.executionStatus), runtimeLabel(info)));
}

Availability canRun(const ConversationInfo &info)
{
    if (info.isArchived())
        return no(u"Archived: unarchive it first"_s);
    if (isExpired(info))
        return no(u"The runtime expired; its workspace is gone"_s);
    if (info.executionStatus == ExecutionStatus::Running && !isStale(info))
        return no(u"Already running"_s);
    // A run would stop at the same action again (it flipped to running and back).
    if (info.executionStatus == ExecutionStatus::WaitingForConfirmation)
        return no(u"Waiting for confirmation: accept or reject its action"_s);
    return yes();
}

Availability canInterrupt(const ConversationInfo &info)
{
    if (info.executionStatus == ExecutionStatus::Running)
        return yes();
    return no(u"Not running"_s);
}

Availability canRespond(const ConversationInfo &info)
{
    if (info.executionStatus != ExecutionStatus::WaitingForConfirmation)
        return no(u"No action is waiting for confirmation"_s);
    if (info.isArchived())
        return no(u"Archived: unarchive it first"_s);
    return yes();
}

Availability canPause(const ConversationInfo &info)
{
    if (info.executionStatus == ExecutionStatus::Running ||
        info.executionStatus == ExecutionStatus::WaitingForConfirmation)
        return yes();
    return no(u"Not running"_s);
}

Availability canReprovision(const ConversationInfo &info)
{
    if (info.isArchived())
        return no(u"Archived: unarchive it first"_s);
    if (isExpired(info))
        return no(u"The runtime expired; its workspace is gone"_s);
    if (info.executionStatus == ExecutionStatus::Running && !isStale(info))
        return no(u"Running: pause it first"_s);
    return yes();
}

Availability canSendMessage(const ConversationInfo &info)
{
    if (info.isArchived())
        return no(u"Archived: unarchive it first"_s);
    if (isExpired(info))
        return no(u"The runtime expired; its workspace is gone"_s);
    return yes();
}

Availability canArchive(const ConversationInfo &info)
{
    return info.isArchived() ? no(u"Already archived"_s) : yes();
}

Availability canUnarchive(const ConversationInfo &info)
{
    return info.isArchived() ? yes() : no(u"Not archived"_s);
}

QString runtimeLabel(const ConversationInfo &info)
{
    if (isExpired(info))
        return u"expired"_s;
    switch (info.runtime.status) {
    case RuntimeStatus::Available:
        return u"available"_s;
    case RuntimeStatus::Starting:
        return u"starting"_s;
    case RuntimeStatus::Missing:
        return info.runtime.canResume ? u"missing (resumable)"_s : u"missing"_s;
    case RuntimeStatus::Error:
        return u"error"_s;
    case RuntimeStatus::OwnershipLost:
        return isHeldElsewhere(info) ? u"on another replica"_s : u"ownership lost"_s;
    }
    return {};
}

QString executionLabel(ExecutionStatus status)
{
    return toString(status).replace(u'_', u' ');
}

} // namespace AgentDeck::Lifecycle
