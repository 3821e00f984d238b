#pragma once

#include "httpconnection.h"

#include <QByteArray>
#include <QString>

#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace AgentDeck::Bench {

struct ReferencePlan
{
    int ratePerSecond = 1000;
    std::chrono::milliseconds duration{5000};
    qsizetype payloadBytes = 400; // as large as the server's event frames
};

// The reference for figure 2: the same fan-out with no server in it. A scheduler thread stands
// for the request that commits an event: at each event's time it hands the event to a fan-out
// thread through an eventfd, as the server's main thread hands a commit to its streams thread;
// the fan-out thread writes one unmasked text frame to every subscriber with send(). Frames
// carry the publisher's "bench n=<n> t=<ns> s=<ns>" text, so the same subscribers and collector
// measure both. What the server adds on top of this (HTTP, SQLite, JSON, Qt) is the difference.
class FanoutReference
{
public:
    explicit FanoutReference(ReferencePlan plan);
    ~FanoutReference();

    FanoutReference(const FanoutReference &) = delete;
    FanoutReference &operator=(const FanoutReference &) = delete;

    // A listening socket on 127.0.0.1, port chosen by the system.
    bool listen(QString *error);
    Endpoint endpoint() const { return m_endpoint; }
    // Accepts `count` clients and answers each upgrade request with 101 (blocking).
    bool acceptSubscribers(int count, QString *error);

    // Publishes on schedule from the two threads; they end by themselves after the last event.
    void start();
    bool isFinished() const { return m_finished.load(); }
    void wait();
    qint64 published() const { return m_published; }

private:
    struct Due
    {
        qint64 n;
        qint64 sentNs;
        qint64 scheduledNs;
    };

    void schedule();
    void fanOut();
    QByteArray frameFor(const Due &event) const;

    ReferencePlan m_plan;
    Endpoint m_endpoint;
    int m_listener = -1;
    int m_wakeUp = -1; // eventfd: scheduler -> fan-out
    std::vector<int> m_sockets;
    std::mutex m_mutex;
    std::deque<Due> m_queue; // guarded by m_mutex
    bool m_lastQueued = false;
    std::thread m_scheduler;
    std::thread m_fanOut;
    qint64 m_published = 0;
    std::atomic<bool> m_finished{false};
};

} // namespace AgentDeck::Bench
