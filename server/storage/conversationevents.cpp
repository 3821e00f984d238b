#include "conversationstore.h"

#include "apierror.h"
#include "catalogrows.h"
#include "database.h"

#include <QJsonDocument>
#include <QRegularExpression>
#include <QSqlRecord>

#include <algorithm>

using namespace Qt::StringLiterals;

// ConversationStore: the events of the histories.

namespace AgentDeck {

using namespace CatalogRows;

QList<StoredEvent> ConversationStore::append(const QUuid &id, QList<Event> events,
                                             std::optional<ExecutionStatus> status, qint64 nowMs,
                                             const LeaseToken *fence, const OutcomeChange &outcome,
                                             bool activity)
{
    // Out of the cache while the transaction runs; back, updated, once it committed (the next
    // message to the conversation then needs no read of its row).
    std::unique_ptr<CachedRow> cached(m_cache.take(id));
    const QString wireId = toWireId(id);
    Transaction transaction(m_db);
    // On PostgreSQL the row is locked until the commit: writers from several replicas take
    // their seqs one after another, and an adoption cannot slip between the fence check and the
    // insert. SQLite has one writer at a time anyway.
    Database::Statement &current = m_db.statement(
        m_db.isPostgres()
            ? u"SELECT event_count, lease_owner, lease_epoch, open_messages, answered_through "
              "FROM conversations WHERE id = ? FOR UPDATE"_s
            : u"SELECT event_count, lease_owner, lease_epoch, open_messages, answered_through "
              "FROM conversations WHERE id = ?"_s);
    current.bind(0, wireId);
    current.exec();
    if (!current.next()) {
        current.finish();
        throw ApiError::notFound(u"Conversation %1 does not exist"_s.arg(wireId));
    }
    qint64 seq = current.int64(0);
    const QString leaseOwner = current.text(1);
    const qint64 leaseEpoch = current.int64(2);
    qint64 openMessages = current.int64(3);
    qint64 answeredThrough = current.int64(4);
    current.finish();
    if (fence && (leaseOwner != fence->owner || leaseEpoch != fence->epoch))
        throw LeaseLostError("conversation " + wireId.toStdString() + " is owned by " +
                             leaseOwner.toStdString() + " at epoch " + std::to_string(leaseEpoch));

    Database::Statement &insert =
        m_db.statement(u"INSERT INTO events (conversation_id, seq, id, kind, source, timestamp, "
                       "body, epoch) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"_s);
    const QDateTime now = fromMs(nowMs);
    QList<StoredEvent> stored;
    stored.reserve(events.size());
    for (Event &event : events) {
        event.seq = ++seq;
        event.timestamp = now;
        insert.bind(0, wireId);
        insert.bind(1, event.seq);
        insert.bind(2, toWireId(event.id));
        insert.bind(3, event.kind);
        insert.bind(4, event.source);
        insert.bind(5, nowMs);
        const QByteArray json = event.toJsonBytes();
        insert.bindUtf8(6, json);
        insert.bind(7, fence ? fence->epoch : leaseEpoch);
        insert.exec();
        stored.append({event.seq, json});
        // As the shell and echo agents take them: each agent message answers the oldest open
        // user message.
        if (event.kind == EventKind::Message && event.source == EventSource::User) {
            ++openMessages;
        } else if (event.kind == EventKind::Message && event.source == EventSource::Agent) {
            openMessages = std::max<qint64>(openMessages - 1, 0);
            if (openMessages == 0)
                answeredThrough = event.seq;
        }
    }

    // The status only when it changes: SQLite rewrites an index entry whenever its column is
    // assigned, even to the same value, and most appends leave the status alone.
    Database::Statement &row = m_db.statement(
        status ? u"UPDATE conversations SET event_count = ?, updated_at = CASE WHEN ? THEN ? ELSE "
                 "updated_at END, "
                 "last_event_at = CASE WHEN ? THEN ? ELSE last_event_at END, open_messages = ?, "
                 "answered_through = ?, execution_status = ?, running_since = CASE WHEN ? THEN "
                 "CASE WHEN execution_status = 'running' THEN running_since ELSE ? END END "
                 "WHERE id = ?"_s
               : u"UPDATE conversations SET event_count = ?, updated_at = CASE WHEN ? THEN ? ELSE "
                 "updated_at END, "
                 "last_event_at = CASE WHEN ? THEN ? ELSE last_event_at END, open_messages = ?, "
                 "answered_through = ? WHERE id = ?"_s);
    int column = 0;
    row.bind(column++, seq);
    row.bind(column++, activity);
    row.bind(column++, nowMs);
    row.bind(column++, !events.isEmpty());
    row.bind(column++, nowMs);
    row.bind(column++, openMessages);
    row.bind(column++, answeredThrough);
    if (status) {
        row.bind(column++, toString(*status));
        // Kept while it goes on running; none once it stops.
        row.bind(column++, *status == ExecutionStatus::Running);
        row.bind(column++, nowMs);
    }
    row.bind(column, wireId);
    row.exec();
    // A statement of its own: most appends leave the outcome alone.
    RunOutcome written = outcome.outcome;
    if (outcome.op == OutcomeChange::Op::Set) {
        written.at = now;
        written.dismissed = false;
        QJsonObject columnJson = written.toJson();
        columnJson.remove(u"dismissed"_s);
        Database::Statement &set = m_db.statement(
            u"UPDATE conversations SET outcome = ?, outcome_dismissed = 0 WHERE id = ?"_s);
        set.bind(0, QString::fromUtf8(QJsonDocument(columnJson).toJson(QJsonDocument::Compact)));
        set.bind(1, wireId);
        set.exec();
    } else if (outcome.op == OutcomeChange::Op::Dismiss) {
        Database::Statement &dismiss = m_db.statement(
            u"UPDATE conversations SET outcome_dismissed = 1 WHERE id = ? AND outcome IS NOT NULL"_s);
        dismiss.bind(0, wireId);
        dismiss.exec();
    }
    if (!stored.isEmpty() && announces())
        announce(id, u"%1 %2"_s.arg(stored.first().seq).arg(stored.last().seq));
    transaction.commit();
    if (cached) {
        ConversationInfo &info = cached->info;
        info.eventCount = seq;
        if (activity)
            info.updatedAt = now;
        if (!events.isEmpty())
            info.lastEventAt = now;
        if (status) {
            if (*status != ExecutionStatus::Running)
                info.runningSince.reset();
            else if (info.executionStatus != ExecutionStatus::Running)
                info.runningSince = now;
            info.executionStatus = *status;
        }
        if (outcome.op == OutcomeChange::Op::Set)
            info.outcome = written;
        else if (outcome.op == OutcomeChange::Op::Dismiss && info.outcome)
            info.outcome->dismissed = true;
        cached->json.clear();
        cache(id, std::move(cached));
    }
    return stored;
}

void ConversationStore::copyHistory(const QUuid &from, const QUuid &to, bool usage)
{
    m_cache.remove(to);
    Transaction transaction(m_db);
    // New ids, as OpenHands' fork gives them: every event's, and every mention of one in the
    // others (an observation's action_id), so that the two histories share none.
    QHash<QString, QString> renamed;
    {
        QSqlQuery ids = m_db.prepare(u"SELECT id FROM events WHERE conversation_id = ?"_s);
        ids.addBindValue(toWireId(from));
        m_db.exec(ids);
        while (m_db.next(ids))
            renamed.insert(ids.value(0).toString(), toWireId(QUuid::createUuid()));
    }
    static const QRegularExpression wireId(
        u"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"_s);
    const auto withNewIds = [&renamed](const QString &body) {
        QString copy;
        copy.reserve(body.size());
        qsizetype done = 0;
        for (auto it = wireId.globalMatch(body); it.hasNext();) {
            const QRegularExpressionMatch match = it.next();
            const auto name = renamed.constFind(match.captured());
            if (name == renamed.cend())
                continue;
            copy += QStringView(body).sliced(done, match.capturedStart() - done);
            copy += *name;
            done = match.capturedEnd();
        }
        copy += QStringView(body).sliced(done);
        return copy;
    };
    struct Row
    {
        qint64 seq;
        QString id, kind, source;
        qint64 timestamp;
        QString body;
    };
    for (qint64 after = 0;;) {
        // A page at a time, read whole before it is written: the history may be long.
        QList<Row> page;
        QSqlQuery read = m_db.prepare(u"SELECT seq, id, kind, source, timestamp, body FROM events "
                                      "WHERE conversation_id = ? AND seq > ? ORDER BY seq "
                                      "LIMIT 500"_s);
        read.addBindValue(toWireId(from));
        read.addBindValue(after);
        m_db.exec(read);
        while (m_db.next(read))
            page.append({read.value(0).toLongLong(), read.value(1).toString(),
                         read.value(2).toString(), read.value(3).toString(),
                         read.value(4).toLongLong(), read.value(5).toString()});
        if (page.isEmpty())
            break;
        Database::Statement &insert = m_db.statement(
            u"INSERT INTO events (conversation_id, seq, id, kind, source, timestamp, "
            "body, epoch) VALUES (?, ?, ?, ?, ?, ?, ?, 0)"_s);
        for (const Row &row : std::as_const(page)) {
            insert.bind(0, toWireId(to));
            insert.bind(1, row.seq);
            insert.bind(2, renamed.value(row.id, row.id));
            insert.bind(3, row.kind);
            insert.bind(4, row.source);
            insert.bind(5, row.timestamp);
            insert.bindUtf8(6, withNewIds(row.body).toUtf8());
            insert.exec();
        }
        after = page.last().seq;
    }
    QStringList columns{u"event_count"_s, u"last_event_at"_s, u"open_messages"_s,
                        u"answered_through"_s};
    if (usage)
        columns << u"prompt_tokens"_s << u"completion_tokens"_s << u"llm_requests"_s
                << u"llm_retries"_s;
    QStringList set;
    for (const QString &column : std::as_const(columns))
        set << u"%1 = (SELECT %1 FROM conversations WHERE id = ?)"_s.arg(column);
    QSqlQuery counts =
        m_db.prepare(u"UPDATE conversations SET "_s + set.join(u", "_s) + u" WHERE id = ?"_s);
    for (qsizetype i = 0; i < columns.size(); ++i)
        counts.addBindValue(toWireId(from));
    counts.addBindValue(toWireId(to));
    m_db.exec(counts);
    transaction.commit();
}

QList<StoredEvent> ConversationStore::eventsAfter(const QUuid &id, qint64 afterSeq, int limit,
                                                  qsizetype maxBytes)
{
    QSqlQuery &q = m_db.prepared(u"SELECT seq, body FROM events WHERE conversation_id = ? AND "
                                 "seq > ? ORDER BY seq LIMIT ?"_s);
    q.addBindValue(toWireId(id));
    q.addBindValue(afterSeq);
    q.addBindValue(limit);
    m_db.exec(q);
    QList<StoredEvent> events;
    qsizetype bytes = 0;
    while (m_db.next(q)) {
        events.append({q.value(0).toLongLong(), q.value(1).toString().toUtf8()});
        if (maxBytes >= 0 && (bytes += events.last().json.size()) >= maxBytes)
            break;
    }
    q.finish();
    return events;
}

QList<Event> ConversationStore::history(const QUuid &id, qint64 afterSeq, qsizetype limit)
{
    constexpr int Page = 1000;
    QList<Event> events;
    for (qsizetype read = 0; limit < 0 || read < limit;) {
        const int wanted = limit < 0 ? Page : int(std::min<qsizetype>(Page, limit - read));
        const QList<StoredEvent> page = eventsAfter(id, afterSeq, wanted);
        for (const StoredEvent &stored : page) {
            if (auto event = Event::fromJson(QJsonDocument::fromJson(stored.json).object()))
                events.append(std::move(*event));
            afterSeq = stored.seq;
        }
        read += page.size();
        if (page.size() < wanted)
            break;
    }
    return events;
}

qint64 ConversationStore::answeredThrough(const QUuid &id)
{
    QSqlQuery &q = m_db.prepared(u"SELECT answered_through FROM conversations WHERE id = ?"_s);
    q.addBindValue(toWireId(id));
    m_db.exec(q);
    const qint64 seq = m_db.next(q) ? q.value(0).toLongLong() : 0;
    q.finish();
    return seq;
}

QList<Event> ConversationStore::historySinceAgentMessage(const QUuid &id)
{
    // Backwards along the primary key from the newest event, to the first agent message.
    QSqlQuery &q = m_db.prepared(
        u"SELECT seq FROM events WHERE conversation_id = ? AND kind = 'MessageEvent' AND "
        "source = 'agent' ORDER BY seq DESC LIMIT 1"_s);
    q.addBindValue(toWireId(id));
    m_db.exec(q);
    const qint64 since = m_db.next(q) ? q.value(0).toLongLong() : 0;
    q.finish();
    return history(id, since);
}

EventPageResult ConversationStore::searchEvents(const QUuid &id, const EventFilter &filter,
                                                bool descending, const QString &pageId, int limit)
{
    Where where = eventWhere(id, filter, m_db.isPostgres());
    if (!pageId.isEmpty()) {
        bool ok = false;
        const qint64 start = pageId.toLongLong(&ok);
        if (!ok || start < 1)
            throw ApiError::invalidParameter(u"page_id is not a page of this search"_s);
        where.add(descending ? u"seq <= ?"_s : u"seq >= ?"_s, {start});
    }
    QSqlQuery q =
        m_db.prepare(u"SELECT seq, body FROM events"_s + where.sql() +
                     (descending ? u" ORDER BY seq DESC"_s : u" ORDER BY seq"_s) + u" LIMIT ?"_s);
    where.bindTo(q);
    q.addBindValue(limit + 1);
    m_db.exec(q);
    EventPageResult page;
    qsizetype bytes = 0;
    while (m_db.next(q)) {
        const qint64 seq = q.value(0).toLongLong();
        if (page.items.size() == limit) {
            page.nextPageId = QString::number(seq);
            break;
        }
        QByteArray json = q.value(1).toString().toUtf8();
        if (!page.items.isEmpty() && bytes + json.size() > MaxEventPageBytes) {
            page.nextPageId = QString::number(seq);
            break;
        }
        bytes += json.size();
        page.items.append({seq, std::move(json)});
    }
    return page;
}

qint64 ConversationStore::countEvents(const QUuid &id, const EventFilter &filter)
{
    const Where where = eventWhere(id, filter, m_db.isPostgres());
    QSqlQuery q = m_db.prepare(u"SELECT COUNT(*) FROM events"_s + where.sql());
    where.bindTo(q);
    m_db.exec(q);
    return m_db.next(q) ? q.value(0).toLongLong() : 0;
}

std::optional<StoredEvent> ConversationStore::event(const QUuid &id, const QUuid &eventId)
{
    QSqlQuery &q =
        m_db.prepared(u"SELECT seq, body FROM events WHERE conversation_id = ? AND id = ?"_s);
    q.addBindValue(toWireId(id));
    q.addBindValue(toWireId(eventId));
    m_db.exec(q);
    std::optional<StoredEvent> stored;
    if (m_db.next(q))
        stored = StoredEvent{q.value(0).toLongLong(), q.value(1).toString().toUtf8()};
    q.finish();
    return stored;
}

QList<std::optional<StoredEvent>> ConversationStore::events(const QUuid &id,
                                                            const QList<QUuid> &eventIds)
{
    QList<std::optional<StoredEvent>> result(eventIds.size());
    if (eventIds.isEmpty())
        return result;
    QStringList placeholders(eventIds.size(), u"?"_s);
    QSqlQuery q = m_db.prepare(u"SELECT id, seq, body FROM events WHERE conversation_id = ? AND "
                               "id IN ("_s +
                               placeholders.join(u',') + u')');
    q.addBindValue(toWireId(id));
    for (const QUuid &eventId : eventIds)
        q.addBindValue(toWireId(eventId));
    m_db.exec(q);
    qsizetype bytes = 0;
    while (m_db.next(q)) {
        const QUuid eventId = QUuid::fromString(q.value(0).toString());
        const StoredEvent stored{q.value(1).toLongLong(), q.value(2).toString().toUtf8()};
        if ((bytes += stored.json.size()) > MaxEventPageBytes)
            throw ApiError::invalidParameter(
                u"the events asked for add up to more than %1 bytes; ask for fewer at a time"_s.arg(
                    MaxEventPageBytes));
        for (qsizetype i = 0; i < eventIds.size(); ++i) {
            if (eventIds[i] == eventId)
                result[i] = stored;
        }
    }
    return result;
}

} // namespace AgentDeck
