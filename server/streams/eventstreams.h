#pragma once

#include <QObject>
#include <QSet>

namespace AgentDeck {

class ApiAuth;
class ApiServer;
class ConversationService;
class ConversationStore;
class EventHub;
class EventStreamSession;
class Metrics;

struct StreamSettings
{
    qint64 sendBudgetBytes = 16 * 1024 * 1024;
    int authTimeoutMs = 10'000;
    int replayPageSize = 256;
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

    EventStreams(ApiServer &server, Context context, QObject *parent = nullptr);
    ~EventStreams() override;
    qsizetype openCount() const { return m_sessions.size(); }
    // Closes every stream with 1001 (going away), for a graceful stop.
    void closeAll();

private:
    void onNewConnection();

    ApiServer &m_server;
    Context m_context;
    QSet<EventStreamSession *> m_sessions;
};

} // namespace AgentDeck
