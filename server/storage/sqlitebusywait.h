#pragma once

#include <chrono>

struct sqlite3;

namespace AgentDeck::SqliteBusyWait {

// How long a connection waits in all for a lock that another connection holds, before its
// statement fails with "database is locked".
inline constexpr std::chrono::milliseconds Limit{5000};

// The pause before try `attempt` (0: the first retry). SQLite's own busy timeout sleeps 1, 2,
// 5, 10, 15... ms between tries, so a commit that found the write lock taken for 4 ms (the
// checkpointer starting the log over) waited 8. These pauses start at 50 µs and double up to
// 1 ms: a waiter is at most 1 ms late, and a long wait still sleeps most of the time.
std::chrono::microseconds pauseBefore(int attempt);
// Everything paused before try `attempt`.
std::chrono::microseconds pausedBefore(int attempt);

// Makes `db` wait for locks with the pauses above, up to Limit.
void install(sqlite3 *db);

} // namespace AgentDeck::SqliteBusyWait
