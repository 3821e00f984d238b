#include "loadgenerator.h"

#include <QCoroSignal>

#include <memory>

namespace AgentDeck::Bench {

namespace {

class LoadRun : public QObject
{
    Q_OBJECT
public:
    LoadRun(Endpoint endpoint, LoadSpec spec)
        : m_endpoint(std::move(endpoint))
        , m_spec(std::move(spec))
    {}

    QCoro::Task<bool> open()
    {
        std::vector<QCoro::Task<bool>> opening;
        for (int i = 0; i < m_spec.connections; ++i) {
            auto *connection = new HttpConnection(m_endpoint, this);
            m_connections.append(connection);
            opening.push_back(connection->open(std::chrono::seconds(10)));
        }
        bool all = true;
        for (auto &task : opening) {
            const bool opened = co_await std::move(task);
            all = opened && all;
        }
        co_return all;
    }

    void start()
    {
        m_startNs = nowNs();
        m_windowStartNs = m_startNs + std::chrono::nanoseconds(m_spec.warmup).count();
        m_windowEndNs = m_spec.window.count() > 0
                            ? m_windowStartNs + std::chrono::nanoseconds(m_spec.window).count()
                            : std::numeric_limits<qint64>::max();
        m_result.latency.reserve(std::size_t(std::min<qint64>(m_spec.maxRequests, 4'000'000)));
        for (HttpConnection *connection : std::as_const(m_connections)) {
            connect(connection, &HttpConnection::responded, this,
                    [this, connection](const HttpResult &result) { onAnswer(connection, result); });
            ++m_active;
            issue(connection);
        }
    }

    LoadResult result()
    {
        if (m_spec.window.count() > 0)
            m_result.windowSeconds = double(m_spec.window.count()) / 1000.0;
        else
            m_result.windowSeconds = double(m_lastAnswerNs - m_windowStartNs) / 1e9;
        return std::move(m_result);
    }

Q_SIGNALS:
    void done();

private:
    void issue(HttpConnection *connection)
    {
        const bool more = m_issued < m_spec.maxRequests && nowNs() < m_windowEndNs;
        if (!more) {
            if (--m_active == 0)
                Q_EMIT done();
            return;
        }
        const qint64 index = m_issued++;
        m_indexOf[connection] = index;
        connection->send(m_spec.request(*connection, index));
    }

    void onAnswer(HttpConnection *connection, const HttpResult &result)
    {
        const qint64 now = nowNs();
        if (now >= m_windowStartNs && now <= m_windowEndNs) {
            m_lastAnswerNs = now;
            if (result.status >= 200 && result.status < 300) {
                ++m_result.counted;
                m_result.latency.add(result.latencyNs);
            } else {
                ++m_result.errors;
            }
        }
        if (m_spec.onResponse)
            m_spec.onResponse(m_indexOf.value(connection), result);
        if (result.status == 0) {
            // The connection is closed; carry on with the others.
            if (--m_active == 0)
                Q_EMIT done();
            return;
        }
        issue(connection);
    }

    Endpoint m_endpoint;
    LoadSpec m_spec;
    QList<HttpConnection *> m_connections;
    QHash<HttpConnection *, qint64> m_indexOf;
    qint64 m_issued = 0;
    int m_active = 0;
    qint64 m_startNs = 0;
    qint64 m_windowStartNs = 0;
    qint64 m_windowEndNs = 0;
    qint64 m_lastAnswerNs = 0;
    LoadResult m_result;
};

} // namespace

QCoro::Task<LoadResult> runLoad(Endpoint endpoint, LoadSpec spec)
{
    const auto deadline = spec.deadline;
    auto run = std::make_unique<LoadRun>(std::move(endpoint), std::move(spec));
    auto opening = run->open();
    const bool opened = co_await std::move(opening);
    if (!opened)
        co_return LoadResult{};
    auto finishing = qCoro(run.get(), &LoadRun::done, deadline);
    run->start();
    const auto finished = co_await std::move(finishing);
    LoadResult result = run->result();
    result.finished = finished.has_value();
    co_return result;
}

} // namespace AgentDeck::Bench

#include "loadgenerator.moc"
