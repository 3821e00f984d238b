#pragma once

#include "sandboxpolicy.h"
#include "wiretypes.h"

#include <QCoroTask>
#include <QHash>
#include <QObject>
#include <QString>
#include <QThreadPool>
#include <QTimer>
#include <QUuid>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>

namespace AgentDeck {

class DockerEngine;
struct DockerResult;

struct SandboxContainerSettings
{
    QString dockerHost;   // --docker-host
    QString tlsDirectory; // --docker-tls-dir (empty: none)
    QString defaultImage; // --sandbox-image: the image of a conversation that names none
    // The provider's DATA/runtimes: containers carry it in a label, so that servers of other
    // data dirs on the same engine (or tests side by side) never take or remove each other's.
    QString runtimesRoot;
    QString replicaId;
    // With replicas on one catalog: its identity (Database::identity()), which names and labels
    // the containers instead of the data dir, so that every replica finds the same one of a
    // conversation. Empty: one server, its containers its data dir's.
    QString catalog;
};

// The containers of `--runtime docker`: one per conversation, on one Docker engine, known by its
// name and labels so that a server that restarts (or crashed) finds it again.
//
// A container runs the engine's init and a shell waiting on its stdin, as root with no
// capability: that keeps it up, and no command (a uid of its own, see SandboxHost) can end it.
// Commands come through `agentdeck container-exec` from the conversation's sandbox host. The
// container sees the workspace and the sandbox home at their host paths, nothing else of the
// host; its root is read-only, its /tmp and /dev/shm memory of the policy's size.
class SandboxContainers : public QObject
{
    Q_OBJECT
public:
    // Labels every container of AgentDeck carries.
    static constexpr auto ConversationLabel = "org.agentdeck.conversation";
    static constexpr auto RuntimesLabel = "org.agentdeck.runtimes";
    static constexpr auto ReplicaLabel = "org.agentdeck.replica";
    // A container made ahead for the warm pool (WarmSandboxes); its value is the fingerprint
    // of what it was made with (warmFingerprint()).
    static constexpr auto WarmLabel = "org.agentdeck.warm";
    // With replicas on one catalog: its identity (SandboxContainerSettings::catalog).
    static constexpr auto CatalogLabel = "org.agentdeck.catalog";
    // The sandbox home it binds (at the same path), of the replica that made it.
    static constexpr auto HomeLabel = "org.agentdeck.home";

    explicit SandboxContainers(SandboxContainerSettings settings, QObject *parent = nullptr);
    ~SandboxContainers() override;

    const QString &dockerHost() const { return m_settings.dockerHost; }
    const QString &tlsDirectory() const { return m_settings.tlsDirectory; }
    // The image of a conversation with `policy`: its own, else the server's.
    QString imageOf(const SandboxPolicy &policy) const;

    struct Prepared
    {
        QString id;    // the container, running
        QString home;  // the sandbox home it binds: `home`, or the one it was made with
        QString error; // why there is none: the engine's own words, or why it was not asked
    };
    // The conversation's container, running: the one a previous start, server or replica left
    // (unpaused or started again if need be), or a new one with `home`. The workspace is seen at
    // its real path and at the names links give it (`workspaceAliases`, see WorkspaceRoots).
    // With `endCommands`, what runs in one found running as a command's uid is ended first: it
    // is of a sandbox host gone (another replica's, whose run was resolved as interrupted).
    QCoro::Task<Prepared> prepare(QUuid conversationId, QString workspace,
                                  QStringList workspaceAliases, QString home, SandboxPolicy policy,
                                  bool endCommands = true);
    // Removes the conversation's container, if there is one (in the background: a failure is
    // logged, and the next sweep tries again).
    void remove(const QUuid &conversationId);
    // Freezes the container (the engine's pause), or stops it keeping its disk, or thaws it; in
    // the background, a failure logged. prepare() brings a stopped one back, and
    // `container-exec` a paused one.
    void pause(const QUuid &conversationId);
    void stop(const QUuid &conversationId);
    void unpause(const QUuid &conversationId);
    // Removes this server's (with replicas, this catalog's) containers whose conversation is no
    // longer kept (`kept` says no): deleted while no server that would remove it ran, or never
    // recorded. How many went; one that could not
    // be removed is logged.
    QCoro::Task<int> sweep(std::function<bool(const QUuid &)> kept);
    // Empty when the engine answers and the default image is there, else why not.
    QCoro::Task<QString> check();

