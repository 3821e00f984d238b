#pragma once

#include <QByteArray>
#include <QHash>
#include <QList>
#include <QMap>
#include <QString>

#include <array>
#include <atomic>

namespace AgentDeck {

// Counters and histograms for /metrics, in Prometheus text format. Request series are keyed by
// route pattern, never by raw path, so their number stays bounded.
class Metrics
{
public:
    void recordRequest(const QString &route, const QByteArray &method, int status, double seconds);
    // The stream counters are kept by the streams' thread and read by /metrics on the main one.
    void webSocketOpened() { m_webSocketsOpen.fetch_add(1, std::memory_order_relaxed); }
    void webSocketClosed() { m_webSocketsOpen.fetch_sub(1, std::memory_order_relaxed); }
    void slowConsumerDropped() { m_slowConsumerDrops.fetch_add(1, std::memory_order_relaxed); }
    qint64 openWebSockets() const { return m_webSocketsOpen.load(std::memory_order_relaxed); }
    qint64 slowConsumerDrops() const { return m_slowConsumerDrops.load(std::memory_order_relaxed); }
    // Bytes accepted for WebSocket clients and not yet handed to the kernel (SendBudget).
    std::atomic<qint64> &webSocketUnsentBytes() { return m_webSocketUnsent; }
    // What the HTTP listener does before a request reaches a route (main thread): requests it
    // answers itself (413, 431, 400, 408) and connections it closes ("idle", "not_reading",
    // "evicted").
    void httpRefused(int status) { ++m_httpRefused[status]; }
    void httpConnectionClosed(const QByteArray &reason) { ++m_httpClosed[reason]; }

    QByteArray render(const QList<QPair<QString, qint64>> &conversationsByStatus,
                      qint64 eventsPublished, qint64 liveRuns) const;

private:
    static constexpr std::array<double, 11> Buckets{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                    0.05,   0.1,   0.25,   0.5,   1.0};
    // Keyed by route and method as they are: every request counts, and building a string key
    // for each took more than the route's handler of a GET by id.
    struct Series
    {
        QString route;
        QByteArray method;
        friend bool operator==(const Series &, const Series &) = default;
        friend size_t qHash(const Series &series, size_t seed = 0)
        {
            return qHashMulti(seed, series.route, series.method);
        }
    };
    struct Stats
    {
        QMap<int, qint64> requestsByStatus;
        std::array<qint64, Buckets.size()> buckets{};
        qint64 count = 0;
        double sum = 0;
    };
    QHash<Series, Stats> m_series;
    QHash<int, qint64> m_httpRefused;
    QHash<QByteArray, qint64> m_httpClosed;
    std::atomic<qint64> m_webSocketsOpen = 0;
    std::atomic<qint64> m_slowConsumerDrops = 0;
    std::atomic<qint64> m_webSocketUnsent = 0;
};

} // namespace AgentDeck
