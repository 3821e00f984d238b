#include "eventlistmodel.h"

#include <iterator>
#include <utility>

using namespace Qt::StringLiterals;

namespace AgentDeck {

EventListModel::EventListModel(QObject *parent)
    : QAbstractListModel(parent)
{}

int EventListModel::rowCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : int(m_events.size());
}

namespace {
// Longer lines are shown broken into lines of this many characters. Qt lays a paragraph out in
// time that grows with the square of its length: a 1 MB line of output (minified JSON, base64)
// took the console 26 s to show whole, without a repaint; in pieces it takes 0.2 s. Wrapped to
// the view's width anyway, a piece ends a row early about once in 40 rows.
constexpr qsizetype MaxShownLine = 5000;

QString withLongLinesBroken(const QString &text)
{
    QString shown;
    qsizetype lineStart = 0;
    qsizetype copied = 0;
    for (qsizetype i = 0; i < text.size(); ++i) {
        if (text[i] == u'\n') {
            lineStart = i + 1;
        } else if (i - lineStart >= MaxShownLine && !text[i].isLowSurrogate()) {
            if (copied == 0)
                shown.reserve(text.size() + text.size() / MaxShownLine);
            shown.append(QStringView(text).sliced(copied, i - copied)).append(u'\n');
            copied = lineStart = i;
        }
    }
    if (copied == 0)
        return text;
    return shown.append(QStringView(text).sliced(copied));
}
} // namespace

QString EventListModel::textOf(const Event &event)
{
    return withLongLinesBroken(withBidiControlsShown(storedTextOf(event)));
}

QString EventListModel::storedTextOf(const Event &event)
{
    if (event.kind == EventKind::Message)
        return event.messageText();
    if (event.kind == EventKind::Action) {
        // A command as it ran; another tool as its name and what it works on.
        const QJsonObject action = event.fields.value(u"action"_s).toObject();
        if (action.contains(u"command"_s))
            return action.value(u"command"_s).toString();
        const QString tool = event.fields.value(u"tool_name"_s).toString();
        if (action.contains(u"path"_s))
            return tool + u' ' + action.value(u"path"_s).toString();
        if (action.contains(u"message"_s))
            return tool + u": "_s + action.value(u"message"_s).toString();
        return tool;
    }
    if (event.kind == EventKind::Observation)
        return event.fields.value(u"observation"_s).toObject().value(u"output"_s).toString();
    if (event.kind == EventKind::AgentError)
        return event.fields.value(u"error"_s).toString();
    if (event.kind == EventKind::StateUpdate)
        return stateUpdateText(event.fields);
    if (event.kind == EventKind::UserReject)
        return u"rejected: "_s + event.fields.value(u"rejection_reason"_s).toString();
    if (event.kind == EventKind::Pause)
        return u"pause requested"_s;
    return {};
}

QString EventListModel::stateUpdateText(const QJsonObject &fields)
{
    const QString key = fields.value(u"key"_s).toString();
    const QString value = fields.value(u"value"_s).toVariant().toString();
    const QString valueWords = QString(value).replace(u'_', u' ');
    QString text;
    if (key == u"archive"_s)
        text = valueWords; // archived, unarchived
    else if (key == u"runtime"_s)
        text = u"sandbox "_s + valueWords; // stopped, paused, resumed, reprovisioned, ...
    else if (key == u"outcome"_s)
        text = u"outcome "_s + valueWords; // dismissed
    else if (key == u"execution_status"_s || key == u"recovery"_s)
        text = QString(key).replace(u'_', u' ') + u": "_s + valueWords;
    else
        text = key + u": "_s + value;
    // A server's own change names its policy; a client's, its key and client (the audit log's
    // actor_display). Events written before they named anyone say what changed only.
    QString who = fields.value(u"actor_display"_s).toString();
    if (who.isEmpty())
        who = fields.value(u"actor"_s).toString();
    if (!who.isEmpty())
        text += u" by "_s + who;
    if (const QString reason = fields.value(u"reason"_s).toString(); !reason.isEmpty())
        text += u": "_s + reason;
    return text;
}

QVariant EventListModel::data(const QModelIndex &index, int role) const
{
    if (!index.isValid() || index.row() >= m_events.size())
        return {};
    const Event &event = m_events[index.row()];
    const QJsonObject observation = event.fields.value(u"observation"_s).toObject();
    switch (role) {
    case Qt::DisplayRole:
    case TextRole:
        return textOf(event);
    case SeqRole:
        return event.seq;
    case KindRole:
        return event.kind;
    case SourceRole:
        return event.source;
    case TimestampRole:
        return event.timestamp;
    case ExitCodeRole:
        return event.kind == EventKind::Observation ? observation.value(u"exit_code"_s).toInt()
                                                    : -1;
    case InterruptedRole:
        return observation.value(u"interrupted"_s).toBool();
    case ErrorCodeRole:
        return event.fields.value(u"code"_s).toString();
    case PreviewRole:
        return event.kind == EventKind::Observation ? tailOf(textOf(event)) : textOf(event);
    case ExpandedRole:
        return m_expanded.contains(event.seq);
    case RunningRole:
        return isRunning(index.row());
    case LiveOutputRole:
        return event.id == m_liveAction && isRunning(index.row()) ? tailOf(m_liveOutput)
                                                                  : QString();
    }
    return {};
}

QString EventListModel::tailOf(const QString &text)
{
    // From the end: a 1 MiB output is not split whole for its last lines.
    qsizetype start = text.size();
    if (text.endsWith(u'\n'))
        --start;
    int lines = 0;
    while (start > 0 && lines < PreviewLines - 1) {
        start = text.lastIndexOf(u'\n', start - 1);
        if (start < 0)
            return text;
        ++lines;
    }
    if (start <= 0)
        return text;
    const qsizetype hidden = QStringView(text).first(start).count(u'\n') + 1;
    if (hidden <= 1) // a line saying so would take the place of the one it hides
        return text;
    return u"… %1 earlier lines\n"_s.arg(hidden) + QStringView(text).sliced(start + 1);
}

