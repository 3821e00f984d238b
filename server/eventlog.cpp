#include "eventlog.h"

#include "clock.h"
#include "storage/database.h"
#include "streams/eventhub.h"

#include <QJsonDocument>

using namespace Qt::StringLiterals;

namespace AgentDeck {

EventLog::EventLog(ConversationStore &store, EventHub &hub, const Clock &clock)
    : m_store(store)
    , m_hub(hub)
    , m_clock(clock)
{}

QList<StoredEvent> EventLog::append(const QUuid &conversationId, QList<Event> events,
                                    std::optional<ExecutionStatus> status, const LeaseToken *fence,
                                    const OutcomeChange &outcome)
{
    const QList<StoredEvent> stored =
        m_store.append(conversationId, std::move(events), status, m_clock.nowMs(), fence, outcome);
    publish(conversationId, stored);
    return stored;
}

void EventLog::publish(const QUuid &conversationId, const QList<StoredEvent> &stored)
{
    for (const StoredEvent &event : stored) {
        m_hub.publish(conversationId, event.seq, event.json);
        ++m_published;
    }
}

QList<StoredEvent> EventLog::recordChange(const QUuid &conversationId, const QString &key,
                                          const QString &value, const ChangeCause &cause,
                                          const std::function<bool()> &change,
                                          const LeaseToken *fence)
{
    // The event is no activity of the conversation: what counts as that is the change's own
    // (a bring-up moves updated_at; an idle stop does not).
    const auto write = [&] {
        return m_store.append(conversationId, {Event::stateUpdate(key, value, cause.toJson())},
                              std::nullopt, m_clock.nowMs(), fence, {}, false);
    };
    QList<StoredEvent> stored;
    if (!change) {
        stored = write();
    } else {
        // The change first: its writes drop the row's cached copy, which the append then finds
        // gone, so no copy of a write that is rolled back outlives it.
        Transaction transaction(m_store.database());
        if (change())
            stored = write();
        transaction.commit();
    }
    publish(conversationId, stored);
    return stored;
}

void EventLog::publishCommandOutput(const QUuid &conversationId, const QUuid &actionId,
                                    const QString &piece)
{
    m_hub.publishCommandOutput(conversationId, actionId, piece);
}

void EventLog::endCommandOutput(const QUuid &conversationId)
{
    m_hub.endCommandOutput(conversationId);
}

void EventLog::publishTransient(const QUuid &conversationId, const QJsonObject &frame)
{
    m_hub.publishTransient(conversationId, QJsonDocument(frame).toJson(QJsonDocument::Compact));
}

QList<StoredEvent> EventLog::setStatus(const QUuid &conversationId, ExecutionStatus status,
                                       QList<Event> alongWith, const LeaseToken *fence,
                                       const OutcomeChange &outcome, const ChangeCause *cause)
{
    alongWith.append(Event::stateUpdate(u"execution_status"_s, toString(status),
                                        cause ? cause->toJson() : QJsonObject()));
    return append(conversationId, std::move(alongWith), status, fence, outcome);
}

} // namespace AgentDeck
