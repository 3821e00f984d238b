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

template<typename Deliver>
void EventHub::fanOut(const QUuid &conversationId, const QByteArray &json, Deliver deliver) const
{
    const auto it = m_subscribers.constFind(conversationId);
    if (it == m_subscribers.cend())
        return;
    // A copy: a subscriber may unsubscribe itself (slow consumer) while we iterate.
    const QList<EventSubscriber *> subscribers = *it;
    const QByteArray frame = WebSocketConnection::textFrame(json);
    for (EventSubscriber *subscriber : subscribers)
        deliver(subscriber, frame);
}

void EventHub::publish(const QUuid &conversationId, qint64 seq, const QByteArray &json)
{
    fanOut(conversationId, json, [seq](EventSubscriber *subscriber, const QByteArray &frame) {
        subscriber->deliver(seq, frame);
    });
}

void EventHub::publishTransient(const QUuid &conversationId, const QByteArray &json)
{
    fanOut(conversationId, json, [](EventSubscriber *subscriber, const QByteArray &frame) {
        subscriber->deliverTransient(frame);
    });
}

qsizetype EventHub::subscriberCount(const QUuid &conversationId) const
{
    return m_subscribers.value(conversationId).size();
}

} // namespace AgentDeck
