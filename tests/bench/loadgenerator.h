#pragma once

#include "httpconnection.h"
#include "samples.h"

#include <QCoroTask>

#include <chrono>
#include <functional>

namespace AgentDeck::Bench {

// A closed loop: each connection sends its next request as soon as the previous one is answered.
struct LoadSpec
{
    int connections = 50;
    qint64 maxRequests = 1'000'000; // bound on requests issued, whatever the window
    std::chrono::milliseconds warmup{0};
    // Answers arriving within [warmup, warmup + window] are counted; 0 counts every answer and
    // stops after maxRequests.
    std::chrono::milliseconds window{0};
    std::chrono::milliseconds deadline{std::chrono::minutes(1)}; // hard bound on the whole run
    std::function<QByteArray(HttpConnection &connection, qint64 index)> request;
    // Optional: sees every answer (e.g. to collect created ids).
    std::function<void(qint64 index, const HttpResult &result)> onResponse;
};

struct LoadResult
{
    bool finished = false; // every connection opened and the run ended before the deadline
    qint64 counted = 0;    // 2xx answers in the window
    qint64 errors = 0;     // other answers and failed requests in the window
    double windowSeconds = 0;
    Samples latency; // of the counted answers

    double perSecond() const { return windowSeconds > 0 ? double(counted) / windowSeconds : 0; }
};

QCoro::Task<LoadResult> runLoad(Endpoint endpoint, LoadSpec spec);

} // namespace AgentDeck::Bench
