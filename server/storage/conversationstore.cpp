#include "conversationstore.h"

#include "apierror.h"
#include "database.h"

#include <QJsonDocument>
#include <QSqlRecord>

#include <algorithm>
#include <memory>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {

const QString ConversationColumns =
    u"id, title, tags, created_at, updated_at, archived_at, execution_status, agent_kind, "
    "working_dir, workspace_owned, always_confirm, event_count, last_event_at, "
    "runtime_error_code, runtime_error_message, runtime_expired_at, agent_config, prompt_tokens, "
    "completion_tokens, llm_requests, llm_retries, sandbox_policy, outcome, outcome_dismissed"_s;
// Several replicas: the owner of a live lease, whose replica holds the runtime (column 24).
const QString LiveLeaseOwnerColumn =
    u", CASE WHEN lease_expires_at > agentdeck_now_ms() THEN lease_owner END"_s;
// A conversation being deleted is gone to every read (see beginRemoval()).
const QString NotBeingRemoved = u"id NOT IN (SELECT conversation_id FROM pending_deletes)"_s;

QDateTime fromMs(qint64 ms)
{
    return QDateTime::fromMSecsSinceEpoch(ms, Qt::UTC);
}

std::optional<QDateTime> optionalTime(const QVariant &value)
{
    if (value.isNull())
        return std::nullopt;
    return fromMs(value.toLongLong());
}

QVariant nullableMs(const std::optional<QDateTime> &time)
{
    return time ? QVariant(time->toMSecsSinceEpoch()) : QVariant(QMetaType(QMetaType::LongLong));
}

QString tagsToJson(const QMap<QString, QString> &tags)
{
    QJsonObject object;
    for (auto it = tags.cbegin(); it != tags.cend(); ++it)
        object.insert(it.key(), it.value());
    return QString::fromUtf8(QJsonDocument(object).toJson(QJsonDocument::Compact));
}

// `instance`: this process's lease owner name when several replicas share the catalog; the
// row then has LiveLeaseOwnerColumn at 24.
ConversationInfo conversationFromRow(const QSqlQuery &q, const QString &instance)
{
    ConversationInfo info;
    info.id = QUuid::fromString(q.value(0).toString());
    info.title = q.value(1).toString();
    if (const QString tagsJson = q.value(2).toString(); tagsJson != u"{}"_s) {
        const QJsonObject tags = QJsonDocument::fromJson(tagsJson.toUtf8()).object();
        for (auto it = tags.begin(); it != tags.end(); ++it)
            info.tags.insert(it.key(), it.value().toString());
    }
    info.createdAt = fromMs(q.value(3).toLongLong());
    info.updatedAt = fromMs(q.value(4).toLongLong());
    info.archivedAt = optionalTime(q.value(5));
    info.executionStatus =
        executionStatusFromString(q.value(6).toString()).value_or(ExecutionStatus::Idle);
    info.agentKind = q.value(7).toString();
    info.workingDir = q.value(8).toString();
    info.workspaceOwnedByServer = q.value(9).toBool();
    info.alwaysConfirm = q.value(10).toBool();
    info.eventCount = q.value(11).toLongLong();
    info.lastEventAt = optionalTime(q.value(12));
    if (const QString config = q.value(16).toString(); !config.isEmpty())
        info.agentConfig = QJsonDocument::fromJson(config.toUtf8()).object();
    info.promptTokens = q.value(17).toLongLong();
    info.completionTokens = q.value(18).toLongLong();
    info.llmRequests = q.value(19).toLongLong();
    info.llmRetries = q.value(20).toLongLong();
    if (const QString policy = q.value(21).toString(); !policy.isEmpty())
        info.sandbox = SandboxPolicy::fromJson(QJsonDocument::fromJson(policy.toUtf8()).object());
    if (const QString outcome = q.value(22).toString(); !outcome.isEmpty()) {
        info.outcome = RunOutcome::fromJson(QJsonDocument::fromJson(outcome.toUtf8()).object());
        if (info.outcome)
            info.outcome->dismissed = q.value(23).toBool();
    }
    const QString owner = instance.isEmpty() ? QString() : q.value(24).toString();
    if (!q.value(15).isNull()) {
        info.runtime = {RuntimeStatus::Missing, false,
                        RuntimeError{u"runtime_expired"_s,
                                     u"The runtime expired; its workspace was deleted"_s}};
    } else if (!owner.isEmpty() && owner != instance) {
        // Sandboxes are local to the replica that started them: this one cannot see it.
        info.runtime = {
            RuntimeStatus::OwnershipLost, false,
            RuntimeError{u"held_by_other_replica"_s,
                         u"The conversation runs on replica %1"_s.arg(owner.section(u'/', 0, 0))}};
    } else if (!q.value(13).isNull()) {
        info.runtime = {RuntimeStatus::Error, true,
                        RuntimeError{q.value(13).toString(), q.value(14).toString()}};
    }
    return info;
}

