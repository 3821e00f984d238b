#include "metrics.h"

#include <QStringList>

#include <algorithm>
#include <tuple>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {
QByteArray labelValue(const QString &value)
{
    QByteArray escaped = value.toUtf8();
    escaped.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
    return escaped;
}
} // namespace

void Metrics::recordRequest(const QString &route, const QByteArray &method, int status,
                            double seconds)
{
    Stats &stats = m_series[Series{route, method}];
    ++stats.requestsByStatus[status];
    ++stats.count;
    stats.sum += seconds;
    for (std::size_t i = 0; i < Buckets.size(); ++i) {
        if (seconds <= Buckets[i])
            ++stats.buckets[i];
    }
}

QByteArray Metrics::render(const QList<QPair<QString, qint64>> &conversationsByStatus,
                           qint64 eventsPublished, qint64 liveRuns) const
{
    QList<Series> series = m_series.keys();
    std::sort(series.begin(), series.end(), [](const Series &a, const Series &b) {
        return std::tie(a.route, a.method) < std::tie(b.route, b.method);
    });
    const auto labelsOf = [](const Series &one) -> QByteArray {
        return "route=\"" + labelValue(one.route) + "\",method=\"" +
               labelValue(QString::fromLatin1(one.method)) + '"';
    };

    QByteArray out;
    out += "# HELP agentdeck_http_requests_total HTTP requests by route, method and status.\n"
           "# TYPE agentdeck_http_requests_total counter\n";
    for (const Series &one : std::as_const(series)) {
        const QByteArray labels = labelsOf(one);
        const Stats &stats = *m_series.constFind(one);
        for (auto it = stats.requestsByStatus.cbegin(); it != stats.requestsByStatus.cend(); ++it)
            out += "agentdeck_http_requests_total{" + labels + ",status=\"" +
                   QByteArray::number(it.key()) + "\"} " + QByteArray::number(it.value()) + '\n';
    }

    out += "# HELP agentdeck_http_request_duration_seconds HTTP request latency by route.\n"
           "# TYPE agentdeck_http_request_duration_seconds histogram\n";
    for (const Series &one : std::as_const(series)) {
        const QByteArray labels = labelsOf(one);
        const Stats &stats = *m_series.constFind(one);
        for (std::size_t i = 0; i < Buckets.size(); ++i)
            out += "agentdeck_http_request_duration_seconds_bucket{" + labels + ",le=\"" +
                   QByteArray::number(Buckets[i]) + "\"} " + QByteArray::number(stats.buckets[i]) +
                   '\n';
        out += "agentdeck_http_request_duration_seconds_bucket{" + labels + ",le=\"+Inf\"} " +
               QByteArray::number(stats.count) + '\n';
        out += "agentdeck_http_request_duration_seconds_sum{" + labels + "} " +
               QByteArray::number(stats.sum, 'g', 9) + '\n';
        out += "agentdeck_http_request_duration_seconds_count{" + labels + "} " +
               QByteArray::number(stats.count) + '\n';
    }

    out += "# HELP agentdeck_conversations Conversations in the catalog by execution status.\n"
           "# TYPE agentdeck_conversations gauge\n";
    for (const auto &[status, count] : conversationsByStatus)
        out += "agentdeck_conversations{execution_status=\"" + labelValue(status) + "\"} " +
               QByteArray::number(count) + '\n';

    out += "# HELP agentdeck_live_runs Runs with a live executor in this process.\n"
           "# TYPE agentdeck_live_runs gauge\n"
           "agentdeck_live_runs " +
           QByteArray::number(liveRuns) + '\n';
    out += "# HELP agentdeck_events_published_total Events committed and fanned out.\n"
           "# TYPE agentdeck_events_published_total counter\n"
           "agentdeck_events_published_total " +
           QByteArray::number(eventsPublished) + '\n';
    out += "# HELP agentdeck_websocket_connections Open WebSocket event streams.\n"
           "# TYPE agentdeck_websocket_connections gauge\n"
           "agentdeck_websocket_connections " +
           QByteArray::number(openWebSockets()) + '\n';
    out += "# HELP agentdeck_websocket_slow_consumer_drops_total Streams closed with 1013 "
           "because their client did not keep up.\n"
           "# TYPE agentdeck_websocket_slow_consumer_drops_total counter\n"
           "agentdeck_websocket_slow_consumer_drops_total " +
           QByteArray::number(slowConsumerDrops()) + '\n';
    out += "# HELP agentdeck_websocket_unsent_bytes Bytes accepted for WebSocket clients and not "
           "yet handed to the kernel, a frame shared by several counted once.\n"
           "# TYPE agentdeck_websocket_unsent_bytes gauge\n"
           "agentdeck_websocket_unsent_bytes " +
           QByteArray::number(m_webSocketUnsent.load(std::memory_order_relaxed)) + '\n';
    out += "# HELP agentdeck_http_refused_total Requests answered before routing: 400, 408, 413 "
           "or 431.\n"
           "# TYPE agentdeck_http_refused_total counter\n";
    for (auto it = m_httpRefused.cbegin(); it != m_httpRefused.cend(); ++it)
        out += "agentdeck_http_refused_total{status=\"" + QByteArray::number(it.key()) + "\"} " +
               QByteArray::number(it.value()) + '\n';
    out += "# HELP agentdeck_http_connections_closed_total HTTP connections the server closed: "
           "idle, not reading their answers, or evicted near the descriptor limit while waiting "
           "for a request head.\n"
           "# TYPE agentdeck_http_connections_closed_total counter\n";
    for (auto it = m_httpClosed.cbegin(); it != m_httpClosed.cend(); ++it)
        out += "agentdeck_http_connections_closed_total{reason=\"" + it.key() + "\"} " +
               QByteArray::number(it.value()) + '\n';
    return out;
}

} // namespace AgentDeck
