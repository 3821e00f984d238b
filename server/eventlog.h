#pragma once

#include "http/actor.h"
#include "storage/conversationstore.h"

#include <functional>

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
    // A status change, recorded with a ConversationStateUpdateEvent so that streams see it;
    // with `cause`, the event names who made the change and why.
    QList<StoredEvent> setStatus(const QUuid &conversationId, ExecutionStatus status,
                                 QList<Event> alongWith = {}, const LeaseToken *fence = nullptr,
                                 const OutcomeChange &outcome = {},
                                 const ChangeCause *cause = nullptr);
    // A change made to the conversation or its runtime, and the state event {key, value} naming
    // who made it and why, committed together: `change` (its writes to the store) runs first in
    // the event's transaction; when it returns false (there was nothing to change) no event is
    // written. Without `change`, the event alone (the change was to no row: a sandbox stopped).
    QList<StoredEvent> recordChange(const QUuid &conversationId, const QString &key,
                                    const QString &value, const ChangeCause &cause,
                                    const std::function<bool()> &change = {},
                                    const LeaseToken *fence = nullptr);

    // Sends a frame to the live subscribers without storing it (no seq): streamed deltas.
    void publishTransient(const QUuid &conversationId, const QJsonObject &frame);
    // What the command of the running action `actionId` printed next, and its end
    // (EventHub::publishCommandOutput()).
    void publishCommandOutput(const QUuid &conversationId, const QUuid &actionId,
                              const QString &piece);
    void endCommandOutput(const QUuid &conversationId);

    qint64 publishedCount() const { return m_published; }

private:
    void publish(const QUuid &conversationId, const QList<StoredEvent> &stored);

    ConversationStore &m_store;
    EventHub &m_hub;
    const Clock &m_clock;
    qint64 m_published = 0;
};

} // namespace AgentDeck
