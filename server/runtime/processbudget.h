#pragma once

#include "serverconfig.h"

#include <QString>

namespace AgentDeck {

// The processes (and threads: each takes a PID) the host has for sandboxes: the smaller of
// kernel.pid_max and kernel.threads-max, less the room kept for the server and the rest of the
// host, an eighth of it and 4096 at least. Three fork-bombing sandboxes took 3,094 PIDs of the
// host's 32,768 when 256 sandboxes of 1,024 processes each were allowed.
struct HostProcesses
{
    qint64 pidMax = 0;
    qint64 threadsMax = 0;

    // From /proc/sys/kernel; 0 for what cannot be read.
    static HostProcesses read();
    qint64 limit() const;
    qint64 room() const;
    qint64 forSandboxes() const { return limit() - room(); }
};

// What a sandbox runs besides its command, each with its threads: the sandbox host,
// bubblewrap's processes or the command's container-exec and the next one's, slirp4netns.
inline constexpr qint64 SandboxOwnProcesses = 16;
// The fewest processes a sandbox is given when its limit is fitted to the host.
inline constexpr qint64 MinFittedProcesses = 64;

// Makes --max-sandboxes sandboxes of --sandbox-processes processes each (and their own) fit
// `host`: a limit the operator did not give (config.fitSandboxProcesses) is lowered to what fits
// (at most the default); one given that does not fit, or no limit at all, is refused. Returns
// why, or nothing when it fits. Only `--runtime local` runs sandboxes.
QString fitSandboxProcesses(ServerConfig &config, const HostProcesses &host);

} // namespace AgentDeck
