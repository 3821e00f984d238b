#pragma once

#include "serverconfig.h"

#include <QCoroTask>
#include <QObject>
#include <QUrl>

#include <functional>
#include <memory>

namespace AgentDeck {

class AgentFactory;
class Clock;
class ConversationService;
class ConversationStore;
class Database;
class RuntimeProvider;

// What the server is built from; anything left empty gets the production implementation.
// Tests inject fakes here.
struct ServerParts
{
    ServerParts();
    ServerParts(ServerParts &&) noexcept;
    ServerParts &operator=(ServerParts &&) noexcept;
    ~ServerParts();

    std::unique_ptr<Clock> clock;
    std::unique_ptr<RuntimeProvider> runtimes;
    std::unique_ptr<AgentFactory> agents;
};

// The whole server: storage, service, HTTP and WebSocket, composed. Lives in one thread; the
// console runs it in a thread of its own.
class AgentDeckServer : public QObject
{
    Q_OBJECT
public:
    explicit AgentDeckServer(ServerConfig config, ServerParts parts = {},
                             QObject *parent = nullptr);
    ~AgentDeckServer() override;

    // Locks the data dir, opens storage, listens. Recovery then runs from the event loop and the
    // server turns ready. Returns false with a sentence for the operator.
    bool start(QString *error);
    // start() failed on settings that cannot work on this host, not on something a later try
    // may find fixed (a port in use, the database down): the unit does not restart it (exit 2).
    bool refusedItsSettings() const { return m_refusedItsSettings; }
    QCoro::Task<> stop();

    quint16 port() const;
    QUrl url() const;
    // Where other replicas tell clients to find this one.
    QString advertisedUrl() const;
    bool isReady() const;
    const ServerConfig &config() const { return m_config; }
    Database &database();
    ConversationStore &store();
    ConversationService &service();

Q_SIGNALS:
    void ready();
    // The server cannot go on, for `reason` (a sentence for the operator): the process stops it
    // and exits with an error.
    void cannotGoOn(const QString &reason);

private:
    void recover();
    // SQLite: PRAGMA quick_check in the background; damage makes /ready 503.
    void checkIntegrity();
    // The replica that is running with this server's --replica-id, named in a sentence; empty
    // when none is (see ReplicaStore::recentBeatOf).
    QString runningServerWithOurId();
    // Runs `work` in the streams' thread and waits for it (at once when that thread is not
    // running).
    void inStreamsThread(const std::function<void()> &work);

    struct Private;
    ServerConfig m_config;
    bool m_refusedItsSettings = false;
    std::unique_ptr<Private> d;
};

} // namespace AgentDeck
