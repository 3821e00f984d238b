#pragma once

#include <QDateTime>
#include <QList>
#include <QString>

#include <chrono>
#include <optional>

namespace AgentDeck {

class Database;

// One server process sharing the catalog, as the replicas table records it.
struct ReplicaRecord
{
    QString id;
    QString instance; // the lease owner name of the running process
    QString advertiseUrl;
    QDateTime startedAt;
    QDateTime heartbeatAt;
    std::optional<QDateTime> stoppedAt;
    bool alive = false; // heartbeat within the liveness window, by the database's clock
    qint64 ownedConversations = 0;
};

// The replicas table: who serves this catalog, where, and whether it still beats. Heartbeats and
// liveness use agentdeck_now_ms(), the database's clock.
class ReplicaStore
{
public:
    // `livenessWindow`: this replica's; one whose last heartbeat is older than its own window
    // has stopped renewing (a replica registered before windows were recorded: this one's).
    ReplicaStore(Database &db, std::chrono::milliseconds livenessWindow);

    std::chrono::milliseconds livenessWindow() const { return m_window; }
    // Records this process as the replica `id` (a restart replaces the earlier instance), with
    // its liveness window.
    void registerReplica(const QString &id, const QString &instance, const QString &advertiseUrl);
    // The last heartbeat of the instance registered as replica `id`, if it beat within the
    // liveness window and is not stopped: a server that is running, or one that just crashed.
    struct Beat
    {
        QString instance;
        QString advertiseUrl;
        qint64 atMs = 0;                             // by the database's clock
        std::chrono::milliseconds livenessWindow{0}; // that instance's
    };
    std::optional<Beat> recentBeatOf(const QString &id);
    // False when the row is another instance's: a server started with the same id while this
    // one was frozen or cut off took it over.
    bool heartbeat(const QString &id, const QString &instance);
    void markStopped(const QString &id, const QString &instance);
    QList<ReplicaRecord> list();

private:
    // Sets `column` to the database's now on this instance's row.
    bool stamp(const QString &column, const QString &id, const QString &instance);

    Database &m_db;
    std::chrono::milliseconds m_window;
};

} // namespace AgentDeck
