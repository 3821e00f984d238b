#include "conversationservice.h"

#include "apierror.h"
#include "eventlog.h"
#include "execution/agent.h"
#include "execution/conversationrunner.h"
#include "lifecycle.h"
#include "logging.h"
#include "runtime/runtime.h"
#include "storage/database.h"

#include <QJsonDocument>

using namespace Qt::StringLiterals;

// ConversationService: runs, and what is asked of them (messages, pauses, interrupts, answers
// to confirmations, a recovery, a retry).

namespace AgentDeck {

namespace {

// The runtime of a run whose agent runs no commands: nothing is brought up for it. A command
// it is asked for all the same (an action left in the history) is not run.
class NoRuntime final : public Runtime
{
public:
    QCoro::Task<CommandResult> execute(CommandRequest) override
    {
        co_return CommandResult{u"This conversation's agent runs no commands"_s, -1, false};
    }
    void interrupt() override {}
};

// The runtime of a run, with the conversation's secrets (ConversationService::updateSecrets())
// in each command's environment as they are when it starts, and their values masked out of
// what it printed; what an action's command prints while it runs is published as it comes
// (EventLog::publishCommandOutput()), masked too.
class RunRuntime final : public Runtime
{
public:
    RunRuntime(std::shared_ptr<Runtime> runtime, std::function<QMap<QString, QString>()> secrets,
               EventLog &log, const QUuid &conversationId)
        : m_runtime(std::move(runtime))
        , m_secrets(std::move(secrets))
        , m_log(log)
        , m_conversationId(conversationId)
    {}
    QCoro::Task<CommandResult> execute(CommandRequest request) override
    {
        const QMap<QString, QString> secrets = m_secrets();
        request.environment.insert(secrets);
        const QUuid actionId = request.actionId;
        if (!actionId.isNull()) {
            request.onOutput = [log = &m_log, id = m_conversationId, actionId,
                                secrets](const QString &piece) {
                log->publishCommandOutput(id, actionId, maskSecrets(piece, secrets));
            };
        }
        const std::shared_ptr<Runtime> runtime = m_runtime; // the run may end meanwhile
        EventLog &log = m_log;
        const QUuid conversationId = m_conversationId;
        auto executing = runtime->execute(std::move(request));
        CommandResult result = co_await std::move(executing);
        if (!actionId.isNull())
            log.endCommandOutput(conversationId);
        result.output = maskSecrets(std::move(result.output), secrets);
        co_return result;
    }
    void interrupt() override { m_runtime->interrupt(); }
    void ownerAlive() override { m_runtime->ownerAlive(); }

private:
    std::shared_ptr<Runtime> m_runtime;
    std::function<QMap<QString, QString>()> m_secrets;
    EventLog &m_log;
    QUuid m_conversationId;
};

} // namespace

void ConversationService::refuseIfRunningHere(const QUuid &id, const QString &detail) const
{
    if (m_lifecycles.isRunningHere(id))
        throw ApiError::conflict(u"conversation_already_running"_s, detail);
}

// `turn` is held until this returns: no other start, resume or stop interleaves with it.
QCoro::Task<> ConversationService::startRun([[maybe_unused]] Turn turn, QUuid id,
                                            std::optional<ChangeCause> cause,
                                            std::optional<ConfirmationAnswer> answer,
                                            QStringList *recovery)
{
    // The row as the request that held the turn before left it (an archive, a stop).
    const ConversationInfo info = require(id);
    requireUsableRuntime(info);
    refuseIfRunningHere(id, u"Conversation is already running"_s);
    writeUnwrittenEnd(info.id);
    const LeaseToken lease = claimOrThrow(info.id);
    // Running only once everything below succeeded; a failure leaves no lease held.
    const quint64 start = ++m_startCount;
    m_lifecycles.at(info.id).beginStart(start, lease);
    // Starting → None, and the lease let go, unless a delete called the start off meanwhile.
    const auto startFailed = [this, id = info.id, start, lease] {
        ConversationLifecycle *lifecycle = m_lifecycles.find(id);
        if (!lifecycle || !lifecycle->startFailed(start))
            return;
        m_lifecycles.settle(id);
        m_leases.release(id, lease);
    };
    const QUuid conversationId = info.id;
    AgentContext context{conversationId, info.agentConfig, m_secrets.value(conversationId),
                         [this, conversationId](const QJsonObject &frame) {
                             m_log.publishTransient(conversationId, frame);
                         }};
    std::unique_ptr<Agent> agent = m_agents.createFor(info.agentKind, context);
    std::shared_ptr<Runtime> runtime;
    QUuid confirmedActionId;
    bool runtimeStarted = false;
    try {
        // A kind this server does not have: a catalog shared with a newer replica.
        if (!agent)
            throw ApiError::conflict(
                u"unknown_agent"_s,
                u"This server has no agent of kind \"%1\" to run it"_s.arg(info.agentKind));
        // A run started by nobody in particular (one a message asked for meanwhile) resolves
        // what is stale as a takeover would.
        const ChangeCause by = cause.value_or(ChangeCause::server(
            u"lease"_s, u"a run started while it was left running by a server that stopped"_s));
        if (resolveStaleUnder(info.id, lease, by) && recovery)
            noteRecovery(info.id, *recovery, RecoveryAction::ResolvedStaleRun, by, &lease);
        if (answer) {
            // Written once the run can start (below): a rejection written before a start that
            // failed (at the sandbox limit, say) left the conversation waiting with nothing to
            // answer, and the retry its 503 asked for was refused 409.
            awaitedAction(info.id, *answer);
            if (answer->accept)
                confirmedActionId = answer->actionId;
        }
        if (agent->runsCommands()) {
            runtimeStarted = Lifecycle::recoveryPlan(info).startRuntime;
            auto bringingUp = bringUpRuntime(info);
            runtime = co_await std::move(bringingUp);
        } else {
            runtime = std::make_shared<NoRuntime>();
        }
    } catch (...) {
        startFailed();
        throw;
    }
    if (const ConversationLifecycle *lifecycle = m_lifecycles.find(info.id);
        !lifecycle || !lifecycle->isStart(start)) {
        // Deleted while its runtime came up, and maybe created again since, with a start of
        // its own: the lease was taken on a row that is gone, and the runtime is the new
        // conversation's if it has a run.
        if (!m_lifecycles.isRunningHere(info.id))
            m_runtimes.release(info.id);
        throw ApiError::notFound(
            u"Conversation %1 was deleted while its run started"_s.arg(toWireId(info.id)));
    }
    // Nothing is awaited from here on: it is still the start `start` when it runs.
    // A start that outlasted the server's grace must not begin a run the stop has not seen.
    if (m_stopping) {
        startFailed();
        throw ApiError{503, u"shutting_down"_s,
                       u"The server is stopping; the run was not started"_s, 1};
    }
    if (answer && !answer->accept) {
        try {
            const Event action = awaitedAction(info.id, *answer);
            m_log.append(info.id, {Event::userReject(action, answer->reason)}, std::nullopt,
                         &lease);
        } catch (...) {
            startFailed();
            throw;
        }
    }
    if (recovery) {
        try {
            const ChangeCause by = cause.value_or(ChangeCause{});
            if (runtimeStarted)
                noteRecovery(info.id, *recovery, RecoveryAction::StartedRuntime, by, &lease);
            noteRecovery(info.id, *recovery, RecoveryAction::ContinuedRun, by, &lease);
        } catch (...) {
            startFailed();
            throw;
        }
    }

    runtime = std::make_shared<RunRuntime>(
        std::move(runtime), [this, id = info.id] { return m_commandSecrets.value(id).values; },
        m_log, info.id);
    // The lifecycle holds the runtime from here; the runner borrows it.
    auto *runner = new ConversationRunner(info.id, lease, m_log, m_store, std::move(agent), runtime,
                                          RunSettings{info.workingDir, info.alwaysConfirm,
                                                      m_settings.commandTimeout,
                                                      m_agents.offersRetry(info.agentKind)},
                                          this);
    const std::optional<ChangeCause> stopCause = m_lifecycles.at(info.id).stopCause();
    const auto stopAsked =
        m_lifecycles.at(info.id).startSucceeded(start, runner, std::move(runtime));
    connect(runner, &ConversationRunner::stopped, this, [this, runner](const QUuid &id) {
        // Nullopt: a runner a delete let go of, whose conversation may have a run of its own
        // again (created again with the same id): it asked for no run after it.
        ConversationLifecycle *lifecycle = m_lifecycles.find(id);
        const std::optional<bool> stoppedHere =
            lifecycle ? lifecycle->runnerStopped(runner, {runner->lease(), runner->unwrittenEnd()})
                      : std::nullopt;
        const bool runsAgain = stoppedHere.value_or(false);
        const bool endUnwritten =
            lifecycle && lifecycle->run() == ConversationLifecycle::Run::EndUnwritten;
        m_lifecycles.settle(id);
        // A run that lost its lease leaves its sandbox to nobody: the new owner runs in one of
        // its own. It stayed up until its idle timeout, reported `available`, and a release
        // sent by the replica that archived the conversation meanwhile found this run still
        // registered and was ignored.
        if (runner->isAbandoned() && !m_lifecycles.isRunningHere(id))
            m_runtimes.letGo(id);
        if (stoppedHere && endUnwritten) {
            // Kept with its lease, which fences it off from a later run.
            m_endRetry.start();
            Q_EMIT runnerStopped(id);
            return;
        }
        try {
            m_leases.release(id, runner->lease());
        } catch (const std::exception &error) {
            qCWarning(lcExecution) << "cannot release the lease of" << id << ":" << error.what();
        }
        Q_EMIT runnerStopped(id);
        if (runsAgain && !runner->isAbandoned() && !m_stopping && !m_lifecycles.isRunningHere(id))
            runAgain(id);
    });
    if (stopAsked == ConversationLifecycle::StopAsked::Interrupt)
        runner->interrupt(InterruptCause::Operator, stopCause);
    else if (stopAsked == ConversationLifecycle::StopAsked::Pause)
        runner->requestPause(stopCause);
    runner->start(confirmedActionId, std::move(cause));
}

QCoro::Task<> ConversationService::runAgain(QUuid id)
{
    try {
        auto waiting = m_lifecycles.turn(id);
        Turn turn = co_await std::move(waiting);
        // Its own status decides, as a /run's would: an archive or a delete meanwhile, or a
        // run that ended in error, is not started again.
        const auto info = m_store.find(id);
        if (!info || info->executionStatus == ExecutionStatus::Error)
            co_return;
        auto starting = startRun(std::move(turn), id, std::nullopt);
        co_await std::move(starting);
    } catch (const ApiError &error) {
        qCInfo(lcExecution) << "the run a message asked for in" << id
                            << "did not start:" << error.detail;
    } catch (const std::exception &error) {
        qCWarning(lcExecution) << "the run a message asked for in" << id
                               << "did not start:" << error.what();
    }
}

QCoro::Task<ConversationInfo> ConversationService::run(QUuid id, ChangeCause cause)
{
    requireUsableRuntime(require(id));
    // Answered at once, not once the start before it is through.
    refuseIfRunningHere(id, u"Conversation is already running"_s);
    auto waiting = m_lifecycles.turn(id);
    Turn turn = co_await std::move(waiting);
    // Run continues where the run stopped. The shell agent's command that a stop, a takeover
    // or a lost sandbox cut short is run again, as retry does (continued, the agent said
    // "[command interrupted]" and finished, and the command was thrown away); one the operator
    // interrupted is not (Run again does that, asked for). An llm agent goes on from the
    // interrupted observation in its history.
    if (ConversationInfo info = require(id); m_agents.offersRetry(info.agentKind)) {
        if (resolveStaleOrRefuse(info, cause))
            info = require(id);
        if (Lifecycle::hasInterruptedCommand(info) &&
            info.outcome->interruptedBy != u"operator"_s && !m_lifecycles.isRunningHere(id)) {
            turn.release();
            auto retrying = retry(id, cause);
            co_return co_await std::move(retrying);
        }
    }
    auto starting = startRun(std::move(turn), id, cause);
    co_await std::move(starting);
    co_return require(id);
}

ConversationInfo ConversationService::pause(const QUuid &id, const ChangeCause &cause)
{
    const ConversationInfo info = require(id);
    ConversationLifecycle *lifecycle = m_lifecycles.find(id);
    if (auto *runner = m_lifecycles.runner(id)) {
        runner->requestPause(cause);
        m_log.append(id, {Event::pause()});
    } else if (lifecycle && lifecycle->askStop(ConversationLifecycle::StopAsked::Pause, cause)) {
        // Its runtime is still coming up: the run pauses before its first step. (Answered and
        // dropped, the run went on to run its command.)
        m_log.append(id, {Event::pause()});
    } else if (resolveStale(info, cause)) {
        // Nobody ran it: it is paused now.
    } else if (info.executionStatus == ExecutionStatus::WaitingForConfirmation) {
        m_log.setStatus(id, ExecutionStatus::Paused, {Event::pause()}, nullptr, {}, &cause);
    } else if (info.executionStatus == ExecutionStatus::Running) {
        askOwnerToStop(id, LeaseStore::Cancel::Pause);
        m_log.append(id, {Event::pause()});
    }
    return require(id);
}

ConversationInfo ConversationService::interrupt(const QUuid &id, const ChangeCause &cause)
{
    const ConversationInfo info = require(id);
    ConversationLifecycle *lifecycle = m_lifecycles.find(id);
    if (auto *runner = m_lifecycles.runner(id))
        runner->interrupt(InterruptCause::Operator, cause);
    else if (lifecycle && lifecycle->run() == ConversationLifecycle::Run::Starting)
        // At once, once it starts.
        lifecycle->askStop(ConversationLifecycle::StopAsked::Interrupt, cause);
    else if (!resolveStale(info, cause) && info.executionStatus == ExecutionStatus::Running)
        askOwnerToStop(id, LeaseStore::Cancel::Interrupt);
    return require(id);
}

void ConversationService::askOwnerToStop(const QUuid &id, LeaseStore::Cancel how)
{
    // Another replica runs it. A cancellation is not an ownership problem: the request is
    // recorded on the row, where the owner's next renewal finds it, and announced so that the
    // owner acts at once.
    Transaction transaction(m_store.database());
    m_leases.requestCancel(id, how);
    m_store.announce(id, how == LeaseStore::Cancel::Interrupt ? u"interrupt"_s : u"pause"_s);
    transaction.commit();
}

void ConversationService::stopRequestedElsewhere(const QUuid &id, LeaseStore::Cancel how)
{
    if (auto *runner = m_lifecycles.runner(id)) {
        if (how == LeaseStore::Cancel::Interrupt)
            runner->interrupt();
        else
            runner->requestPause();
    }
}

QCoro::Task<StoredEvent> ConversationService::sendMessage(QUuid id, MessageRequest message,
                                                          ChangeCause cause)
{
    const ConversationInfo info = require(id);
    const bool starts = message.run && !m_lifecycles.isRunningHere(id);
    if (message.run) {
        requireUsableRuntime(info);
        // Stored and then refused, the message ran twice when the client sent it to the owner.
        refuseIfHeldElsewhere(id);
    }
    // The same with a client that sent it again after a 503's Retry-After. Asked of the agent
    // only at the limit: most agents need a runtime, and making one costs more than the check.
    if (starts) {
        if (const auto refusal = m_runtimes.limitRefusal(id)) {
            const auto agent = m_agents.create(info.agentKind);
            if (agent && agent->runsCommands())
                throw runtimeLimitReached(*refusal);
        }
    }
    resolveStale(info, cause);
    const QList<StoredEvent> stored =
        m_log.append(id, {Event::message(EventSource::User, message.role, message.text)});
    // A run ending at a pause or an interrupt does not pick the message up: the message asks
    // for one after it. (Answered 200, the message was never run.)
    if (message.run && !starts) {
        if (ConversationLifecycle *lifecycle = m_lifecycles.find(id)) {
            const ConversationRunner *runner = lifecycle->runner();
            lifecycle->askRunAfterStop(runner && runner->isStopping());
        }
    }
    // A live run picks the message up at its next step; otherwise start one.
    if (starts) {
        try {
            auto waiting = m_lifecycles.turn(id);
            Turn turn = co_await std::move(waiting);
            // A start that held the turn before began a run, which picks the message up.
            if (m_lifecycles.isRunningHere(id)) {
                if (ConversationLifecycle *lifecycle = m_lifecycles.find(id)) {
                    const ConversationRunner *runner = lifecycle->runner();
                    lifecycle->askRunAfterStop(runner && runner->isStopping());
                }
                co_return stored.first();
            }
            auto starting = startRun(std::move(turn), id, cause);
            co_await std::move(starting);
        } catch (ApiError &error) {
            // The message is stored, and a client told only that the run failed sent it again
            // once the Retry-After had passed: twice in the history. The answer says so.
            const qint64 seq = stored.first().seq;
            error.detail = u"The message was stored (seq %1), but its run did not start: %2; "
                           "run the conversation to run it, rather than sending it again"_s.arg(
                               QString::number(seq), error.detail);
            error.extra.insert(u"seq"_s, seq);
            throw;
        }
    }
    co_return stored.first();
}

QCoro::Task<ConversationInfo>
ConversationService::respondToConfirmation(QUuid id, bool accept, QString reason, ChangeCause cause)
{
    const ConversationInfo info = require(id);
    if (info.executionStatus != ExecutionStatus::WaitingForConfirmation)
        throw ApiError::conflict(u"not_waiting_for_confirmation"_s,
                                 u"Conversation is not waiting for a confirmation (it is %1)"_s.arg(
                                     toString(info.executionStatus)));
    requireUsableRuntime(info);
    const QList<Event> history = m_store.historySinceAgentMessage(id);
    const Event *action = pendingAction(history);
    if (!action)
        throw ApiError::conflict(u"not_waiting_for_confirmation"_s,
                                 u"Conversation has no action waiting for a confirmation"_s);
    refuseIfHeldElsewhere(id);
    const ConfirmationAnswer answer{action->id, accept, reason};
    auto waiting = m_lifecycles.turn(id);
    Turn turn = co_await std::move(waiting);
    // The answer is written once the run is claimed: a rejection written before the claim
    // stayed when another replica's answer won it (and was answered 409), and that replica's
    // accept then found its action rejected.
    auto starting = startRun(std::move(turn), id, cause, answer);
    co_await std::move(starting);
    co_return require(id);
}

Event ConversationService::awaitedAction(const QUuid &id, const ConfirmationAnswer &answer)
{
    // Under the lease the row is what it is: an answer that came through another replica
    // first has moved it on.
    const auto answeredMeanwhile = [] {
        return ApiError::conflict(u"not_waiting_for_confirmation"_s,
                                  u"The action was answered meanwhile"_s);
    };
    const auto current = m_store.find(id);
    if (!current || current->executionStatus != ExecutionStatus::WaitingForConfirmation)
        throw answeredMeanwhile();
    const QList<Event> history = m_store.historySinceAgentMessage(id);
    const Event *action = pendingAction(history);
    if (!action || action->id != answer.actionId)
        throw answeredMeanwhile();
    return *action;
}

QString ConversationService::finalResponse(const QUuid &id)
{
    require(id);
    EventFilter filter;
    filter.kind = EventKind::Message;
    filter.source = EventSource::Agent;
    const EventPageResult page = m_store.searchEvents(id, filter, true, {}, 1);
    if (page.items.isEmpty())
        return {};
    const auto event = Event::fromJson(QJsonDocument::fromJson(page.items.first().json).object());
    return event ? event->messageText() : QString();
}

QCoro::Task<Recovery> ConversationService::recover(QUuid id, ChangeCause cause)
{
    requireUsableRuntime(require(id));
    if (m_lifecycles.isRunningHere(id))
        co_return Recovery{require(id), {}};
    auto waiting = m_lifecycles.turn(id);
    Turn turn = co_await std::move(waiting);
    ConversationInfo info = require(id);
    requireUsableRuntime(info);
    QStringList actions;
    if (!m_lifecycles.isRunningHere(id)) {
        // Continued, the shell agent's run only said "[command interrupted]" and finished:
        // the crash read as a success. Its stale run is resolved first, so that the plan sees
        // the interrupted command, whose offer to run it again stays.
        if (m_agents.offersRetry(info.agentKind) && resolveStaleOrRefuse(info, cause)) {
            noteRecovery(id, actions, RecoveryAction::ResolvedStaleRun, cause);
            info = require(id);
        }
        // The plan the console offered Recover with, on the row as it is now. Another agent's
        // stale run is resolved by the start that continues it, under the run's own lease.
        const Lifecycle::RecoveryPlan plan = Lifecycle::recoveryPlan(info);
        if (info.executionStatus == ExecutionStatus::Running || plan.continueRun) {
            auto starting = startRun(std::move(turn), id, cause, {}, &actions);
            co_await std::move(starting);
        } else if (plan.startRuntime) {
            refuseIfHeldElsewhere(id);
            auto bringingUp = bringUpRuntime(info);
            co_await std::move(bringingUp);
            noteRecovery(id, actions, RecoveryAction::StartedRuntime, cause);
        }
    }
    co_return Recovery{require(id), actions};
}

void ConversationService::noteRecovery(const QUuid &id, QStringList &actions,
                                       QLatin1StringView action, const ChangeCause &cause,
                                       const LeaseToken *lease)
{
    m_log.recordChange(id, QString(RecoveryEventKey), QString(action), cause, {}, lease);
    actions.append(action);
}

ConversationInfo ConversationService::dismissOutcome(const QUuid &id, const ChangeCause &cause)
{
    require(id);
    // Only an outcome there was to dismiss is in the history.
    m_log.recordChange(id, u"outcome"_s, u"dismissed"_s, cause,
                       [this, id] { return m_store.dismissOutcome(id); });
    return require(id);
}

QCoro::Task<ConversationInfo> ConversationService::retry(QUuid id, ChangeCause cause)
{
    const ConversationInfo info = require(id);
    if (!Lifecycle::hasInterruptedCommand(info) || m_lifecycles.isRunningHere(id))
        throw ApiError::conflict(u"nothing_to_retry"_s,
                                 u"The conversation has no interrupted command to run again"_s);
    try {
        auto sending =
            sendMessage(id, MessageRequest{u"user"_s, info.outcome->retryCommand, true}, cause);
        co_await std::move(sending);
    } catch (const ApiError &error) {
        // Stored but not run (the answer says so): offered again, it would be stored twice.
        if (error.extra.contains(u"seq"_s))
            m_store.dismissOutcome(id);
        throw;
    }
    co_return require(id);
}

} // namespace AgentDeck
