#pragma once

#include "conversationlifecycle.h"
#include "conversationrequests.h"
#include "conversationsecrets.h"
#include "http/actor.h"
#include "runtime/sandboxisolation.h"
#include "runtimedetails.h"
#include "storage/conversationstore.h"
#include "trash.h"
#include "workspacedisks.h"
#include "workspaceroots.h"

#include <QCoroTask>
#include <QHash>
#include <QObject>
#include <QTimer>

#include <chrono>

namespace AgentDeck {

class AgentFactory;
class AuditLog;
struct ApiError;
class Clock;
class ConversationRunner;
class EventLog;
class ReplicaStore;
class Runtime;
class RuntimeProvider;

class WarmSandboxes;

struct ServiceSettings
{
    QString workspaceRoot;
    std::chrono::milliseconds commandTimeout{0};
    // This process's lease owner name: replica id plus an instance suffix.
    QString leaseOwner;
    QString replicaId;
    // Several replicas share the catalog (PostgreSQL): leases of other owners are never
    // adopted at startup, only once they lapse.
    bool sharedCatalog = false;
    // How the workspaces and runtime dirs of deleted conversations go (Trash::discard in the
    // server).
    RemoveTree removeTree = removeTreeNow;
    // The server's sandbox policy, and how this machine enforces it (runtime_info.sandbox).
    SandboxPolicy sandboxPolicy;
    SandboxIsolation isolation;
    // Where a caller's working dir may be.
    WorkspaceRoots workspaceRoots;
    // The size limit of the workspaces the server makes; none: no limit, no images.
    WorkspaceDisks *disks = nullptr;
    // --sandbox-warm: the conversation ids with a container ready, for creates that ask for
    // nothing of their own. Null: none.
    WarmSandboxes *warm = nullptr;
};

// The conversations use case: everything the API can do to a conversation, independent of HTTP.
// Handlers and WebSocket sessions call it; it throws ApiError for what the caller got wrong.
// What ConversationService::removeOrphanedDirs did with the directories of conversations the
// catalog does not know.
struct OrphanSweep
{
    int removed = 0;
    int kept = 0; // made before the catalog
};

// What POST /recover did (RecoveryAction, in order; none when there was nothing to recover),
// and the conversation as it is after.
struct Recovery
{
    ConversationInfo conversation;
    QStringList actions;
};

class ConversationService : public QObject
{
    Q_OBJECT
public:
    ConversationService(ConversationStore &store, LeaseStore &leases, ReplicaStore &replicas,
                        EventLog &log, RuntimeProvider &runtimes, const AgentFactory &agents,
                        const Clock &clock, ServiceSettings settings, QObject *parent = nullptr);
    ~ConversationService() override;
    // Where what the server does on its own (a run resolved at startup or taken over from a
    // replica that stopped) is recorded; none: nowhere.
    void setAuditLog(AuditLog *log) { m_audit = log; }

    // Returns the conversation and whether it was created (false: it existed already).
    // `cause`: who created it, named by the `running` status of the run its initial message
    // starts.
    QCoro::Task<std::pair<ConversationInfo, bool>> create(CreateConversationRequest request,
                                                          ChangeCause cause = {});
    // A new conversation with the history of `id` (OpenHands' fork), idle, with its agent,
    // policy and secrets; its workspace a copy of the server's own workspace of `id`, or the
    // same directory when `id` was given one. 409 while `id` runs or waits for a confirmation,
    // and when the fork's id is taken.
    QCoro::Task<ConversationInfo> fork(QUuid id, ForkConversationRequest request);
    ConversationInfo get(const QUuid &id);
    // The same as get(id).toJsonBytes(), reusing the bytes while the row and its runtime info
    // are unchanged (ConversationStore::findJson).
    QByteArray getJson(const QUuid &id);
    QList<std::optional<ConversationInfo>> getMany(const QList<QUuid> &ids);
    ConversationPageResult search(const ConversationFilter &filter, ConversationSort sort,
                                  const QString &pageId, int limit);
    qint64 count(const ConversationFilter &filter) { return m_store.count(filter); }
    ConversationInfo update(const QUuid &id, const ConversationUpdate &update);
    // Deletes the conversation, its history (a batch of events per turn of the event loop)
    // and its files.
    QCoro::Task<> remove(QUuid id);
    // Another replica deleted the conversation: what this one holds of it (a run, a sandbox,
    // streams) goes too.
    void forgetDeletedElsewhere(const QUuid &id);
    // Another replica was asked to pause or interrupt a run of this one.
    void stopRequestedElsewhere(const QUuid &id, LeaseStore::Cancel how);
    // Another replica archived the conversation or stopped its runtime: a sandbox this one keeps
    // for it stops too (it stayed up until its idle timeout).
    void releaseRequestedElsewhere(const QUuid &id);

