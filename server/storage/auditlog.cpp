#include "auditlog.h"

#include "database.h"
#include "logging.h"
#include "wiretypes.h"

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {
constexpr auto Columns =
    "number, at_ms, actor, client, action, conversation_id, replica, reason, status";
} // namespace

QJsonObject AuditRecord::toJson() const
{
    QJsonObject json = ChangeCause{actor, reason}.toJson();
    json.insert(u"id"_s, QString::number(number));
    json.insert(u"timestamp"_s, toWireTime(atMs));
    json.insert(u"action"_s, action);
    json.insert(u"conversation_id"_s,
                conversationId.isNull() ? QJsonValue() : QJsonValue(toWireId(conversationId)));
    json.insert(u"replica"_s, replica);
    json.insert(u"result"_s, status >= 200 && status < 300 ? u"done"_s : u"refused"_s);
    json.insert(u"status"_s, status);
    return json;
}

AuditLog::AuditLog(Database &db, QString replica)
    : m_db(db)
    , m_replica(std::move(replica))
{
    m_flush.setSingleShot(true);
    m_flush.setInterval(FlushDelay);
    connect(&m_flush, &QTimer::timeout, this, &AuditLog::flush);
}

AuditLog::~AuditLog()
{
    flush();
}

bool AuditLog::admitRefused()
{
    if (m_window.hasExpired()) {
        if (m_refusedInWindow > RefusedPerMinute)
            qCWarning(lcServer) << m_refusedInWindow - RefusedPerMinute
                                << "refused attempts went unrecorded in the audit log in a minute";
        m_window.setRemainingTime(std::chrono::minutes(1));
        m_refusedInWindow = 0;
    }
    if (++m_refusedInWindow <= RefusedPerMinute)
        return true;
    ++m_refusedDropped;
    return false;
}

void AuditLog::record(const Actor &actor, const QString &action, const QUuid &conversationId,
                      const QString &reason, int status)
{
    if ((status < 200 || status >= 300) && !admitRefused())
        return;
    AuditRecord record;
    record.actor = actor;
    record.action = action;
    record.conversationId = conversationId;
    record.reason = ChangeCause::cleanReason(reason);
    record.status = status;
    m_pending.append(std::move(record));
    if (!m_flush.isActive())
        m_flush.start();
}

void AuditLog::flush()
{
    if (m_pending.isEmpty())
        return;
    const QList<AuditRecord> pending = std::exchange(m_pending, {});
    try {
        Transaction transaction(m_db);
        if (m_db.isPostgres()) {
            // A sequence hands numbers out in no commit order: without the lock a reader could
            // see 11 committed before 10 and pass 10 by. One writer at a time (a batch of a turn,
            // off any request's path) keeps numbers and commits in one order; the announcement
            // goes out with the commit.
            m_db.exec(m_db.prepared(u"SELECT pg_advisory_xact_lock(4802)"_s));
            m_db.exec(m_db.prepared(u"SELECT pg_notify('"_s + WrittenChannel + u"', '')"_s));
        }
        QSqlQuery &q = m_db.prepared(
            u"INSERT INTO audit_log (at_ms, actor, client, action, conversation_id, replica, "
            "reason, status) VALUES (agentdeck_now_ms(), COALESCE(?, ''), COALESCE(?, ''), ?, ?, "
            "?, COALESCE(?, ''), ?)"_s);
        for (const AuditRecord &record : pending) {
            q.addBindValue(record.actor.key);
            q.addBindValue(record.actor.client);
            q.addBindValue(record.action);
            q.addBindValue(record.conversationId.isNull()
                               ? QVariant(QMetaType(QMetaType::QString))
                               : QVariant(toWireId(record.conversationId)));
            q.addBindValue(m_replica);
            q.addBindValue(record.reason);
            q.addBindValue(record.status);
            m_db.exec(q);
        }
        transaction.commit();
    } catch (const StorageError &error) {
        qCWarning(lcServer).noquote()
            << u"cannot write %1 audit records (the first: %2 of %3): %4"_s.arg(
                   QString::number(pending.size()), pending.constFirst().action,
                   toWireId(pending.constFirst().conversationId), QString::fromUtf8(error.what()));
        return;
    }
    Q_EMIT written();
}

std::pair<QList<AuditRecord>, bool> AuditLog::search(const Query &query)
{
    flush();
    QStringList where;
    QVariantList values;
    const auto add = [&](const QString &condition, const QVariant &value) {
        where.append(condition);
        values.append(value);
    };
    if (query.fromMs)
        add(u"at_ms >= ?"_s, *query.fromMs);
    if (query.beforeMs)
        add(u"at_ms < ?"_s, *query.beforeMs);
    if (!query.actor.isEmpty())
        add(u"actor = ?"_s, query.actor);
    if (!query.client.isEmpty())
        add(u"client = ?"_s, query.client);
    if (!query.action.isEmpty())
        add(u"action = ?"_s, query.action);
    if (!query.conversationId.isNull())
        add(u"conversation_id = ?"_s, toWireId(query.conversationId));
    if (query.results == Query::Results::Done)
        where.append(u"status BETWEEN 200 AND 299"_s);
    else if (query.results == Query::Results::Refused)
        where.append(u"status NOT BETWEEN 200 AND 299"_s);
    if (query.after)
        add(query.descending ? u"number < ?"_s : u"number > ?"_s, *query.after);
    // In the order they were written: one database's sequence, across replicas too.
    QSqlQuery q = m_db.prepare(
        u"SELECT "_s + QLatin1StringView(Columns) + u" FROM audit_log"_s +
        (where.isEmpty() ? QString() : u" WHERE "_s + where.join(u" AND "_s)) +
        (query.descending ? u" ORDER BY number DESC"_s : u" ORDER BY number"_s) + u" LIMIT ?"_s);
    for (const QVariant &value : std::as_const(values))
        q.addBindValue(value);
    q.addBindValue(query.limit + 1);
    m_db.exec(q);
    QList<AuditRecord> records;
    while (m_db.next(q)) {
        AuditRecord record;
        record.number = q.value(0).toLongLong();
        record.atMs = q.value(1).toLongLong();
        record.actor = {q.value(2).toString(), q.value(3).toString()};
        record.action = q.value(4).toString();
        if (!q.value(5).isNull())
            record.conversationId = parseWireId(q.value(5).toString()).value_or(QUuid());
        record.replica = q.value(6).toString();
        record.reason = q.value(7).toString();
        record.status = q.value(8).toInt();
        records.append(record);
    }
    const bool more = records.size() > query.limit;
    if (more)
        records.removeLast();
    return {records, more};
}

qint64 AuditLog::removeOlderThan(qint64 ageMs)
{
    QSqlQuery &q = m_db.prepared(u"DELETE FROM audit_log WHERE at_ms < agentdeck_now_ms() - ?"_s);
    q.addBindValue(ageMs);
    m_db.exec(q);
    return q.numRowsAffected();
}

} // namespace AgentDeck
