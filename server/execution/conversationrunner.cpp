#include "conversationrunner.h"

#include "runtime/commandleader.h"

#include "apierror.h"
#include "eventlog.h"
#include "execution/tools.h"
#include "logging.h"
#include "storage/conversationstore.h"
#include "storage/database.h"

#include <QCoroTimer>
#include <QElapsedTimer>
#include <QSet>

#include <algorithm>

using namespace Qt::StringLiterals;

namespace AgentDeck {

QList<const Event *> pendingActions(const QList<Event> &history)
{
    // Scanned from the end: the actions of one agent step are written together, so the pending
    // ones are the unresolved actions after the last resolved one. None come before an agent's
    // message (an agent writes one after its actions are done), which bounds the scan: a run
    // looks after every step, and reading a backlog of messages whole each time cost N².
    QSet<QString> resolved;
    QList<const Event *> pending;
    for (auto it = history.crbegin(); it != history.crend(); ++it) {
        if (it->kind == EventKind::Observation || it->kind == EventKind::UserReject) {
            resolved.insert(it->actionId());
        } else if (it->kind == EventKind::Action) {
            if (resolved.contains(toWireId(it->id)))
                break;
            pending.prepend(&*it);
        } else if (it->kind == EventKind::Message &&
                   (!pending.isEmpty() || it->source == EventSource::Agent)) {
            break;
        }
    }
    return pending;
}

QList<Event> unstoredOf(ConversationStore &store, const QUuid &id, QList<Event> events)
{
    events.removeIf([&](const Event &event) { return store.event(id, event.id).has_value(); });
    return events;
}

const Event *pendingAction(const QList<Event> &history)
{
    const QList<const Event *> pending = pendingActions(history);
    return pending.isEmpty() ? nullptr : pending.first();
}

namespace {
bool isUserMessage(const Event &event)
{
    return event.kind == EventKind::Message && event.source == EventSource::User;
}
} // namespace

Event calledOffObservation(const Event &action)
{
    return Event::observation(action, u"[not run: the run was interrupted]"_s, -1, true);
}

namespace {
QString causeWords(const QString &cause)
{
    if (cause == InterruptCause::Restart)
        return u"by a restart of the server"_s;
    if (cause == InterruptCause::Takeover)
        return u"when another server took the conversation over"_s;
    if (cause == InterruptCause::SandboxLost)
        return u"because its sandbox went away"_s;
    return u"by the operator"_s;
}
} // namespace

RunOutcome commandOutcome(const Event &action, const CommandResult &result, const QString &cause,
                          bool offersRetry)
{
    RunOutcome outcome;
    outcome.startedAt = action.timestamp;
    if (result.interrupted) {
        outcome.kind = RunOutcome::Kind::Interrupted;
        outcome.interruptedBy = cause;
        outcome.detail = u"The command was interrupted "_s + causeWords(cause);
        if (offersRetry)
            outcome.retryCommand =
                action.fields.value(u"action"_s).toObject().value(u"command"_s).toString();
        return outcome;
    }
    outcome.exitCode = result.exitCode;
    // The runtimes end a command at its timeout with 124 and this line (commandOutput()).
    if (result.exitCode == 124 && result.output.endsWith(u"[command timed out]\n"_s)) {
        outcome.kind = RunOutcome::Kind::TimedOut;
        outcome.detail = u"The command timed out"_s;
        return outcome;
    }
    // A sandbox's limit says so in the last line of the output (limitNote()).
    if (const QString limit = limitSaidIn(result.output); !limit.isEmpty()) {
        outcome.kind = RunOutcome::Kind::Limit;
        outcome.code = u"sandbox_limit"_s;
        outcome.detail = u"The command was stopped: "_s + limit;
        return outcome;
    }
    outcome.kind = result.exitCode == 0 ? RunOutcome::Kind::Succeeded : RunOutcome::Kind::Failed;
    outcome.detail = u"The command exited with code %1"_s.arg(result.exitCode);
    return outcome;
}

RunOutcome interruptedRunOutcome(const QString &cause)
{
    RunOutcome outcome;
    outcome.kind = RunOutcome::Kind::Interrupted;
    outcome.interruptedBy = cause;
    outcome.detail = u"The run was interrupted "_s + causeWords(cause);
    return outcome;
}

RunOutcome errorOutcome(const Event &agentError)
{
    RunOutcome outcome;
    outcome.code = agentError.fields.value(u"code"_s).toString();
    outcome.kind = outcome.code == u"max_iterations_reached"_s ? RunOutcome::Kind::Limit
                                                               : RunOutcome::Kind::Error;
    outcome.detail = agentError.fields.value(u"error"_s).toString();
    return outcome;
}

ConversationRunner::ConversationRunner(const QUuid &conversationId, LeaseToken lease, EventLog &log,
                                       ConversationStore &store, std::unique_ptr<Agent> agent,
                                       std::weak_ptr<Runtime> runtime, RunSettings settings,
                                       QObject *parent)
    : QObject(parent)
    , m_id(conversationId)
    , m_lease(std::move(lease))
    , m_log(log)
    , m_store(store)
    , m_agent(std::move(agent))
    , m_runtime(std::move(runtime))
    , m_settings(std::move(settings))
{}

ConversationRunner::~ConversationRunner() = default;

void ConversationRunner::start(const QUuid &confirmedActionId, std::optional<ChangeCause> cause)
{
    m_confirmedActionId = confirmedActionId;
    m_startCause = std::move(cause);
    runLoop();
}

void ConversationRunner::runLoop()
{
    // The task is eager; it ends by emitting stopped() and deleting the runner.
    loop();
}

void ConversationRunner::requestPause(const std::optional<ChangeCause> &cause)
{
    if (!m_stopCause)
        m_stopCause = cause;
    m_pauseRequested = true;
    // A model request in flight is cancelled: waiting for it is not a safe point.
    if (m_agent)
        m_agent->cancel();
}

void ConversationRunner::interrupt(QLatin1StringView cause, const std::optional<ChangeCause> &by)
{
    if (m_interruptCause.isEmpty())
        m_interruptCause = cause;
    if (!m_stopCause)
        m_stopCause = by;
    m_pauseRequested = true;
    m_interrupted = true;
    if (m_agent)
        m_agent->cancel();
    if (const auto runtime = m_runtime.lock())
        runtime->interrupt();
}

void ConversationRunner::abandon()
{
    m_abandoned = true;
    interrupt();
}

void ConversationRunner::onLeaseState(LeaseState state)
{
    switch (state) {
    case LeaseState::Held:
        break;
    case LeaseState::CancelRequested:
        requestPause();
        break;
    case LeaseState::InterruptRequested:
        interrupt();
        break;
    case LeaseState::LostToAnotherOwner:
    case LeaseState::Deleted:
        qCWarning(lcExecution) << "run of" << m_id << "lost its lease (epoch" << m_lease.epoch
                               << "); stopping without writing";
        abandon();
        break;
    }
}

QCoro::Task<> ConversationRunner::loop()
{
    QList<Event> history;
    qint64 seen = 0;
    const auto refresh = [&](qsizetype limit = -1) {
        const QList<Event> more = m_store.history(m_id, seen, limit);
        if (!more.isEmpty())
            seen = more.last().seq;
        history.append(more);
        return more.size();
    };

    try {
        // A new run is the operator acting on the outcome of the last one.
        m_log.setStatus(m_id, ExecutionStatus::Running, {}, &m_lease, OutcomeChange::dismiss(),
                        m_startCause ? &*m_startCause : nullptr);
        // Parsing all of a long history cost a run ~1 s and ~150 MB at 100,000 events before
        // its first step; the shell and echo agents need only what is not answered yet.
        if (m_agent->historyScope() == Agent::HistoryScope::OpenMessages)
            seen = m_store.answeredThrough(m_id);
        // A long history is read a page per turn of the event loop: read in one go, 220,000
        // events held every other request for 2.6 s at the start of each run.
        while (!m_abandoned && refresh(HistoryPage) == HistoryPage) {
            auto turn = QCoro::sleepFor(std::chrono::milliseconds(0));
            co_await std::move(turn);
        }
        for (bool first = true; !m_abandoned; first = false) {
            // A step need not wait for anything (the echo agent's, the shell agent's replies),
            // and a run of such steps held the thread: a backlog of 8,000 messages answered in
            // one go kept every request, pause included, waiting 7 s. Each step takes a turn.
            if (!first) {
                auto turn = QCoro::sleepFor(std::chrono::milliseconds(0));
                co_await std::move(turn);
                if (m_abandoned)
                    break;
            }
            refresh();
            if (m_pauseRequested) {
                // An interrupt between an action's write and its command's start calls the step
                // off as one during the command does: otherwise the next run ran it.
                // Between steps nothing is cut short: the outcome stays the last command's.
                QList<Event> calledOff;
                OutcomeChange outcome;
                if (const QList<const Event *> pending = pendingActions(history);
                    m_interrupted && !pending.isEmpty()) {
                    for (const Event *action : pending)
                        calledOff.append(calledOffObservation(*action));
                    outcome = OutcomeChange::set(commandOutcome(*pending.first(), {{}, -1, true},
                                                                m_interruptCause,
                                                                m_settings.offersRetry));
                }
                m_log.setStatus(m_id, ExecutionStatus::Paused, calledOff, &m_lease, outcome,
                                stopCause());
                break;
            }
            if (const QList<const Event *> pending = pendingActions(history); !pending.isEmpty()) {
                if (m_settings.alwaysConfirm && pending.first()->id != m_confirmedActionId) {
                    m_log.setStatus(m_id, ExecutionStatus::WaitingForConfirmation, {}, &m_lease);
                    break;
                }
                // Held until the command returns, whatever lets go of the run meanwhile.
                const std::shared_ptr<Runtime> runtime = m_runtime.lock();
                if (!runtime) {
                    // Its lifecycle let go of the run (a delete): it writes nothing more.
                    m_abandoned = true;
                    break;
                }
                const Event action = *pending.first();
                m_confirmedActionId = QUuid();
                m_commandInFlight = true;
                // Tasks are made before they are awaited: GCC 12 destroys argument temporaries
                // of a co_await full-expression twice.
                const QString toolName = action.fields.value(u"tool_name"_s).toString();
                CommandResult result = Tools::notOffered(toolName);
                if (toolName.isEmpty() || m_agent->offers(toolName)) {
                    auto execution =
                        Tools::run(*runtime, toolName, action.fields.value(u"action"_s).toObject(),
                                   m_settings.workingDir, m_settings.commandTimeout, action.id);
                    result = co_await std::move(execution);
                }
                m_commandInFlight = false;
                if (m_abandoned)
                    break;
                const Event observation =
                    Event::observation(action, result.output, result.exitCode, result.interrupted);
                // Cut short without being asked to: the sandbox went away under it.
                const OutcomeChange outcome = OutcomeChange::set(commandOutcome(
                    action, result,
                    m_interrupted ? m_interruptCause : QString(InterruptCause::SandboxLost),
                    m_settings.offersRetry));
                if (result.interrupted) {
                    // The rest of the step is called off too: an operator who interrupts
                    // `rm -rf a` must not see `rm -rf b` run when the conversation resumes.
                    QList<Event> observations{observation};
                    for (const Event *rest : pending.sliced(1))
                        observations.append(calledOffObservation(*rest));
                    m_unstored = observations;
                    auto writing = persist(
                        [&] {
                            m_log.setStatus(m_id, ExecutionStatus::Paused, observations, &m_lease,
                                            outcome, stopCause());
                        },
                        observation.id);
                    co_await std::move(writing);
                    m_unstored.clear();
                    break;
                }
                // What the command did is written even if the database blinks meanwhile: an
                // action left without its observation would run again.
                m_unstored = {observation};
                auto writing = persist(
                    [&] { m_log.append(m_id, {observation}, std::nullopt, &m_lease, outcome); },
                    observation.id);
                co_await std::move(writing);
                m_unstored.clear();
                continue;
            }
            auto decision = m_agent->next(history);
            const AgentStep step = co_await std::move(decision);
            if (m_abandoned)
                break;
            m_store.addUsage(m_id, step.usage, m_lease);
            switch (step.kind) {
            case AgentStep::Kind::RunCommand:
                m_log.append(m_id, {Event::action(u"bash"_s, step.text)}, std::nullopt, &m_lease);
                continue;
            case AgentStep::Kind::Reply:
                m_log.append(m_id, {Event::message(EventSource::Agent, u"assistant"_s, step.text)},
                             std::nullopt, &m_lease);
                continue;
            case AgentStep::Kind::CallTools: {
                QList<Event> actions;
                for (const ToolCall &call : step.toolCalls)
                    actions.append(
                        Event::toolCall(call.name, call.id, call.arguments, call.thought));
                m_log.append(m_id, actions, std::nullopt, &m_lease);
                continue;
            }
            case AgentStep::Kind::Finish: {
                // A message sent while the agent decided (a model takes seconds to answer) is
                // not in what it answered: it is asked again with it. The run finished, and the
                // message stayed unanswered.
                const qsizetype seenBefore = history.size();
                refresh();
                if (std::any_of(history.cbegin() + seenBefore, history.cend(), isUserMessage))
                    continue;
                QList<Event> finalMessage;
                if (!step.text.isEmpty())
                    finalMessage.append(
                        Event::message(EventSource::Agent, u"assistant"_s, step.text));
                m_log.setStatus(m_id, ExecutionStatus::Finished, finalMessage, &m_lease);
                break;
            }
            case AgentStep::Kind::Cancelled:
                // A pause is no outcome; an interrupt cuts the run short.
                m_log.setStatus(m_id, ExecutionStatus::Paused, {}, &m_lease,
                                m_interrupted
                                    ? OutcomeChange::set(interruptedRunOutcome(m_interruptCause))
                                    : OutcomeChange{},
                                stopCause());
                break;
            case AgentStep::Kind::Fail: {
                const Event failure = Event::agentError(step.errorCode, step.text);
                m_log.setStatus(m_id, ExecutionStatus::Error, {failure}, &m_lease,
                                OutcomeChange::set(errorOutcome(failure)));
                break;
            }
            }
            break;
        }
    } catch (const LeaseLostError &error) {
        // Fenced off: another owner took the conversation. Write nothing more.
        qCWarning(lcExecution) << "run of" << m_id << "stopped: lease lost:" << error.what();
    } catch (const ApiError &error) {
        // The conversation was deleted under us: there is nothing left to write to.
        qCInfo(lcExecution) << "run of" << m_id << "ended:" << error.detail;
    } catch (const std::exception &error) {
        qCWarning(lcExecution) << "run of" << m_id << "failed:" << error.what();
        // Storage failures say what to do; the driver's text ("commit: database or disk is full
        // Unable to fetch row", PostgreSQL's over three lines) is a detail of it, on one line.
        const auto *storage = dynamic_cast<const StorageError *>(&error);
        const QString what = QString::fromUtf8(error.what()).simplified();
        const Event failure =
            !storage ? Event::agentError(u"run_failed"_s, what)
            : storage->diskFull()
                ? Event::agentError(u"storage_full"_s,
                                    u"The run stopped because the server's disk is full. Free "
                                    "space on the server, then run the conversation again."_s)
            : storage->corrupt()
                ? Event::agentError(u"storage_corrupt"_s,
                                    u"The run stopped because the server's database is damaged "
                                    "(%1). Its operator must restore it from a backup."_s.arg(what))
                : Event::agentError(u"storage_unavailable"_s,
                                    u"The run stopped because the server could not write to its "
                                    "database (%1). Run the conversation again once the "
                                    "database is back."_s.arg(what));
        // What the command did goes with it: left out, its action would run again.
        QList<Event> end = m_unstored;
        end.append(failure);
        try {
            m_log.setStatus(m_id, ExecutionStatus::Error, unstoredOf(m_store, m_id, end), &m_lease,
                            OutcomeChange::set(errorOutcome(failure)));
        } catch (const std::exception &) {
            // Storage refuses this too (a full disk): the service writes it once it is back.
            m_unwrittenEnd = end;
        }
    }
    Q_EMIT stopped(m_id);
    deleteLater();
}

QCoro::Task<> ConversationRunner::persist(std::function<void()> write, QUuid storedEvent)
{
    QElapsedTimer outage;
    auto pause = std::chrono::milliseconds(50);
    for (;;) {
        try {
            // Writing again would meet the stored event's id, and fail until the limit.
            if (outage.isValid() && m_store.event(m_id, storedEvent)) {
                qCInfo(lcExecution)
                    << "run of" << m_id << "finds its write stored: the commit's answer was lost";
                co_return;
            }
            write();
            if (outage.isValid())
                qCInfo(lcExecution) << "run of" << m_id << "wrote after" << outage.elapsed()
                                    << "ms without storage";
            co_return;
        } catch (const StorageError &error) {
            // A full disk waits for the operator, not for a retry; an interrupt or a delete
            // ends the wait (the server is stopping, or nothing is left to write to).
            if (error.diskFull() || error.corrupt() || m_interrupted || m_abandoned ||
                (outage.isValid() &&
                 std::chrono::milliseconds(outage.elapsed()) > StorageOutageLimit))
                throw;
            if (!outage.isValid()) {
                outage.start();
                qCWarning(lcExecution)
                    << "run of" << m_id
                    << "cannot write; retrying while storage is back:" << error.what();
            }
        }
        auto waiting = QCoro::sleepFor(pause);
        co_await std::move(waiting);
        pause = std::min(pause * 2, std::chrono::milliseconds(500));
    }
}

} // namespace AgentDeck
