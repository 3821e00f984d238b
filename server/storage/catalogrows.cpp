#include "catalogrows.h"

#include "apierror.h"
#include "conversationstore.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSqlQuery>

using namespace Qt::StringLiterals;

namespace AgentDeck::CatalogRows {

const QString ConversationColumns =
    u"id, title, tags, created_at, updated_at, archived_at, execution_status, agent_kind, "
    "working_dir, workspace_owned, always_confirm, event_count, last_event_at, "
    "runtime_error_code, runtime_error_message, runtime_expired_at, agent_config, prompt_tokens, "
    "completion_tokens, llm_requests, llm_retries, sandbox_policy, outcome, outcome_dismissed, "
    "secret_names, running_since"_s;
const QString LiveLeaseOwnerColumn =
    u", CASE WHEN lease_expires_at > agentdeck_now_ms() THEN lease_owner END"_s;
const QString NotBeingRemoved = u"id NOT IN (SELECT conversation_id FROM pending_deletes)"_s;

QDateTime fromMs(qint64 ms)
{
    return QDateTime::fromMSecsSinceEpoch(ms, Qt::UTC);
}

QVariant nullableMs(const std::optional<QDateTime> &time)
{
    return time ? QVariant(time->toMSecsSinceEpoch()) : QVariant(QMetaType(QMetaType::LongLong));
}

QString tagsToJson(const QMap<QString, QString> &tags)
{
    return QString::fromUtf8(QJsonDocument(toWireTags(tags)).toJson(QJsonDocument::Compact));
}

namespace {

// A row of a result, column by column: QSqlQuery's or a Database::Statement's.
class RowReader
{
public:
    virtual ~RowReader() = default;
    virtual QString text(int column) const = 0;
    virtual qint64 int64(int column) const = 0;
    virtual bool isNull(int column) const = 0;
    std::optional<QDateTime> time(int column) const
    {
        return isNull(column) ? std::nullopt : std::optional(fromMs(int64(column)));
    }
};

class QueryRow final : public RowReader
{
public:
    explicit QueryRow(const QSqlQuery &query)
        : m_query(query)
    {}
    QString text(int column) const override { return m_query.value(column).toString(); }
    qint64 int64(int column) const override { return m_query.value(column).toLongLong(); }
    bool isNull(int column) const override { return m_query.value(column).isNull(); }

private:
    const QSqlQuery &m_query;
};

class StatementRow final : public RowReader
{
public:
    explicit StatementRow(const Database::Statement &statement)
        : m_statement(statement)
    {}
    QString text(int column) const override { return m_statement.text(column); }
    qint64 int64(int column) const override { return m_statement.int64(column); }
    bool isNull(int column) const override { return m_statement.isNull(column); }

private:
    const Database::Statement &m_statement;
};

ConversationInfo conversationFrom(const RowReader &q, const QString &instance)
{
    ConversationInfo info;
    info.id = QUuid::fromString(q.text(0));
    info.title = q.text(1);
    if (const QString tagsJson = q.text(2); tagsJson != u"{}"_s) {
        const QJsonObject tags = QJsonDocument::fromJson(tagsJson.toUtf8()).object();
        for (auto it = tags.begin(); it != tags.end(); ++it)
            info.tags.insert(it.key(), it.value().toString());
    }
    info.createdAt = fromMs(q.int64(3));
    info.updatedAt = fromMs(q.int64(4));
    info.archivedAt = q.time(5);
    info.executionStatus = executionStatusFromString(q.text(6)).value_or(ExecutionStatus::Idle);
    info.agentKind = q.text(7);
    info.workingDir = q.text(8);
    info.workspaceOwnedByServer = (q.int64(9) != 0);
    info.alwaysConfirm = (q.int64(10) != 0);
    info.eventCount = q.int64(11);
    info.lastEventAt = q.time(12);
    if (const QString config = q.text(16); !config.isEmpty())
        info.agentConfig = QJsonDocument::fromJson(config.toUtf8()).object();
    info.promptTokens = q.int64(17);
    info.completionTokens = q.int64(18);
    info.llmRequests = q.int64(19);
    info.llmRetries = q.int64(20);
    if (const QString policy = q.text(21); !policy.isEmpty())
        info.sandbox = SandboxPolicy::fromJson(QJsonDocument::fromJson(policy.toUtf8()).object());
    if (const QString outcome = q.text(22); !outcome.isEmpty()) {
        info.outcome = RunOutcome::fromJson(QJsonDocument::fromJson(outcome.toUtf8()).object());
        if (info.outcome)
            info.outcome->dismissed = (q.int64(23) != 0);
    }
    if (const QString names = q.text(24); names != u"[]"_s) {
        for (const QJsonValue &name : QJsonDocument::fromJson(names.toUtf8()).array())
            info.secretNames.append(name.toString());
    }
    info.runningSince = q.time(25);
    const QString owner = instance.isEmpty() ? QString() : q.text(26);
    if (!q.isNull(15)) {
        info.runtime = {RuntimeStatus::Missing, false,
                        RuntimeError{u"runtime_expired"_s,
                                     u"The runtime expired; its workspace was deleted"_s}};
    } else if (!owner.isEmpty() && owner != instance) {
        // Sandboxes are local to the replica that started them: this one cannot see it.
        info.runtime = {
            RuntimeStatus::OwnershipLost, false,
            RuntimeError{u"held_by_other_replica"_s,
                         u"The conversation runs on replica %1"_s.arg(owner.section(u'/', 0, 0))}};
    } else if (!q.isNull(13)) {
        info.runtime = {RuntimeStatus::Error, true, RuntimeError{q.text(13), q.text(14)}};
    }
    return info;
}

} // namespace

ConversationInfo conversationFromRow(const QSqlQuery &q, const QString &instance)
{
    return conversationFrom(QueryRow(q), instance);
}

ConversationInfo conversationFromRow(const Database::Statement &statement, const QString &instance)
{
    return conversationFrom(StatementRow(statement), instance);
}

void Where::bindTo(Database::Statement &statement, int first) const
{
    for (qsizetype i = 0; i < values.size(); ++i) {
        const QVariant &value = values[i];
        const int index = first + int(i);
        switch (value.typeId()) {
        case QMetaType::Bool:
            statement.bind(index, value.toBool());
            break;
        case QMetaType::Int:
        case QMetaType::LongLong:
        case QMetaType::UInt:
        case QMetaType::ULongLong:
            statement.bind(index, value.toLongLong());
            break;
        default:
            statement.bind(index, value.toString());
        }
    }
}

// `text` inside a LIKE pattern, with its own wildcards taken literally.

namespace {

QString likeContains(const QString &text)
{
    QString escaped = text;
    escaped.replace(u'\\', u"\\\\"_s).replace(u'%', u"\\%"_s).replace(u'_', u"\\_"_s);
    return u'%' + escaped + u'%';
}

} // namespace

// SQLite's LIKE ignores ASCII case; PostgreSQL needs ILIKE to match the same rows.

namespace {

QString containsCondition(const QString &column, bool postgres)
{
    return column + (postgres ? u" ILIKE ? ESCAPE '\\'"_s : u" LIKE ? ESCAPE '\\'"_s);
}

} // namespace

// Whether `text` is stored as it is inside an event's JSON, where the writer escapes quotes,

// backslashes and control characters.

namespace {

bool storedAsIs(const QString &text)
{
    return std::none_of(text.cbegin(), text.cend(),
                        [](QChar c) { return c == u'"' || c == u'\\' || c.unicode() < 0x20; });
}

} // namespace

// The `body` filter looks at the text of an event's fields (strings and numbers, at any depth),

// not at their names, nor at the envelope, which has filters of its own: `body=command` finds

// commands, not every action, and `body=Message` no longer finds every message.

//

// PostgreSQL's jsonb holds no NUL and no surrogate without its pair, and one event whose text

// had either (a message, a command's output) made every body search of its conversation fail.

// Such an event is searched as the JSON text it is stored as: one whose JSON has the escape

// `\u0000` or `\ud800`-`\udfff` (an odd number of backslashes before the `u`; an even number is

// text that spells one, as command output may).

namespace {

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

} // namespace

namespace {

// The events' `body` filter, on the `body` column of the events in the statement.
void addBodyContains(Where &where, const QString &text, bool postgres)
{
    const QString pattern = likeContains(text);
    // The stored JSON holds such text as it is: a plain LIKE passes over most events before
    // any is taken apart.
    if (storedAsIs(text))
        where.add(containsCondition(u"body"_s, postgres), {pattern});
    addBodyTextCondition(where, pattern, postgres);
}

} // namespace

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
    // Hex digits and dashes only (ConversationFilter::fromQuery): nothing to escape.
    if (!filter.idPrefix.isEmpty())
        where.add(u"id LIKE ?"_s, {QString(filter.idPrefix + u'%')});
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
    // Every event of the conversation is read until one has it: a search of words no event
    // holds reads the whole log (the index on (conversation_id, seq) finds each one's events).
    if (!filter.bodyContains.isEmpty()) {
        Where inEvents;
        inEvents.add(u"events.conversation_id = conversations.id"_s);
        addBodyContains(inEvents, filter.bodyContains, postgres);
        where.add(u"EXISTS (SELECT 1 FROM events"_s + inEvents.sql() + u')', inEvents.values);
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
    if (!filter.bodyContains.isEmpty())
        addBodyContains(where, filter.bodyContains, postgres);
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

} // namespace AgentDeck::CatalogRows
