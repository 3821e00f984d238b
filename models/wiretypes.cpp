#include "wiretypes.h"

#include "wirebytes.h"

#include <QJsonArray>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {

constexpr std::array executionStatusNames{
    std::pair{ExecutionStatus::Idle, "idle"_L1},
    std::pair{ExecutionStatus::Running, "running"_L1},
    std::pair{ExecutionStatus::Paused, "paused"_L1},
    std::pair{ExecutionStatus::WaitingForConfirmation, "waiting_for_confirmation"_L1},
    std::pair{ExecutionStatus::Finished, "finished"_L1},
    std::pair{ExecutionStatus::Error, "error"_L1},
    std::pair{ExecutionStatus::Stuck, "stuck"_L1},
};

constexpr std::array runtimeStatusNames{
    std::pair{RuntimeStatus::Available, "available"_L1},
    std::pair{RuntimeStatus::Starting, "starting"_L1},
    std::pair{RuntimeStatus::Missing, "missing"_L1},
    std::pair{RuntimeStatus::Error, "error"_L1},
    std::pair{RuntimeStatus::OwnershipLost, "ownership_lost"_L1},
    std::pair{RuntimeStatus::Paused, "paused"_L1},
    std::pair{RuntimeStatus::Stopped, "stopped"_L1},
};

constexpr std::array outcomeKindNames{
    std::pair{RunOutcome::Kind::Succeeded, "succeeded"_L1},
    std::pair{RunOutcome::Kind::Failed, "failed"_L1},
    std::pair{RunOutcome::Kind::Interrupted, "interrupted"_L1},
    std::pair{RunOutcome::Kind::TimedOut, "timed_out"_L1},
    std::pair{RunOutcome::Kind::Limit, "limit"_L1},
    std::pair{RunOutcome::Kind::Error, "error"_L1},
};

template<typename Enum, std::size_t N>
QString nameOf(const std::array<std::pair<Enum, QLatin1StringView>, N> &table, Enum value)
{
    for (const auto &[v, name] : table) {
        if (v == value)
            return name;
    }
    return {};
}

template<typename Enum, std::size_t N>
std::optional<Enum> valueOf(const std::array<std::pair<Enum, QLatin1StringView>, N> &table,
                            QStringView text)
{
    for (const auto &[v, name] : table) {
        if (text == name)
            return v;
    }
    return std::nullopt;
}

QJsonValue optionalTime(const std::optional<QDateTime> &time)
{
    return time ? QJsonValue(toWireTime(*time)) : QJsonValue(QJsonValue::Null);
}

} // namespace

QString toString(ExecutionStatus status)
{
    return nameOf(executionStatusNames, status);
}

std::optional<ExecutionStatus> executionStatusFromString(QStringView text)
{
    return valueOf(executionStatusNames, text);
}

QString toString(RuntimeStatus status)
{
    return nameOf(runtimeStatusNames, status);
}

std::optional<RuntimeStatus> runtimeStatusFromString(QStringView text)
{
    return valueOf(runtimeStatusNames, text);
}

QString toDisplayTime(const QDateTime &time, bool dateUnlessToday)
{
    if (!time.isValid())
        return u"-"_s;
    const QDateTime utc = time.toUTC();
    const bool today = utc.date() == QDateTime::currentDateTimeUtc().date();
    return utc.toString(dateUnlessToday && today ? u"HH:mm:ss 'UTC'"_s
                                                 : u"yyyy-MM-dd HH:mm:ss 'UTC'"_s);
}

std::optional<QDateTime> parseWireTime(const QString &text)
{
    QDateTime time = QDateTime::fromString(text, Qt::ISODateWithMs);
    if (!time.isValid())
        return std::nullopt;
    // A time without a zone is taken as UTC: the wire never speaks local time.
    if (time.timeSpec() == Qt::LocalTime)
        time.setTimeSpec(Qt::UTC);
    return time.toUTC();
}

QJsonObject toWireTags(const QMap<QString, QString> &tags)
{
    QJsonObject object;
    for (auto it = tags.cbegin(); it != tags.cend(); ++it)
        object.insert(it.key(), it.value());
    return object;
}

QString toWireId(const QUuid &id)
{
    return id.toString(QUuid::WithoutBraces);
}

