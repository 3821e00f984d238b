#pragma once

#include "eventhub.h"
#include "eventstreams.h"
#include "streamsession.h"

#include <QCoroTask>
#include <QObject>
#include <QUuid>

#include <memory>

namespace AgentDeck {

class WebSocketConnection;

// One client following one conversation. States: waiting for the auth frame (unless its URL
// gave the key), replaying history from the store, live. While replaying it ignores published
// events (the store has them and the replay reads them); it switches to live right after a
// replay read that came back short, with no await in between, so nothing committed can fall
// into a gap.
class EventStreamSession : public StreamSession, public EventSubscriber
{
    Q_OBJECT
public:
    // Messages of one client on their way to be stored: past them, its socket is not read
    // until one is answered. Without a bound, 150,000 frames from one client were queued to
    // the main thread at once, and every HTTP request waited 24 s behind them.
    static constexpr int MaxMessagesInFlight = 16;

    // `urlKey`: the session_api_key the socket's URL gave, if it gave one; it takes the place
    // of the auth frame (a wrong one closes the socket with 4001 at once). `client`: the
    // upgrade request's, which the messages it sends are made by with the key's name.
    EventStreamSession(std::unique_ptr<WebSocketConnection> socket, quint64 serial,
                       const QUuid &conversationId, std::optional<qint64> afterSeq,
                       std::optional<QByteArray> urlKey, QString client, EventStreams &streams,
                       QObject *parent = nullptr);
    ~EventStreamSession() override;

    QUuid conversationId() const { return m_id; }
    // Its conversation was deleted: closed with 4004, unless it has not authenticated yet (it
    // learns that only after the auth frame, as it would of any unknown conversation).
    void conversationDeleted();
    void sendError(const QString &code, const QString &detail);
    // A message the client sent was stored (empty code), or refused with an error frame.
    void messageAnswered(const QString &code, const QString &detail);
    void deliver(qint64 seq, const QByteArray &frame) override;
    void deliverTransient(const QByteArray &frame) override;
    void beginBurst() override;
    void endBurst() override;

private:
    enum class State
    {
        Authenticating,
        Replaying,
        Live,
        Closed
    };
    // Replayed (or live only from the start): from here on events come as they are published,
    // and first what the command running now printed so far.
    void goLive();

    QCoro::Task<> replay();
    // Sends the stored events after the last one sent up to `untilSeq`; false when the stream
    // could not follow (it is closed then).
    bool catchUp(qint64 untilSeq);
    // Writes a frame unless it would take the unsent bytes over the budget; then the client is
    // a slow consumer and is closed.
    bool send(const QByteArray &frame);
    void beginStreaming() override;
    void onFrame(const QByteArray &frame) override;
    void stopped() override;

    QUuid m_id;
    std::optional<qint64> m_afterSeq;
    State m_state = State::Authenticating;
    qint64 m_lastSeq = 0;
    int m_messagesInFlight = 0;
};

} // namespace AgentDeck
