#include "conversationservice.h"

#include "apierror.h"
#include "eventlog.h"
#include "execution/agent.h"
#include "execution/conversationrunner.h"
#include "logging.h"
#include "runtime/runtime.h"
#include "signalwait.h"
#include "storage/auditlog.h"
#include "storage/database.h"
#include "storage/replicastore.h"

#include <QElapsedTimer>

using namespace Qt::StringLiterals;

// ConversationService: the leases of runs, and what is left of runs nobody runs any more (a
// crash, a replica gone, an end storage refused).

namespace AgentDeck {

namespace {

// Why a conversation cannot be claimed: its owner renews (409, ask it or retry), or it stopped
// renewing and the lease has not lapsed yet (503 until it has). Both name the owner.
ApiError ownershipError(const LeaseHolder &holder, std::chrono::milliseconds livenessWindow)
{
    const QString owner = holder.replicaId.isEmpty() ? holder.owner : holder.replicaId;
    const int secondsLeft = int(std::max<qint64>(1, (holder.msLeft + 999) / 1000));
    // An owner missing from the replicas table is given the benefit of the doubt: it is live.
    // It is judged by its own window (one with a longer lease TTL beats less often).
    const bool renewing =
        !holder.replicaStopped &&
        (!holder.heartbeatAgeMs ||
         *holder.heartbeatAgeMs <= holder.livenessWindowMs.value_or(livenessWindow.count()));
    ApiError error;
    if (renewing) {
        error = ApiError::conflict(
            u"held_by_other_replica"_s,
            u"Conversation is held by another replica (%1); send the request there or retry in "
            "%2 s"_s.arg(owner)
                .arg(secondsLeft));
    } else {
        error = ApiError{503, u"owner_unresponsive"_s,
                         u"Conversation is held by replica %1, which stopped renewing its lease; "
                         "it can be taken over in %2 s"_s.arg(owner)
                             .arg(secondsLeft)};
    }
    error.retryAfterSeconds = secondsLeft;
    error.extra = QJsonObject{{u"owner"_s, owner},
                              {u"advertise_url"_s, holder.advertiseUrl.isEmpty()
                                                       ? QJsonValue()
                                                       : QJsonValue(holder.advertiseUrl)},
                              {u"retry_after"_s, secondsLeft}};
    return error;
}

} // namespace

void ConversationService::renewLeases()
{
    const QHash<QUuid, qint64> held = m_lifecycles.runningLeaseEpochs();
    Transaction transaction(m_store.database());
    const bool stillTheReplica = m_replicas.heartbeat(m_settings.replicaId, m_settings.leaseOwner);
    const QHash<QUuid, LeaseState> states = m_leases.renew(m_settings.leaseOwner, held);
    transaction.commit();
    if (!stillTheReplica && !m_replaced) {
        m_replaced = true;
        Q_EMIT replacedAsReplica();
    }
    for (auto it = states.cbegin(); it != states.cend(); ++it) {
        const ConversationLifecycle *lifecycle = m_lifecycles.find(it.key());
        if (!lifecycle || !lifecycle->runner())
            continue;
        // Still this server's: a sandbox that stops the commands of an owner gone silent hears
        // that it is not.
        Runtime *runtime = lifecycle->runtime();
        if (runtime &&
            (it.value() == LeaseState::Held || it.value() == LeaseState::CancelRequested))
            runtime->ownerAlive();
        lifecycle->runner()->onLeaseState(it.value());
    }
    if (m_settings.sharedCatalog) {
        resolveLapsedRuns();
        if (!m_stopping)
            resumeRemovals();
    }
}

void ConversationService::writeUnwrittenEnds()
{
    const auto unwritten = [this] {
        return m_lifecycles.in(ConversationLifecycle::Run::EndUnwritten);
    };
    for (const QUuid &id : unwritten()) {
        try {
            writeUnwrittenEnd(id);
        } catch (const StorageError &) {
            // not yet
        }
    }
    if (unwritten().isEmpty())
        m_endRetry.stop();
}

void ConversationService::writeUnwrittenEnd(const QUuid &id)
{
    const ConversationLifecycle *lifecycle = m_lifecycles.find(id);
    if (!lifecycle || lifecycle->run() != ConversationLifecycle::Run::EndUnwritten)
        return;
    const ConversationLifecycle::UnwrittenEnd end = lifecycle->unwrittenEnd();
    const auto written = [this, &id] {
        m_lifecycles.at(id).endWritten();
        m_lifecycles.settle(id);
    };
    try {
        m_log.setStatus(id, ExecutionStatus::Error, unstoredOf(m_store, id, end.events), &end.lease,
                        !end.events.isEmpty() && end.events.last().kind == EventKind::AgentError
                            ? OutcomeChange::set(errorOutcome(end.events.last()))
                            : OutcomeChange{});
    } catch (const StorageError &) {
        throw;
    } catch (const std::exception &error) {
        // A delete, or a recovery by another replica once the lease lapsed, settled it.
        qCInfo(lcExecution) << "the end of the run of" << id << "is not needed:" << error.what();
        written();
        return;
    }
    written();
    qCInfo(lcExecution) << "wrote the end of the run of" << id << "now that storage is back";
    try {
        m_leases.release(id, end.lease);
    } catch (const std::exception &error) {
        qCWarning(lcExecution) << "cannot release the lease of" << id << ":" << error.what();
    }
}

void ConversationService::resolveLapsedRuns()
{
    // Runs a dead replica left `running` are resolved by whichever replica claims them first,
    // a few per tick, so nothing stays stuck until someone touches it.
    const ChangeCause takeover =
        ChangeCause::server(u"lease"_s, u"the replica that ran it stopped renewing its lease"_s);
    for (const QUuid &id : m_leases.lapsedRuns(LapsedRunsPerTick)) {
        try {
            if (auto info = m_store.find(id); info && resolveStale(*info, takeover)) {
                qCInfo(lcExecution) << "resolved" << id << "left running by a replica that stopped";
                if (m_audit)
                    m_audit->record(takeover.actor, u"take_over_run"_s, id, takeover.reason);
            }
        } catch (const std::exception &error) {
            qCWarning(lcExecution)
                << "cannot resolve the lapsed run of" << id << ":" << error.what();
        }
    }
}

LeaseToken ConversationService::claimOrThrow(const QUuid &id)
{
    if (auto lease = m_leases.claim(id, m_settings.leaseOwner))
        return *lease;
    const auto holder = m_leases.holder(id);
    if (!holder) {
        if (!m_store.find(id))
            throw ApiError::notFound(u"Conversation %1 does not exist"_s.arg(toWireId(id)));
        // Released between the claim and the look: the next attempt gets it.
        ApiError error{503, u"lease_released"_s, u"Conversation was handed over just now; retry"_s};
        error.retryAfterSeconds = 1;
        throw error;
    }
    throw ownershipError(*holder, m_replicas.livenessWindow());
}

void ConversationService::refuseIfHeldElsewhere(const QUuid &id)
{
    if (m_lifecycles.isRunningHere(id))
        return;
    if (const auto holder = m_leases.holder(id);
        holder && holder->owner != m_settings.leaseOwner && holder->msLeft > 0)
        throw ownershipError(*holder, m_replicas.livenessWindow());
}

bool ConversationService::resolveStale(const ConversationInfo &info, const ChangeCause &by,
                                       QLatin1StringView cause)
{
    const ConversationLifecycle *lifecycle = m_lifecycles.find(info.id);
    if (info.executionStatus != ExecutionStatus::Running ||
        (lifecycle && lifecycle->isRunningHere()))
        return false;
    // A run of this server that ended while storage refused its end: not stale, only unwritten.
    if (lifecycle && lifecycle->run() == ConversationLifecycle::Run::EndUnwritten) {
        writeUnwrittenEnd(info.id);
        return true;
    }
    // Stale only if nobody else holds the run: the claim is the proof.
    const auto lease = m_leases.claim(info.id, m_settings.leaseOwner);
    if (!lease)
        return false;
    const bool resolved = resolveStaleUnder(info.id, *lease, by, cause);
    m_leases.release(info.id, *lease);
    return resolved;
}

bool ConversationService::resolveStaleOrRefuse(const ConversationInfo &info, const ChangeCause &by)
{
    // A claim refused by a lease that lapses at once: the next try finds it free.
    for (int attempt = 0; attempt < 3; ++attempt) {
        if (resolveStale(info, by))
            return true;
        refuseIfHeldElsewhere(info.id);
        const auto current = m_store.find(info.id);
        if (!current || current->executionStatus != ExecutionStatus::Running ||
            m_lifecycles.isRunningHere(info.id))
            return false;
    }
    return false;
}

bool ConversationService::resolveStaleUnder(const QUuid &id, const LeaseToken &lease,
                                            const ChangeCause &by, QLatin1StringView cause)
{
    // The row as it is under the lease: a status read before the claim may be of a run that
    // ended and let go of its lease since. Another replica's pause then wrote a false
    // "the server stopped" into a run that had finished, and paused it.
    const auto current = m_store.find(id);
    if (!current || current->executionStatus != ExecutionStatus::Running)
        return false;
    const ConversationInfo &info = *current;
    QList<Event> events;
    RunOutcome outcome = interruptedRunOutcome(cause);
    const QList<Event> history = m_store.historySinceAgentMessage(info.id);
    if (const QList<const Event *> pending = pendingActions(history); !pending.isEmpty()) {
        // The observation tells what the runtime saw of the command: what it printed, and how it
        // ended if it ended while no server watched. One still running in an adopted sandbox is
        // stopped, and the observation says so.
        const Event &action = *pending.first();
        CommandResult result{{}, -1, true};
        if (const auto record = m_runtimes.lastCommand(info.id);
            record && record->actionId == action.id)
            result = record->result;
        if (result.interrupted)
            m_runtimes.interruptOrphan(info.id);
        events.append(
            Event::observation(action, result.output, result.exitCode, result.interrupted));
        outcome = commandOutcome(action, result, cause, m_agents.offersRetry(info.agentKind));
        // A command cut short calls off the rest of its step, as an interrupt does: the next
        // run ran them. (One that had ended leaves them to run, as a pause does.)
        if (result.interrupted) {
            for (const Event *rest : pending.sliced(1))
                events.append(calledOffObservation(*rest));
        }
    }
    // What the operator's two answers do, said where they read it (the console's card, ctl).
    const bool commandAgain = !outcome.retryCommand.isEmpty();
    events.append(Event::agentError(
        u"run_interrupted"_s,
        u"The run was interrupted because the server that executed it stopped. %1 Dismiss "
        "leaves it as it is and takes it off the list of what needs attention."_s.arg(
            commandAgain
                ? u"Run runs the interrupted command again: $ "_s + outcome.retryCommand + u'.'
                : u"Run continues the conversation from where it stopped."_s)));
    m_log.setStatus(info.id, ExecutionStatus::Paused, events, &lease, OutcomeChange::set(outcome),
                    &by);
    qCDebug(lcExecution) << "resolved stale running conversation" << info.id;
    return true;
}

int ConversationService::recoverStale()
{
    // One transaction for the whole pass: startup time does not grow with a commit per row.
    Transaction transaction(m_store.database());
    const int adopted =
        m_settings.sharedCatalog
            ? m_leases.adoptEarlierInstances(m_settings.leaseOwner, m_settings.replicaId)
            : m_leases.adoptAll(m_settings.leaseOwner);
    if (adopted > 0)
        qCInfo(lcExecution) << "adopted" << adopted << "leases of an earlier instance";
    int recovered = 0;
    const ChangeCause recovery =
        ChangeCause::server(u"recovery"_s, u"it was running when the server stopped"_s);
    for (const QUuid &id : m_store.idsWithStatus(ExecutionStatus::Running)) {
        if (auto info = m_store.find(id);
            info && resolveStale(*info, recovery, InterruptCause::Restart)) {
            ++recovered;
            if (m_audit)
                m_audit->record(recovery.actor, u"resolve_stale_run"_s, id, recovery.reason);
        }
    }
    transaction.commit();
    return recovered;
}

QCoro::Task<> ConversationService::shutdown(std::chrono::milliseconds grace)
{
    m_stopping = true;
    // Starts whose runtime is still coming up after the grace the requests had are called
    // off: their requests are answered before the process exits (503, and a message's answer
    // says that it was stored). They waited on, and the process exited without an answer.
    for (const QUuid &id : m_lifecycles.in(ConversationLifecycle::Run::Starting))
        m_runtimes.release(id);
    const ChangeCause stopping = ChangeCause::server(u"shutdown"_s, u"the server is stopping"_s);
    for (ConversationRunner *runner : m_lifecycles.runners()) {
        runner->requestPause(stopping);
        if (m_audit)
            m_audit->record(stopping.actor, u"pause"_s, runner->conversationId(), stopping.reason);
    }
    QElapsedTimer elapsed;
    elapsed.start();
    bool interrupted = false;
    while (m_lifecycles.runningCount() > 0) {
        const auto left = grace - std::chrono::milliseconds(elapsed.elapsed());
        if (left.count() <= 0 && !interrupted) {
            qCInfo(lcExecution) << "interrupting" << m_lifecycles.runningCount()
                                << "runs still in flight";
            const ChangeCause graceOver = ChangeCause::server(
                u"shutdown"_s, u"still running when the shutdown grace ended"_s);
            for (ConversationRunner *runner : m_lifecycles.runners()) {
                runner->interrupt(InterruptCause::Restart, graceOver);
                if (m_audit)
                    m_audit->record(graceOver.actor, u"interrupt"_s, runner->conversationId(),
                                    graceOver.reason);
            }
            interrupted = true;
        }
        if (interrupted && elapsed.elapsed() > grace.count() + 5000)
            break;
        auto stoppedOne = signalOrTimeout(this, &ConversationService::runnerStopped,
                                          std::max(left, std::chrono::milliseconds(100)));
        co_await std::move(stoppedOne);
    }
    m_renewal.stop();
    // A clean stop hands over at once: nobody has to wait for these leases to lapse. Without
    // storage they lapse as after a crash; the stop goes on (it used to end here, and the
    // process never exited).
    try {
        Transaction transaction(m_store.database());
        m_leases.releaseAll(m_settings.leaseOwner);
        m_replicas.markStopped(m_settings.replicaId, m_settings.leaseOwner);
        transaction.commit();
    } catch (const StorageError &error) {
        qCWarning(lcServer) << "cannot hand over leases; they lapse after their TTL:"
                            << error.what();
    }
}

} // namespace AgentDeck
