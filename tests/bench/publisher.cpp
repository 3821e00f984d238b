#include "publisher.h"

#include "wiretypes.h"

#include <QJsonDocument>
#include <QTimer>

using namespace Qt::StringLiterals;

namespace AgentDeck::Bench {

Publisher::Publisher(PublishPlan plan)
    : m_plan(std::move(plan))
    , m_target("/api/conversations/" + toWireId(m_plan.conversation).toLatin1() + "/events")
{
    m_result.planned = qint64(m_plan.ratePerSecond) * m_plan.duration.count() / 1000;
    m_result.postLatency.reserve(std::size_t(m_result.planned));
}

QCoro::Task<> Publisher::start()
{
    std::vector<QCoro::Task<bool>> opening;
    for (int i = 0; i < m_plan.connections; ++i) {
        auto *connection = new HttpConnection(m_plan.endpoint, this);
        m_connections.append(connection);
        connect(connection, &HttpConnection::responded, this,
                [this, connection](const HttpResult &result) { onAnswer(connection, result); });
        opening.push_back(connection->open(std::chrono::seconds(10)));
    }
    bool all = true;
    for (auto &task : opening) {
        const bool opened = co_await std::move(task);
        all = opened && all;
    }
    m_result.connected = all;
    if (!all) {
        finish();
        co_return;
    }
    m_idle = m_connections;

    m_deadline = new QTimer(this);
    m_deadline->setSingleShot(true);
    connect(m_deadline, &QTimer::timeout, this, &Publisher::finish);
    m_deadline->start(m_plan.duration + std::chrono::seconds(15));

    m_ticker = new QTimer(this);
    m_ticker->setTimerType(Qt::PreciseTimer);
    connect(m_ticker, &QTimer::timeout, this, &Publisher::tick);
    m_startNs = nowNs();
    m_ticker->start(1);
    tick();
}

void Publisher::tick()
{
    if (m_finished)
        return;
    // Event n is due at start + n / rate.
    const qint64 elapsed = nowNs() - m_startNs;
    const qint64 due =
        std::min(m_result.planned, elapsed * m_plan.ratePerSecond / 1'000'000'000 + 1);
    while (m_scheduled < due)
        m_backlog.enqueue(m_scheduled++);
    dispatch();
    if (m_scheduled == m_result.planned) {
        m_ticker->stop();
        finishIfDone();
    }
}

void Publisher::dispatch()
{
    while (!m_backlog.isEmpty() && !m_idle.isEmpty()) {
        const qint64 n = m_backlog.dequeue();
        HttpConnection *connection = m_idle.takeLast();
        const qint64 scheduledNs = m_startNs + n * 1'000'000'000 / m_plan.ratePerSecond;
        const qint64 sentNs = nowNs();
        MessageRequest message;
        message.text = u"bench n=%1 t=%2 s=%3"_s.arg(n).arg(sentNs).arg(scheduledNs);
        message.run = false;
        const QByteArray body = QJsonDocument(message.toJson()).toJson(QJsonDocument::Compact);
        connection->send(connection->makeRequest("POST", m_target, body));
        if (m_result.sent == 0)
            m_result.firstSendNs = sentNs;
        m_result.lastSendNs = sentNs;
        ++m_result.sent;
    }
    m_result.maxBacklog = std::max<qint64>(m_result.maxBacklog, m_backlog.size());
}

void Publisher::onAnswer(HttpConnection *connection, const HttpResult &result)
{
    if (m_finished)
        return;
    if (result.status >= 200 && result.status < 300) {
        ++m_result.stored;
        m_result.postLatency.add(result.latencyNs);
    } else {
        ++m_result.failed;
    }
    if (connection->isOpen())
        m_idle.append(connection);
    dispatch();
    finishIfDone();
}

void Publisher::finishIfDone()
{
    if (m_scheduled == m_result.planned && m_backlog.isEmpty() &&
        m_result.stored + m_result.failed == m_result.sent)
        finish();
}

void Publisher::finish()
{
    if (m_finished)
        return;
    m_finished = true;
    // Everything that lives in this thread goes with it; the object itself is plain data now.
    if (m_ticker)
        m_ticker->stop();
    if (m_deadline)
        m_deadline->stop();
    for (QObject *child : children())
        child->deleteLater();
    Q_EMIT finished();
}

} // namespace AgentDeck::Bench
