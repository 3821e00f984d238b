#pragma once

#include <QObject>
#include <QSet>

class QTcpSocket;

namespace AgentDeck {

class ApiAuth;
class ConversationService;
class ConversationStore;
class EventHub;
class EventStreamSession;
class HttpListener;
class Metrics;

struct StreamSettings
{
    qint64 sendBudgetBytes = 16 * 1024 * 1024;
    int authTimeoutMs = 10'000;
    int replayPageSize = 256;
    qint64 maxMessageBytes = 4 * 1024 * 1024; // a client's message, like a request body
};

// Accepts the WebSocket connections of /sockets/events/{id} and owns their sessions.
class EventStreams : public QObject
{
    Q_OBJECT
public:
    struct Context
    {
        ConversationStore &store;
        EventHub &hub;
        ConversationService &service;
        const ApiAuth &auth;
        Metrics &metrics;
        StreamSettings settings;
    };

    // Takes the WebSocket upgrades that `listener` finds.
    EventStreams(HttpListener &listener, Context context, QObject *parent = nullptr);
    ~EventStreams() override;
    qsizetype openCount() const { return m_sessions.size(); }
    // Closes every stream with 1001 (going away), for a graceful stop.
    void closeAll();

private:
    void onUpgrade(QTcpSocket *socket, const QByteArray &head);

    Context m_context;
    QSet<EventStreamSession *> m_sessions;
};

} // namespace AgentDeck
