#include "leasestore.h"

#include "database.h"
#include "wiretypes.h"

#include <QSqlQuery>
#include <QStringList>

using namespace Qt::StringLiterals;

namespace AgentDeck {

LeaseStore::LeaseStore(Database &db, std::chrono::milliseconds ttl)
    : m_db(db)
    , m_ttl(ttl)
{}

std::optional<LeaseToken> LeaseStore::claim(const QUuid &id, const QString &owner)
{
    // In a transaction of its own: SQLite hands over a RETURNING row before it commits, and the
    // failure of an autocommit (a full disk) went unseen; the server then wrote under a lease
    // the row never had, and every write was fenced off.
    Transaction transaction(m_db);
    QSqlQuery &q =
        m_db.prepared(u"UPDATE conversations SET lease_owner = ?, lease_epoch = lease_epoch + 1, "
                      "lease_expires_at = agentdeck_now_ms() + ?, cancel_requested = 0 "
                      "WHERE id = ? AND (lease_owner IS NULL OR lease_owner = ? "
                      "OR lease_expires_at <= agentdeck_now_ms()) RETURNING lease_epoch"_s);
    q.addBindValue(owner);
    q.addBindValue(qint64(m_ttl.count()));
    q.addBindValue(toWireId(id));
    q.addBindValue(owner);
    m_db.exec(q);
    std::optional<LeaseToken> token;
    if (m_db.next(q))
        token = LeaseToken{owner, q.value(0).toLongLong()};
    q.finish();
    transaction.commit();
    return token;
}

std::optional<LeaseHolder> LeaseStore::holder(const QUuid &id)
{
    QSqlQuery &q = m_db.prepared(
        u"SELECT c.lease_owner, c.lease_epoch, c.lease_expires_at - agentdeck_now_ms(), r.id, "
        "r.advertise_url, agentdeck_now_ms() - r.heartbeat_at, r.stopped_at, "
        "r.liveness_window_ms "
        "FROM conversations c LEFT JOIN replicas r ON r.instance = c.lease_owner "
        "WHERE c.id = ? AND c.lease_owner IS NOT NULL"_s);
    q.addBindValue(toWireId(id));
    m_db.exec(q);
    std::optional<LeaseHolder> holder;
    if (m_db.next(q)) {
        holder =
            LeaseHolder{q.value(0).toString(), q.value(1).toLongLong(), q.value(2).toLongLong()};
        holder->replicaId = q.value(3).toString();
        holder->advertiseUrl = q.value(4).toString();
        if (!q.value(5).isNull())
            holder->heartbeatAgeMs = q.value(5).toLongLong();
        holder->replicaStopped = !q.value(6).isNull();
        if (!q.value(7).isNull())
            holder->livenessWindowMs = q.value(7).toLongLong();
    }
    q.finish();
    return holder;
}

QHash<QUuid, LeaseState> LeaseStore::renew(const QString &owner, const QHash<QUuid, qint64> &held)
{
    QHash<QUuid, LeaseState> states;
    if (held.isEmpty())
        return states;
    QStringList pairs;
    QVariantList values;
    for (auto it = held.cbegin(); it != held.cend(); ++it) {
        pairs.append(u"(id = ? AND lease_epoch = ?)"_s);
        values << toWireId(it.key()) << it.value();
    }
    const QString matching = u"lease_owner = ? AND ("_s + pairs.join(u" OR "_s) + u')';

    Transaction transaction(m_db);
    QSqlQuery extend = m_db.prepare(
        u"UPDATE conversations SET lease_expires_at = agentdeck_now_ms() + ? WHERE "_s + matching);
    extend.addBindValue(qint64(m_ttl.count()));
    extend.addBindValue(owner);
    for (const QVariant &value : values)
        extend.addBindValue(value);
    m_db.exec(extend);

    QStringList placeholders(held.size(), u"?"_s);
    QSqlQuery read = m_db.prepare(u"SELECT id, lease_owner, lease_epoch, cancel_requested FROM "
                                  "conversations WHERE id IN ("_s +
                                  placeholders.join(u',') + u')');
    for (auto it = held.cbegin(); it != held.cend(); ++it)
        read.addBindValue(toWireId(it.key()));
    m_db.exec(read);
    for (auto it = held.cbegin(); it != held.cend(); ++it)
        states.insert(it.key(), LeaseState::Deleted);
    while (m_db.next(read)) {
        const QUuid id = QUuid::fromString(read.value(0).toString());
        const bool ours =
            read.value(1).toString() == owner && read.value(2).toLongLong() == held.value(id);
        const int cancel = read.value(3).toInt();
        states[id] = !ours                              ? LeaseState::LostToAnotherOwner
                     : cancel == int(Cancel::Interrupt) ? LeaseState::InterruptRequested
                     : cancel == int(Cancel::Pause)     ? LeaseState::CancelRequested
                                                        : LeaseState::Held;
    }
    read.finish();
    transaction.commit();
    return states;
}

void LeaseStore::release(const QUuid &id, const LeaseToken &token)
{
    QSqlQuery &q = m_db.prepared(
        u"UPDATE conversations SET lease_owner = NULL, lease_expires_at = NULL, "
        "cancel_requested = 0 WHERE id = ? AND lease_owner = ? AND lease_epoch = ?"_s);
    q.addBindValue(toWireId(id));
    q.addBindValue(token.owner);
    q.addBindValue(token.epoch);
    m_db.exec(q);
}

int LeaseStore::releaseAll(const QString &owner)
{
    QSqlQuery &q = m_db.prepared(u"UPDATE conversations SET lease_owner = NULL, "
                                 "lease_expires_at = NULL WHERE lease_owner = ?"_s);
    q.addBindValue(owner);
    m_db.exec(q);
    return q.numRowsAffected();
}

int LeaseStore::adoptAll(const QString &owner)
{
    return adopt(owner, u""_s);
}

int LeaseStore::adoptEarlierInstances(const QString &owner, const QString &replicaId)
{
    return adopt(owner, replicaId + u'/');
}

int LeaseStore::adopt(const QString &owner, const QString &ownerPrefix)
{
    // Adopting is claiming: the epoch moves on, so a writer of the old owner is fenced off.
    QSqlQuery &q =
        m_db.prepared(u"UPDATE conversations SET lease_owner = ?, lease_epoch = lease_epoch + 1, "
                      "lease_expires_at = agentdeck_now_ms() + ? WHERE lease_owner IS NOT NULL "
                      "AND lease_owner <> ? AND substr(lease_owner, 1, length(?)) = ?"_s);
    q.addBindValue(owner);
    q.addBindValue(qint64(m_ttl.count()));
    q.addBindValue(owner);
    // Counted in characters, as substr() counts: QString::size() counts UTF-16 units, and an id
    // with a character beyond them (an emoji) adopted nothing.
    q.addBindValue(ownerPrefix);
    q.addBindValue(ownerPrefix);
    m_db.exec(q);
    return q.numRowsAffected();
}

QList<QUuid> LeaseStore::lapsedRuns(int limit)
{
    // Not those being deleted: nobody resolves them, and a page of them hid the others.
    QSqlQuery &q = m_db.prepared(
        u"SELECT id FROM conversations WHERE execution_status = 'running' AND "
        "(lease_owner IS NULL OR lease_expires_at <= agentdeck_now_ms()) AND id NOT IN "
        "(SELECT conversation_id FROM pending_deletes) LIMIT ?"_s);
    q.addBindValue(limit);
    m_db.exec(q);
    QList<QUuid> ids;
    while (m_db.next(q))
        ids.append(QUuid::fromString(q.value(0).toString()));
    q.finish();
    return ids;
}

void LeaseStore::requestCancel(const QUuid &id, Cancel how)
{
    // An interrupt asked for earlier is not weakened to a pause.
    QSqlQuery &q = m_db.prepared(u"UPDATE conversations SET cancel_requested = "
                                 "CASE WHEN cancel_requested > ? THEN cancel_requested ELSE ? END "
                                 "WHERE id = ?"_s);
    q.addBindValue(int(how));
    q.addBindValue(int(how));
    q.addBindValue(toWireId(id));
    m_db.exec(q);
}

QString LeaseStore::sandboxHolder(const QUuid &id)
{
    QSqlQuery &q = m_db.prepared(u"SELECT sandbox_holder FROM conversations WHERE id = ?"_s);
    q.addBindValue(toWireId(id));
    m_db.exec(q);
    const QString holder = m_db.next(q) ? q.value(0).toString() : QString();
    q.finish();
    return holder;
}

void LeaseStore::setSandboxHolder(const QUuid &id, const QString &replicaId)
{
    QSqlQuery &q = m_db.prepared(u"UPDATE conversations SET sandbox_holder = ? WHERE id = ?"_s);
    q.addBindValue(replicaId);
    q.addBindValue(toWireId(id));
    m_db.exec(q);
}

} // namespace AgentDeck
