#include "sqlitebusywait.h"

#include <sqlite3.h>

#include <algorithm>
#include <thread>

namespace AgentDeck::SqliteBusyWait {

namespace {
constexpr std::chrono::microseconds FirstPause{50};
constexpr std::chrono::microseconds LongestPause{1000};
// Doublings from the first pause to the longest: 50, 100, 200, 400, 800 µs.
constexpr int RampSteps = 5;

int onBusy(void *, int attempt)
{
    if (pausedBefore(attempt) >= Limit)
        return 0; // give up: the statement fails with SQLITE_BUSY
    std::this_thread::sleep_for(pauseBefore(attempt));
    return 1;
}
} // namespace

std::chrono::microseconds pauseBefore(int attempt)
{
    return attempt < RampSteps ? FirstPause * (1 << attempt) : LongestPause;
}

std::chrono::microseconds pausedBefore(int attempt)
{
    const int ramp = std::min(attempt, RampSteps);
    return FirstPause * ((1 << ramp) - 1) + LongestPause * (attempt - ramp);
}

void install(sqlite3 *db)
{
    sqlite3_busy_handler(db, onBusy, nullptr);
}

} // namespace AgentDeck::SqliteBusyWait
