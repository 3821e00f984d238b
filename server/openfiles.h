#pragma once

#include <QtGlobal>

// The process's limit of open files (RLIMIT_NOFILE).
namespace AgentDeck::OpenFiles {

// Raises the soft limit to the hard one, and returns the limit now. Every connection, stream and
// sandbox socket is a descriptor, and Linux's default soft limit, 1,024, is for programs that
// use select(); Qt polls.
qint64 raiseLimit();

// The soft limit the process had before raiseLimit(): what the processes it starts get back
// (programs that close every descriptor up to the limit take a while at a million).
qint64 startingLimit();

// Sets the soft limit to `limit`, within the hard one. Only system calls: fit for a child
// process modifier.
void setLimit(qint64 limit);

} // namespace AgentDeck::OpenFiles