// `text` inside a LIKE pattern, with its own wildcards taken literally.
QString likeContains(const QString &text)
{
    QString escaped = text;
    escaped.replace(u'\\', u"\\\\"_s).replace(u'%', u"\\%"_s).replace(u'_', u"\\_"_s);
    return u'%' + escaped + u'%';
}

// A WHERE clause with its bound values, built up condition by condition.
struct Where
{
    QStringList conditions;
    QVariantList values;

    void add(const QString &condition, QVariantList conditionValues = {})
    {
        conditions.append(condition);
        values.append(conditionValues);
    }
    QString sql() const
    {
        return conditions.isEmpty() ? QString() : u" WHERE "_s + conditions.join(u" AND "_s);
    }
    void bindTo(QSqlQuery &query) const
    {
        for (const QVariant &value : values)
            query.addBindValue(value);
    }
};

// SQLite's LIKE ignores ASCII case; PostgreSQL needs ILIKE to match the same rows.
QString containsCondition(const QString &column, bool postgres)
{
    return column + (postgres ? u" ILIKE ? ESCAPE '\\'"_s : u" LIKE ? ESCAPE '\\'"_s);
}

// Whether `text` is stored as it is inside an event's JSON, where the writer escapes quotes,
// backslashes and control characters.
bool storedAsIs(const QString &text)
{
    return std::none_of(text.cbegin(), text.cend(),
                        [](QChar c) { return c == u'"' || c == u'\\' || c.unicode() < 0x20; });
}

// The `body` filter looks at the text of an event's fields (strings and numbers, at any depth),
// not at their names, nor at the envelope, which has filters of its own: `body=command` finds
// commands, not every action, and `body=Message` no longer finds every message.
//
// PostgreSQL's jsonb holds no NUL and no surrogate without its pair, and one event whose text
// had either (a message, a command's output) made every body search of its conversation fail.
// Such an event is searched as the JSON text it is stored as: one whose JSON has the escape
// `\u0000` or `\ud800`-`\udfff` (an odd number of backslashes before the `u`; an even number is
// text that spells one, as command output may).
void addBodyTextCondition(Where &where, const QString &pattern, bool postgres)
{
    if (!postgres) {
        where.add(u"EXISTS (SELECT 1 FROM json_tree(json_remove(body, '$.id', '$.kind', "
                  "'$.source', '$.timestamp', '$.seq')) WHERE type IN ('text', 'integer', "
                  "'real') AND value LIKE ? ESCAPE '\\')"_s,
                  {pattern});
        return;
    }
    where.add(u"CASE WHEN body ~ '(^|[^\\\\])(\\\\\\\\)*\\\\u(0000|[dD][89a-fA-F])' "
              "THEN body ILIKE ? ESCAPE '\\' "
              "ELSE EXISTS (SELECT 1 FROM jsonb_path_query(body::jsonb - ARRAY['id', 'kind', "
              "'source', 'timestamp', 'seq'], 'strict $.**') AS item WHERE "
              "jsonb_typeof(item) IN ('string', 'number') AND item #>> '{}' ILIKE ? "
              "ESCAPE '\\') END"_s,
              {pattern, pattern});
}

Where conversationWhere(const ConversationFilter &filter, bool postgres)
{
    Where where;
    if (filter.archive == ArchiveFilter::Active)
        where.add(u"archived_at IS NULL"_s);
    else if (filter.archive == ArchiveFilter::Archived)
        where.add(u"archived_at IS NOT NULL"_s);
    if (filter.status)
        where.add(u"execution_status = ?"_s, {toString(*filter.status)});
    if (!filter.text.isEmpty())
        where.add(containsCondition(u"title"_s, postgres), {likeContains(filter.text)});
    // Key/value pairs of the tags object rather than a JSON path: any key, quotes and dots
    // included, matches as is.
    const QString pairs = postgres ? u"json_each_text(tags::json)"_s : u"json_each(tags)"_s;
    for (const TagFilter &tag : filter.tags) {
        if (tag.value)
            where.add(u"EXISTS (SELECT 1 FROM "_s + pairs + u" WHERE key = ? AND value = ?)"_s,
                      {tag.key, *tag.value});
        else
            where.add(u"EXISTS (SELECT 1 FROM "_s + pairs + u" WHERE key = ?)"_s, {tag.key});
    }
    return where;
}

Where eventWhere(const QUuid &id, const EventFilter &filter, bool postgres)
{
    Where where;
    where.add(u"conversation_id = ?"_s, {toWireId(id)});
    if (filter.afterSeq > 0)
        where.add(u"seq > ?"_s, {filter.afterSeq});
    if (!filter.kind.isEmpty())
        where.add(u"kind = ?"_s, {filter.kind});
    if (!filter.source.isEmpty())
        where.add(u"source = ?"_s, {filter.source});
    if (!filter.bodyContains.isEmpty()) {
        const QString pattern = likeContains(filter.bodyContains);
        // The stored JSON holds such text as it is: a plain LIKE passes over most events before
        // any is taken apart.
        if (storedAsIs(filter.bodyContains))
            where.add(containsCondition(u"body"_s, postgres), {pattern});
        addBodyTextCondition(where, pattern, postgres);
    }
    if (filter.timestampGteMs)
        where.add(u"timestamp >= ?"_s, {*filter.timestampGteMs});
    if (filter.timestampLtMs)
        where.add(u"timestamp < ?"_s, {*filter.timestampLtMs});
    return where;
}