std::optional<qint64> parseWireCount(QStringView text)
{
    const bool digitsOnly = !text.isEmpty() && std::all_of(text.begin(), text.end(), [](QChar c) {
        return c >= u'0' && c <= u'9';
    });
    if (!digitsOnly)
        return std::nullopt;
    bool fits = false;
    const qint64 value = text.toLongLong(&fits);
    return fits ? std::optional(value) : std::nullopt;
}

QString leftWhole(const QString &text, qsizetype count)
{
    if (count >= text.size())
        return text;
    if (count > 0 && text[count - 1].isHighSurrogate() && text[count].isLowSurrogate())
        --count;
    return text.left(count);
}

std::optional<bool> parseWireBool(QStringView text)
{
    if (text.compare(u"true", Qt::CaseInsensitive) == 0 || text == u"1")
        return true;
    if (text.compare(u"false", Qt::CaseInsensitive) == 0 || text == u"0")
        return false;
    return std::nullopt;
}

std::optional<QUuid> parseWireId(QStringView text)
{
    QUuid id;
    if (text.size() == 36)
        id = QUuid::fromString(text);
    else if (text.size() == 32)
        id = QUuid::fromString(QString(u'{' + text.left(8) + u'-' + text.mid(8, 4) + u'-' +
                                       text.mid(12, 4) + u'-' + text.mid(16, 4) + u'-' +
                                       text.mid(20) + u'}'));
    if (id.isNull())
        return std::nullopt;
    return id;
}

bool isNilWireId(QStringView text)
{
    return text == u"00000000-0000-0000-0000-000000000000"_s ||
           text == u"00000000000000000000000000000000"_s;
}

QJsonObject SandboxUsage::toJson() const
{
    return {{u"cpu_seconds"_s, cpuSeconds},
            {u"memory_bytes"_s, memoryBytes},
            {u"memory_peak_bytes"_s, memoryPeakBytes},
            {u"processes"_s, processes},
            {u"disk_bytes"_s, diskBytes},
            {u"at"_s, toWireTime(at)}};
}

std::optional<SandboxUsage> SandboxUsage::fromJson(const QJsonValue &value)
{
    const QJsonObject object = value.toObject();
    if (object.isEmpty())
        return std::nullopt;
    SandboxUsage usage;
    usage.cpuSeconds = object.value(u"cpu_seconds"_s).toDouble();
    usage.memoryBytes = object.value(u"memory_bytes"_s).toInteger();
    usage.memoryPeakBytes = object.value(u"memory_peak_bytes"_s).toInteger();
    usage.processes = object.value(u"processes"_s).toInteger();
    usage.diskBytes = object.value(u"disk_bytes"_s).toInteger();
    usage.at = parseWireTime(object.value(u"at"_s).toString()).value_or(QDateTime());
    return usage;
}

QJsonObject RuntimeInfo::toJson() const
{
    QJsonValue errorValue = QJsonValue::Null;
    if (error)
        errorValue = QJsonObject{{u"code"_s, error->code}, {u"message"_s, error->message}};
    QJsonObject object{{u"runtime_status"_s, toString(status)},
                       {u"can_resume"_s, canResume},
                       {u"runtime_error"_s, errorValue}};
    if (!sandbox.isEmpty())
        object.insert(u"sandbox"_s, sandbox);
    if (!missingSecrets.isEmpty())
        object.insert(u"missing_secrets"_s, QJsonArray::fromStringList(missingSecrets));
    if (!statusReason.isEmpty())
        object.insert(u"runtime_status_reason"_s, statusReason);
    if (statusSince)
        object.insert(u"runtime_status_since"_s, toWireTime(*statusSince));
    if (usage)
        object.insert(u"usage"_s, usage->toJson());
    return object;
}

RuntimeInfo RuntimeInfo::fromJson(const QJsonValue &value)
{
    RuntimeInfo info;
    const QJsonObject object = value.toObject();
    if (object.isEmpty())
        return info;
    info.status = runtimeStatusFromString(object.value(u"runtime_status"_s).toString())
                      .value_or(RuntimeStatus::Available);
    info.canResume = object.value(u"can_resume"_s).toBool(true);
    const QJsonObject error = object.value(u"runtime_error"_s).toObject();
    if (!error.isEmpty())
        info.error =
            RuntimeError{error.value(u"code"_s).toString(), error.value(u"message"_s).toString()};
    info.sandbox = object.value(u"sandbox"_s).toObject();
    for (const QJsonValue &name : object.value(u"missing_secrets"_s).toArray())
        info.missingSecrets.append(name.toString());
    info.statusReason = object.value(u"runtime_status_reason"_s).toString();
    if (const QJsonValue since = object.value(u"runtime_status_since"_s); since.isString())
        info.statusSince = parseWireTime(since.toString());
    info.usage = SandboxUsage::fromJson(object.value(u"usage"_s));
    return info;
}

