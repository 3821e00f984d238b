#pragma once

#include "commandleader.h"

#include <QStringList>

class QProcessEnvironment;

namespace AgentDeck {

// `agentdeck container-exec --docker-host H [--docker-tls-dir DIR] --container ID --user UID:GID
// --workdir DIR -- PROGRAM ARGS...`: runs PROGRAM in a running container through the engine's exec,
// for a sandbox host whose commands run in containers (--runtime docker). It prints what the
// command prints, both streams as they come, and exits with its status (125 when the engine failed
// it).
//
// It leads the command as `command-leader` does a host's own processes: the command runs under
// a shell that, once it ends, kills whatever it left running as the sandbox's user (`kill -9 -1`
// spares the container's init, which runs as root, and the shell itself), so the stream ends
// with the command. On SIGTERM, SIGINT or its parent's death the same kill comes from a second
// exec, and it exits 128 + SIGTERM. The command gets its environment, but PATH, which is the
// image's.
//
// A process of the command that the kernel killed for the container's memory limit (its cgroup's
// oom_kill count rose while the command ran) is said in a last line naming the limit
// (--memory-bytes), which limitSaidIn() reads like the local runtime's.
//
// With `--info-fd N --block-fd M` (UserModeNetwork::childArguments()), it speaks bubblewrap's
// protocol for the `egress` network: it writes {"child-pid": PID} to N, PID the container's
// init as this host sees it (the engine's State.Pid, checked to be in the container's cgroup), or
// {"error": WHY} when there is none here (an engine on another host or in another PID
// namespace), and runs the command once M has a byte or is closed.
//
// With `--command-on-stdin` instead of `-- PROGRAM ARGS...`, it waits for one line on its standard
// input, {"command": [PROGRAM, ARGS...], "environment": ["NAME=value", ...]}
// (containerExecCommandLine()), and runs that; an end of input first ends it.
int runContainerExec(int argc, char *argv[]);

// The engine a container-exec talks to: its URL and TLS directory (DockerEngine).
struct ContainerEngine
{
    QString host;
    QString tlsDirectory; // empty: none
};

// The arguments of `agentdeck container-exec` for `program` and `arguments`; `memoryBytes` is the
// container's memory limit (0: none); `network`: the network's (UserModeNetwork), or none.
QStringList containerExecArguments(const ContainerEngine &engine, const QString &container,
                                   const CommandUser &user, const QString &workdir,
                                   qint64 memoryBytes, const QString &program,
                                   const QStringList &arguments, const QStringList &network = {});

// The same started ahead of its command (`--command-on-stdin`), which containerExecCommandLine()
// then gives it on its standard input with its environment: the spawn of a process of the whole
// binary is a third of what a command in a container costs, and this takes it off the command's
// time. Not for the `egress` network, whose descriptors are each command's.
QStringList containerExecWaitingArguments(const ContainerEngine &engine, const QString &container,
                                          const CommandUser &user, const QString &workdir,
                                          qint64 memoryBytes);
QByteArray containerExecCommandLine(const QString &program, const QStringList &arguments,
                                    const QProcessEnvironment &environment);

} // namespace AgentDeck
