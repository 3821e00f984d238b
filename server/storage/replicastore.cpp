#include "replicastore.h"

#include "database.h"

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {
// Replicas silent for longer than this are forgotten when another one registers.
constexpr qint64 ForgetAfterMs = 7 * 24 * 3600 * 1000LL;

QDateTime fromMs(qint64 ms)
{
    return QDateTime::fromMSecsSinceEpoch(ms, Qt::UTC);
}
} // namespace

ReplicaStore::ReplicaStore(Database &db, std::chrono::milliseconds livenessWindow)
    : m_db(db)
    , m_window(livenessWindow)
{}

void ReplicaStore::registerReplica(const QString &id, const QString &instance,
                                   const QString &advertiseUrl)
{
    Transaction transaction(m_db);
    QSqlQuery &forget = m_db.prepared(
        u"DELETE FROM replicas WHERE heartbeat_at < agentdeck_now_ms() - ? AND id <> ?"_s);
    forget.addBindValue(ForgetAfterMs);
    forget.addBindValue(id);
    m_db.exec(forget);
    QSqlQuery &upsert = m_db.prepared(
        u"INSERT INTO replicas (id, instance, advertise_url, started_at, heartbeat_at, "
        "liveness_window_ms) VALUES (?, ?, ?, agentdeck_now_ms(), agentdeck_now_ms(), ?) "
        "ON CONFLICT (id) DO UPDATE SET instance = excluded.instance, "
        "advertise_url = excluded.advertise_url, started_at = excluded.started_at, "
        "heartbeat_at = excluded.heartbeat_at, liveness_window_ms = excluded.liveness_window_ms, "
        "stopped_at = NULL"_s);
    upsert.addBindValue(id);
    upsert.addBindValue(instance);
    upsert.addBindValue(advertiseUrl.isEmpty() ? QVariant(QMetaType(QMetaType::QString))
                                               : QVariant(advertiseUrl));
    upsert.addBindValue(qint64(m_window.count()));
    m_db.exec(upsert);
    transaction.commit();
}

std::optional<ReplicaStore::Beat> ReplicaStore::recentBeatOf(const QString &id)
{
    QSqlQuery &q = m_db.prepared(
        u"SELECT instance, advertise_url, heartbeat_at, agentdeck_now_ms() - heartbeat_at, "
        "COALESCE(liveness_window_ms, ?) FROM replicas WHERE id = ? AND stopped_at IS NULL"_s);
    q.addBindValue(qint64(m_window.count()));
    q.addBindValue(id);
    m_db.exec(q);
    std::optional<Beat> beat;
    if (m_db.next(q) && q.value(3).toLongLong() <= q.value(4).toLongLong())
        beat = Beat{q.value(0).toString(), q.value(1).toString(), q.value(2).toLongLong(),
                    std::chrono::milliseconds(q.value(4).toLongLong())};
    q.finish();
    return beat;
}

bool ReplicaStore::heartbeat(const QString &id, const QString &instance)
{
    return stamp(u"heartbeat_at"_s, id, instance);
}

void ReplicaStore::markStopped(const QString &id, const QString &instance)
{
    stamp(u"stopped_at"_s, id, instance);
}

bool ReplicaStore::stamp(const QString &column, const QString &id, const QString &instance)
{
    // Only this instance's row: a later instance of the same replica id has taken it over.
    QSqlQuery &q = m_db.prepared(u"UPDATE replicas SET "_s + column +
                                 u" = agentdeck_now_ms() WHERE id = ? AND instance = ?"_s);
    q.addBindValue(id);
    q.addBindValue(instance);
    m_db.exec(q);
    return q.numRowsAffected() > 0;
}

QList<ReplicaRecord> ReplicaStore::list()
{
    // Owned: leases that have not lapsed, counted through the lease_owner index.
    QSqlQuery &q = m_db.prepared(
        u"SELECT r.id, r.instance, r.advertise_url, r.started_at, r.heartbeat_at, r.stopped_at, "
        "agentdeck_now_ms() - r.heartbeat_at, (SELECT COUNT(*) FROM conversations c WHERE "
        "c.lease_owner = r.instance AND c.lease_expires_at > agentdeck_now_ms()), "
        "COALESCE(r.liveness_window_ms, ?) FROM replicas r ORDER BY r.id"_s);
    q.addBindValue(qint64(m_window.count()));
    m_db.exec(q);
    QList<ReplicaRecord> replicas;
    while (m_db.next(q)) {
        ReplicaRecord replica;
        replica.id = q.value(0).toString();
        replica.instance = q.value(1).toString();
        replica.advertiseUrl = q.value(2).toString();
        replica.startedAt = fromMs(q.value(3).toLongLong());
        replica.heartbeatAt = fromMs(q.value(4).toLongLong());
        if (!q.value(5).isNull())
            replica.stoppedAt = fromMs(q.value(5).toLongLong());
        // Each by its own window: a replica with a longer lease TTL beats less often.
        replica.alive = !replica.stoppedAt && q.value(6).toLongLong() <= q.value(8).toLongLong();
        replica.ownedConversations = q.value(7).toLongLong();
        replicas.append(replica);
    }
    q.finish();
    return replicas;
}

} // namespace AgentDeck
