#include "sendbudget.h"

#include "logging.h"
#include "websocketconnection.h"

namespace AgentDeck {

SendBudget::SendBudget(qint64 limitBytes, std::atomic<qint64> *unsentGauge)
    : m_limit(limitBytes)
    , m_gauge(unsentGauge)
{}

SendBudget::~SendBudget()
{
    // Connections that outlive the budget count nothing more.
    const QSet<WebSocketConnection *> connections = m_connections;
    for (WebSocketConnection *connection : connections)
        connection->leaveSendBudget();
    if (m_gauge)
        m_gauge->store(0, std::memory_order_relaxed);
}

qint64 SendBudget::costOf(const QByteArray &frame) const
{
    return m_held.contains(frame.constData()) ? 0 : frame.size();
}

bool SendBudget::fits(const QByteArray &frame) const
{
    const qint64 cost = costOf(frame);
    return cost == 0 || unsent() + cost <= m_limit || unsent() == 0;
}

bool SendBudget::makeRoom(const QByteArray &frame, const WebSocketConnection *sender)
{
    while (!fits(frame)) {
        // The one whose oldest unsent frame is the oldest: it is the furthest behind. (A
        // connection closing already holds at most the rest of a frame it began, and its close
        // frame: there is nothing to take from it.)
        WebSocketConnection *slowest = nullptr;
        quint64 oldest = 0;
        for (WebSocketConnection *connection : std::as_const(m_connections)) {
            const QByteArray *front = connection->oldestDroppable();
            if (!front)
                continue;
            const quint64 age = ageOf(*front);
            if (!slowest || age < oldest) {
                slowest = connection;
                oldest = age;
            }
        }
        if (!slowest)
            return true;
        qCInfo(lcStreams) << "over the server's budget of unsent WebSocket bytes" << m_limit
                          << "with" << unsent() << "unsent: dropping the slowest consumer";
        slowest->dropAsSlowConsumer();
        if (slowest == sender)
            return false;
    }
    return true;
}

void SendBudget::join(WebSocketConnection *connection)
{
    m_connections.insert(connection);
}

void SendBudget::leave(WebSocketConnection *connection)
{
    m_connections.remove(connection);
}

void SendBudget::hold(const QByteArray &frame)
{
    Held &held = m_held[frame.constData()];
    if (held.holders++ == 0) {
        held.bytes = frame.size();
        held.age = m_nextAge++;
        m_sharedBytes += held.bytes;
        changed();
    }
}

void SendBudget::release(const QByteArray &frame)
{
    const auto it = m_held.find(frame.constData());
    if (it == m_held.end())
        return;
    if (--it->holders == 0) {
        m_sharedBytes -= it->bytes;
        m_held.erase(it);
        changed();
    }
}

void SendBudget::addOwn(qint64 delta)
{
    if (delta == 0)
        return;
    m_ownBytes += delta;
    changed();
}

quint64 SendBudget::ageOf(const QByteArray &frame) const
{
    const auto it = m_held.constFind(frame.constData());
    return it == m_held.cend() ? 0 : it->age;
}

void SendBudget::changed()
{
    m_peak = std::max(m_peak, unsent());
    if (m_gauge)
        m_gauge->store(unsent(), std::memory_order_relaxed);
}

} // namespace AgentDeck
