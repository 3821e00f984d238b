#include "conversationservice.h"

#include "apierror.h"
#include "clock.h"
#include "eventlog.h"
#include "execution/conversationrunner.h"
#include "logging.h"
#include "runtime/runtime.h"
#include "signalwait.h"

#include <QDir>
#include <QPointer>
#include <QScopeGuard>

using namespace Qt::StringLiterals;

// ConversationService: bringing a conversation's runtime up, replacing it and stopping it (an
// archive stops it too).

namespace AgentDeck {

QCoro::Task<std::shared_ptr<Runtime>> ConversationService::bringUpRuntime(ConversationInfo info)
{
    // A supplied workspace is checked again: what it names may have become a link since (made
    // by a command of another conversation), into the data dir or out of the workspace roots,
    // which the sandbox then mounted writable.
    if (!info.workspaceOwnedByServer &&
        checkWorkingDir(info.workingDir) != QDir::cleanPath(info.workingDir))
        throw ApiError::invalidParameter(
            u"workspace.working_dir %1 has become a symbolic link since the conversation was "
            "created; the sandbox does not follow it"_s.arg(info.workingDir));
    mountWorkspace(info);
    // Bringing a runtime up is activity: the retention counts from here (an update of nothing
    // moves updated_at only), and no retention pass of this server expires the conversation
    // while its runtime comes up (isInUse()). Expired on the way by another replica's pass, it
    // is refused below.
    m_store.update(info.id, {}, m_clock.nowMs());
    m_lifecycles.at(info.id).bringUpBegan();
    const auto broughtUp = qScopeGuard([self = QPointer(this), id = info.id] {
        if (!self)
            return;
        if (ConversationLifecycle *lifecycle = self->m_lifecycles.find(id))
            lifecycle->bringUpEnded();
        self->m_lifecycles.settle(id);
    });
    auto acquiring = m_runtimes.acquire(info);
    RuntimeAcquisition acquisition = co_await std::move(acquiring);
    // The conversation may have been deleted or archived while the sandbox started: an archive
    // then found no runtime to stop, and this one stayed up.
    const auto now = m_store.find(info.id);
    // Deleted meanwhile, and maybe created again since (a row made at another time): the
    // runtime is then the new conversation's if it has a start or a run of its own, and so are
    // the files; an error of this start is not the new row's either.
    if (!now || now->createdAt != info.createdAt) {
        if (acquisition.runtime && !m_lifecycles.isRunningHere(info.id))
            m_runtimes.release(info.id);
        // The delete removed the files before the sandbox made them again.
        if (!now)
            removeFilesOf(info, m_runtimes.runtimeDirectory(info.id));
        throw ApiError::notFound(
            u"Conversation %1 was deleted while its runtime started"_s.arg(toWireId(info.id)));
    }
    if (now->isArchived() || isRuntimeExpired(*now)) {
        if (acquisition.runtime)
            m_runtimes.release(info.id);
        requireUsableRuntime(*now);
    }
    if (acquisition.atLimit)
        throw runtimeLimitReached(acquisition.error);
    if (acquisition.cancelled && m_stopping)
        throw ApiError{503, u"shutting_down"_s,
                       u"The server is stopping; the run was not started"_s, 1};
    if (acquisition.cancelled)
        throw ApiError::conflict(u"runtime_start_cancelled"_s,
                                 u"The runtime was stopped while it started, by a request made "
                                 "meanwhile (a reprovision, an archive)"_s);
    if (!acquisition.runtime) {
        m_store.setRuntimeError(info.id, acquisition.error);
        throw ApiError{502, acquisition.error.code,
                       u"Cannot start the runtime: "_s + acquisition.error.message};
    }
    if (info.runtime.error)
        m_store.setRuntimeError(info.id, std::nullopt);
    // The conversation is run here from now on: a replica that ran it before stops the sandbox
    // it kept, which stayed up beside this one, `available`, until its idle timeout. Not worth
    // failing the start for: unannounced, that sandbox stops at its idle timeout as before.
    try {
        m_store.announce(info.id, u"release"_s);
    } catch (const std::exception &error) {
        qCWarning(lcRuntime) << "cannot announce that" << info.id << "runs here:" << error.what();
    }
    co_return acquisition.runtime;
}

QCoro::Task<> ConversationService::stopRunAndRuntime(QUuid id, ChangeCause cause,
                                                     std::function<void()> then)
{
    // No run follows the one interrupted here (a message with run: true asked for one): the
    // archive waited while a new run went through the conversation's whole backlog.
    m_lifecycles.at(id).haltBegan();
    const auto halted = qScopeGuard([self = QPointer(this), id] {
        if (!self)
            return;
        if (ConversationLifecycle *lifecycle = self->m_lifecycles.find(id))
            lifecycle->haltEnded();
        self->m_lifecycles.settle(id);
    });
    // A start or a resume holding the turn is bringing the runtime up: called off, not waited
    // for (a sandbox may take long to start, and its run is not to begin).
    if (!m_lifecycles.runner(id))
        m_runtimes.release(id);
    auto waiting = m_lifecycles.turn(id);
    const Turn turn = co_await std::move(waiting);
    // With the turn held no run starts: the one running is the last to stop. (The wait is
    // asked again when it outlasts the timeout.)
    while (auto *runner = m_lifecycles.runner(id)) {
        runner->interrupt(InterruptCause::Operator, cause);
        auto stopped =
            signalOrTimeout(this, &ConversationService::runnerStopped, std::chrono::seconds(10));
        co_await std::move(stopped);
    }
    m_runtimes.release(id);
    then();
}

QCoro::Task<ConversationInfo> ConversationService::archive(QUuid id, ChangeCause cause)
{
    const ConversationInfo info = require(id);
    // Only the owner can stop its run and sandbox: archiving here left them going.
    refuseIfHeldElsewhere(id);
    // A run whose owner went quiet past its lease is taken over and resolved first: archived
    // without, it went on when its frozen owner woke, which found its lease still its own.
    resolveStale(info, cause);
    // Archived before the turn goes: a start waiting for it finds the conversation archived.
    auto stopping = stopRunAndRuntime(id, cause, [this, id, &cause] {
        // An archive of an archived conversation changes nothing, and is no event.
        m_log.recordChange(id, u"archive"_s, u"archived"_s, cause, [this, id] {
            const std::optional<bool> archived = m_store.setArchived(id, m_clock.nowMs());
            if (!archived)
                throw ApiError::notFound(u"Conversation %1 does not exist"_s.arg(toWireId(id)));
            // Archiving is acting on the outcome: unarchived, it does not ask for attention
            // again.
            m_store.dismissOutcome(id);
            // Its runtime is stopped, as by a stop, which clears a failed start's error (an
            // expiry stays: it is no error of a start).
            if (require(id).runtime.error)
                m_store.setRuntimeError(id, std::nullopt);
            m_store.announce(id, u"release"_s);
            return *archived;
        });
    });
    co_await std::move(stopping);
    qCInfo(lcServer) << "archived conversation" << id;
    co_return require(id);
}

ConversationInfo ConversationService::unarchive(const QUuid &id, const ChangeCause &cause)
{
    m_log.recordChange(id, u"archive"_s, u"unarchived"_s, cause, [this, id] {
        const std::optional<bool> unarchived = m_store.setArchived(id, std::nullopt);
        if (!unarchived)
            throw ApiError::notFound(u"Conversation %1 does not exist"_s.arg(toWireId(id)));
        return *unarchived;
    });
    return require(id);
}

QCoro::Task<ConversationInfo> ConversationService::resumeRuntime(QUuid id, ChangeCause cause)
{
    require(id);
    auto waiting = m_lifecycles.turn(id);
    const Turn turn = co_await std::move(waiting);
    const ConversationInfo info = require(id);
    requireUsableRuntime(info);
    // A second sandbox on the workspace of a run going on elsewhere.
    refuseIfHeldElsewhere(id);
    auto bringingUp = bringUpRuntime(info);
    co_await std::move(bringingUp);
    m_log.recordChange(id, u"runtime"_s, u"resumed"_s, cause);
    co_return require(id);
}

QCoro::Task<ConversationInfo> ConversationService::reprovisionRuntime(QUuid id, ChangeCause cause)
{
    const QString running = u"Conversation is running; pause it before reprovisioning"_s;
    requireUsableRuntime(require(id));
    refuseIfRunningHere(id, running);
    // A resume before it brings its sandbox up, which this one then replaces; one after it
    // finds the new sandbox.
    auto waiting = m_lifecycles.turn(id);
    const Turn turn = co_await std::move(waiting);
    const ConversationInfo info = require(id);
    requireUsableRuntime(info);
    refuseIfHeldElsewhere(id);
    refuseIfRunningHere(id, running);
    m_runtimes.release(id);
    auto bringingUp = bringUpRuntime(info);
    co_await std::move(bringingUp);
    // The history says so: what the commands before it left in the sandbox (its /tmp, its
    // processes) is gone from here on.
    m_log.recordChange(id, u"runtime"_s, u"reprovisioned"_s, cause);
    co_return require(id);
}

QCoro::Task<ConversationInfo> ConversationService::startFresh(QUuid id, ChangeCause cause)
{
    const auto refuseUnlessExpired = [this](const ConversationInfo &info) {
        if (info.isArchived())
            requireUsableRuntime(info);
        if (!isRuntimeExpired(info))
            throw ApiError::conflict(u"runtime_not_expired"_s,
                                     u"The runtime has not expired; reprovision replaces a live "
                                     "one, and resume brings a stopped one up"_s);
    };
    refuseUnlessExpired(require(id));
    refuseIfHeldElsewhere(id);
    auto waiting = m_lifecycles.turn(id);
    const Turn turn = co_await std::move(waiting);
    refuseUnlessExpired(require(id));
    // The expiry is lifted before the bring-up, which refuses an expired runtime; a start that
    // fails leaves the conversation with a runtime error of its own, as any start does. Not
    // while a retention pass still deletes its files: they would go under the new sandbox.
    if (!m_store.clearExpiry(id)) {
        ApiError error{503, u"runtime_expiring"_s,
                       u"The expired runtime's files are still being removed; try again"_s};
        error.retryAfterSeconds = 1;
        throw error;
    }
    // The expiry removed the workspace and its disk: a server's starts on a new one.
    if (const ConversationInfo info = require(id); info.workspaceOwnedByServer) {
        QDir().mkpath(info.workingDir);
        auto making = makeWorkspaceDisk(id, info.workingDir);
        co_await std::move(making);
    }
    auto bringingUp = bringUpRuntime(require(id));
    co_await std::move(bringingUp);
    // The history says so: what its commands left is gone, and the workspace (the server's)
    // starts empty.
    m_log.recordChange(id, u"runtime"_s, u"started_fresh"_s, cause);
    co_return require(id);
}

QCoro::Task<ConversationInfo> ConversationService::stopRuntime(QUuid id, ChangeCause cause)
{
    require(id);
    refuseIfHeldElsewhere(id);
    auto stopping = stopRunAndRuntime(id, cause, [this, id, &cause] {
        m_log.recordChange(id, u"runtime"_s, u"stopped"_s, cause, [this, id] {
            m_store.setRuntimeError(id, std::nullopt);
            m_store.announce(id, u"release"_s);
            return true;
        });
    });
    co_await std::move(stopping);
    co_return require(id);
}

void ConversationService::noteRuntimeChange(const QUuid &id, const QString &value,
                                            const ChangeCause &cause)
{
    try {
        m_log.recordChange(id, u"runtime"_s, value, cause);
    } catch (const std::exception &error) {
        qCWarning(lcRuntime) << "cannot write to the history of" << id << "that its runtime was"
                             << value << ":" << error.what();
    }
}

void ConversationService::releaseRequestedElsewhere(const QUuid &id)
{
    // A run started here since is this replica's own (the other one was refused while it ran).
    if (m_lifecycles.isRunningHere(id))
        return;
    // Only this replica's sandbox: what it shares with the one that asked (a container) is
    // that one's, which removes it itself when that is what it asks (an archive, a stop).
    m_runtimes.letGo(id);
}

void ConversationService::requireSandboxHere(const QUuid &id)
{
    const ConversationInfo info = require(id);
    requireUsableRuntime(info);
    refuseIfHeldElsewhere(id);
    mountWorkspace(info);
}

RuntimeDetails ConversationService::runtimeDetails(const QUuid &id)
{
    require(id);
    RuntimeDetails details;
    m_runtimes.describeProcess(id, details);
    details.runtimeDir = m_runtimes.runtimeDirectory(id);
    if (const auto holder = m_leases.holder(id)) {
        details.leaseOwner = holder->owner;
        details.ownerReplica = holder->replicaId;
        details.ownerUrl = holder->advertiseUrl;
        details.leaseEpoch = holder->epoch;
        details.leaseMsLeft = holder->msLeft;
        details.ownedHere = holder->owner == m_settings.leaseOwner;
    }
    return details;
}

} // namespace AgentDeck
