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

bool hasInterruptedCommand(const ConversationInfo &info)
{
    return info.outcome && !info.outcome->retryCommand.isEmpty() && !info.outcome->dismissed;
}

bool needsAttention(const ConversationInfo &info)
{
    if (info.isArchived())
        return false;
    if (isStale(info) || info.executionStatus == ExecutionStatus::Error ||
        info.executionStatus == ExecutionStatus::WaitingForConfirmation)
        return true;
    if (info.outcome && info.outcome->needsAttention() &&
        info.executionStatus != ExecutionStatus::Running)
        return true;
    if (isHeldElsewhere(info))
        return false;
    return (info.runtime.error.has_value() && !isExpired(info)) ||
           info.runtime.status == RuntimeStatus::OwnershipLost;
}

RecoveryPlan recoveryPlan(const ConversationInfo &info)
{
    RecoveryPlan plan;
    const ExecutionStatus status = info.executionStatus;
    plan.resolveStaleRun = status == ExecutionStatus::Running && isStale(info);
    plan.startRuntime = runsCommands(info) && info.runtime.canResume &&
                        (info.runtime.status == RuntimeStatus::Missing ||
                         info.runtime.status == RuntimeStatus::Error);
    plan.continueRun = (status == ExecutionStatus::Paused || status == ExecutionStatus::Error ||
                        status == ExecutionStatus::Stuck) &&
                       !hasInterruptedCommand(info);
    return plan;
}

Availability canRecover(const ConversationInfo &info)
{
    if (info.isArchived())
        return no(u"Archived: unarchive it first"_s);
    if (isExpired(info))
        return no(u"The runtime expired; its workspace is gone"_s);
    if (isHeldElsewhere(info))
        return no(info.runtime.error->message + u"; act on it there"_s);
    if (!recoveryPlan(info).isEmpty())
        return yes();
    if (canRunAgain(info).enabled)
        return no(
            u"Nothing to recover: the runtime is %1; Run again runs the interrupted command"_s.arg(
                runtimeLabel(info)));
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
        return no(u"The runtime expired; Start fresh starts it with an empty workspace"_s);
    if (info.executionStatus == ExecutionStatus::Running && !isStale(info))
        return no(u"Running: pause it first"_s);
    return yes();
}

Availability canStartFresh(const ConversationInfo &info)
{
    if (info.isArchived())
        return no(u"Archived: unarchive it first"_s);
    if (!isExpired(info))
        return no(u"The runtime has not expired"_s);
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

Availability canRunAgain(const ConversationInfo &info)
{
    if (!hasInterruptedCommand(info))
        return no(u"No interrupted command to run again"_s);
    if (info.isArchived())
        return no(u"Archived: unarchive it first"_s);
    if (isExpired(info))
        return no(u"The runtime expired; its workspace is gone"_s);
    if (info.executionStatus == ExecutionStatus::Running && !isStale(info))
        return no(u"Already running"_s);
    return yes();
}

Availability canDismiss(const ConversationInfo &info)
{
    if (!info.outcome || !info.outcome->needsAttention())
        return no(u"No failed or interrupted run to dismiss"_s);
    return yes();
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
    case RuntimeStatus::Paused:
    case RuntimeStatus::Stopped: {
        const QString word = toString(info.runtime.status);
        return info.runtime.statusReason.isEmpty() ? word
                                                   : word + u" · "_s + info.runtime.statusReason;
    }
    }
    return {};
}

QString executionLabel(ExecutionStatus status)
{
    return toString(status).replace(u'_', u' ');
}

QString outcomeLabel(const ConversationInfo &info)
{
    if (!info.outcome)
        return {};
    const RunOutcome &outcome = *info.outcome;
    switch (outcome.kind) {
    case RunOutcome::Kind::Succeeded:
        return {};
    case RunOutcome::Kind::Failed:
        return outcome.exitCode ? u"exit %1"_s.arg(*outcome.exitCode) : u"failed"_s;
    case RunOutcome::Kind::Interrupted:
        if (outcome.interruptedBy == InterruptCause::Restart)
            return u"interrupted by a restart"_s;
        if (outcome.interruptedBy == InterruptCause::Operator)
            return u"interrupted by the operator"_s;
        if (outcome.interruptedBy == InterruptCause::Takeover)
            return u"interrupted by a takeover"_s;
        if (outcome.interruptedBy == InterruptCause::SandboxLost)
            return u"interrupted: sandbox lost"_s;
        return u"interrupted"_s;
    case RunOutcome::Kind::TimedOut:
        return u"timed out"_s;
    case RunOutcome::Kind::Limit:
        return u"stopped by a limit"_s;
    case RunOutcome::Kind::Error:
        // The error's code in words ("error · llm unavailable").
        return outcome.code.isEmpty() ? u"error"_s : QString(outcome.code).replace(u'_', u' ');
    }
    return {};
}

QString executionText(const ConversationInfo &info)
{
    const QString status = executionLabel(info.executionStatus);
    // A run going on has no outcome yet: the one shown is of the run before.
    if (info.executionStatus == ExecutionStatus::Running)
        return status;
    const QString outcome = outcomeLabel(info);
    return outcome.isEmpty() ? status : status + u" · "_s + outcome;
}

QString recoveryText(const QStringList &actions)
{
    QStringList words;
    for (const QString &action : actions) {
        if (action == RecoveryAction::ResolvedStaleRun)
            words.append(u"resolved the run left running"_s);
        else if (action == RecoveryAction::StartedRuntime)
            words.append(u"started the runtime"_s);
        else if (action == RecoveryAction::ContinuedRun)
            words.append(u"continued the run"_s);
        else // a newer server's
            words.append(QString(action).replace(u'_', u' '));
    }
    return words.join(u", "_s);
}

} // namespace AgentDeck::Lifecycle
