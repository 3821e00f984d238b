#include "eventlog.h"

#include "clock.h"
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
    for (const StoredEvent &event : stored) {
        m_hub.publish(conversationId, event.seq, event.json);
        ++m_published;
    }
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
                                       const OutcomeChange &outcome)
{
    alongWith.append(Event::stateUpdate(u"execution_status"_s, toString(status)));
    return append(conversationId, std::move(alongWith), status, fence, outcome);
}

} // namespace AgentDeck
