#pragma once

#include "httpconnection.h"

#include <QCoroTask>
#include <QList>

#include <chrono>

namespace AgentDeck::Bench {

// wrk (Debian's `wrk`) as the load of the throughput figures: `threads` threads of epoll clients
// in C, which keep a server of one core busy where the bench's own load generator (one Qt
// thread) does not. The connections ask the targets in turn, for `duration` (whole seconds).
struct WrkResult
{
    bool ran = false;
    double perSecond = 0;
    qint64 errors = 0; // socket errors, timeouts and answers other than 2xx or 3xx
    QString problem;
};

// The wrk binary, or empty when it is not installed.
QString wrkBinary();

QCoro::Task<WrkResult> runWrk(Endpoint endpoint, QList<QByteArray> targets, int threads,
                              int connections, std::chrono::milliseconds duration);

} // namespace AgentDeck::Bench
