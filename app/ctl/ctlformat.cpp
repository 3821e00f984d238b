#include "ctlformat.h"

#include "lifecycle.h"

#include <QJsonArray>
#include <QJsonDocument>

using namespace Qt::StringLiterals;

namespace AgentDeck::CtlFormat {

namespace {

constexpr qsizetype MaxTitleLength = 40;
// Wide enough for every known value, so that followed events line up.
constexpr int SeqWidth = 5;
constexpr int SourceWidth = 11; // "environment"
constexpr int KindWidth = 12;   // "state update"

QString oneLine(QString text)
{
    while (text.endsWith(u'\n') || text.endsWith(u'\r'))
        text.chop(1);
    text.replace(u"\r\n"_s, u"\\n"_s);
    text.replace(u'\n', u"\\n"_s);
    text.replace(u'\r', u"\\r"_s);
    text.replace(u'\t', u' ');
    return text;
}

// Terminal columns a code point takes: 2 for East Asian wide characters and emoji, 0 for
// combining marks, 1 otherwise. (wcwidth() knows nothing beyond ASCII in the C locale, which is
// what cron and CI run ctl in.)
int columnsOf(char32_t c)
{
    if (QChar::category(c) == QChar::Mark_NonSpacing || QChar::category(c) == QChar::Mark_Enclosing)
        return 0;
    const bool wide = (c >= 0x1100 && c <= 0x115F) || (c >= 0x2E80 && c <= 0xA4CF) ||
                      (c >= 0xAC00 && c <= 0xD7A3) || (c >= 0xF900 && c <= 0xFAFF) ||
                      (c >= 0xFE30 && c <= 0xFE4F) || (c >= 0xFF00 && c <= 0xFF60) ||
                      (c >= 0xFFE0 && c <= 0xFFE6) || (c >= 0x1F300 && c <= 0x1F64F) ||
                      (c >= 0x1F680 && c <= 0x1F6FF) || (c >= 0x1FA70 && c <= 0x1FAFF) ||
                      (c >= 0x1F900 && c <= 0x1F9FF) || (c >= 0x20000 && c <= 0x3FFFD);
    return wide ? 2 : 1;
}

qsizetype columnsOf(const QString &text)
{
    qsizetype columns = 0;
    for (const char32_t c : text.toUcs4())
        columns += columnsOf(c);
    return columns;
}

// `text` padded with spaces to `columns` terminal columns.
QString padded(const QString &text, qsizetype columns)
{
    return text + QString(std::max<qsizetype>(0, columns - columnsOf(text)), u' ');
}

QString titleCell(const QString &title)
{
    const QString line = oneLine(title);
    if (line.isEmpty())
        return u"-"_s;
    if (columnsOf(line) <= MaxTitleLength)
        return line;
    // Cut between code points (a cut inside a surrogate pair printed "?"), within the columns.
    QString cut;
    qsizetype columns = 0;
    for (const char32_t c : line.toUcs4()) {
        if (columns + columnsOf(c) > MaxTitleLength - 1)
            break;
        columns += columnsOf(c);
        cut += QString::fromUcs4(&c, 1);
    }
    return cut + u'…';
}

QString kindWord(const QString &kind)
{
    if (kind == EventKind::Message)
        return u"message"_s;
    if (kind == EventKind::Action)
        return u"action"_s;
    if (kind == EventKind::Observation)
        return u"observation"_s;
    if (kind == EventKind::AgentError)
        return u"agent error"_s;
    if (kind == EventKind::StateUpdate)
        return u"state update"_s;
    if (kind == EventKind::Pause)
        return u"pause"_s;
    if (kind == EventKind::UserReject)
        return u"rejection"_s;
    return kind;
}

QString jsonText(const QJsonValue &value)
{
    if (value.isString())
        return value.toString();
    if (value.isObject())
        return QString::fromUtf8(QJsonDocument(value.toObject()).toJson(QJsonDocument::Compact));
    if (value.isArray())
        return QString::fromUtf8(QJsonDocument(value.toArray()).toJson(QJsonDocument::Compact));
    if (value.isBool())
        return value.toBool() ? u"true"_s : u"false"_s;
    if (value.isDouble())
        return QString::number(value.toDouble());
    return u"null"_s;
}

} // namespace

namespace {

// C1 controls (C0 ones are escaped by JSON already), and the bidirectional formatting
// characters, which reorder what follows them: "deploy \u202eevil\u202c" reads otherwise.
bool isHiddenControl(char16_t code)
{
    return (code >= 0x7f && code < 0xa0) || isBidiControl(code);
}

QString hex(char16_t code, int digits)
{
    return QString::number(code, 16).rightJustified(digits, u'0');
}

} // namespace

QString terminalSafe(const QString &text)
{
    const auto isControl = [](QChar c) {
        const char16_t code = c.unicode();
        return (code < 0x20 && code != u'\n' && code != u'\t') || isHiddenControl(code);
    };
    if (std::none_of(text.cbegin(), text.cend(), isControl))
        return text;
    QString safe;
    safe.reserve(text.size() + 16);
    for (const QChar c : text) {
        if (!isControl(c))
            safe += c;
        else if (c.unicode() < 0x100)
            safe += u"\\x"_s + hex(c.unicode(), 2);
        else
            safe += u"\\u"_s + hex(c.unicode(), 4);
    }
    return safe;
}

QString jsonText(const QJsonValue &value, QJsonDocument::JsonFormat format)
{
    const QString text =
        QString::fromUtf8(value.isArray() ? QJsonDocument(value.toArray()).toJson(format)
                                          : QJsonDocument(value.toObject()).toJson(format));
    // Qt leaves these as they are; terminalSafe() then made them \xNN, which is no JSON, and
    // `ctl list --json | jq` failed for the whole catalog on one title holding U+007F. Outside
    // strings JSON is ASCII, so each one is in a string, where \uNNNN is what it means.
    return withCharactersEscaped(text, isHiddenControl);
}

QString shortTime(const QDateTime &time)
{
    if (!time.isValid())
        return u"-"_s;
    return time.toUTC().toString(u"yyyy-MM-ddThh:mm:ss"_s) + u'Z';
}

QString alignedTable(const QStringList &header, const QList<QStringList> &rows)
{
    QList<qsizetype> widths(header.size(), 0);
    const auto measure = [&widths](const QStringList &row) {
        for (qsizetype i = 0; i < row.size() && i < widths.size(); ++i)
            widths[i] = std::max(widths[i], columnsOf(row[i]));
    };
    measure(header);
    for (const QStringList &row : rows)
        measure(row);

    QString text;
    const auto write = [&](const QStringList &row) {
        QString line;
        for (qsizetype i = 0; i < row.size(); ++i) {
            if (i + 1 < row.size())
                line += padded(row[i], widths[i]) + u"  "_s;
            else
                line += row[i];
        }
        text += line + u'\n';
    };
    write(header);
    for (const QStringList &row : rows)
        write(row);
    return text;
}

QString executionWord(const ConversationInfo &info)
{
    QString word = Lifecycle::executionText(info);
    if (info.executionStatus == ExecutionStatus::Running && Lifecycle::isStale(info))
        word += u" (stale)"_s;
    return word;
}

QString conversationTable(const QList<ConversationInfo> &conversations)
{
    QList<QStringList> rows;
    rows.reserve(conversations.size());
    for (const ConversationInfo &info : conversations) {
        rows.append({toWireId(info.id), titleCell(info.title), executionWord(info),
                     Lifecycle::runtimeLabel(info), info.isArchived() ? u"archived"_s : u"-"_s,
                     QString::number(info.eventCount), shortTime(info.updatedAt)});
    }
    return alignedTable({u"ID"_s, u"TITLE"_s, u"EXECUTION"_s, u"RUNTIME"_s, u"ARCHIVED"_s,
                         u"EVENTS"_s, u"UPDATED"_s},
                        rows);
}

QString conversationDetails(const ConversationInfo &info)
{
    QList<QStringList> rows;
    const auto add = [&rows](const QString &field, const QString &value) {
        rows.append({field + u':', value});
    };
    add(u"id"_s, toWireId(info.id));
    add(u"title"_s, info.title.isEmpty() ? u"-"_s : oneLine(info.title));
    add(u"execution"_s, executionWord(info));
    if (info.outcome) {
        const RunOutcome &outcome = *info.outcome;
        add(u"outcome"_s, toString(outcome.kind) + u": "_s + oneLine(outcome.detail) +
                              (outcome.dismissed          ? u" (dismissed)"_s
                               : outcome.needsAttention() ? u" (needs attention)"_s
                                                          : QString()));
        if (!outcome.retryCommand.isEmpty())
            add(u"retry"_s, u"$ "_s + oneLine(outcome.retryCommand));
    }
    add(u"runtime"_s, Lifecycle::runtimeLabel(info));
    add(u"can resume"_s, info.runtime.canResume ? u"yes"_s : u"no"_s);
    if (info.runtime.error)
        add(u"runtime error"_s, info.runtime.error->code + u": "_s + info.runtime.error->message);
    add(u"archived"_s,
        info.archivedAt ? u"archived since "_s + shortTime(*info.archivedAt) : u"-"_s);
    add(u"agent"_s, info.agentKind);
    add(u"confirmation"_s, info.alwaysConfirm ? u"AlwaysConfirm"_s : u"NeverConfirm"_s);
    add(u"workspace"_s,
        info.workingDir + (info.workspaceOwnedByServer ? u" (owned by the server)"_s
                                                       : u" (supplied by the caller)"_s));
    QStringList tags;
    for (auto it = info.tags.cbegin(); it != info.tags.cend(); ++it)
        tags.append(it.key() + u'=' + it.value());
    add(u"tags"_s, tags.isEmpty() ? u"-"_s : tags.join(u", "_s));
    add(u"created"_s, shortTime(info.createdAt));
    add(u"updated"_s, shortTime(info.updatedAt));
    add(u"events"_s,
        info.lastEventAt
            ? u"%1, last at %2"_s.arg(info.eventCount).arg(shortTime(*info.lastEventAt))
            : QString::number(info.eventCount));

    QString text;
    qsizetype width = 0;
    for (const QStringList &row : rows)
        width = std::max(width, row[0].size());
    for (const QStringList &row : rows)
        text += row[0].leftJustified(width) + u"  "_s + row[1] + u'\n';
    return text;
}

QString eventHeader()
{
    return u"SEQ"_s.rightJustified(SeqWidth) + u"  "_s + u"TIME"_s.leftJustified(20) + u"  "_s +
           u"SOURCE"_s.leftJustified(SourceWidth) + u"  "_s + u"KIND"_s.leftJustified(KindWidth) +
           u"  DETAIL\n"_s;
}

QString liveOutputLines(const QString &piece)
{
    const QString indent = QString(SeqWidth + 2, u' ') + u"\u2502 "_s;
    QList<QStringView> split = QStringView(piece).split(u'\n');
    if (!split.isEmpty() && split.last().isEmpty())
        split.removeLast(); // after the last line's end
    QString lines;
    for (const QStringView line : std::as_const(split))
        lines += indent + terminalSafe(line.toString()) + u'\n';
    return lines;
}

QString eventLine(const Event &event)
{
    const QString line =
        QString::number(event.seq).rightJustified(SeqWidth) + u"  "_s + shortTime(event.timestamp) +
        u"  "_s + event.source.leftJustified(SourceWidth) + u"  "_s +
        kindWord(event.kind).leftJustified(KindWidth) + u"  "_s + eventSummary(event);
    // No trailing blanks when an event has nothing more to say (a pause).
    QStringView trimmed(line);
    while (trimmed.endsWith(u' '))
        trimmed.chop(1);
    return trimmed.toString() + u'\n';
}

QString eventSummary(const Event &event)
{
    const QJsonObject &fields = event.fields;
    if (event.kind == EventKind::Message)
        return oneLine(event.messageText());
    if (event.kind == EventKind::Action) {
        const QString command = fields.value(u"action"_s).toObject().value(u"command"_s).toString();
        return command.isEmpty() ? fields.value(u"tool_name"_s).toString()
                                 : u"$ "_s + oneLine(command);
    }
    if (event.kind == EventKind::Observation) {
        const QJsonObject observation = fields.value(u"observation"_s).toObject();
        QString text = u"exit %1"_s.arg(observation.value(u"exit_code"_s).toInt());
        if (observation.value(u"interrupted"_s).toBool())
            text += u" (interrupted)"_s;
        const QString output = observation.value(u"output"_s).toString();
        if (!output.isEmpty())
            text += u": "_s + oneLine(output);
        return text;
    }
    if (event.kind == EventKind::AgentError)
        return fields.value(u"code"_s).toString() + u": "_s +
               oneLine(fields.value(u"error"_s).toString());
    if (event.kind == EventKind::StateUpdate)
        return fields.value(u"key"_s).toString() + u" = "_s +
               oneLine(jsonText(fields.value(u"value"_s)));
    if (event.kind == EventKind::UserReject)
        return oneLine(fields.value(u"rejection_reason"_s).toString());
    if (event.kind == EventKind::Pause)
        return {};
    return oneLine(jsonText(QJsonValue(fields)));
}

} // namespace AgentDeck::CtlFormat