    // The container's name on the engine.
    QString nameOf(const QUuid &conversationId) const;

    // The warm pool's (WarmSandboxes): prepare() of a container labelled WarmLabel.
    QCoro::Task<Prepared> prepareWarm(QUuid conversationId, QString workspace, QStringList aliases,
                                      QString home, SandboxPolicy policy);
    // What a warm container of `policy` is made with: its image and limits. One made with
    // another (the server restarted with other options) is not handed out.
    QString warmFingerprint(const SandboxPolicy &policy) const;
    // This server's containers labelled WarmLabel, free or claimed, as the engine lists them.
    QCoro::Task<DockerResult> listWarm();
    // The id of the default image on the engine (an image rebuilt under the same name has
    // another), or the engine's error.
    QCoro::Task<DockerResult> inspectDefaultImage();
    // Removes the conversation's container, and waits for it; the engine's error, or empty.
    QCoro::Task<QString> removeNow(QUuid conversationId);

    // What the conversation's running container used when it was last measured (every
    // MeasureInterval, and at measure()); nothing when it runs none. Its disk is its writable
    // layer as of then, and its workspace and home as last walked (measureDisk()).
    std::optional<SandboxUsage> usageOf(const QUuid &conversationId) const;
    // Measures every running container of this server now (with measureOnly(), those of the
    // conversations it says).
    QCoro::Task<void> measure();
    void measureOnly(std::function<bool(const QUuid &)> wanted) { m_measured = std::move(wanted); }
    static constexpr std::chrono::seconds MeasureInterval{5};

Q_SIGNALS:
    // A call inBackground() made on the conversation's container has ended.
    void backgroundEnded(const QUuid &conversationId);

private:
    // The host dirs of the conversation's container (its binds, `dirs`), measured on a worker
    // thread when they are due (SandboxDisk::nextAfter()), one walk at a time; `writable` is its
    // writable layer now. Returns its disk as known so far.
    qint64 measureDisk(const QUuid &conversationId, const QStringList &dirs, qint64 writable);

    // Runs one call on the conversation's container in the background, logging its failure
    // (`what`: "remove", "pause"...).
    void inBackground(const QUuid &conversationId, const char *what,
                      QCoro::Task<DockerResult> (*call)(DockerEngine *, QString));
    // The label filter of this server's (or catalog's) containers.
    QString ownFilter() const;
    // Ends the processes of every uid but root's in the container.
    QCoro::Task<void> endCommandsIn(QString id);

    SandboxContainerSettings m_settings;
    std::unique_ptr<DockerEngine> m_engine;
    QHash<QUuid, SandboxUsage> m_usage;
    // Calls inBackground() has on its way, by conversation: prepare() waits for them.
    QHash<QUuid, int> m_inBackground;
    std::function<bool(const QUuid &)> m_measured;
    QTimer m_measuring;
    bool m_measuringNow = false;
    // The containers prepareWarm() is making: prepare() labels them.
    QHash<QUuid, QString> m_warming;
    struct DiskState
    {
        qint64 hostBytes = 0; // its workspace and home, as last walked
        qint64 writableBytes = 0;
        std::chrono::steady_clock::time_point due;
        bool walking = false;
    };
    QHash<QUuid, DiskState> m_disk;
    QThreadPool m_diskWalks;
    std::atomic<bool> m_stopping = false;
};

} // namespace AgentDeck
