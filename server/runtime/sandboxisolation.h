#pragma once

#include "sandboxpolicy.h"

#include <QJsonObject>
#include <QString>
#include <QStringList>
#include <QUuid>

namespace AgentDeck {

// How the commands of a sandbox are contained on this machine, found out once (probe()) by the
// server at startup and by each sandbox host when it starts:
// - bubblewrap: a mount namespace with a read-only view of the system (/usr, /etc, /opt, /var)
//   and only the workspace, the sandbox home and a per-command /tmp writable, the data dir
//   hidden; PID, IPC and UTS namespaces; a network namespace unless the policy says `host`.
//   Capabilities: a server that is not root runs bubblewrap in a user namespace of its own
//   (the command holds no capability anywhere); a root server's commands change to a uid of
//   their own (sandboxUid()) with every capability and `no_new_privs`, through setpriv.
// - none: bubblewrap is missing or cannot create its namespaces. Commands run as the server's
//   user (a root server's change to the sandbox uid all the same), see the whole system and the
//   host's network; their process trees still end with them (CommandLeader).
// - container (--runtime docker): a container per conversation on a Docker engine, from an image
//   of the operator's choosing; only the workspace and the sandbox home are the host's. No
//   capabilities, `no-new-privileges`, a read-only root but for them and a sized /tmp; commands
//   run as a uid of their own. Memory and processes are limited for the sandbox as a whole, by
//   the engine's cgroups (see SandboxContainers). A network namespace of its own (only its
//   loopback), to which the `egress` network is attached as to bubblewrap's.
// Limits are otherwise rlimits (prlimit inside the sandbox): per process, except the count of
// processes. Under a cgroup delegated to the server, each sandbox also gets a cgroup of its own
// that holds all of its processes together (SandboxCgroups).
struct SandboxIsolation
{
    enum class Mechanism
    {
        Bubblewrap,
        Container,
        None
    };
    Mechanism mechanism = Mechanism::None;
    // Why it is none (bubblewrap missing, or the error it gave).
    QString reason;
    // The server runs as root: commands change to a uid of their own.
    bool root = false;
    // Commands run inside the server (--runtime process): nothing but the limits, the
    // environment and the end of process trees applies.
    bool inProcess = false;
    // slirp4netns is there for the `egress` network (UserModeNetwork), and can reach the
    // sandboxes' network namespaces; for containers, why not when it cannot.
    bool userModeNetwork = false;
    QString noUserModeNetwork;
    // The ranges the `egress` network reaches beside the public addresses (EgressFilter).
    QStringList egressAllowed;
    // bubblewrap sizes a tmpfs (--size, 0.8 and later): /tmp and /dev/shm are bounded. probe()
    // finds out.
    bool sizedTmpfs = true;

    static SandboxIsolation probe();
    // bubblewrap's arguments for the namespaces of a command (the probe tries the same).
    static QStringList namespaceArguments(bool root, bool hostNetwork);
    static SandboxIsolation forProcessRuntime();
    // The containers of the engine at `dockerHost`: their `egress` network is attached from this
    // host (to the container's namespace, found through its init's pid), which takes an engine
    // on this host (unix://) and a root server (the namespace is the engine's).
    static SandboxIsolation forContainers(const QString &dockerHost);

    bool isWeak() const { return mechanism == Mechanism::None; }
    // "bubblewrap", "container" or "none".
    QString mechanismName() const;
    // One sentence per part of `policy` this machine cannot enforce.
    QStringList unenforced(const SandboxPolicy &policy) const;
    // The policy in force and how: runtime_info.sandbox. `diskLimit`: whether the workspace's
    // size is limited (WorkspaceDisks::describe()); empty: "not enforced".
    QJsonObject describe(const SandboxPolicy &policy, const QString &diskLimit = {}) const;
    // /server_info's `sandbox`: the mechanism, the server's policy and what it cannot enforce.
    QJsonObject toJson(const SandboxPolicy &serverPolicy, const QString &diskLimit = {}) const;
    // The warning a server prints at startup when isolation is weak; empty when it is not.
    QString warning() const;
};

// The uid (and gid) a root server's sandbox runs the conversation's commands as: one of its own
// per conversation, so that two sandboxes never share a uid's process count or files, and never
// one of the host's users (1,800,000,000 and up).
uint sandboxUid(const QUuid &conversationId);

} // namespace AgentDeck