QString toString(RunOutcome::Kind kind)
{
    return nameOf(outcomeKindNames, kind);
}

std::optional<RunOutcome::Kind> outcomeKindFromString(QStringView text)
{
    return valueOf(outcomeKindNames, text);
}

std::optional<QStringList> recoveryActionsOf(const QJsonObject &answer)
{
    const QJsonValue actions = answer.value(u"actions"_s);
    if (!actions.isArray())
        return std::nullopt;
    QStringList list;
    for (const QJsonValue &action : actions.toArray())
        list.append(action.toString());
    return list;
}

QJsonObject RunOutcome::toJson() const
{
    const auto orNull = [](const QString &text) {
        return text.isEmpty() ? QJsonValue(QJsonValue::Null) : QJsonValue(text);
    };
    return {{u"kind"_s, toString(kind)},
            {u"exit_code"_s, exitCode ? QJsonValue(*exitCode) : QJsonValue(QJsonValue::Null)},
            {u"interrupted_by"_s, orNull(interruptedBy)},
            {u"code"_s, orNull(code)},
            {u"detail"_s, detail},
            {u"retry_command"_s, orNull(retryCommand)},
            {u"at"_s, at.isValid() ? QJsonValue(toWireTime(at)) : QJsonValue(QJsonValue::Null)},
            {u"started_at"_s, startedAt.isValid() ? QJsonValue(toWireTime(startedAt))
                                                  : QJsonValue(QJsonValue::Null)},
            {u"dismissed"_s, dismissed}};
}

std::optional<RunOutcome> RunOutcome::fromJson(const QJsonValue &value)
{
    const QJsonObject object = value.toObject();
    const auto kind = outcomeKindFromString(object.value(u"kind"_s).toString());
    if (!kind)
        return std::nullopt;
    RunOutcome outcome;
    outcome.kind = *kind;
    if (const QJsonValue exitCode = object.value(u"exit_code"_s); exitCode.isDouble())
        outcome.exitCode = exitCode.toInt();
    outcome.interruptedBy = object.value(u"interrupted_by"_s).toString();
    outcome.code = object.value(u"code"_s).toString();
    outcome.detail = object.value(u"detail"_s).toString();
    outcome.retryCommand = object.value(u"retry_command"_s).toString();
    outcome.at = parseWireTime(object.value(u"at"_s).toString()).value_or(QDateTime());
    outcome.startedAt =
        parseWireTime(object.value(u"started_at"_s).toString()).value_or(QDateTime());
    outcome.dismissed = object.value(u"dismissed"_s).toBool();
    return outcome;
}

QJsonObject ConversationInfo::agentJson() const
{
    QJsonObject agent = agentConfig;
    agent.insert(u"kind"_s, agentKind);
    return agent;
}

QJsonObject ConversationInfo::toJson() const
{
    QJsonObject object{
        {u"id"_s, toWireId(id)},
        {u"title"_s, title},
        {u"tags"_s, toWireTags(tags)},
        {u"created_at"_s, toWireTime(createdAt)},
        {u"updated_at"_s, toWireTime(updatedAt)},
        {u"archived_at"_s, optionalTime(archivedAt)},
        {u"execution_status"_s, toString(executionStatus)},
        {u"running_since"_s, optionalTime(runningSince)},
        {u"outcome"_s, outcome ? QJsonValue(outcome->toJson()) : QJsonValue(QJsonValue::Null)},
        {u"agent"_s, agentJson()},
        {u"workspace"_s, QJsonObject{{u"working_dir"_s, workingDir},
                                     {u"owned_by_server"_s, workspaceOwnedByServer}}},
        {u"confirmation_policy"_s,
         QJsonObject{{u"kind"_s, alwaysConfirm ? u"AlwaysConfirm"_s : u"NeverConfirm"_s}}},
        {u"runtime_info"_s, runtime.toJson()},
        {u"stats"_s, QJsonObject{{u"event_count"_s, eventCount},
                                 {u"last_event_at"_s, optionalTime(lastEventAt)},
                                 {u"prompt_tokens"_s, promptTokens},
                                 {u"completion_tokens"_s, completionTokens},
                                 {u"requests"_s, llmRequests},
                                 {u"retries"_s, llmRetries}}},
    };
    if (!secretNames.isEmpty())
        object.insert(u"secret_names"_s, QJsonArray::fromStringList(secretNames));
    return object;
}