    // `cause` (who asked, and why) is named by the state events the change writes: the status
    // `running` of the run it starts, `paused` of the run it stops, the `archive`, `runtime`,
    // `recovery` and `outcome` events (see docs/API.md).

    // Starts or continues the run; a shell command that was interrupted runs again (retry()).
    QCoro::Task<ConversationInfo> run(QUuid id, ChangeCause cause = {});
    ConversationInfo pause(const QUuid &id, const ChangeCause &cause = {});
    ConversationInfo interrupt(const QUuid &id, const ChangeCause &cause = {});
    QCoro::Task<StoredEvent> sendMessage(QUuid id, MessageRequest message, ChangeCause cause = {});
    QCoro::Task<ConversationInfo> respondToConfirmation(QUuid id, bool accept, QString reason,
                                                        ChangeCause cause = {});
    QString finalResponse(const QUuid &id);
    // Adds `secrets` to the conversation's (a name given again takes the new value): its
    // commands get them in their environment from their next command on. Kept in this
    // process's memory only; 422 past ConversationSecrets::MaxBytes in all.
    void updateSecrets(const QUuid &id, const ConversationSecrets &secrets);

    // Archive stops the runtime first, then sets archived_at (the first one is kept).
    QCoro::Task<ConversationInfo> archive(QUuid id, ChangeCause cause = {});
    ConversationInfo unarchive(const QUuid &id, const ChangeCause &cause = {});
    // Brings the runtime up, reusing a live sandbox; runs nothing.
    QCoro::Task<ConversationInfo> resumeRuntime(QUuid id, ChangeCause cause = {});
    // Replaces the runtime with a fresh one on the same workspace; runs nothing.
    QCoro::Task<ConversationInfo> reprovisionRuntime(QUuid id, ChangeCause cause = {});
    // Starts an expired runtime again, with an empty workspace when the server owns it (one it
    // was given is used as it is), history kept; 409 `runtime_not_expired` otherwise.
    QCoro::Task<ConversationInfo> startFresh(QUuid id, ChangeCause cause = {});
    // A request about to use the sandbox of `id` outside a run (the workspace routes): refused
    // while the runtime expired (410), or while another replica holds the conversation, whose
    // sandbox is there (409 held_by_other_replica, or 503 while its lease lapses).
    void requireSandboxHere(const QUuid &id);
    // The sandbox's process and the lease of `id`, for GET .../runtime.
    RuntimeDetails runtimeDetails(const QUuid &id);
    // Stops the runtime (and a run using it), keeping history; clears a runtime error.
    QCoro::Task<ConversationInfo> stopRuntime(QUuid id, ChangeCause cause = {});
    // A policy of the server changed the runtime (`value`: "stopped", "paused", "expired"):
    // the history says so, naming the policy and its reason. Never throws: the change stays
    // made when its event cannot be written (the conversation was deleted meanwhile).
    void noteRuntimeChange(const QUuid &id, const QString &value, const ChangeCause &cause);
    // The console's one click: resolve stale state, bring the runtime up, continue the run,
    // as far as each is needed (Lifecycle::recoveryPlan()); each step is in the answer and in
    // the history. When the outcome offers to run an interrupted command again (the shell
    // agent's), the run is not continued (it would only report the interruption): the offer
    // stays.
    QCoro::Task<Recovery> recover(QUuid id, ChangeCause cause = {});
    // The operator acknowledged the outcome: it no longer needs attention.
    ConversationInfo dismissOutcome(const QUuid &id, const ChangeCause &cause = {});
    // Runs the interrupted command the outcome offers again, as a new message; 409
    // `nothing_to_retry` when it offers none (any more). run() does the same for such a
    // conversation.
    QCoro::Task<ConversationInfo> retry(QUuid id, ChangeCause cause = {});

