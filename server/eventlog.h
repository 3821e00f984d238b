#pragma once

#include "storage/conversationstore.h"

namespace AgentDeck {

class Clock;
class EventHub;

// The one way events are written: one transaction in the store, then a non-blocking fan-out to
// the live subscribers. Nothing awaits between the commit and the fan-out, so a stream that
// switched from replay to live cannot miss an event.
class EventLog
{
public:
    EventLog(ConversationStore &store, EventHub &hub, const Clock &clock);

    // `fence`: the lease token of the run writing; the write fails with LeaseLostError when
    // another owner holds the conversation now. `outcome` is written in the same transaction.
    QList<StoredEvent> append(const QUuid &conversationId, QList<Event> events,
                              std::optional<ExecutionStatus> status = std::nullopt,
                              const LeaseToken *fence = nullptr, const OutcomeChange &outcome = {});
    // A status change, recorded with a ConversationStateUpdateEvent so that streams see it.
    QList<StoredEvent> setStatus(const QUuid &conversationId, ExecutionStatus status,
                                 QList<Event> alongWith = {}, const LeaseToken *fence = nullptr,
                                 const OutcomeChange &outcome = {});

    // Sends a frame to the live subscribers without storing it (no seq): streamed deltas.
    void publishTransient(const QUuid &conversationId, const QJsonObject &frame);
    // What the command of the running action `actionId` printed next, and its end
    // (EventHub::publishCommandOutput()).
    void publishCommandOutput(const QUuid &conversationId, const QUuid &actionId,
                              const QString &piece);
    void endCommandOutput(const QUuid &conversationId);

    qint64 publishedCount() const { return m_published; }

private:
    ConversationStore &m_store;
    EventHub &m_hub;
    const Clock &m_clock;
    qint64 m_published = 0;
};

} // namespace AgentDeck
