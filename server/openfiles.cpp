#include "openfiles.h"

#include <atomic>
#include <limits>
#include <sys/resource.h>

namespace AgentDeck::OpenFiles {

namespace {
std::atomic<qint64> startedWith{-1};

qint64 asLimit(rlim_t value)
{
    return value == RLIM_INFINITY ? std::numeric_limits<int>::max() : qint64(value);
}
} // namespace

qint64 raiseLimit()
{
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0)
        return 1024;
    qint64 expected = -1;
    startedWith.compare_exchange_strong(expected, asLimit(limit.rlim_cur));
    if (limit.rlim_cur < limit.rlim_max) {
        const rlim_t before = limit.rlim_cur;
        limit.rlim_cur = limit.rlim_max;
        if (::setrlimit(RLIMIT_NOFILE, &limit) != 0)
            limit.rlim_cur = before;
    }
    return asLimit(limit.rlim_cur);
}

qint64 startingLimit()
{
    if (const qint64 known = startedWith.load(); known >= 0)
        return known;
    rlimit limit{};
    return ::getrlimit(RLIMIT_NOFILE, &limit) == 0 ? asLimit(limit.rlim_cur) : 1024;
}

void setLimit(qint64 wanted)
{
    rlimit limit{};
    if (wanted <= 0 || ::getrlimit(RLIMIT_NOFILE, &limit) != 0)
        return;
    limit.rlim_cur = limit.rlim_max == RLIM_INFINITY || rlim_t(wanted) < limit.rlim_max
                         ? rlim_t(wanted)
                         : limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
}

} // namespace AgentDeck::OpenFiles
