#include "basheventstore.h"

#include "database.h"
#include "wiretypes.h"

#include <QJsonDocument>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {
// Trimmed to MaxStored once per this many inserts, not at each.
constexpr int TrimEvery = 100;

QJsonObject parsed(const QString &body)
{
    return QJsonDocument::fromJson(body.toUtf8()).object();
}

QVariant nullable(const QString &text)
{
    return text.isEmpty() ? QVariant(QMetaType(QMetaType::QString)) : QVariant(text);
}
} // namespace

BashEventStore::BashEventStore(Database &db)
    : m_db(db)
{}

void BashEventStore::insert(const QJsonObject &event)
{
    const QString kind = event.value(u"kind"_s).toString();
    const QString commandId = kind == u"BashCommand"_s ? event.value(u"id"_s).toString()
                                                       : event.value(u"command_id"_s).toString();
    const qint64 at = parseWireTime(event.value(u"timestamp"_s).toString())
                          .value_or(QDateTime::currentDateTimeUtc())
                          .toMSecsSinceEpoch();
    QSqlQuery &q = m_db.prepared(
        u"INSERT INTO bash_events (id, kind, command_id, output_order, timestamp_ms, body) "
        "VALUES (?, ?, ?, ?, ?, ?)"_s);
    q.addBindValue(event.value(u"id"_s).toString());
    q.addBindValue(kind);
    q.addBindValue(nullable(commandId));
    q.addBindValue(kind == u"BashOutput"_s ? QVariant(event.value(u"order"_s).toInt())
                                           : QVariant(QMetaType(QMetaType::Int)));
    q.addBindValue(at);
    q.addBindValue(QString::fromUtf8(QJsonDocument(event).toJson(QJsonDocument::Compact)));
    m_db.exec(q);
    if (++m_sinceTrim < TrimEvery)
        return;
    m_sinceTrim = 0;
    QSqlQuery &trim = m_db.prepared(
        u"DELETE FROM bash_events WHERE number <= (SELECT MAX(number) FROM bash_events) - ?"_s);
    trim.addBindValue(MaxStored);
    m_db.exec(trim);
}

std::optional<QJsonObject> BashEventStore::find(const QString &id)
{
    QSqlQuery &q = m_db.prepared(u"SELECT body FROM bash_events WHERE id = ?"_s);
    q.addBindValue(id);
    m_db.exec(q);
    std::optional<QJsonObject> event;
    if (m_db.next(q))
        event = parsed(q.value(0).toString());
    q.finish();
    return event;
}

QList<QJsonObject> BashEventStore::newest(int count)
{
    QSqlQuery &q = m_db.prepared(
        u"SELECT body FROM (SELECT number, body FROM bash_events ORDER BY number DESC LIMIT ?) "
        "AS recent ORDER BY number"_s);
    q.addBindValue(count);
    m_db.exec(q);
    QList<QJsonObject> events;
    while (m_db.next(q))
        events.append(parsed(q.value(0).toString()));
    return events;
}

qint64 BashEventStore::clear()
{
    QSqlQuery &q = m_db.prepared(u"DELETE FROM bash_events"_s);
    m_db.exec(q);
    return q.numRowsAffected();
}

std::pair<QList<QJsonObject>, bool> BashEventStore::search(const Query &query)
{
    QStringList where;
    QVariantList values;
    if (!query.kind.isEmpty()) {
        where.append(u"kind = ?"_s);
        values.append(query.kind);
    }
    if (!query.commandId.isEmpty()) {
        where.append(u"command_id = ?"_s);
        values.append(query.commandId);
    }
    if (query.fromMs) {
        where.append(u"timestamp_ms >= ?"_s);
        values.append(*query.fromMs);
    }
    if (query.beforeMs) {
        where.append(u"timestamp_ms < ?"_s);
        values.append(*query.beforeMs);
    }
    if (query.orderAfter) {
        where.append(u"kind = 'BashOutput' AND output_order > ?"_s);
        values.append(*query.orderAfter);
    }
    // In the order they were recorded, which is their timestamps' (one clock, one writer per
    // event), and stable for equal ones.
    QSqlQuery q =
        m_db.prepare(u"SELECT body FROM bash_events"_s +
                     (where.isEmpty() ? QString() : u" WHERE "_s + where.join(u" AND "_s)) +
                     (query.descending ? u" ORDER BY timestamp_ms DESC, number DESC"_s
                                       : u" ORDER BY timestamp_ms, number"_s) +
                     u" LIMIT ? OFFSET ?"_s);
    for (const QVariant &value : values)
        q.addBindValue(value);
    q.addBindValue(query.limit + 1);
    q.addBindValue(query.offset);
    m_db.exec(q);
    QList<QJsonObject> events;
    while (m_db.next(q))
        events.append(parsed(q.value(0).toString()));
    const bool more = events.size() > query.limit;
    if (more)
        events.removeLast();
    return {events, more};
}

} // namespace AgentDeck