void EventListModel::setExpanded(qint64 seq, bool expanded)
{
    if (expanded == m_expanded.contains(seq))
        return;
    if (expanded)
        m_expanded.insert(seq);
    else
        m_expanded.remove(seq);
    for (qsizetype row = 0; row < m_events.size(); ++row) {
        if (m_events[row].seq == seq) {
            const QModelIndex changed = index(int(row));
            Q_EMIT dataChanged(changed, changed, {ExpandedRole});
            return;
        }
    }
}

QHash<int, QByteArray> EventListModel::roleNames() const
{
    return {{SeqRole, "seq"},
            {KindRole, "kind"},
            {SourceRole, "source"},
            {TimestampRole, "timestamp"},
            {TextRole, "text"},
            {ExitCodeRole, "exitCode"},
            {InterruptedRole, "interrupted"},
            {ErrorCodeRole, "errorCode"},
            {PreviewRole, "preview"},
            {ExpandedRole, "expanded"},
            {RunningRole, "running"},
            {LiveOutputRole, "liveOutput"}};
}

void EventListModel::append(const Event &event)
{
    if (event.seq <= lastSeq())
        return;
    // The newest action may stop running with this event (its observation, a pause).
    const int action = newestActionRow();
    const int row = int(m_events.size());
    beginInsertRows({}, row, row);
    m_events.append(event);
    endInsertRows();
    if (action >= 0) {
        const QModelIndex changed = index(action);
        Q_EMIT dataChanged(changed, changed, {RunningRole, LiveOutputRole});
    }
    if (event.kind == EventKind::Observation || event.kind == EventKind::UserReject) {
        if (event.fields.value(u"action_id"_s).toString() == toWireId(m_liveAction)) {
            m_liveAction = {};
            m_liveOutput.clear();
        }
    }
    letGoOfOldest();
    Q_EMIT countChanged();
}

void EventListModel::addLiveOutput(const QUuid &actionId, const QString &piece)
{
    const int action = newestActionRow();
    if (action < 0 || m_events[action].id != actionId || !isRunning(action))
        return; // not the command running now (its end came first, or another timeline's)
    if (m_liveAction != actionId) {
        m_liveAction = actionId;
        m_liveOutput.clear();
    }
    m_liveOutput += piece;
    if (m_liveOutput.size() > LiveOutputBytes)
        m_liveOutput.remove(0, m_liveOutput.size() - LiveOutputBytes);
    const QModelIndex changed = index(action);
    Q_EMIT dataChanged(changed, changed, {LiveOutputRole});
}

int EventListModel::newestActionRow() const
{
    for (qsizetype row = m_events.size() - 1; row >= 0; --row) {
        if (m_events[row].kind == EventKind::Action)
            return int(row);
    }
    return -1;
}

bool EventListModel::isRunning(int row) const
{
    const Event &action = m_events[row];
    if (action.kind != EventKind::Action)
        return false;
    const QString id = toWireId(action.id);
    for (qsizetype next = row + 1; next < m_events.size(); ++next) {
        const Event &event = m_events[next];
        if ((event.kind == EventKind::Observation || event.kind == EventKind::UserReject) &&
            event.fields.value(u"action_id"_s).toString() == id)
            return false;
        if (event.kind == EventKind::Pause ||
            (event.kind == EventKind::StateUpdate &&
             event.fields.value(u"key"_s) == u"execution_status"_s &&
             event.fields.value(u"value"_s) != u"running"_s))
            return false;
    }
    return true;
}

void EventListModel::prepend(const QList<Event> &events)
{
    // Only a run that ends right before the first row: the rest is what arrived meanwhile.
    qint64 next = earlierCount();
    auto first = events.cend();
    while (first != events.cbegin() && std::prev(first)->seq == next) {
        --first;
        --next;
    }
    const int added = int(events.cend() - first);
    if (added == 0)
        return;
    beginInsertRows({}, 0, added - 1);
    m_events = QList<Event>(first, events.cend()) + m_events;
    endInsertRows();
    Q_EMIT countChanged();
}

void EventListModel::clear(qint64 afterSeq)
{
    beginResetModel();
    m_events.clear();
    m_expanded.clear();
    m_liveAction = {};
    m_liveOutput.clear();
    m_startAfter = afterSeq;
    endResetModel();
    Q_EMIT countChanged();
}

void EventListModel::setShowingEnd(bool showingEnd)
{
    if (std::exchange(m_showingEnd, showingEnd) == showingEnd)
        return;
    Q_EMIT showingEndChanged();
    if (showingEnd && m_events.size() > KeptEvents) {
        letGoOfOldest();
        Q_EMIT countChanged();
    }
}

void EventListModel::loadEarlier()
{
    if (earlierCount() > 0)
        Q_EMIT earlierWanted();
}

void EventListModel::letGoOfOldest()
{
    const int excess = int(m_events.size()) - KeptEvents;
    if (!m_showingEnd || excess <= 0)
        return;
    beginRemoveRows({}, 0, excess - 1);
    m_events.remove(0, excess);
    endRemoveRows();
}

void EventListModel::setFollowing(bool following)
{
    if (std::exchange(m_following, following) != following)
        Q_EMIT followingChanged();
}

void EventListModel::setLive(bool live)
{
    if (std::exchange(m_live, live) != live)
        Q_EMIT liveChanged();
}

} // namespace AgentDeck
