#pragma once

#include "eventhub.h"
#include "eventstreams.h"

#include <QCoroTask>
#include <QObject>
#include <QTimer>
#include <QUuid>

#include <memory>

namespace AgentDeck {

class WebSocketConnection;

// One client following one conversation. States: waiting for the auth frame (unless its URL
// gave the key), replaying history from the store, live. While replaying it ignores published
// events (the store has them and the replay reads them); it switches to live right after a
// replay read that came back short, with no await in between, so nothing committed can fall
// into a gap.
class EventStreamSession : public QObject, public EventSubscriber
{
    Q_OBJECT
public:
    // Close codes of event streams beyond RFC 6455's: 4000 + the HTTP status they stand for,
    // and 1013 for a client that does not read.
    static constexpr int CloseUnauthorized = 4001;
    static constexpr int CloseNotFound = 4004;
    static constexpr int CloseInvalidParameter = 4022;
    static constexpr int CloseSlowConsumer = 1013;
    // Messages of one client on their way to be stored: past them, its socket is not read
    // until one is answered. Without a bound, 150,000 frames from one client were queued to
    // the main thread at once, and every HTTP request waited 24 s behind them.
    static constexpr int MaxMessagesInFlight = 16;

    // `urlKey`: the session_api_key the socket's URL gave, if it gave one; it takes the place
    // of the auth frame (a wrong one closes the socket with 4001 at once).
    EventStreamSession(std::unique_ptr<WebSocketConnection> socket, quint64 serial,
                       const QUuid &conversationId, std::optional<qint64> afterSeq,
                       std::optional<QByteArray> urlKey, EventStreams &streams,
                       QObject *parent = nullptr);
    ~EventStreamSession() override;

    void start();
    quint64 serial() const { return m_serial; }
    QUuid conversationId() const { return m_id; }
    void closeWith(int code, const QString &reason);
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

Q_SIGNALS:
    void finished(AgentDeck::EventStreamSession *session);

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
    void onTextMessage(const QByteArray &message);
    void beginStreaming();

    std::unique_ptr<WebSocketConnection> m_socket;
    quint64 m_serial;
    QUuid m_id;
    std::optional<qint64> m_afterSeq;
    std::optional<QByteArray> m_urlKey;
    EventStreams &m_streams;
    State m_state = State::Authenticating;
    qint64 m_lastSeq = 0;
    int m_messagesInFlight = 0;
    QTimer m_authTimer;
};

} // namespace AgentDeck
