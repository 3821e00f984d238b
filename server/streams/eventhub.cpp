#include "eventhub.h"

#include "websocketconnection.h"

namespace AgentDeck {

void EventHub::subscribe(const QUuid &conversationId, EventSubscriber *subscriber)
{
    m_subscribers[conversationId].append(subscriber);
}

void EventHub::unsubscribe(const QUuid &conversationId, EventSubscriber *subscriber)
{
    auto it = m_subscribers.find(conversationId);
    if (it == m_subscribers.end())
        return;
    it->removeOne(subscriber);
    if (it->isEmpty())
        m_subscribers.erase(it);
}

void EventHub::publish(const QUuid &conversationId, qint64 seq, const QByteArray &json)
{
    const auto it = m_subscribers.constFind(conversationId);
    if (it == m_subscribers.cend())
        return;
    // A copy: a subscriber may unsubscribe itself (slow consumer) while we iterate.
    const QList<EventSubscriber *> subscribers = *it;
    const QByteArray frame = WebSocketConnection::textFrame(json);
    for (EventSubscriber *subscriber : subscribers)
        subscriber->deliver(seq, frame);
}

qsizetype EventHub::subscriberCount(const QUuid &conversationId) const
{
    return m_subscribers.value(conversationId).size();
}

} // namespace AgentDeck