QByteArray ConversationInfo::toJsonBytes() const
{
    QByteArray out;
    out.reserve(1024);
    out += "{\"agent\":";
    if (agentConfig.isEmpty()) {
        out += "{\"kind\":";
        appendJsonString(out, agentKind);
        out += '}';
    } else {
        appendJsonValue(out, agentJson());
    }
    out += ",\"archived_at\":";
    appendOptionalTime(out, archivedAt);
    out += ",\"confirmation_policy\":{\"kind\":";
    out += alwaysConfirm ? "\"AlwaysConfirm\"" : "\"NeverConfirm\"";
    out += "},\"created_at\":";
    appendWireTime(out, createdAt);
    out += ",\"execution_status\":";
    appendJsonString(out, toString(executionStatus));
    out += ",\"id\":";
    appendJsonString(out, toWireId(id));
    out += ",\"outcome\":";
    if (outcome)
        appendJsonValue(out, outcome->toJson());
    else
        out += "null";
    out += ",\"running_since\":";
    appendOptionalTime(out, runningSince);
    out += ",\"runtime_info\":{\"can_resume\":";
    out += runtime.canResume ? "true" : "false";
    if (!runtime.missingSecrets.isEmpty()) {
        out += ",\"missing_secrets\":";
        appendJsonValue(out, QJsonArray::fromStringList(runtime.missingSecrets));
    }
    out += ",\"runtime_error\":";
    if (runtime.error) {
        out += "{\"code\":";
        appendJsonString(out, runtime.error->code);
        out += ",\"message\":";
        appendJsonString(out, runtime.error->message);
        out += '}';
    } else {
        out += "null";
    }
    out += ",\"runtime_status\":";
    appendJsonString(out, toString(runtime.status));
    if (!runtime.statusReason.isEmpty()) {
        out += ",\"runtime_status_reason\":";
        appendJsonString(out, runtime.statusReason);
    }
    if (runtime.statusSince) {
        out += ",\"runtime_status_since\":";
        appendOptionalTime(out, runtime.statusSince);
    }
    if (!runtime.sandboxJson.isEmpty()) {
        out += ",\"sandbox\":";
        out += runtime.sandboxJson;
    } else if (!runtime.sandbox.isEmpty()) {
        out += ",\"sandbox\":";
        appendJsonValue(out, runtime.sandbox);
    }
    if (runtime.usage) {
        out += ",\"usage\":";
        appendJsonValue(out, runtime.usage->toJson());
    }
    out += '}';
    if (!secretNames.isEmpty()) {
        out += ",\"secret_names\":";
        appendJsonValue(out, QJsonArray::fromStringList(secretNames));
    }
    out += ",\"stats\":{\"completion_tokens\":";
    out += QByteArray::number(completionTokens);
    out += ",\"event_count\":";
    out += QByteArray::number(eventCount);
    out += ",\"last_event_at\":";
    appendOptionalTime(out, lastEventAt);
    out += ",\"prompt_tokens\":";
    out += QByteArray::number(promptTokens);
    out += ",\"requests\":";
    out += QByteArray::number(llmRequests);
    out += ",\"retries\":";
    out += QByteArray::number(llmRetries);
    out += "},\"tags\":{";
    for (auto it = tags.cbegin(); it != tags.cend(); ++it) {
        if (it != tags.cbegin())
            out += ',';
        appendJsonString(out, it.key());
        out += ':';
        appendJsonString(out, it.value());
    }
    out += "},\"title\":";
    appendJsonString(out, title);
    out += ",\"updated_at\":";
    appendWireTime(out, updatedAt);
    out += ",\"workspace\":{\"owned_by_server\":";
    out += workspaceOwnedByServer ? "true" : "false";
    out += ",\"working_dir\":";
    appendJsonString(out, workingDir);
    out += "}}";
    return out;
}