// Page ids are opaque to clients: "<sort key ms>:<id>" in base64url.
QString encodeCursor(qint64 key, const QString &id)
{
    return QString::fromLatin1(
        QString(QString::number(key) + u':' + id)
            .toUtf8()
            .toBase64(QByteArray::Base64UrlEncoding | QByteArray::OmitTrailingEquals));
}

std::pair<qint64, QString> decodeCursor(const QString &pageId)
{
    const auto decoded = QByteArray::fromBase64Encoding(
        pageId.toLatin1(), QByteArray::Base64UrlEncoding | QByteArray::AbortOnBase64DecodingErrors);
    const QString text = decoded ? QString::fromUtf8(*decoded) : QString();
    const qsizetype colon = text.indexOf(u':');
    bool ok = false;
    const qint64 key = colon > 0 ? text.left(colon).toLongLong(&ok) : 0;
    const auto id = colon > 0 ? parseWireId(QStringView(text).mid(colon + 1)) : std::nullopt;
    if (!ok || !id)
        throw ApiError::invalidParameter(u"page_id is not a page of this search"_s);
    return {key, toWireId(*id)};
}

} // namespace

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
    QSqlQuery q = m_db.prepare(u"SELECT "_s + columns() + u" FROM conversations"_s + where.sql() +
                               u" ORDER BY "_s + keyColumn + direction + u", id"_s + direction +
                               u" LIMIT ?"_s);
    where.bindTo(q);
    q.addBindValue(limit + 1);
    m_db.exec(q);

    ConversationPageResult page;
    while (m_db.next(q)) {
        ConversationInfo info = conversationFromRow(q, m_instance);
        if (page.items.size() == limit) {
            const QDateTime &key = byUpdated ? info.updatedAt : info.createdAt;
            page.nextPageId = encodeCursor(key.toMSecsSinceEpoch(), toWireId(info.id));
            break;
        }
        page.items.append(std::move(info));
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

bool ConversationStore::update(const QUuid &id, const ConversationUpdate &update, qint64 nowMs)
{
    m_cache.remove(id);
    Where set;
    if (update.title)
        set.add(u"title = ?"_s, {*update.title});
    if (update.tags)
        set.add(u"tags = ?"_s, {tagsToJson(*update.tags)});
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

bool ConversationStore::setArchived(const QUuid &id, std::optional<qint64> archivedAtMs)
{
    m_cache.remove(id);
    // Archiving again keeps the first timestamp.
    QSqlQuery &q = m_db.prepared(
        archivedAtMs
            ? u"UPDATE conversations SET archived_at = COALESCE(archived_at, ?) WHERE id = ?"_s
            : u"UPDATE conversations SET archived_at = NULL WHERE id = ?"_s);
    if (archivedAtMs)
        q.addBindValue(*archivedAtMs);
    q.addBindValue(toWireId(id));
    m_db.exec(q);
    return q.numRowsAffected() > 0;
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

QList<StoredEvent> ConversationStore::append(const QUuid &id, QList<Event> events,
                                             std::optional<ExecutionStatus> status, qint64 nowMs,
                                             const LeaseToken *fence, const OutcomeChange &outcome)
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
        status ? u"UPDATE conversations SET event_count = ?, updated_at = ?, "
                 "last_event_at = CASE WHEN ? THEN ? ELSE last_event_at END, open_messages = ?, "
                 "answered_through = ?, execution_status = ? WHERE id = ?"_s
               : u"UPDATE conversations SET event_count = ?, updated_at = ?, "
                 "last_event_at = CASE WHEN ? THEN ? ELSE last_event_at END, open_messages = ?, "
                 "answered_through = ? WHERE id = ?"_s);
    int column = 0;
    row.bind(column++, seq);
    row.bind(column++, nowMs);
    row.bind(column++, !events.isEmpty());
    row.bind(column++, nowMs);
    row.bind(column++, openMessages);
    row.bind(column++, answeredThrough);
    if (status)
        row.bind(column++, toString(*status));
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
        info.updatedAt = now;
        if (!events.isEmpty())
            info.lastEventAt = now;
        if (status)
            info.executionStatus = *status;
        if (outcome.op == OutcomeChange::Op::Set)
            info.outcome = written;
        else if (outcome.op == OutcomeChange::Op::Dismiss && info.outcome)
            info.outcome->dismissed = true;
        cached->json.clear();
        cache(id, std::move(cached));
    }
    return stored;
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
