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
    // `livenessWindow`: a replica whose last heartbeat is older than this has stopped renewing.
    ReplicaStore(Database &db, std::chrono::milliseconds livenessWindow);

    std::chrono::milliseconds livenessWindow() const { return m_window; }
    // Records this process as the replica `id` (a restart replaces the earlier instance).
    void registerReplica(const QString &id, const QString &instance, const QString &advertiseUrl);
    // The live server that already is replica `id`, named in a sentence; empty when there is
    // none. A registered instance counts as live when it has beaten within the liveness window,
    // is not stopped, is advertised elsewhere than `advertiseUrl` (which this process listens on
    // now, so an earlier instance there has gone), and beats again within `watch` (one renewal
    // interval and a little): a server that just crashed has a fresh heartbeat too.
    QString liveServerWithId(const QString &id, const QString &advertiseUrl,
                             std::chrono::milliseconds watch);
    void heartbeat(const QString &id, const QString &instance);
    void markStopped(const QString &id, const QString &instance);
    QList<ReplicaRecord> list();

private:
    // Sets `column` to the database's now on this instance's row.
    void stamp(const QString &column, const QString &id, const QString &instance);

    Database &m_db;
    std::chrono::milliseconds m_window;
};

} // namespace AgentDeck
