#pragma once

#include "httpconnection.h"
#include "samples.h"

#include <QUuid>

#include <atomic>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

namespace AgentDeck::Bench {

struct PublishPlan
{
    Endpoint endpoint;
    QUuid conversation;
    int ratePerSecond = 1000;
    std::chrono::milliseconds duration{5000};
    int connections = 16; // keep-alive connections the POSTs are spread over
};

struct PublishResult
{
    qint64 planned = 0;
    qint64 sent = 0;
    qint64 stored = 0;     // 2xx answers: events that were committed and published
    qint64 failed = 0;     // other answers or failed requests
    qint64 maxBacklog = 0; // events that were due while every connection was busy
    qint64 firstSendNs = 0;
    qint64 lastSendNs = 0;
    Samples postLatency; // HTTP round trip of the POSTs

    double achievedRate() const
    {
        return lastSendNs > firstSendNs && sent > 1
                   ? double(sent - 1) * 1e9 / double(lastSendNs - firstSendNs)
                   : 0;
    }
};

// POSTs message events at a fixed rate (open loop, on schedule) from a thread of its own that
// runs the keep-alive connections on epoll, so that neither the receivers' work nor a Qt event
// loop's cost per request delays the schedule or takes CPU from the server. Each message's text
// carries its number, the time its request was written and the time it was scheduled for:
// "bench n=<n> t=<write ns> s=<scheduled ns>" on the bench's monotonic clock.
class Publisher
{
public:
    explicit Publisher(PublishPlan plan);
    ~Publisher();

    Publisher(const Publisher &) = delete;
    Publisher &operator=(const Publisher &) = delete;

    // Connects every connection, then publishes in the thread; false (with error()) when a
    // connection cannot be made.
    bool start();
    QString error() const { return m_error; }
    // The thread ends by itself once every event was answered, or past the deadline
    // (the plan's duration and 15 s).
    bool isFinished() const { return m_finished.load(); }
    void wait();
    // Valid after wait().
    const PublishResult &result() const { return m_result; }

    static QByteArray marker() { return QByteArrayLiteral("bench n="); }

private:
    struct Connection;

    void run();
    void schedule(qint64 now);
    void dispatch();
    void readFrom(Connection &connection);
    void armTimer(qint64 atNs);
    bool done() const;

    PublishPlan m_plan;
    PublishResult m_result;
    QByteArray m_hostHeader;
    QByteArray m_target;
    QByteArray m_bodyBefore; // the message's JSON around its text
    QByteArray m_bodyAfter;
    std::vector<std::unique_ptr<Connection>> m_connections;
    std::vector<Connection *> m_idle;
    std::deque<qint64> m_backlog; // numbers of due events not yet written
    qint64 m_scheduled = 0;
    qint64 m_startNs = 0;
    qint64 m_deadlineNs = 0;
    int m_epoll = -1;
    int m_timer = -1;
    std::thread m_thread;
    std::atomic<bool> m_finished{false};
    QString m_error;
};

} // namespace AgentDeck::Bench
