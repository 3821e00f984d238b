#pragma once

#include "sandboxruntime.h"
#include "workspaceroots.h"

#include <QHash>
#include <QJsonObject>
#include <QObject>
#include <QPointer>
#include <QSet>
#include <QTimer>

#include <functional>

namespace AgentDeck {

class Clock;
class SandboxContainers;

// What the catalog says of the conversations' containers (LocalSandboxSettings::catalog). Each
// may be empty: a container is then this server's alone, kept while its runtime dir is.
struct ContainerCatalog
{
    // The catalog has the conversation: a container of one it has not is swept.
    std::function<bool(const QUuid &)> has;
    // With replicas on one catalog, sharing the containers: another live replica holds the
    // conversation's lease now (its commands run in the container), ...
    std::function<bool(const QUuid &)> leasedElsewhere;
    // ... this replica's sandbox took the container last (it alone pauses, stops or removes it
    // for being idle, or as its sandbox goes), and recording that it takes it.
    std::function<bool(const QUuid &)> heldHere;
    std::function<void(const QUuid &)> take;
};

struct LocalSandboxSettings
{
    QString program;      // the agentdeck binary, started as `agentdeck sandbox-host`
    QString runtimesRoot; // DATA/runtimes: one dir per conversation
    std::chrono::milliseconds idleTimeout{30 * 60 * 1000};
    // With replicas, a sandbox stops its command when its server has not said for this long
    // that it still holds the conversation's lease (Runtime::ownerAlive): a server frozen past
    // its lease (SIGSTOP, a paused VM) cannot stop the command itself, and the replica that
    // takes the conversation over starts a sandbox of its own. Shorter than the lease, so that
    // the command is gone before the lease can lapse. 0: commands run on (one server alone:
    // nobody takes over, and a server that comes back stops what it left, adoptExisting()).
    std::chrono::milliseconds ownerSilenceLimit{0};
    // At most this many hosts at once (0: no limit): each is a process and a few MB, and shell
    // conversations keep theirs for the idle timeout, so without a bound a busy server ran out
    // of process ids or descriptors. At the limit the one idle the longest makes room.
    int maxSandboxes = 0;
    // How long a host may take to come up and answer.
    std::chrono::milliseconds startTimeout{10'000};
    // The server's sandbox policy: each conversation's own within it.
    SandboxPolicy policy;
    // The ranges an `egress` network reaches beside the public addresses (CIDRs).
    QStringList egressAllowed;
    // Where workspaces may be: a workspace under a root named by a link is shown to its
    // commands by that name too.
    WorkspaceRoots roots;
    // --runtime docker: each host runs its commands in a container of these (not owned).
    SandboxContainers *containers = nullptr;
    ContainerCatalog catalog;
    // With containers: a sandbox idle this long is frozen (--sandbox-idle-pause), and one idle
    // this long stopped with its container's disk kept (--sandbox-idle-stop); 0: never. The next
    // command brings either back.
    std::chrono::milliseconds idlePause{0};
    std::chrono::milliseconds idleStop{0};
    // Told what a policy of the server did to a conversation's sandbox, for the audit log:
    // `policy` "idle" or "limit", `action` "pause_runtime" or "stop_runtime". Null: nobody.
    std::function<void(const QUuid &, const QString &policy, const QString &action,
                       const QString &reason)>
        policyActed;
    // The delegated cgroup under which each sandbox gets a cgroup of its own (SandboxCgroups);
    // empty: none.
    QString cgroupRoot;
    // The conversation ids the warm pool holds (WarmSandboxes::isReserved): their hosts,
    // started ahead (prestart()), are never stopped for being idle. Null: none.
    std::function<bool(const QUuid &)> reserved;
};

// One sandbox host process per conversation, adopted across server restarts. With containers,
// the host runs its conversation's commands in the conversation's container, which goes with
// the host's release.
class LocalSandboxProvider final : public QObject, public RuntimeProvider
{
    Q_OBJECT
public:
    explicit LocalSandboxProvider(LocalSandboxSettings settings, QObject *parent = nullptr);
    ~LocalSandboxProvider() override;

