#include "eventhub.h"

#include "websocketconnection.h"
#include "wiretypes.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QSet>

using namespace Qt::StringLiterals;

namespace AgentDeck {

EventHub::EventHub(QObject *parent)
    : QObject(parent)
{}

void EventHub::subscribe(const QUuid &conversationId, EventSubscriber *subscriber)
{
    const QMutexLocker lock(&m_mutex);
    m_subscribers[conversationId].append(subscriber);
}

void EventHub::unsubscribe(const QUuid &conversationId, EventSubscriber *subscriber)
{
    const QMutexLocker lock(&m_mutex);
    auto it = m_subscribers.find(conversationId);
    if (it == m_subscribers.end())
        return;
    it->removeOne(subscriber);
    if (it->isEmpty())
        m_subscribers.erase(it);
}

void EventHub::publish(const QUuid &conversationId, qint64 seq, const QByteArray &json)
{
    enqueue({conversationId, seq, json});
}

void EventHub::publishTransient(const QUuid &conversationId, const QByteArray &json)
{
    enqueue({conversationId, 0, json});
}

QByteArray EventHub::commandOutputJson(const QUuid &conversationId, const QUuid &actionId,
                                       qint64 offset, const QString &text)
{
    return QJsonDocument(QJsonObject{{u"type"_s, u"transient"_s},
                                     {u"kind"_s, u"CommandOutput"_s},
                                     {u"conversation_id"_s, toWireId(conversationId)},
                                     {u"action_id"_s, toWireId(actionId)},
                                     {u"offset"_s, offset},
                                     {u"text"_s, text}})
        .toJson(QJsonDocument::Compact);
}

void EventHub::publishCommandOutput(const QUuid &conversationId, const QUuid &actionId,
                                    const QString &piece)
{
    qint64 offset = 0;
    {
        const QMutexLocker lock(&m_mutex);
        CommandOutput &output = m_commandOutput[conversationId];
        if (output.actionId != actionId)
            output = {actionId, 0, {}};
        offset = output.total;
        output.total += piece.size();
        output.kept += piece;
        if (output.kept.size() > CommandOutputKept)
            output.kept.remove(0, output.kept.size() - CommandOutputKept);
    }
    enqueue({conversationId, 0, commandOutputJson(conversationId, actionId, offset, piece)});
}

void EventHub::endCommandOutput(const QUuid &conversationId)
{
    const QMutexLocker lock(&m_mutex);
    m_commandOutput.remove(conversationId);
}

std::optional<QByteArray> EventHub::commandOutputSoFar(const QUuid &conversationId) const
{
    const QMutexLocker lock(&m_mutex);
    const auto it = m_commandOutput.constFind(conversationId);
    if (it == m_commandOutput.cend() || it->kept.isEmpty())
        return std::nullopt;
    return WebSocketConnection::textFrame(
        commandOutputJson(conversationId, it->actionId, it->total - it->kept.size(), it->kept));
}

void EventHub::enqueue(Published event)
{
    bool first = false;
    {
        const QMutexLocker lock(&m_mutex);
        // Nobody to tell: whoever subscribes later reads the store after subscribing.
        if (!m_subscribers.contains(event.conversationId))
            return;
        first = m_queue.isEmpty();
        m_queue.append(std::move(event));
    }
    // One wake-up for a burst: the hub's thread takes everything queued until it runs.
    if (first)
        QMetaObject::invokeMethod(this, &EventHub::deliverQueued, Qt::QueuedConnection);
}

void EventHub::deliverQueued()
{
    QList<Published> queue;
    {
        const QMutexLocker lock(&m_mutex);
        // A burst is bounded: the sockets' writes wait for the loop to come round, and a burst
        // of 16 events of 1 MB made every subscriber a slow consumer, readers that kept up
        // included (while the fan-out to 300 that did not read let events pile up).
        qsizetype count = 0;
        qint64 bytes = 0;
        while (count < m_queue.size() && (count == 0 || bytes < MaxBurstBytes))
            bytes += m_queue.at(count++).json.size();
        if (count == m_queue.size()) {
            queue.swap(m_queue);
        } else {
            queue = m_queue.first(count);
            m_queue.remove(0, count);
            QMetaObject::invokeMethod(this, &EventHub::deliverQueued, Qt::QueuedConnection);
        }
    }
    // A conversation's subscribers begin the burst before its first event in it and end it
    // after the last: each socket gets the burst's frames in one write.
    QSet<QUuid> begun;
    QList<EventSubscriber *> inBurst;
    for (const Published &event : queue) {
        QList<EventSubscriber *> subscribers;
        {
            // A copy: a subscriber may unsubscribe itself (a slow consumer) while it is told.
            const QMutexLocker lock(&m_mutex);
            subscribers = m_subscribers.value(event.conversationId);
        }
        if (subscribers.isEmpty())
            continue;
        if (!begun.contains(event.conversationId)) {
            begun.insert(event.conversationId);
            for (EventSubscriber *subscriber : std::as_const(subscribers))
                subscriber->beginBurst();
            inBurst.append(subscribers);
        }
        const QByteArray frame = WebSocketConnection::textFrame(event.json);
        for (EventSubscriber *subscriber : std::as_const(subscribers)) {
            if (event.seq > 0)
                subscriber->deliver(event.seq, frame);
            else
                subscriber->deliverTransient(frame);
        }
    }
    for (EventSubscriber *subscriber : std::as_const(inBurst))
        subscriber->endBurst();
}

qsizetype EventHub::subscriberCount(const QUuid &conversationId) const
{
    const QMutexLocker lock(&m_mutex);
    return m_subscribers.value(conversationId).size();
}

QList<QUuid> EventHub::subscribedConversations() const
{
    const QMutexLocker lock(&m_mutex);
    return m_subscribers.keys();
}

} // namespace AgentDeck