    // Takes over the leases an earlier instance left (single node: it is provably dead), then
    // resolves every conversation it left `running`. Returns how many were resolved.
    int recoverStale();
    // Removes the directories under `roots` (DATA/workspaces, DATA/runtimes) named by a
    // conversation that no longer exists, stopping a sandbox adopted for one: a delete that
    // crashed between the row and its files, or one done by another replica, leaves them. Those
    // made before the catalog (`catalogCreatedMs`) are kept: an emptied or replaced catalog
    // knows none of its conversations. Runs after startup in batches, one per turn of the event
    // loop (a catalog of 100,000 took 0.85 s in one piece).
    QCoro::Task<OrphanSweep> removeOrphanedDirs(QStringList roots, qint64 catalogCreatedMs);
    // Finishes the deletes a stopped or killed server left half done, in the background, a
    // batch per turn as a delete goes.
    void resumeRemovals();
    // Beats this replica's heartbeat and renews the leases of every live run, in one batch, and
    // acts on what it finds.
    void renewLeases();
    QString leaseOwner() const { return m_settings.leaseOwner; }
    bool isLive(const QUuid &id) const { return m_lifecycles.runner(id) != nullptr; }
    // Used here now: it runs, or its runtime is coming up (a run's start, a resume).
    bool isInUse(const QUuid &id) const { return m_lifecycles.isInUse(id); }
    int liveCount() const { return m_lifecycles.runningCount(); }
    // The runtimes' lines of /metrics (RuntimeProvider::metrics()).
    QByteArray runtimeMetrics() const;
    // Pauses every run at a safe point; interrupts what is still running after `grace`.
    QCoro::Task<> shutdown(std::chrono::milliseconds grace);

Q_SIGNALS:
    void runnerStopped(const QUuid &id);
    // The conversation is gone (its history and files may still be going); its streams end.
    void deleted(const QUuid &id);
    // Another server started with this one's --replica-id while this one was frozen or cut
    // off, and is that replica now (emitted once).
    void replacedAsReplica();

private:
    ConversationInfo require(const QUuid &id);
    // Every runtime the server may keep is taken (by a run, or for a confirmation): a client
    // tries again later (503, Retry-After).
    static ApiError runtimeLimitReached(const RuntimeError &error);
    static bool isRuntimeExpired(const ConversationInfo &info);
    // Stops this process's run and sandbox of the conversation; returns its runtime dir.
    QString releaseLocalParts(const QUuid &id);
    // Removes the files of a conversation whose row is gone: its runtime's, and its workspace
    // when the server made it.
    void removeFilesOf(const ConversationInfo &info, const QString &runtimeDir);
    // The part of a delete after it was marked (ConversationStore::beginRemoval): the history a
    // batch per turn, then the row, then the files.
    QCoro::Task<> eraseRemoved(ConversationInfo info, QString runtimeDir);
    void askOwnerToStop(const QUuid &id, LeaseStore::Cancel how);
    void resolveLapsedRuns();
    static constexpr int LapsedRunsPerTick = 20;
    // Writes the ends of runs storage refused; those it still refuses wait for the next try.
    void writeUnwrittenEnds();
    // Writes the end of `id`'s run if storage refused it; throws StorageError while storage
    // still does. Before anything else claims the conversation's lease: the end is kept under
    // it, and a claim (of this server's own lease) made it look settled elsewhere. It was then
    // dropped, and the conversation stayed `running` with nothing running it.
    void writeUnwrittenEnd(const QUuid &id);
    static constexpr std::chrono::seconds UnwrittenEndRetry{1};
    // Events a delete removes per turn of the event loop (~12 ms of SQLite's time).
    static constexpr int DeleteBatch = 500;
    // How long a fork may take to copy its workspace.
    static constexpr std::chrono::milliseconds WorkspaceCopyTimeout{5 * 60 * 1000};
    void requireUsableRuntime(const ConversationInfo &info) const;
    // The runtime info of conversations (one, or a page), with the sandbox policy in force.
    RuntimeInfo runtimeOf(const ConversationInfo &info) const;
    void describe(QList<ConversationInfo> &conversations) const;
    // What of the runtime info only this server knows: the sandbox policy in force, and the
    // secrets whose values it lacks.
    void describeHere(const ConversationInfo &info, RuntimeInfo &runtime) const;
    // `cause`: the InterruptCause the outcome names; a restart at startup, a takeover of a run
    // whose owner went away otherwise. `by`: who resolved it, and why (the status event's).
    bool resolveStale(const ConversationInfo &info, const ChangeCause &by,
                      QLatin1StringView cause = InterruptCause::Takeover);
    // The same, but a `running` conversation another owner's live lease holds is refused as
    // refuseIfHeldElsewhere refuses it: a lease that lapsed between the two was resolved by
    // the start that followed, which then ran on from the interrupted command.
    bool resolveStaleOrRefuse(const ConversationInfo &info, const ChangeCause &by);
    // Whether the conversation was `running` under `lease` and is resolved now.
    bool resolveStaleUnder(const QUuid &id, const LeaseToken &lease, const ChangeCause &by,
                           QLatin1StringView cause = InterruptCause::Takeover);
    LeaseToken claimOrThrow(const QUuid &id);
    // A request that needs the conversation's run or runtime, refused before it changes
    // anything while another owner's lease is live (409 or 503, as the claim would answer).
    void refuseIfHeldElsewhere(const QUuid &id);
    // An operator's answer to the action waiting for confirmation, given with the run it
    // starts.
    struct ConfirmationAnswer
    {
        QUuid actionId;
        bool accept = true;
        QString reason;
    };
    using Turn = ConversationLifecycles::Turn;
    // Starts a run of `id` with its turn (ConversationLifecycles::turn()) held, deciding on the
    // row as it is then; the turn goes once the runner runs, or the start failed. A recovery's
    // start notes its steps in `recovery` (noteRecovery()). `cause`: who started it; none for a
    // run a message asked for while the one before was stopping.
    QCoro::Task<> startRun(Turn turn, QUuid id, std::optional<ChangeCause> cause,
                           std::optional<ConfirmationAnswer> answer = {},
                           QStringList *recovery = nullptr);
    // A step of a recovery: in its answer's `actions`, and in the history (under `lease`, when
    // a run's start holds it).
    void noteRecovery(const QUuid &id, QStringList &actions, QLatin1StringView action,
                      const ChangeCause &cause, const LeaseToken *lease = nullptr);
    // 409 while a run is starting or running here.
    void refuseIfRunningHere(const QUuid &id, const QString &detail) const;
    // Writes `answer` under `lease`; 409 when the action is no longer the one waiting.
    // The action `answer` is for, still waiting under this server's lease; 409 when an answer
    // through another replica came first.
    Event awaitedAction(const QUuid &id, const ConfirmationAnswer &answer);
    QCoro::Task<std::shared_ptr<Runtime>> bringUpRuntime(ConversationInfo info);
    // Stops the run and the runtime for good (an archive, a runtime stop), then does `then`
    // with the turn still held: a request waiting for it decides on what `then` left. A
    // runtime coming up for the request holding the turn is called off rather than waited for.
    QCoro::Task<> stopRunAndRuntime(QUuid id, ChangeCause cause, std::function<void()> then);
    // Starts the run a message asked for while the one before was stopping
    // (ConversationLifecycle::runsAgain()).
    QCoro::Task<> runAgain(QUuid id);
    QString workspaceFor(const QUuid &id) const;
    // Mounts the disk of a workspace the server made, when it has one that is not mounted (after
    // a reboot); 503 when that fails: commands would write beside the files, unlimited.
    void mountWorkspace(const ConversationInfo &info) const;
    // Makes the disk of a workspace the server makes, where sizes are enforced; 503 when that
    // fails.
    QCoro::Task<> makeWorkspaceDisk(QUuid id, QString dir);
    QString checkWorkingDir(const QString &path) const; // throws 422