    // Reconnects to the sandboxes a previous server left running. Startup only.
    int adoptExisting();
    // Stops the sandboxes a previous server left running under `runtimesRoot`, for a server
    // that runs its commands otherwise (--runtime process); how many there were.
    static int stopLeftOver(const QString &runtimesRoot);

    // Starts the host of a warm container's conversation to be (a workspace the server made, the
    // server's policy) in the background, so that its first command waits for neither.
    void prestart(const QUuid &conversationId, const QString &workspace);

    QCoro::Task<RuntimeAcquisition> acquire(ConversationInfo conversation) override;
    void release(const QUuid &conversationId) override;
    void letGo(const QUuid &conversationId) override;
    void describe(QList<ConversationInfo> &conversations) const override;
    RuntimeInfo runtimeOf(const ConversationInfo &conversation) const override;
    void interruptOrphan(const QUuid &conversationId) override;
    std::optional<CommandRecord> lastCommand(const QUuid &conversationId) const override;
    QString runtimeDirectory(const QUuid &conversationId) const override;
    void detachAll() override;
    void setIdleKeeper(std::function<bool(const QUuid &)> keeper) override;
    std::optional<RuntimeError> limitRefusal(const QUuid &conversationId) const override;

    void describeProcess(const QUuid &conversationId, RuntimeDetails &details) const override;
    QByteArray metrics() const override;

Q_SIGNALS:
    // A host's start for the conversation ended, up or not.
    void startEnded(const QUuid &conversationId);

private:
    QString newSocketPath(const QUuid &id) const;
    void sweepIdle();
    // Stops the host, and removes its container or (`keepContainer`) only stops it; unless
    // another replica's sandbox took the container since and this is not `forAll` (a delete,
    // an archive, a reprovision: the conversation's, not only this replica's sandbox's).
    void stopSandbox(const QUuid &conversationId, bool keepContainer, bool forAll);
    // Removes the containers of conversations the catalog no longer has.
    QCoro::Task<int> sweepContainers();
    // This server's to pause, stop or remove: no other replica's sandbox took it since.
    bool holdsContainer(const QUuid &id) const;
    // No run holds it, it runs nothing, and its conversation does not wait for a confirmation.
    bool isIdle(const QUuid &id, const std::shared_ptr<SandboxRuntime> &runtime) const;
    void tellPolicy(const QUuid &id, const QString &policy, const QString &action,
                    const QString &reason) const;
    bool atLimit() const;
    RuntimeError limitError() const;
    // The sandbox to stop to make room: the one idle the longest (null when none is idle).
    QUuid idleTheLongest() const;
    // Below the limit, or brought below it by stopping the sandbox idle the longest.
    bool makeRoom();
    void watch(const QUuid &id, SandboxRuntime *runtime);
    void forget(const QUuid &id);

    LocalSandboxSettings m_settings;
    QHash<QUuid, QPointer<SandboxRuntime>> m_live;
    QHash<QUuid, std::shared_ptr<SandboxRuntime>> m_owned;
    // Sandboxes being started, with their host once it is started (to connect to).
    QHash<QUuid, QPointer<SandboxRuntime>> m_starting;
    // Starts released while their container was being made: the container goes again.
    QSet<QUuid> m_releasedWhileStarting;
    // Containers frozen or stopped for being idle, since when (ms since the epoch).
    QHash<QUuid, qint64> m_pausedAtMs;
    QHash<QUuid, qint64> m_stoppedAtMs;
    // Sandboxes that went away on their own (killed, crashed, stopped for not answering), shown
    // as runtime_error `sandbox_lost` until the next start or stop.
    QHash<QUuid, QString> m_lost;
    QTimer m_sweep;
    std::function<bool(const QUuid &)> m_idleKeeper;
};

} // namespace AgentDeck