std::optional<ConversationInfo> ConversationInfo::fromJson(const QJsonObject &object)
{
    const auto id = parseWireId(object.value(u"id"_s).toString());
    if (!id || !object.contains(u"archived_at"_s))
        return std::nullopt;
    ConversationInfo info;
    info.id = *id;
    info.title = object.value(u"title"_s).toString();
    const QJsonObject tags = object.value(u"tags"_s).toObject();
    for (auto it = tags.begin(); it != tags.end(); ++it)
        info.tags.insert(it.key(), it.value().toString());
    info.createdAt = parseWireTime(object.value(u"created_at"_s).toString()).value_or(QDateTime());
    info.updatedAt = parseWireTime(object.value(u"updated_at"_s).toString()).value_or(QDateTime());
    if (object.value(u"archived_at"_s).isString())
        info.archivedAt = parseWireTime(object.value(u"archived_at"_s).toString());
    info.executionStatus = executionStatusFromString(object.value(u"execution_status"_s).toString())
                               .value_or(ExecutionStatus::Idle);
    info.agentConfig = object.value(u"agent"_s).toObject();
    info.agentKind = info.agentConfig.take(u"kind"_s).toString();
    const QJsonObject workspace = object.value(u"workspace"_s).toObject();
    info.workingDir = workspace.value(u"working_dir"_s).toString();
    info.workspaceOwnedByServer = workspace.value(u"owned_by_server"_s).toBool(true);
    info.alwaysConfirm =
        object.value(u"confirmation_policy"_s).toObject().value(u"kind"_s) == u"AlwaysConfirm"_s;
    if (object.value(u"running_since"_s).isString())
        info.runningSince = parseWireTime(object.value(u"running_since"_s).toString());
    info.runtime = RuntimeInfo::fromJson(object.value(u"runtime_info"_s));
    info.outcome = RunOutcome::fromJson(object.value(u"outcome"_s));
    for (const QJsonValue &name : object.value(u"secret_names"_s).toArray())
        info.secretNames.append(name.toString());
    const QJsonObject stats = object.value(u"stats"_s).toObject();
    info.eventCount = stats.value(u"event_count"_s).toInteger();
    if (stats.value(u"last_event_at"_s).isString())
        info.lastEventAt = parseWireTime(stats.value(u"last_event_at"_s).toString());
    info.promptTokens = stats.value(u"prompt_tokens"_s).toInteger();
    info.completionTokens = stats.value(u"completion_tokens"_s).toInteger();
    info.llmRequests = stats.value(u"requests"_s).toInteger();
    info.llmRetries = stats.value(u"retries"_s).toInteger();
    return info;
}

namespace {

// Labels end up as SQLite text (the title as a column; tags when a filter reads them through
// json_each), which has no form for a surrogate without its pair: SQLite joined a lone high
// surrogate to the character after it ("t \ud800 x" came back as "t \U00010020x").
bool isValidUnicode(QStringView text)
{
    return text.isValidUtf16();
}

} // namespace

std::optional<ConversationLabels> ConversationLabels::fromJson(const QJsonObject &object,
                                                               QString *error)
{
    const auto fail = [error](const QString &sentence) {
        *error = sentence;
        return std::nullopt;
    };
    ConversationLabels labels;
    if (const QJsonValue title = object.value(u"title"_s);
        !title.isUndefined() && !title.isNull()) {
        if (!title.isString())
            return fail(u"title must be a string"_s);
        if (codePoints(title.toString()) > MaxTitleLength)
            return fail(u"title must be at most %1 characters"_s.arg(MaxTitleLength));
        if (!isValidUnicode(title.toString()))
            return fail(u"title is not valid Unicode: it has a surrogate without its pair"_s);
        // PostgreSQL's text holds none, and `q` cannot look for one.
        if (title.toString().contains(QChar::Null))
            return fail(u"title cannot contain a NUL character"_s);
        labels.title = title.toString();
    }
    if (const QJsonValue tags = object.value(u"tags"_s); !tags.isUndefined() && !tags.isNull()) {
        if (!tags.isObject())
            return fail(u"tags must be an object of strings"_s);
        const QJsonObject tagObject = tags.toObject();
        if (tagObject.size() > MaxTags)
            return fail(u"tags takes at most %1 tags"_s.arg(MaxTags));
        QMap<QString, QString> map;
        for (auto it = tagObject.begin(); it != tagObject.end(); ++it) {
            if (!it.value().isString())
                return fail(u"tags must be an object of strings"_s);
            const qsizetype nameLength = codePoints(it.key());
            if (nameLength == 0 || nameLength > MaxTagNameLength)
                return fail(u"a tag name must be 1 to %1 characters"_s.arg(MaxTagNameLength));
            // The tag filter reads "name:value" (see ConversationFilter).
            if (it.key().contains(u':'))
                return fail(u"a tag name cannot contain \":\" (tag \"%1\")"_s.arg(it.key()));
            if (codePoints(it.value().toString()) > MaxTagValueLength)
                return fail(u"tag \"%1\" must be at most %2 characters"_s.arg(it.key()).arg(
                    MaxTagValueLength));
            if (!isValidUnicode(it.key()) || !isValidUnicode(it.value().toString()))
                return fail(u"a tag is not valid Unicode: it has a surrogate without its pair"_s);
            // Stored whole, but the tag filter compared them cut at the NUL: "k:v" found the
            // value "v\0x", and the exact "k:v%00x" found nothing. `q` and `body` refuse it too.
            if (it.key().contains(QChar(0)) || it.value().toString().contains(QChar(0)))
                return fail(u"a tag cannot contain a NUL character"_s);
            map.insert(it.key(), it.value().toString());
        }
        labels.tags = std::move(map);
    }
    return labels;
}