    ConversationStore &m_store;
    LeaseStore &m_leases;
    ReplicaStore &m_replicas;
    EventLog &m_log;
    RuntimeProvider &m_runtimes;
    const AgentFactory &m_agents;
    const Clock &m_clock;
    ServiceSettings m_settings;
    AuditLog *m_audit = nullptr;
    // What this process holds of each conversation: its run, what was asked of it, its
    // runtime's bring-ups and halts.
    ConversationLifecycles m_lifecycles;
    // Per-conversation secrets (llm API keys): in memory only, never stored or returned.
    QHash<QUuid, QString> m_secrets;
    // The secrets of conversations' commands (updateSecrets()), in memory only too.
    QHash<QUuid, ConversationSecrets> m_commandSecrets;
    // The policies described last for runtime_info and their descriptions: nearly every
    // conversation has the server's, and each read of one described it anew (a tenth of a GET
    // by id).
    struct DescribedPolicy
    {
        SandboxPolicy policy;
        QString diskLimit;
        QJsonObject description;
        QByteArray json;
    };
    // The few there are (policies in force, a workspace limited or not), the last used first.
    mutable QList<DescribedPolicy> m_described;
    quint64 m_startCount = 0;
    bool m_stopping = false; // shutdown() has begun: no run starts any more
    bool m_replaced = false; // replacedAsReplica() was emitted
    QTimer m_renewal;
    // Retries the ends of runs storage refused (ConversationLifecycle::Run::EndUnwritten).
    QTimer m_endRetry;
};

} // namespace AgentDeck
