#pragma once

#include "sandboxpolicy.h"

#include <QStringList>

#include <optional>

namespace AgentDeck {

// A uid and gid that a root server's commands change to.
struct CommandUser
{
    uint uid = 0;
    uint gid = 0;
};

// Gives the workspace `dir`, and everything in it, to uid:gid, and makes it 0700. For a directory
// the server made only.
bool giveWorkspace(const QString &dir, uint uid, uint gid);

// Whom a root server's commands in `workspace` run as: its owner, or when root owns it,
// `sandboxUid`, to whom the workspace is then given if `madeByServer` (a directory the server
// did not make keeps its owner and mode), and always the dirs of `alsoGive` (the sandbox
// home). Never root: an error names what failed.
std::optional<CommandUser> commandUserFor(const QString &workspace, bool madeByServer,
                                          const QStringList &alsoGive, uint sandboxUid,
                                          QString *error);

// `agentdeck command-leader [--uid U --gid G] [limits] -- PROGRAM ARGS...`: runs PROGRAM as the
// one child of a process that ends its whole process tree with it, for commands that have no
// PID namespace of their own (no bubblewrap, --runtime process). It is a child subreaper, so
// whatever the command leaves behind, a `(setsid sleep 600 &)` too, becomes its child; when
// PROGRAM exits, or the leader gets SIGTERM or SIGINT (an interrupt, a timeout, a stop), or its
// parent dies, every process under it is killed before it exits with PROGRAM's status
// (128 + signal for a signal). The child gets the limits (rlimits) and, with --uid, drops to
// that uid with no capabilities and `no_new_privs`.
int runCommandLeader(int argc, char *argv[]);

// The arguments of `agentdeck command-leader` for `program` and `arguments`.
QStringList commandLeaderArguments(const SandboxPolicy &limits, std::optional<CommandUser> user,
                                   const QString &program, const QStringList &arguments);

// prlimit's options for the limits of `policy` (empty when it has none).
QStringList prlimitArguments(const SandboxPolicy &policy);

// A line to add to a command's output when a limit of `policy` is the likely reason it ended
// as it did (exit status 128 + SIGXCPU, say); empty when none is.
QString limitNote(const SandboxPolicy &policy, int exitCode, const QString &output);

// The limit a command's output says (in its last line, limitNote()) stopped it, in words
// ("the sandbox's limit of 64 processes was reached"); empty when none did.
QString limitSaidIn(const QString &output);

} // namespace AgentDeck
