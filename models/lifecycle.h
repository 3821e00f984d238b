#pragma once

#include "wiretypes.h"

namespace AgentDeck::Lifecycle {

// Derived facts a client decides with. They read only ConversationInfo, so the console, the CLI
// and tests agree on them.

// Whether its runs bring a sandbox up: every agent's but echo's, which runs no commands (the
// server's Agent::runsCommands).
bool runsCommands(const ConversationInfo &info);
// `running` that no live runtime backs, or a run the server itself flagged as stuck.
bool isStale(const ConversationInfo &info);
// The runtime expired: history stays, the workspace is gone, nothing can run again.
bool isExpired(const ConversationInfo &info);
// Another replica holds the conversation's lease (and its runtime): not this server's concern.
bool isHeldElsewhere(const ConversationInfo &info);
// Its outcome offers to run an interrupted command again (the shell agent's), and nobody
// acknowledged it.
bool hasInterruptedCommand(const ConversationInfo &info);
// Something an operator should look at: stale, failed, waiting for a decision, runtime error,
// or a run whose last action failed, was interrupted or stopped at a limit (RunOutcome::
// needsAttention: until the operator runs it again, archives it or dismisses the outcome).
bool needsAttention(const ConversationInfo &info);

// What POST /recover would do to the conversation as `info` shows it (RecoveryAction). The
// server decides its recovery with this on its own row, once a stale run is resolved; the
// console and ctl offer Recover with it, so that Recover is offered exactly when the server
// would do something. Archived, expired and held elsewhere are refusals, not plans
// (canRecover()).
struct RecoveryPlan
{
    // `running` with no live runtime (isStale()): resolved to `paused` first.
    bool resolveStaleRun = false;
    // Its agent runs commands and no sandbox is up (missing, lost, a failed start).
    bool startRuntime = false;
    // Paused, failed or stuck, with no interrupted command offered to run again (the shell
    // agent's, which Run again runs: continued, the run would only report the interruption).
    bool continueRun = false;

    bool isEmpty() const { return !resolveStaleRun && !startRuntime && !continueRun; }
};
RecoveryPlan recoveryPlan(const ConversationInfo &info);

// Whether the console's one-click actions make sense, and if not, why (for a tooltip).
struct Availability
{
    bool enabled = false;
    QString reason; // empty when enabled
};
Availability canRecover(const ConversationInfo &info);
Availability canRun(const ConversationInfo &info);
Availability canPause(const ConversationInfo &info);
// Stop the command in flight now (Pause waits for it to end).
Availability canInterrupt(const ConversationInfo &info);
// Accept or reject the action a conversation waits on.
Availability canRespond(const ConversationInfo &info);
Availability canReprovision(const ConversationInfo &info);
// Start an expired runtime again with an empty workspace (POST .../runtime/start_fresh).
Availability canStartFresh(const ConversationInfo &info);
Availability canArchive(const ConversationInfo &info);
// Send a message (the server refuses one to an archived or expired conversation).
Availability canSendMessage(const ConversationInfo &info);
Availability canUnarchive(const ConversationInfo &info);
// Run the interrupted command the outcome offers again (the shell agent's).
Availability canRunAgain(const ConversationInfo &info);
// Acknowledge an outcome that needs attention.
Availability canDismiss(const ConversationInfo &info);

// The words of a badge, shared by the console and the CLI.
QString runtimeLabel(const ConversationInfo &info);
QString executionLabel(ExecutionStatus status);
// What the outcome adds to the status ("exit 2", "interrupted by a restart"); empty for none
// and for a success.
QString outcomeLabel(const ConversationInfo &info);
// The status with its outcome: "finished · exit 2", "paused · interrupted by a restart".
QString executionText(const ConversationInfo &info);
// What a recovery did (POST /recover's `actions`), in words: "started the runtime, continued
// the run"; empty for nothing.
QString recoveryText(const QStringList &actions);

} // namespace AgentDeck::Lifecycle