QJsonObject ConversationLabels::toJson() const
{
    QJsonObject object;
    if (title)
        object.insert(u"title"_s, *title);
    if (tags)
        object.insert(u"tags"_s, toWireTags(*tags));
    return object;
}

std::optional<MessageRequest> MessageRequest::fromJson(const QJsonObject &object, QString *error)
{
    MessageRequest request;
    const QJsonValue role = object.value(u"role"_s);
    if (!role.isUndefined() && !role.isString()) {
        *error = u"\"role\" must be a string"_s;
        return std::nullopt;
    }
    request.role = role.toString(u"user"_s);
    if (request.role != u"user"_s && request.role != u"system"_s) {
        *error = u"\"role\" must be \"user\" or \"system\""_s;
        return std::nullopt;
    }
    const QJsonValue content = object.value(u"content"_s);
    if (content.isString()) {
        request.text = content.toString();
    } else if (content.isArray()) {
        for (const QJsonValue &part : content.toArray()) {
            const QJsonObject partObject = part.toObject();
            if (partObject.value(u"type"_s) != u"text"_s ||
                !partObject.value(u"text"_s).isString()) {
                *error = u"each content part must be {\"type\": \"text\", \"text\": string}"_s;
                return std::nullopt;
            }
            request.text += partObject.value(u"text"_s).toString();
        }
    } else {
        *error = u"\"content\" must be a list of text parts"_s;
        return std::nullopt;
    }
    const QJsonValue run = object.value(u"run"_s);
    if (!run.isUndefined() && !run.isBool()) {
        *error = u"\"run\" must be a boolean"_s;
        return std::nullopt;
    }
    request.run = run.toBool(false);
    return request;
}

bool isBidiControl(char16_t code)
{
    return code == 0x061c || code == 0x200e || code == 0x200f ||
           (code >= 0x202a && code <= 0x202e) || (code >= 0x2066 && code <= 0x2069);
}

QString withCharactersEscaped(const QString &text, bool (*matches)(char16_t))
{
    if (std::none_of(text.cbegin(), text.cend(),
                     [matches](QChar c) { return matches(c.unicode()); }))
        return text;
    QString escaped;
    escaped.reserve(text.size() + 16);
    for (const QChar c : text) {
        if (matches(c.unicode()))
            escaped += u"\\u"_s + QString::number(c.unicode(), 16).rightJustified(4, u'0');
        else
            escaped += c;
    }
    return escaped;
}

qsizetype codePoints(QStringView text)
{
    return text.size() -
           std::count_if(text.begin(), text.end(), [](QChar c) { return c.isLowSurrogate(); });
}

QString withBidiControlsShown(const QString &text)
{
    return withCharactersEscaped(text, isBidiControl);
}

QString withControlsShown(const QString &text)
{
    return withCharactersEscaped(text, [](char16_t code) {
        return code < 0x20 || (code >= 0x7f && code <= 0x9f) || isBidiControl(code);
    });
}

} // namespace AgentDeck
