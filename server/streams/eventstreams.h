#pragma once

#include "sendbudget.h"

#include <QHash>
#include <QList>
#include <QObject>
#include <QTimer>
#include <QUuid>

#include <memory>
#include <optional>

class QJsonObject;
class QTcpSocket;

namespace AgentDeck {

class ApiAuth;
class AuditFeed;
class AuditLog;
struct AuditRecord;
class BashEventLog;
class BashStreamSession;
class ConversationService;
class ConversationStore;
class Database;
class EventHub;
class EventStreamSession;
class HttpListener;
class LifecycleStreamSession;
class Metrics;
class WebSocketConnection;
struct MessageRequest;
struct StoredEvent;

struct StreamSettings
{
    qint64 sendBudgetBytes = 16 * 1024 * 1024; // unsent bytes of one connection
    // Unsent bytes of every connection together, a frame shared by many counted once (see
    // SendBudget).
    qint64 totalSendBudgetBytes = 128 * 1024 * 1024;
    int authTimeoutMs = 10'000;
    int replayPageSize = 256;
    qint64 maxMessageBytes = 4 * 1024 * 1024; // a client's message, like a request body
    // A stream reading its backlog at the client's pace (a replay, the lifecycle feed) closes
    // a client that takes nothing for this long as a slow consumer.
    int stallTimeoutMs = 30'000;
};

// Accepts the WebSocket connections of /sockets/events/{id} (EventStreamSession),
// /sockets/bash-events (BashStreamSession) and /sockets/lifecycle (LifecycleStreamSession) and
// owns their sessions. It lives
// in a thread of its own, with the hub: writing each event to every subscriber's socket is the
// larger part of the work of an event, and it must not hold up the requests that write the
// next ones. Replay and catch-up read from a database connection of this thread.
class EventStreams : public QObject
{
    Q_OBJECT
public:
    struct Context
    {
        const Database &database;     // the streams read through a connection of their own to it
        EventHub &hub;                // lives in the streams' thread
        ConversationService &service; // main thread: messages sent over a socket go there
        const ApiAuth &auth;
        Metrics &metrics;
        StreamSettings settings;
        // Lives in the main thread: the bash-events sockets follow it (BashStreamSession).
        std::shared_ptr<BashEventLog> bashEvents;
        // Lives in the main thread: the lifecycle sockets follow what it writes (AuditFeed).
        const AuditLog *audit = nullptr;
    };

    // Call in the thread the streams will live in, the hub's. Null when the database cannot
    // be opened from it.
    static std::unique_ptr<EventStreams> open(Context context, QString *error);
    ~EventStreams() override;

    // Takes the WebSocket upgrades that `listener` finds (in the listener's thread) over to
    // this thread.
    void acceptFrom(HttpListener &listener);
    // Closes every stream with 1001 (going away), for a graceful stop; this thread only.
    void closeAll();

    // For the sessions, in this thread. Reads that fail are tried once more, which reconnects
    // when the database went away meanwhile (a PostgreSQL restart); then they throw
    // StorageError.
    std::optional<qint64> eventCountOf(const QUuid &conversationId);
    QList<StoredEvent> eventsAfter(const QUuid &conversationId, qint64 afterSeq, int limit,
                                   qsizetype maxBytes = -1);
    // The audit log's records of changes made past `afterNumber`, in number order; and the
    // number of the newest record of any kind (0 for none).
    QList<AuditRecord> auditRecordsAfter(qint64 afterNumber, const QString &action,
                                         const QUuid &conversationId, int limit);
    qint64 newestAuditNumber();
    AuditFeed &auditFeed() { return *m_auditFeed; }
    EventHub &hub() { return m_context.hub; }
    const ApiAuth &auth() const { return m_context.auth; }
    Metrics &metrics() { return m_context.metrics; }
    const StreamSettings &settings() const { return m_context.settings; }
    SendBudget &sendBudget() { return m_sendBudget; }
    // How a socket authenticates (the same for every kind of stream): with the key its URL or
    // header gave, judged at once; else with an auth frame ({"type": "auth", "session_api_key"})
    // within the auth timeout. Without keys configured, at once.
    enum class Authenticated
    {
        Yes,
        No,
        AwaitingFrame,
    };
    // `keyName`, when given, is set to the name of the key accepted.
    Authenticated authenticate(const std::optional<QByteArray> &key,
                               QString *keyName = nullptr) const;
    // Whether `frame` (a text message) is the auth frame of a key the server accepts.
    bool acceptsAuthFrame(const QByteArray &frame, QString *keyName = nullptr) const;
    enum class Sent
    {
        Yes,
        SlowConsumer, // past the connection's own budget: close it with 1013
        Dropped,      // the server's budget dropped a slow consumer, this one (closing already)
    };
    // Writes a frame within the connection's budget and the server's.
    Sent send(WebSocketConnection &socket, const QByteArray &frame);
    // Stores a message a client sent over its stream, on the main thread; a failure comes
    // back to the session as an error frame, if it is still open then.
    void sendMessage(EventStreamSession *session, MessageRequest request);
    BashEventLog &bashEvents() { return *m_context.bashEvents; }
    // Starts the command a bash-events socket asked for, on the main thread; a refusal comes
    // back to the session as a BashError frame, if it is still open then.
    void startBashCommand(BashStreamSession *session, const QJsonObject &request);

private:
    EventStreams(Context context, std::unique_ptr<Database> database);
    void onUpgrade(QTcpSocket *socket, const QByteArray &head);
    void answerSession(quint64 serial, const QString &code, const QString &detail);
    // `client`: the upgrade's, as Actor::clientFrom() names it.
    void acceptBashStream(std::unique_ptr<WebSocketConnection> connection,
                          std::optional<QByteArray> key, QString client);
    void acceptLifecycleStream(std::unique_ptr<WebSocketConnection> connection,
                               std::optional<QByteArray> key, QString client);
    // Closes a connection whose URL asked for something it cannot have, with `code`.
    void refuse(std::unique_ptr<WebSocketConnection> connection, int code, const QString &reason);
    template<typename Read> auto retried(Read read) -> decltype(read());
    // Keeps `session` in `sessions` until its connection is gone, and starts it.
    template<typename Session> void keep(QHash<quint64, Session *> &sessions, Session *session);

    Context m_context;
    SendBudget m_sendBudget; // before the sessions go, it lets the connections left go
    std::unique_ptr<Database> m_database;
    std::unique_ptr<ConversationStore> m_store;
    std::unique_ptr<AuditLog> m_auditReader; // reads only, through this thread's connection
    std::unique_ptr<AuditFeed> m_auditFeed;
    QHash<quint64, EventStreamSession *> m_sessions; // by serial
    QHash<quint64, BashStreamSession *> m_bashSessions;
    QHash<quint64, LifecycleStreamSession *> m_lifecycleSessions;
    // After sessions end: gives back what glibc keeps of their frames and pages. Blocks under
    // its mmap threshold stay in its arenas when freed: eight stalled replays of small events
    // left 125 MB behind after they closed.
    QTimer m_trim;
    quint64 m_nextSerial = 1;
};

} // namespace AgentDeck
