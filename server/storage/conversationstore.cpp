#include "conversationstore.h"

#include "apierror.h"
#include "catalogrows.h"
#include "database.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QSqlRecord>

#include <algorithm>
#include <memory>

using namespace Qt::StringLiterals;

namespace AgentDeck {

using namespace CatalogRows;

ConversationStore::ConversationStore(Database &db, qsizetype cacheBytes)
    : m_db(db)
    , m_cache(cacheBytes)
{}

qsizetype ConversationStore::cachedBytes(const ConversationInfo &info)
{
    // The strings twice (UTF-16 in the row, UTF-8 in its JSON), tags and agent settings being
    // most of a large row; a fixed part for the rest.
    qsizetype text = info.title.size() + info.workingDir.size();
    if (info.outcome)
        text += info.outcome->detail.size() + info.outcome->retryCommand.size();
    for (auto tag = info.tags.cbegin(); tag != info.tags.cend(); ++tag)
        text += tag.key().size() + tag.value().size();
    for (auto setting = info.agentConfig.constBegin(); setting != info.agentConfig.constEnd();
         ++setting) {
        // An object (the llm settings) counts as a few strings.
        const QJsonValue value = setting.value();
        text += setting.key().size() + (value.isString() ? value.toString().size() : 64);
    }
    return 1024 + 6 * text;
}

void ConversationStore::cache(const QUuid &id, std::unique_ptr<CachedRow> row)
{
    const qsizetype bytes = cachedBytes(row->info);
    m_cache.insert(id, row.release(), bytes);
}

void ConversationStore::insert(const ConversationInfo &info)
{
    m_cache.remove(info.id);
    QSqlQuery &q = m_db.prepared(
        u"INSERT INTO conversations (id, title, tags, created_at, updated_at, archived_at, "
        "execution_status, agent_kind, working_dir, workspace_owned, always_confirm, agent_config, "
        "sandbox_policy) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"_s);
    q.addBindValue(toWireId(info.id));
    q.addBindValue(info.title);
    q.addBindValue(tagsToJson(info.tags));
    q.addBindValue(info.createdAt.toMSecsSinceEpoch());
    q.addBindValue(info.updatedAt.toMSecsSinceEpoch());
    q.addBindValue(nullableMs(info.archivedAt));
    q.addBindValue(toString(info.executionStatus));
    q.addBindValue(info.agentKind);
    q.addBindValue(info.workingDir);
    q.addBindValue(int(info.workspaceOwnedByServer));
    q.addBindValue(int(info.alwaysConfirm));
    q.addBindValue(info.agentConfig.isEmpty()
                       ? QVariant(QMetaType(QMetaType::QString))
                       : QVariant(QString::fromUtf8(
                             QJsonDocument(info.agentConfig).toJson(QJsonDocument::Compact))));
    q.addBindValue(info.sandbox
                       ? QVariant(QString::fromUtf8(
                             QJsonDocument(info.sandbox->toJson()).toJson(QJsonDocument::Compact)))
                       : QVariant(QMetaType(QMetaType::QString)));
    m_db.exec(q);
}

void ConversationStore::addUsage(const QUuid &id, const LlmUsage &usage, const LeaseToken &fence)
{
    if (usage.isEmpty())
        return;
    m_cache.remove(id);
    // Fenced like every write of a run: a zombie's usage is not counted.
    QSqlQuery &q =
        m_db.prepared(u"UPDATE conversations SET prompt_tokens = prompt_tokens + ?, "
                      "completion_tokens = completion_tokens + ?, llm_requests = llm_requests + ?, "
                      "llm_retries = llm_retries + ? WHERE id = ? AND lease_owner = ? "
                      "AND lease_epoch = ?"_s);
    q.addBindValue(usage.promptTokens);
    q.addBindValue(usage.completionTokens);
    q.addBindValue(usage.requests);
    q.addBindValue(usage.retries);
    q.addBindValue(toWireId(id));
    q.addBindValue(fence.owner);
    q.addBindValue(fence.epoch);
    m_db.exec(q);
    if (q.numRowsAffected() == 0)
        throw LeaseLostError("conversation " + toWireId(id).toStdString() +
                             " is no longer held at epoch " + std::to_string(fence.epoch));
}

bool ConversationStore::dismissOutcome(const QUuid &id)
{
    m_cache.remove(id);
    QSqlQuery &q = m_db.prepared(u"UPDATE conversations SET outcome_dismissed = 1 WHERE id = ? "
                                 "AND outcome IS NOT NULL AND outcome_dismissed = 0"_s);
    q.addBindValue(toWireId(id));
    m_db.exec(q);
    return q.numRowsAffected() > 0;
}

std::optional<ConversationInfo> ConversationStore::find(const QUuid &id)
{
    if (const CachedRow *cached = m_cache.object(id))
        return cached->info;
    QSqlQuery &q = m_db.prepared(u"SELECT "_s + columns() +
                                 u" FROM conversations WHERE id = ? AND "_s + NotBeingRemoved);
    q.addBindValue(toWireId(id));
    m_db.exec(q);
    std::optional<ConversationInfo> info;
    if (m_db.next(q))
        info = conversationFromRow(q, m_instance);
    q.finish();
    if (info && m_cache.maxCost() > 0)
        cache(id, std::make_unique<CachedRow>(CachedRow{*info, {}, {}}));
    return info;
}

std::optional<QByteArray>
ConversationStore::findJson(const QUuid &id,
                            const std::function<RuntimeInfo(const ConversationInfo &)> &runtimeOf)
{
    CachedRow *row = m_cache.object(id);
    if (!row) {
        std::optional<ConversationInfo> info = find(id);
        if (!info)
            return std::nullopt;
        row = m_cache.object(id);
        if (!row) { // no cache
            info->runtime = runtimeOf(*info);
            return info->toJsonBytes();
        }
    }
    RuntimeInfo runtime = runtimeOf(row->info);
    if (row->json.isEmpty() || runtime != row->jsonRuntime) {
        ConversationInfo described = row->info;
        described.runtime = runtime;
        row->json = described.toJsonBytes();
        row->jsonRuntime = std::move(runtime);
    }
    return row->json;
}

QList<std::optional<ConversationInfo>> ConversationStore::findMany(const QList<QUuid> &ids)
{
    QList<std::optional<ConversationInfo>> result(ids.size());
    if (ids.isEmpty())
        return result;
    QStringList placeholders(ids.size(), u"?"_s);
    QSqlQuery q = m_db.prepare(u"SELECT "_s + columns() + u" FROM conversations WHERE id IN ("_s +
                               placeholders.join(u',') + u") AND "_s + NotBeingRemoved);
    for (const QUuid &id : ids)
        q.addBindValue(toWireId(id));
    m_db.exec(q);
    while (m_db.next(q)) {
        ConversationInfo info = conversationFromRow(q, m_instance);
        for (qsizetype i = 0; i < ids.size(); ++i) {
            if (ids[i] == info.id)
                result[i] = info;
        }
    }
    return result;
}

QSet<QUuid> ConversationStore::existingIds(const QList<QUuid> &ids)
{
    QSet<QUuid> existing;
    if (ids.isEmpty())
        return existing;
    QStringList placeholders(ids.size(), u"?"_s);
    QSqlQuery q = m_db.prepare(u"SELECT id FROM conversations WHERE id IN ("_s +
                               placeholders.join(u',') + u')');
    for (const QUuid &id : ids)
        q.addBindValue(toWireId(id));
    m_db.exec(q);
    while (m_db.next(q))
        existing.insert(QUuid(q.value(0).toString()));
    return existing;
}

QList<QPair<QUuid, QString>> ConversationStore::withWorkingDirs(const QStringList &dirs)
{
    QList<QPair<QUuid, QString>> found;
    if (dirs.isEmpty())
        return found;
    QStringList placeholders(dirs.size(), u"?"_s);
    QSqlQuery q =
        m_db.prepare(u"SELECT id, working_dir FROM conversations WHERE "_s + NotBeingRemoved +
                     u" AND working_dir IN ("_s + placeholders.join(u',') + u')');
    for (const QString &dir : dirs)
        q.addBindValue(dir);
    m_db.exec(q);
    while (m_db.next(q))
        found.append({QUuid(q.value(0).toString()), q.value(1).toString()});
    return found;
}

ConversationPageResult ConversationStore::search(const ConversationFilter &filter,
                                                 ConversationSort sort, const QString &pageId,
                                                 int limit)
{
    const bool byUpdated =
        sort == ConversationSort::UpdatedAt || sort == ConversationSort::UpdatedAtDesc;
    const bool descending =
        sort == ConversationSort::CreatedAtDesc || sort == ConversationSort::UpdatedAtDesc;
    const QString keyColumn = byUpdated ? u"updated_at"_s : u"created_at"_s;
    const QString direction = descending ? u" DESC"_s : u" ASC"_s;

    Where where = conversationWhere(filter, m_db.isPostgres());
    where.add(NotBeingRemoved);
    if (!pageId.isEmpty()) {
        // Keyset paging: the page starts at the cursor row itself. A row value, not
        // "key < ? OR (key = ? AND id <= ?)": with the OR, SQLite walked the partition index from
        // its start to the cursor (a deep page at 100,000 rows took 11-15 ms instead of 2 ms);
        // the row value is a range on the index, whatever the size of the catalog.
        const auto [key, id] = decodeCursor(pageId);
        where.add(u"("_s + keyColumn + u", id) "_s + (descending ? u"<="_s : u">="_s) +
                      u" (?, ?)"_s,
                  {key, id});
    }
    const QString sql = u"SELECT "_s + columns() + u" FROM conversations"_s + where.sql() +
                        u" ORDER BY "_s + keyColumn + direction + u", id"_s + direction +
                        u" LIMIT ?"_s;
    ConversationPageResult page;
    const auto take = [&](ConversationInfo info) {
        if (page.items.size() < limit) {
            page.items.append(std::move(info));
            return true;
        }
        const QDateTime &key = byUpdated ? info.updatedAt : info.createdAt;
        page.nextPageId = encodeCursor(key.toMSecsSinceEpoch(), toWireId(info.id));
        return false;
    };
    // Prepared once for the shapes of search clients repeat (a list's pages, a filter or two),
    // its rows read without Qt Sql's copy of each value: parsing the statement was a quarter
    // of a page of 10, and Qt's rows a fifth. Every tag adds a condition: a statement of many
    // tags is made for the request alone rather than kept without bound.
    if (filter.tags.size() <= 2) {
        Database::Statement &statement = m_db.statement(sql);
        where.bindTo(statement);
        statement.bind(int(where.values.size()), qint64(limit + 1));
        statement.exec();
        while (statement.next() && take(conversationFromRow(statement, m_instance))) {
        }
        statement.finish();
        return page;
    }
    QSqlQuery q = m_db.prepare(sql);
    where.bindTo(q);
    q.addBindValue(limit + 1);
    m_db.exec(q);
    while (m_db.next(q) && take(conversationFromRow(q, m_instance))) {
    }
    return page;
}

qint64 ConversationStore::count(const ConversationFilter &filter)
{
    Where where = conversationWhere(filter, m_db.isPostgres());
    // Only while a delete goes on: the condition doubled the time of a count over 100,000 rows.
    if (anyBeingRemoved())
        where.add(NotBeingRemoved);
    QSqlQuery q = m_db.prepare(u"SELECT COUNT(*) FROM conversations"_s + where.sql());
    where.bindTo(q);
    m_db.exec(q);
    return m_db.next(q) ? q.value(0).toLongLong() : 0;
}

QString ConversationStore::columns() const
{
    return m_instance.isEmpty() ? ConversationColumns : ConversationColumns + LiveLeaseOwnerColumn;
}

bool ConversationStore::announces() const
{
    return !m_instance.isEmpty() && m_db.isPostgres();
}

void ConversationStore::announce(const QUuid &id, const QString &what)
{
    if (!announces())
        return;
    // Delivered to the listening replicas when (and only if) the transaction commits.
    QSqlQuery &q = m_db.prepared(u"SELECT pg_notify('"_s + ChangeChannel + u"', ?)"_s);
    q.addBindValue(QString(m_instance + u' ' + toWireId(id) + u' ' + what));
    m_db.exec(q);
    q.finish();
}

void ConversationStore::setSecretNames(const QUuid &id, const QStringList &names)
{
    m_cache.remove(id);
    QSqlQuery q = m_db.prepare(u"UPDATE conversations SET secret_names = ? WHERE id = ?"_s);
    q.addBindValue(QString::fromUtf8(
        QJsonDocument(QJsonArray::fromStringList(names)).toJson(QJsonDocument::Compact)));
    q.addBindValue(toWireId(id));
    m_db.exec(q);
}

bool ConversationStore::update(const QUuid &id, const ConversationUpdate &update, qint64 nowMs)
{
    m_cache.remove(id);
    Where set;
    if (update.title)
        set.add(u"title = ?"_s, {*update.title});
    if (update.tags)
        set.add(u"tags = ?"_s, {tagsToJson(*update.tags)});
    if (update.alwaysConfirm)
        set.add(u"always_confirm = ?"_s, {int(*update.alwaysConfirm)});
    set.add(u"updated_at = ?"_s, {nowMs});
    QSqlQuery q = m_db.prepare(u"UPDATE conversations SET "_s + set.conditions.join(u", "_s) +
                               u" WHERE id = ?"_s);
    set.bindTo(q);
    q.addBindValue(toWireId(id));
    m_db.exec(q);
    return q.numRowsAffected() > 0;
}

bool ConversationStore::beginRemoval(const QUuid &id, const QString &deleter)
{
    m_cache.remove(id);
    Transaction transaction(m_db);
    QSqlQuery &q = m_db.prepared(u"INSERT INTO pending_deletes (conversation_id, deleter) SELECT "
                                 "id, ? FROM conversations WHERE id = ? AND "_s +
                                 NotBeingRemoved);
    q.addBindValue(deleter);
    q.addBindValue(toWireId(id));
    m_db.exec(q);
    const bool marked = q.numRowsAffected() > 0;
    if (marked)
        announce(id, u"deleted"_s);
    transaction.commit();
    return marked;
}

bool ConversationStore::isBeingRemoved(const QUuid &id)
{
    QSqlQuery &q =
        m_db.prepared(u"SELECT COUNT(*) FROM pending_deletes WHERE conversation_id = ?"_s);
    q.addBindValue(toWireId(id));
    m_db.exec(q);
    const bool marked = m_db.next(q) && q.value(0).toLongLong() > 0;
    q.finish();
    return marked;
}

bool ConversationStore::anyBeingRemoved()
{
    QSqlQuery &q = m_db.prepared(u"SELECT COUNT(*) FROM pending_deletes"_s);
    m_db.exec(q);
    const bool any = m_db.next(q) && q.value(0).toLongLong() > 0;
    q.finish();
    return any;
}

QList<ConversationInfo> ConversationStore::takeOverRemovals(const QString &deleter, bool all,
                                                            std::chrono::milliseconds window)
{
    // A deleter that beats is still at it; the instance a replica's row names is its live one
    // (a restart of the replica replaced it), so an earlier instance's deletes are taken over.
    QSqlQuery &abandoned = m_db.prepared(
        u"SELECT conversation_id, deleter FROM pending_deletes WHERE ? = 1 OR deleter IS NULL OR "
        "(deleter <> ? AND NOT EXISTS (SELECT 1 FROM replicas r WHERE r.instance = "
        "pending_deletes.deleter AND r.stopped_at IS NULL AND agentdeck_now_ms() - "
        "r.heartbeat_at <= COALESCE(r.liveness_window_ms, ?)))"_s);
    abandoned.addBindValue(all ? 1 : 0);
    abandoned.addBindValue(deleter);
    abandoned.addBindValue(qint64(window.count()));
    m_db.exec(abandoned);
    QList<std::pair<QString, QVariant>> found;
    while (m_db.next(abandoned))
        found.append({abandoned.value(0).toString(), abandoned.value(1)});
    abandoned.finish();
    // Asked at every lease renewal of a replica: nothing to take takes no write lock.
    if (found.isEmpty())
        return {};
    // Each taken only from the deleter it was found with: two replicas looking at once take
    // each delete once.
    Transaction transaction(m_db);
    QList<QUuid> taken;
    QSqlQuery &claim = m_db.prepared(u"UPDATE pending_deletes SET deleter = ? WHERE "
                                     "conversation_id = ? AND deleter IS NOT DISTINCT FROM ?"_s);
    for (const auto &[id, previous] : std::as_const(found)) {
        claim.addBindValue(deleter);
        claim.addBindValue(id);
        claim.addBindValue(previous.isNull() ? QVariant(QMetaType(QMetaType::QString)) : previous);
        m_db.exec(claim);
        if (claim.numRowsAffected() > 0)
            taken.append(QUuid::fromString(id));
    }
    QList<ConversationInfo> infos;
    for (const QUuid &id : std::as_const(taken)) {
        QSqlQuery &q =
            m_db.prepared(u"SELECT "_s + columns() + u" FROM conversations WHERE id = ?"_s);
        q.addBindValue(toWireId(id));
        m_db.exec(q);
        if (m_db.next(q))
            infos.append(conversationFromRow(q, m_instance));
        q.finish();
    }
    transaction.commit();
    return infos;
}

bool ConversationStore::remove(const QUuid &id)
{
    m_cache.remove(id);
    Transaction transaction(m_db);
    QSqlQuery &events = m_db.prepared(u"DELETE FROM events WHERE conversation_id = ?"_s);
    events.addBindValue(toWireId(id));
    m_db.exec(events);
    QSqlQuery &row = m_db.prepared(u"DELETE FROM conversations WHERE id = ?"_s);
    row.addBindValue(toWireId(id));
    m_db.exec(row);
    const bool removed = row.numRowsAffected() > 0;
    QSqlQuery &mark = m_db.prepared(u"DELETE FROM pending_deletes WHERE conversation_id = ?"_s);
    mark.addBindValue(toWireId(id));
    m_db.exec(mark);
    // Announced once: when the delete began, if it was marked.
    if (removed && mark.numRowsAffected() == 0)
        announce(id, u"deleted"_s);
    transaction.commit();
    return removed;
}

int ConversationStore::removeNewestEvents(const QUuid &id, int count)
{
    QSqlQuery &q = m_db.prepared(u"DELETE FROM events WHERE conversation_id = ? AND seq IN "
                                 "(SELECT seq FROM events WHERE conversation_id = ? "
                                 "ORDER BY seq DESC LIMIT ?)"_s);
    const QString wireId = toWireId(id);
    q.addBindValue(wireId);
    q.addBindValue(wireId);
    q.addBindValue(count);
    m_db.exec(q);
    return q.numRowsAffected();
}

std::optional<bool> ConversationStore::setArchived(const QUuid &id,
                                                   std::optional<qint64> archivedAtMs)
{
    m_cache.remove(id);
    QSqlQuery &q = m_db.prepared(
        archivedAtMs
            ? u"UPDATE conversations SET archived_at = ? WHERE id = ? AND archived_at IS NULL"_s
            : u"UPDATE conversations SET archived_at = NULL WHERE id = ? AND archived_at IS NOT NULL"_s);
    if (archivedAtMs)
        q.addBindValue(*archivedAtMs);
    q.addBindValue(toWireId(id));
    m_db.exec(q);
    if (q.numRowsAffected() > 0)
        return true;
    if (!find(id))
        return std::nullopt;
    return false;
}

void ConversationStore::setRuntimeError(const QUuid &id, const std::optional<RuntimeError> &error)
{
    m_cache.remove(id);
    QSqlQuery &q = m_db.prepared(
        u"UPDATE conversations SET runtime_error_code = ?, runtime_error_message = ? WHERE id = ?"_s);
    q.addBindValue(error ? QVariant(error->code) : QVariant(QMetaType(QMetaType::QString)));
    q.addBindValue(error ? QVariant(error->message) : QVariant(QMetaType(QMetaType::QString)));
    q.addBindValue(toWireId(id));
    m_db.exec(q);
}

QList<ExpiryCandidate> ConversationStore::expiryCandidates(qint64 inactiveBeforeMs)
{
    QSqlQuery &q = m_db.prepared(
        u"SELECT id, working_dir, workspace_owned FROM conversations WHERE "_s + NotBeingRemoved +
        u" AND ((runtime_expired_at IS NULL AND updated_at < ? "
        "AND execution_status NOT IN ('running', 'waiting_for_confirmation')) "
        "OR (runtime_expired_at IS NOT NULL AND runtime_cleaned = 0))"_s);
    q.addBindValue(inactiveBeforeMs);
    m_db.exec(q);
    QList<ExpiryCandidate> candidates;
    while (m_db.next(q))
        candidates.append(
            {QUuid::fromString(q.value(0).toString()), q.value(1).toString(), q.value(2).toBool()});
    q.finish();
    return candidates;
}

bool ConversationStore::markExpired(const QUuid &id, qint64 inactiveBeforeMs, qint64 nowMs)
{
    m_cache.remove(id);
    // The same conditions as the selection, checked again in the write: a conversation that
    // started running in between is left alone. A row already marked stays marked.
    QSqlQuery &q = m_db.prepared(
        u"UPDATE conversations SET runtime_expired_at = COALESCE(runtime_expired_at, ?), "
        "runtime_error_code = NULL, runtime_error_message = NULL WHERE id = ? AND "
        "(runtime_expired_at IS NOT NULL OR (updated_at < ? AND execution_status NOT IN "
        "('running', 'waiting_for_confirmation')))"_s);
    q.addBindValue(nowMs);
    q.addBindValue(toWireId(id));
    q.addBindValue(inactiveBeforeMs);
    m_db.exec(q);
    return q.numRowsAffected() > 0;
}

bool ConversationStore::clearExpiry(const QUuid &id)
{
    m_cache.remove(id);
    QSqlQuery &q =
        m_db.prepared(u"UPDATE conversations SET runtime_expired_at = NULL, runtime_cleaned = 0 "
                      "WHERE id = ? AND runtime_expired_at IS NOT NULL AND runtime_cleaned = 1"_s);
    q.addBindValue(toWireId(id));
    m_db.exec(q);
    return q.numRowsAffected() > 0;
}

void ConversationStore::markCleaned(const QUuid &id)
{
    QSqlQuery &q = m_db.prepared(u"UPDATE conversations SET runtime_cleaned = 1 WHERE id = ?"_s);
    q.addBindValue(toWireId(id));
    m_db.exec(q);
}

QList<QUuid> ConversationStore::idsWithStatus(ExecutionStatus status)
{
    QSqlQuery &q = m_db.prepared(u"SELECT id FROM conversations WHERE execution_status = ? AND "_s +
                                 NotBeingRemoved);
    q.addBindValue(toString(status));
    m_db.exec(q);
    QList<QUuid> ids;
    while (m_db.next(q))
        ids.append(QUuid::fromString(q.value(0).toString()));
    q.finish();
    return ids;
}

QList<QPair<QString, qint64>> ConversationStore::countByStatus()
{
    QSqlQuery &q = m_db.prepared(
        anyBeingRemoved() ? u"SELECT execution_status, COUNT(*) FROM conversations WHERE "_s +
                                NotBeingRemoved + u" GROUP BY execution_status"_s
                          : u"SELECT execution_status, COUNT(*) FROM conversations "
                            "GROUP BY execution_status"_s);
    m_db.exec(q);
    QList<QPair<QString, qint64>> counts;
    while (m_db.next(q))
        counts.append({q.value(0).toString(), q.value(1).toLongLong()});
    q.finish();
    return counts;
}

} // namespace AgentDeck
