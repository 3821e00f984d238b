#pragma once

#include <QByteArray>
#include <QHash>
#include <QList>
#include <QMutex>
#include <QObject>
#include <QString>
#include <QUuid>

#include <optional>

namespace AgentDeck {

class EventSubscriber
{
public:
    virtual ~EventSubscriber() = default;
    // Called in the hub's thread after the event's transaction committed, in the order of the
    // commits. Must not block. `frame` is the event's JSON as a complete WebSocket text frame,
    // built once and shared by every subscriber.
    virtual void deliver(qint64 seq, const QByteArray &frame) = 0;
    // A transient frame (a streamed text delta), also a complete text frame: not stored, no
    // seq. Live subscribers only; one that cannot take it now may drop it.
    virtual void deliverTransient(const QByteArray &) {}
    // Around the deliveries of one burst (every event queued when the hub's thread woke): what
    // is delivered in between may go to the client in one write at endBurst().
    virtual void beginBurst() {}
    virtual void endBurst() {}
};

// Fans committed events out to the subscribers of their conversation. Subscribers live in the
// hub's thread (the streams' thread); events are published from any thread. publish() only
// queues: the hub's thread builds each frame once and writes it to the subscribers, so a
// commit never waits for sockets.
//
// Nothing is lost between a commit and a subscription: a subscriber subscribes first and reads
// the store afterwards, in the hub's thread with no event processed in between. An event
// committed before that read is in it (and its queued copy is dropped as already seen); one
// committed after it is queued behind the subscription.
class EventHub : public QObject
{
    Q_OBJECT
public:
    explicit EventHub(QObject *parent = nullptr);

    // The hub's thread only.
    void subscribe(const QUuid &conversationId, EventSubscriber *subscriber);
    void unsubscribe(const QUuid &conversationId, EventSubscriber *subscriber);

    // Any thread.
    void publish(const QUuid &conversationId, qint64 seq, const QByteArray &json);
    void publishTransient(const QUuid &conversationId, const QByteArray &json);
    // What the command of a conversation's running action prints, published as transient
    // CommandOutput frames ({"action_id", "offset", "text"}; `offset` counts the characters of
    // its output before the piece) and kept (the last CommandOutputKept characters) until
    // endCommandOutput(): a subscriber that goes live while the command runs is sent that first
    // (commandOutputSoFar()), and the offsets tell a client what a piece repeats of it.
    void publishCommandOutput(const QUuid &conversationId, const QUuid &actionId,
                              const QString &piece);
    void endCommandOutput(const QUuid &conversationId);
    // The frame of what the running command printed so far, as a complete text frame.
    std::optional<QByteArray> commandOutputSoFar(const QUuid &conversationId) const;
    static constexpr qsizetype CommandOutputKept = 64 * 1024;
    qsizetype subscriberCount(const QUuid &conversationId) const;
    QList<QUuid> subscribedConversations() const;

private:
    struct Published
    {
        QUuid conversationId;
        qint64 seq; // 0: transient
        QByteArray json;
    };
    // Bytes of events delivered in one burst, at least one event.
    static constexpr qint64 MaxBurstBytes = 4 * 1024 * 1024;
    void enqueue(Published event);
    void deliverQueued();

    struct CommandOutput
    {
        QUuid actionId;
        qint64 total = 0; // characters printed
        QString kept;     // the last of them
    };
    static QByteArray commandOutputJson(const QUuid &conversationId, const QUuid &actionId,
                                        qint64 offset, const QString &text);

    mutable QMutex m_mutex; // guards the members below
    QHash<QUuid, QList<EventSubscriber *>> m_subscribers;
    QList<Published> m_queue;
    QHash<QUuid, CommandOutput> m_commandOutput;
};

} // namespace AgentDeck
