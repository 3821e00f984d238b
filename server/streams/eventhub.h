#pragma once

#include <QByteArray>
#include <QHash>
#include <QList>
#include <QUuid>

namespace AgentDeck {

class EventSubscriber
{
public:
    virtual ~EventSubscriber() = default;
    // Called right after the event's transaction committed. Must not block or re-enter the hub.
    // `frame` is the event's JSON as a complete WebSocket text frame, built once and shared by
    // every subscriber.
    virtual void deliver(qint64 seq, const QByteArray &frame) = 0;
    // A transient frame (a streamed text delta), also a complete text frame: not stored, no
    // seq. Live subscribers only; one that cannot take it now may drop it.
    virtual void deliverTransient(const QByteArray &) {}
};

// Fans committed events out to the subscribers of their conversation.
class EventHub
{
public:
    void subscribe(const QUuid &conversationId, EventSubscriber *subscriber);
    void unsubscribe(const QUuid &conversationId, EventSubscriber *subscriber);
    void publish(const QUuid &conversationId, qint64 seq, const QByteArray &json);
    void publishTransient(const QUuid &conversationId, const QByteArray &json);
    qsizetype subscriberCount(const QUuid &conversationId) const;
    QList<QUuid> subscribedConversations() const { return m_subscribers.keys(); }

private:
    template<typename Deliver>
    void fanOut(const QUuid &conversationId, const QByteArray &json, Deliver deliver) const;

    QHash<QUuid, QList<EventSubscriber *>> m_subscribers;
};

} // namespace AgentDeck
