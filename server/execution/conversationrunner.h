#pragma once

#include "execution/agent.h"
#include "http/actor.h"
#include "runtime/runtime.h"
#include "storage/leasestore.h"

#include <QObject>
#include <QUuid>

#include <functional>

namespace AgentDeck {

class ConversationStore;
class EventLog;

struct RunSettings
{
    QString workingDir;
    bool alwaysConfirm = false;
    std::chrono::milliseconds commandTimeout{0};
    // An interrupted command is offered to run again (AgentFactory::offersRetry).
    bool offersRetry = false;
};

// The live executor of one conversation: asks the agent for the next step, runs commands in the
// runtime, writes every result through the event log, and ends in a resting status (paused,
// finished, waiting_for_confirmation or error). It deletes itself when its loop has ended.
// The runtime is borrowed from the conversation's lifecycle (ConversationLifecycle::runtime()),
// which owns it while the run runs there: let go of (a delete), no further command starts.
class ConversationRunner : public QObject
{
    Q_OBJECT
public:
    ConversationRunner(const QUuid &conversationId, LeaseToken lease, EventLog &log,
                       ConversationStore &store, std::unique_ptr<Agent> agent,
                       std::weak_ptr<Runtime> runtime, RunSettings settings,
                       QObject *parent = nullptr);
    ~ConversationRunner() override;

    QUuid conversationId() const { return m_id; }
    const LeaseToken &lease() const { return m_lease; }
    // What the last lease renewal found.
    void onLeaseState(LeaseState state);
    // Starts the loop. `confirmedActionId` is the pending action the user just accepted;
    // `cause`, who started the run (its `running` status names them).
    void start(const QUuid &confirmedActionId = {}, std::optional<ChangeCause> cause = {});
    // Stop after the current step. `cause`: who asked, named by the `paused` status (the first
    // one given); none: a replica's request, whose own record names them.
    void requestPause(const std::optional<ChangeCause> &cause = {});
    // The confirmation policy changed while the run goes on: it applies from the next action.
    void setAlwaysConfirm(bool on) { m_settings.alwaysConfirm = on; }
    // Cancel the command in flight (recorded as interrupted by `cause`, an InterruptCause),
    // then stop. The first cause given is the one recorded.
    void interrupt(QLatin1StringView cause = InterruptCause::Operator,
                   const std::optional<ChangeCause> &by = {});
    // The conversation is being deleted: stop without writing anything more.
    void abandon();
    bool isCommandInFlight() const { return m_commandInFlight; }
    // A pause or an interrupt was asked for: the run ends at its next safe point.
    bool isStopping() const { return m_pauseRequested; }
    // The run lost its lease, or its conversation was deleted: it stopped without writing.
    bool isAbandoned() const { return m_abandoned; }
    // The events that end the run in `error` (what its last command did, if storage refused
    // that, and why the run stopped), when storage refused them: the row still says `running`,
    // under this run's lease. Empty when the run ended as it should.
    const QList<Event> &unwrittenEnd() const { return m_unwrittenEnd; }

    // How long a run waits for storage to come back before a write fails it.
    static constexpr std::chrono::seconds StorageOutageLimit{60};
    // Events of the history read per turn of the event loop when a run starts (~25 ms).
    static constexpr qsizetype HistoryPage = 2000;

Q_SIGNALS:
    void stopped(const QUuid &conversationId);

private:
    QCoro::Task<> loop();
    void runLoop();
    // Runs `write`, again and again while storage fails (a database restart), until it is
    // done, the disk is full, the run is interrupted or abandoned, or StorageOutageLimit passed.
    // `storedEvent` is the id of an event the write stores: an attempt that failed may have
    // been committed all the same (the connection went before the COMMIT's answer came), and
    // then the write is done.
    QCoro::Task<> persist(std::function<void()> write, QUuid storedEvent);
    // Who asked the run to stop, when someone did: a command cut short without being asked to
    // (the sandbox went away) names nobody.
    const ChangeCause *stopCause() const
    {
        return m_pauseRequested && m_stopCause ? &*m_stopCause : nullptr;
    }

    QUuid m_id;
    LeaseToken m_lease;
    EventLog &m_log;
    ConversationStore &m_store;
    std::unique_ptr<Agent> m_agent;
    std::weak_ptr<Runtime> m_runtime;
    RunSettings m_settings;
    QUuid m_confirmedActionId;
    bool m_pauseRequested = false;
    bool m_interrupted = false;
    QString m_interruptCause;
    std::optional<ChangeCause> m_startCause;
    std::optional<ChangeCause> m_stopCause; // who asked for the pause or the interrupt
    bool m_abandoned = false;
    bool m_commandInFlight = false;
    QList<Event> m_unstored; // what the command in hand did, until it is stored
    QList<Event> m_unwrittenEnd;
};

// The actions of the history's last agent step that have neither an observation nor a
// rejection, earliest first; pendingAction() is the first of them (the next to run).
QList<const Event *> pendingActions(const QList<Event> &history);
const Event *pendingAction(const QList<Event> &history);
// The observation of a pending action that an interrupted step calls off: it never ran, and it
// does not run when the conversation resumes.
Event calledOffObservation(const Event &action);
// The outcome of `action` from what its command did. A command cut short is interrupted by
// `cause` (an InterruptCause); `offersRetry`: it is offered to run again.
RunOutcome commandOutcome(const Event &action, const CommandResult &result, const QString &cause,
                          bool offersRetry);
// A run cut short between its steps (no command was running).
RunOutcome interruptedRunOutcome(const QString &cause);
// A run ended by `agentError` (an AgentErrorEvent): at a limit, or in error.
RunOutcome errorOutcome(const Event &agentError);

// `events` without those the conversation's history holds already (a write whose commit
// answer was lost may have been done).
QList<Event> unstoredOf(ConversationStore &store, const QUuid &id, QList<Event> events);

} // namespace AgentDeck
