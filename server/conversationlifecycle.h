#pragma once

#include "http/actor.h"
#include "storage/leasestore.h"
#include "wiretypes.h"

#include <QHash>
#include <QList>
#include <QPointer>
#include <QUuid>

#include <coroutine>
#include <memory>

namespace AgentDeck {

class ConversationRunner;
class Runtime;

// What this process holds of one conversation beside its row: where its run is here (one state,
// Run), what was asked of that run meanwhile, and how many requests are bringing its runtime up
// or stopping it for good. ConversationService keeps one per conversation it holds anything of
// (ConversationLifecycles) and changes it only through the transitions below, each of which
// says from which states it leads where; the row stays the record of the conversation, this is
// what is live of it in this process.
//
// It owns what a run here holds: the lease, and the runtime the run's commands go to (the
// runner only borrows it, so a run this object let go of can start no command). The provider
// keeps the sandbox process itself, which outlives runs (a shell conversation keeps its sandbox
// between them, and the workspace routes use it).
//
//            beginStart()          startSucceeded()
//     None ──────────────► Starting ───────────────► Running
//      ▲                      │ startFailed(),         │ runnerStopped()
//      │                      │ forget()               ├──────────────► None
//      └──────────────────────┘                        │ (its end refused by storage)
//      ▲                                               └──────────────► EndUnwritten
//      │                  endWritten(), forget()                           │
//      └───────────────────────────────────────────────────────────────────┘
class ConversationLifecycle
{
public:
    enum class Run
    {
        None,         // no run of it here
        Starting,     // a run's runtime is coming up, under the run's lease (startNumber())
        Running,      // a runner runs it (runner()), its commands in runtime()
        EndUnwritten, // its run ended while storage refused the end (unwrittenEnd())
    };
    // A pause or an interrupt asked for while the run started, carried out once it runs (the
    // stronger of the two).
    enum class StopAsked
    {
        None,
        Pause,
        Interrupt
    };
    // The end of a run storage refused (a full disk), kept with its lease, which fences it off
    // from a later run.
    struct UnwrittenEnd
    {
        LeaseToken lease;
        QList<Event> events;
    };

    Run run() const { return m_run; }
    // A run is starting or running here: nothing else may start one.
    bool isRunningHere() const { return m_run == Run::Starting || m_run == Run::Running; }
    // It runs, or its runtime is coming up (a run's start, a resume).
    bool isInUse() const { return isRunningHere() || m_bringUps > 0; }
    // Nothing is held of it: the object can go.
    bool isSettled() const
    {
        return m_run == Run::None && m_bringUps == 0 && m_halts == 0 && !m_turnTaken;
    }
    // A request holds its turn (ConversationLifecycles::turn()).
    bool isTurnTaken() const { return m_turnTaken; }

    quint64 startNumber() const { return m_run == Run::Starting ? m_start : 0; }
    bool isStart(quint64 number) const { return m_run == Run::Starting && m_start == number; }
    // The lease the run is started or run under.
    const LeaseToken &lease() const { return m_lease; }
    ConversationRunner *runner() const;
    // The runtime of the run while it runs here (null in any other state).
    Runtime *runtime() const { return m_runtime.get(); }
    StopAsked stopAsked() const { return m_stopAsked; }
    bool runsAgain() const { return m_runsAgain; }
    bool isHalting() const { return m_halts > 0; }
    const UnwrittenEnd &unwrittenEnd() const { return m_end; }

    // None → Starting: start number `number`, under `lease`. False (nothing changes) from any
    // other state.
    bool beginStart(quint64 number, const LeaseToken &lease);
    // Starting: a pause or an interrupt to carry out once it runs, asked by `cause` (the first
    // one kept, for the run's `paused`). False in any other state.
    bool askStop(StopAsked how, const std::optional<ChangeCause> &cause = {});
    // Who asked for the stop of the start in hand.
    const std::optional<ChangeCause> &stopCause() const { return m_stopCause; }
    // Starting → Running, with `runner` running its commands in `runtime` (held from here until
    // the run ends here); returns the stop asked meanwhile. Nullopt when it is not the start
    // `number` any more (a delete called it off): nothing changes then.
    std::optional<StopAsked> startSucceeded(quint64 number, ConversationRunner *runner,
                                            std::shared_ptr<Runtime> runtime);
    // Starting → None, when it is still the start `number` (false: a later one, left alone).
    bool startFailed(quint64 number);
    // Running → None, or → EndUnwritten when `unwritten` has events. Returns whether a run was
    // asked for after it (askRunAfterStop()); nullopt when `runner` is not this state's runner
    // (one that forget() let go of): nothing changes then.
    std::optional<bool> runnerStopped(const ConversationRunner *runner, UnwrittenEnd unwritten);
    // EndUnwritten → None.
    bool endWritten();
    // A message asks for a run while this one stops (a pause or an interrupt ends it): started
    // once it has stopped. Only while stopping, and never while it is halted for good; returns
    // whether it was taken.
    bool askRunAfterStop(bool runnerStopping);
    // Any state → None: the conversation is gone (a delete). Returns the runner to abandon; its
    // runtime is let go of here (a command in flight keeps it until it returns).
    ConversationRunner *forget();

