#pragma once

#include "storage/leasestore.h"
#include "wiretypes.h"

#include <QHash>
#include <QList>
#include <QPointer>
#include <QUuid>

namespace AgentDeck {

class ConversationRunner;

// What this process holds of one conversation beside its row: where its run is here (one state,
// Run), what was asked of that run meanwhile, and how many requests are bringing its runtime up
// or stopping it for good. ConversationService keeps one per conversation it holds anything of
// (ConversationLifecycles) and changes it only through the transitions below, each of which
// says from which states it leads where; the row stays the record of the conversation, this is
// what is live of it in this process.
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
        Running,      // a runner runs it (runner())
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
    bool isSettled() const { return m_run == Run::None && m_bringUps == 0 && m_halts == 0; }

    quint64 startNumber() const { return m_run == Run::Starting ? m_start : 0; }
    bool isStart(quint64 number) const { return m_run == Run::Starting && m_start == number; }
    // The lease the run is started or run under.
    const LeaseToken &lease() const { return m_lease; }
    ConversationRunner *runner() const;
    StopAsked stopAsked() const { return m_stopAsked; }
    bool runsAgain() const { return m_runsAgain; }
    bool isHalting() const { return m_halts > 0; }
    const UnwrittenEnd &unwrittenEnd() const { return m_end; }

    // None → Starting: start number `number`, under `lease`. False (nothing changes) from any
    // other state.
    bool beginStart(quint64 number, const LeaseToken &lease);
    // Starting: a pause or an interrupt to carry out once it runs. False in any other state.
    bool askStop(StopAsked how);
    // Starting → Running, with `runner`; returns the stop asked meanwhile. Nullopt when it is
    // not the start `number` any more (a delete called it off): nothing changes then.
    std::optional<StopAsked> startSucceeded(quint64 number, ConversationRunner *runner);
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
    // Any state → None: the conversation is gone (a delete). Returns the runner to abandon.
    ConversationRunner *forget();

    // A runtime bring-up began or ended (ConversationService::bringUpRuntime()).
    void bringUpBegan() { ++m_bringUps; }
    void bringUpEnded() { m_bringUps = std::max(0, m_bringUps - 1); }
    // The run and runtime are being stopped for good (an archive, a runtime stop): no run
    // follows the one stopped, and a message asks for none.
    void haltBegan();
    void haltEnded() { m_halts = std::max(0, m_halts - 1); }

private:
    Run m_run = Run::None;
    quint64 m_start = 0;
    LeaseToken m_lease;
    QPointer<ConversationRunner> m_runner;
    StopAsked m_stopAsked = StopAsked::None;
    bool m_runsAgain = false;
    UnwrittenEnd m_end;
    int m_bringUps = 0;
    int m_halts = 0;
};

// The lifecycles of the conversations this process holds anything of, by id; one that settles
// goes (settle()). Never hold a reference across a suspension: look it up again.
class ConversationLifecycles
{
public:
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
    int runningCount() const;

private:
    QHash<QUuid, ConversationLifecycle> m_lifecycles;
};

} // namespace AgentDeck
