#pragma once

#include "sandboxpolicy.h"

#include <QString>

namespace AgentDeck {

// Per-sandbox cgroups (cgroup v2) under the cgroup that systemd delegated to the service
// (`Delegate=yes`): each sandbox's processes together, its host and bubblewrap included, are held
// to `memory.max` and `pids.max`, which rlimits (per process, or per user) cannot do.
//
// A cgroup that holds processes may not give controllers to its children, so the server moves
// itself into DELEGATED/supervisor and enables memory and pids for DELEGATED's children; each
// sandbox host moves itself into DELEGATED/sandbox-ID before it runs a command, so that everything
// it starts is counted there.
//
// For the same reason systemd (before DelegateSubgroup=, v254) cannot start the service again
// while DELEGATED gives controllers to its children: the new main process goes into DELEGATED
// itself (219/CGROUP). A stopping server takes the controllers back (release()), and so does a
// process prepare() leaves beside it for when it is killed or crashes; the limits of the
// sandboxes that outlive it go with them, and the next server gives them back to the sandboxes
// it adopts (restore()), from what each host wrote to its runtime dir (LimitsFile). Without a
// delegated cgroup (no systemd, no `Delegate=yes`, cgroup v1) the rlimits are all there is.
namespace SandboxCgroups {

// What the server found at start: the delegated cgroup's directory, or why there is none.
struct Delegation
{
    QString root;    // e.g. /sys/fs/cgroup/system.slice/agentdeck.service; empty: none
    QString problem; // why there is none
    bool isAvailable() const { return !root.isEmpty(); }
};

// Looks for the delegated cgroup of the calling process and, when there is one, moves the process
// into its `supervisor` child and enables memory and pids for the children, and leaves a child
// process that calls release() once the calling process has ended, however it ended. Once, at
// start. A
// cgroup counts as delegated when systemd marked it so (the `trusted.delegate` or `user.delegate`
// attribute), or, for a server that is not root, when it is the server's own and writable.
Delegation prepare();

// The cgroup of the sandbox of conversation `wireId` under `root`.
QString sandboxCgroup(const QString &root, const QString &wireId);

// Removes the cgroups of sandboxes whose processes have all ended (the kernel refuses to remove
// one that still has processes).
void removeEnded(const QString &root);

// What a sandbox's cgroup allows: the command's processes their memory limit and as much again
// for the memory file systems (/tmp, /dev/shm, which the cgroup charges), plus what the host
// itself needs; the command's processes and the sandbox's own (SandboxOwnProcesses). 0: no limit.
qint64 memoryMax(const SandboxPolicy &policy);
qint64 pidsMax(const SandboxPolicy &policy);

// For the sandbox host: makes `cgroup` with the limits of `policy` and moves the calling process
// into it, and writes the limits to `runtimeDir` for restore(). False with *error when it could
// not.
bool enter(const QString &cgroup, const SandboxPolicy &policy, const QString &runtimeDir,
           QString *error);

// For a stopping server: no more controllers for the children of `root`, so that systemd can
// start the service again.
void release(const QString &root);

// For a server that adopted the sandbox in `runtimeDir`: its cgroup under `root` gets the limits
// its host wrote there again (release() took them). False with *error when it could not.
bool restore(const QString &root, const QString &wireId, const QString &runtimeDir, QString *error);

} // namespace SandboxCgroups

} // namespace AgentDeck