    // A runtime bring-up began or ended (ConversationService::bringUpRuntime()).
    void bringUpBegan() { ++m_bringUps; }
    void bringUpEnded() { m_bringUps = std::max(0, m_bringUps - 1); }
    // The run and runtime are being stopped for good (an archive, a runtime stop): no run
    // follows the one stopped, and a message asks for none.
    void haltBegan();
    void haltEnded() { m_halts = std::max(0, m_halts - 1); }

private:
    friend class ConversationLifecycles;

    Run m_run = Run::None;
    quint64 m_start = 0;
    LeaseToken m_lease;
    QPointer<ConversationRunner> m_runner;
    std::shared_ptr<Runtime> m_runtime;
    StopAsked m_stopAsked = StopAsked::None;
    std::optional<ChangeCause> m_stopCause;
    bool m_runsAgain = false;
    UnwrittenEnd m_end;
    int m_bringUps = 0;
    int m_halts = 0;
    // The turn (ConversationLifecycles::turn()): taken, and who waits for it, first come first.
    // A delete (forget()) leaves both: those waiting find the conversation gone.
    bool m_turnTaken = false;
    QList<std::coroutine_handle<>> m_waitingForTurn;
};

// The lifecycles of the conversations this process holds anything of, by id; one that settles
// goes (settle()). Never hold a reference across a suspension: look it up again.
//
// One request at a time changes what runs a conversation here: a run's start, a resume, a
// reprovision, a stop of the runtime, an archive, a fork's copy of the workspace each take the
// conversation's turn first and hold it until they are done. The others wait for it in the
// order they came, and decide on the row as the one before them left it, never on one read
// before it. What must not wait does not take it: a pause, an interrupt, a message to a live
// run, and a delete, which calls off what holds the turn (forget()).
class ConversationLifecycles
{
public:
    // Held while a request changes the run or the runtime; the next one's when it goes.
    class Turn
    {
    public:
        Turn() = default;
        Turn(Turn &&other) noexcept;
        Turn &operator=(Turn &&other) noexcept;
        Turn(const Turn &) = delete;
        Turn &operator=(const Turn &) = delete;
        ~Turn() { release(); }
        void release();

    private:
        friend class ConversationLifecycles;
        Turn(ConversationLifecycles *owner, const QUuid &id);

        ConversationLifecycles *m_owner = nullptr;
        QPointer<QObject> m_context; // the owner's: gone, it has nothing to hand over
        bool m_guarded = false;
        QUuid m_id;
    };
    // co_await it for the turn of one conversation (a Turn).
    class TurnAwaiter
    {
    public:
        bool await_ready() { return m_owner->tryTakeTurn(m_id); }
        void await_suspend(std::coroutine_handle<> waiting)
        {
            m_owner->at(m_id).m_waitingForTurn.append(waiting);
        }
        Turn await_resume() { return Turn(m_owner, m_id); }

    private:
        friend class ConversationLifecycles;
        TurnAwaiter(ConversationLifecycles *owner, const QUuid &id)
            : m_owner(owner)
            , m_id(id)
        {}
        ConversationLifecycles *m_owner;
        QUuid m_id;
    };

    // `context`: what the turn is handed over through (a queued call on its thread), and whose
    // end ends the handovers. Without one, the application object.
    explicit ConversationLifecycles(QObject *context = nullptr)
        : m_context(context)
    {}
    // The turn of `id`, at once when nobody holds it, else after those who came before.
    TurnAwaiter turn(const QUuid &id) { return TurnAwaiter(this, id); }

    ConversationLifecycle *find(const QUuid &id);
    const ConversationLifecycle *find(const QUuid &id) const;
    ConversationLifecycle &at(const QUuid &id) { return m_lifecycles[id]; }
    // Drops the lifecycle of `id` when nothing is held of it any more.
    void settle(const QUuid &id);

    bool isRunningHere(const QUuid &id) const;
    bool isInUse(const QUuid &id) const;
    ConversationRunner *runner(const QUuid &id) const;
    // The conversations whose lifecycle is in `run`.
    QList<QUuid> in(ConversationLifecycle::Run run) const;
    QList<ConversationRunner *> runners() const;
    // The epoch of the lease of each run running here, by conversation (what a renewal renews).
    QHash<QUuid, qint64> runningLeaseEpochs() const;
    int runningCount() const;

private:
    bool tryTakeTurn(const QUuid &id);
    void handOverTurn(const QUuid &id);

    QObject *m_context;
    QHash<QUuid, ConversationLifecycle> m_lifecycles;
};

} // namespace AgentDeck
