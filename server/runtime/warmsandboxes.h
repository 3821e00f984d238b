#pragma once

#include "sandboxpolicy.h"
#include "trash.h"
#include "workspaceroots.h"

#include <QCoroTask>
#include <QList>
#include <QObject>
#include <QString>
#include <QTimer>
#include <QUuid>

#include <optional>

namespace AgentDeck {

class SandboxContainers;
class WorkspaceDisks;

struct WarmSandboxSettings
{
    int count = 0;          // --sandbox-warm: containers kept ready
    QString runtimesRoot;   // DATA/runtimes
    QString workspacesRoot; // DATA/workspaces
    // The server's policy: what a conversation that asks for nothing gets.
    SandboxPolicy policy;
    // --sandbox-disk: the workspace's image is made (and mounted) before its container, which
    // sees only what is mounted on the workspace when it is made. Null: none.
    WorkspaceDisks *disks = nullptr;
    // How a discarded reservation's workspace goes (its disk image with it).
    RemoveTree removeTree = removeTreeNow;
    // Starts the sandbox host of a ready reservation (LocalSandboxProvider::prestart()), and
    // stops it with its reservation; null: none.
    std::function<void(const QUuid &, const QString &workspace)> prestart;
    std::function<void(const QUuid &)> release;
    // Where workspaces may be: a container sees its workspace by the names links give it too.
    WorkspaceRoots roots;
};

// The warm pool of `--runtime docker` (--sandbox-warm N): N containers of the default image and
// policy, made and started ahead for conversation ids not created yet. A container's binds are
// fixed when it is made, so each is made for an id with that id's future workspace and home; a
// create that asks for nothing of its own (no id, no working dir, the server's policy) takes
// the id, and its first command finds its container running.
//
// A reservation is DATA/runtimes/ID with the file `warm` in it: that keeps its dirs from the
// sweeps of directories and containers of conversations the catalog does not know, and tells a
// free warm container from a claimed one after a restart (claim() removes it before the id is
// handed out, so one is never handed out twice).
class WarmSandboxes : public QObject
{
    Q_OBJECT
public:
    static constexpr auto MarkerName = "warm";
    // How often the pool is checked (containers that died, or were removed) and filled again
    // after a failure.
    static constexpr std::chrono::seconds CheckInterval{30};
    // How long after a claim the pool starts to fill again: making a container takes the CPU
    // the claimed conversation's first command wants.
    static constexpr std::chrono::milliseconds RefillDelay{1000};

    WarmSandboxes(SandboxContainers *containers, WarmSandboxSettings settings,
                  QObject *parent = nullptr);
    ~WarmSandboxes() override;

    // Finds the warm containers a previous server left, removes those that do not fit, and fills
    // the pool; in the background.
    void start();
    // A ready reservation for a conversation of `policy` (the conversation's in force), taken out
    // of the pool; none when the policy is not the server's or none is ready. The pool fills
    // again in the background.
    std::optional<QUuid> claim(const SandboxPolicy &policy);
    // Reserved for the pool, free (its marker is there).
    bool isReserved(const QUuid &id) const;
    int readyCount() const { return int(m_ready.size()); }
    int wanted() const { return m_settings.count; }
    // The gauge agentdeck_sandboxes_warm.
    QByteArray metrics() const;

private:
    QString runtimeDirOf(const QUuid &id) const;
    QString workspaceOf(const QUuid &id) const;
    QString markerOf(const QUuid &id) const;
    // Runs reconcile(), or once more after the one running.
    void refill();
    QCoro::Task<void> reconcile();
    // Makes one reservation and its container; false (the engine's words logged) when it could
    // not.
    QCoro::Task<bool> makeOne();
    // Removes a reservation: its container, workspace and runtime dir.
    QCoro::Task<void> discard(QUuid id, QString why);

    SandboxContainers *m_containers;
    WarmSandboxSettings m_settings;
    QString m_fingerprint;
    QList<QUuid> m_ready;
    bool m_running = false;
    bool m_again = false;
    QString m_lastProblem; // said once until it changes or the pool fills
    QTimer m_check;
};

} // namespace AgentDeck
