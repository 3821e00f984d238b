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
};

// Fans committed events out to the subscribers of their conversation.
class EventHub
{
public:
    void subscribe(const QUuid &conversationId, EventSubscriber *subscriber);
    void unsubscribe(const QUuid &conversationId, EventSubscriber *subscriber);
    void publish(const QUuid &conversationId, qint64 seq, const QByteArray &json);
    qsizetype subscriberCount(const QUuid &conversationId) const;

private:
    QHash<QUuid, QList<EventSubscriber *>> m_subscribers;
};

} // namespace AgentDeck
