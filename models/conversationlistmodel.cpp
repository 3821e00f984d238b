#include "conversationlistmodel.h"

#include "lifecycle.h"

#include <QStringList>
#include <QTimer>

#include <utility>

using namespace Qt::StringLiterals;

namespace AgentDeck {

ConversationListModel::ConversationListModel(QObject *parent)
    : QAbstractTableModel(parent)
    , m_durationTick(new QTimer(this))
{
    m_durationTick->setInterval(1000);
    connect(m_durationTick, &QTimer::timeout, this, &ConversationListModel::tickDurations);
    m_durationTick->start();
}

qint64 ConversationListModel::durationOf(const ConversationInfo &info) const
{
    // Rows of a server that does not answer stand where it last said.
    const QDateTime now =
        m_stale && m_staleAsOf.isValid() ? m_staleAsOf.toUTC() : QDateTime::currentDateTimeUtc();
    if (info.executionStatus == ExecutionStatus::Running)
        return info.runningSince ? std::max<qint64>(0, info.runningSince->msecsTo(now)) : -1;
    if (info.outcome && info.outcome->startedAt.isValid() && info.outcome->at.isValid())
        return std::max<qint64>(0, info.outcome->startedAt.msecsTo(info.outcome->at));
    return -1;
}

QString ConversationListModel::durationText(qint64 ms)
{
    const qint64 seconds = ms / 1000;
    if (seconds < 60)
        return tr("%1 s").arg(seconds);
    if (seconds < 3600)
        return tr("%1 min %2 s").arg(seconds / 60).arg(seconds % 60);
    if (seconds < 86400)
        return tr("%1 h %2 min").arg(seconds / 3600).arg(seconds % 3600 / 60);
    return tr("%1 d %2 h").arg(seconds / 86400).arg(seconds % 86400 / 3600);
}

void ConversationListModel::tickDurations()
{
    // A server that does not answer says nothing of how its runs went on: their time stands.
    if (m_stale)
        return;
    // One change a tick, from the first running row to the last: a signal per row woke every
    // listener once per running conversation each second.
    int first = -1, last = -1;
    for (int row = 0; row < m_items.size(); ++row) {
        if (m_items[row].executionStatus == ExecutionStatus::Running && m_items[row].runningSince) {
            first = first < 0 ? row : first;
            last = row;
        }
    }
    if (first >= 0)
        Q_EMIT dataChanged(index(first, DurationColumn), index(last, DurationColumn),
                           {Qt::DisplayRole, DurationRole});
}

int ConversationListModel::rowCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : int(m_items.size());
}

int ConversationListModel::columnCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant ConversationListModel::data(const QModelIndex &index, int role) const
{
    if (!index.isValid() || index.row() >= m_items.size())
        return {};
    const ConversationInfo &info = m_items[index.row()];
    switch (role) {
    case Qt::DisplayRole:
        switch (index.column()) {
        case TitleColumn:
            return withControlsShown(info.title);
        case ExecutionColumn:
            if (info.executionStatus == ExecutionStatus::Running && m_pausing.contains(info.id))
                return tr("pausing…");
            return withAsOf(Lifecycle::executionText(info));
        case RuntimeColumn:
            return withAsOf(Lifecycle::runtimeLabel(info));
        case DurationColumn: {
            const qint64 ms = durationOf(info);
            if (ms < 0)
                return QString();
            return info.executionStatus == ExecutionStatus::Running
                       ? tr("running for %1").arg(durationText(ms))
                       : tr("ran for %1").arg(durationText(ms));
        }
        case UpdatedColumn:
            // Local time without its zone could not be compared with ctl's.
            return toDisplayTime(info.updatedAt);
        case TagsColumn:
            return withControlsShown(tagsText(info.tags));
        case ServerColumn:
            return m_serverLabel;
        }
        return {};
    case ServerDownRole:
        return m_stale;
    case DurationRole:
        return durationOf(info);
    case Qt::EditRole:
        // As stored: the editor shows a control character as itself, to keep or remove.
        if (index.column() == TitleColumn)
            return info.title;
        if (index.column() == TagsColumn)
            return tagsText(info.tags);
        return {};
    case Qt::ToolTipRole:
        // The badge's words may be cut: whole here, and how old they are.
        if (m_stale && (index.column() == RuntimeColumn || index.column() == ExecutionColumn))
            return tr("%1 — what the server said %2; it does not answer now")
                .arg(index.column() == RuntimeColumn ? Lifecycle::runtimeLabel(info)
                                                     : Lifecycle::executionText(info),
                     asOfText());
        // The badge's words whole (a narrow column cuts them), then what they stand for.
        if (index.column() == RuntimeColumn)
            return info.runtime.error
                       ? Lifecycle::runtimeLabel(info) + u": " + info.runtime.error->message
                       : Lifecycle::runtimeLabel(info);
        if (index.column() == ExecutionColumn && info.outcome &&
            info.outcome->kind != RunOutcome::Kind::Succeeded &&
            info.executionStatus != ExecutionStatus::Running)
            return QString(Lifecycle::executionText(info) + u": " + info.outcome->detail +
                           (info.outcome->dismissed ? tr(" (dismissed)") : QString()));
        if (index.column() == ExecutionColumn)
            return data(index, Qt::DisplayRole);
        if (index.column() == DurationColumn && durationOf(info) >= 0)
            return info.executionStatus == ExecutionStatus::Running
                       ? tr("Running since %1").arg(toDisplayTime(*info.runningSince))
                       : tr("The last command ran from %1 to %2")
                             .arg(toDisplayTime(info.outcome->startedAt),
                                  toDisplayTime(info.outcome->at));
        // Whole, where the column cuts them: titles read "Deploy to production (ne…".
        if (index.column() == TitleColumn || index.column() == TagsColumn ||
            index.column() == ServerColumn)
            return data(index, Qt::DisplayRole);
        return {};
    case IdRole:
        return toWireId(info.id);
    case TitleRole:
        return info.title;
    case ExecutionStatusRole:
        return toString(info.executionStatus);
    case RuntimeStatusRole:
        return toString(info.runtime.status);
    case RuntimeLabelRole:
        return Lifecycle::runtimeLabel(info);
    case CanResumeRole:
        return info.runtime.canResume;
    case ArchivedRole:
        return info.isArchived();
    case StaleRole:
        return Lifecycle::isStale(info);
    case NeedsAttentionRole:
        return Lifecycle::needsAttention(info);
    case UpdatedAtRole:
        return info.updatedAt;
    case CreatedAtRole:
        return info.createdAt;
    case TagsRole: {
        QVariantMap tags;
        for (auto it = info.tags.cbegin(); it != info.tags.cend(); ++it)
            tags.insert(it.key(), it.value());
        return tags;
    }
    case EventCountRole:
        return info.eventCount;
    case ConversationRole:
        return QVariant::fromValue(info);
    case OutcomeKindRole:
        return info.outcome ? toString(info.outcome->kind) : QString();
    case OutcomeAttentionRole:
        return info.outcome && info.outcome->needsAttention();
    case OutcomeLabelRole:
        return Lifecycle::outcomeLabel(info);
    }
    return {};
}

Qt::ItemFlags ConversationListModel::flags(const QModelIndex &index) const
{
    Qt::ItemFlags flags = QAbstractTableModel::flags(index);
    if (index.column() == TitleColumn || index.column() == TagsColumn)
        flags |= Qt::ItemIsEditable;
    return flags;
}

bool ConversationListModel::setData(const QModelIndex &index, const QVariant &value, int role)
{
    if (role != Qt::EditRole || !index.isValid() || index.row() >= m_items.size())
        return false;
    const ConversationInfo &info = m_items[index.row()];
    ConversationLabels labels;
    if (index.column() == TitleColumn) {
        if (value.toString() == info.title)
            return false;
        labels.title = value.toString();
    } else if (index.column() == TagsColumn) {
        QString error;
        labels.tags = tagsFromText(value.toString(), &error);
        if (!labels.tags) {
            Q_EMIT labelsRefused(info.id, error);
            return false;
        }
        if (*labels.tags == info.tags)
            return false;
    } else {
        return false;
    }
    Q_EMIT labelsEdited(info.id, labels);
    return false;
}

QString ConversationListModel::tagsText(const QMap<QString, QString> &tags)
{
    QStringList shown;
    for (auto it = tags.cbegin(); it != tags.cend(); ++it)
        shown.append(it.value().isEmpty() ? it.key() : it.key() + u'=' + it.value());
    return shown.join(u", "_s);
}

std::optional<QMap<QString, QString>> ConversationListModel::tagsFromText(const QString &text,
                                                                          QString *error)
{
    QMap<QString, QString> tags;
    for (const QString &item : text.split(u',', Qt::SkipEmptyParts)) {
        const QString tag = item.trimmed();
        if (tag.isEmpty())
            continue;
        const qsizetype equals = tag.indexOf(u'=');
        const QString name = (equals < 0 ? tag : tag.left(equals)).trimmed();
        const QString value = equals < 0 ? QString() : tag.mid(equals + 1).trimmed();
        if (name.isEmpty()) {
            *error = tr("A tag needs a name before its \"=\": \"%1\"").arg(tag);
            return std::nullopt;
        }
        if (tags.contains(name)) {
            *error = tr("The tag \"%1\" is given twice").arg(name);
            return std::nullopt;
        }
        tags.insert(name, value);
    }
    return tags;
}

QVariant ConversationListModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return {};
    switch (section) {
    case TitleColumn:
        return tr("Title");
    case ExecutionColumn:
        return tr("Status");
    case RuntimeColumn:
        return tr("Runtime");
    case UpdatedColumn:
        return tr("Updated");
    case DurationColumn:
        return tr("Duration");
    case TagsColumn:
        return tr("Tags");
    case ServerColumn:
        return tr("Server");
    }
    return {};
}

void ConversationListModel::setServerLabel(const QString &label)
{
    m_serverLabel = label;
    if (!m_items.isEmpty())
        Q_EMIT dataChanged(index(0, ServerColumn), index(int(m_items.size()) - 1, ServerColumn));
}

void ConversationListModel::setStale(bool stale, const QDateTime &asOf)
{
    const QDateTime shownAsOf = stale ? asOf : QDateTime();
    if (stale == m_stale && shownAsOf == m_staleAsOf)
        return;
    m_stale = stale;
    m_staleAsOf = shownAsOf;
    if (!m_items.isEmpty())
        Q_EMIT dataChanged(index(0, 0), index(int(m_items.size()) - 1, ColumnCount - 1),
                           {ServerDownRole, Qt::DisplayRole, Qt::ToolTipRole});
}

QString ConversationListModel::asOfText() const
{
    return m_staleAsOf.isValid() ? tr("as of %1").arg(m_staleAsOf.toString(u"HH:mm:ss"_s))
                                 : tr("as last read");
}

QHash<int, QByteArray> ConversationListModel::roleNames() const
{
    QHash<int, QByteArray> names = QAbstractTableModel::roleNames();
    names.insert({{IdRole, "conversationId"},
                  {TitleRole, "title"},
                  {ExecutionStatusRole, "executionStatus"},
                  {RuntimeStatusRole, "runtimeStatus"},
                  {RuntimeLabelRole, "runtimeLabel"},
                  {CanResumeRole, "canResume"},
                  {ArchivedRole, "archived"},
                  {StaleRole, "stale"},
                  {NeedsAttentionRole, "needsAttention"},
                  {UpdatedAtRole, "updatedAt"},
                  {CreatedAtRole, "createdAt"},
                  {TagsRole, "tags"},
                  {EventCountRole, "eventCount"},
                  {ConversationRole, "conversation"},
                  {OutcomeKindRole, "outcomeKind"},
                  {OutcomeAttentionRole, "outcomeNeedsAttention"},
                  {OutcomeLabelRole, "outcomeLabel"}});
    return names;
}

void ConversationListModel::markPausing(const QUuid &id)
{
    const int row = rowOf(id);
    if (row < 0 || m_items[row].executionStatus != ExecutionStatus::Running)
        return;
    m_pausing.insert(id);
    Q_EMIT dataChanged(index(row, ExecutionColumn), index(row, ExecutionColumn));
}

void ConversationListModel::replaceRow(int row, const ConversationInfo &info)
{
    const bool neededAttention = Lifecycle::needsAttention(m_items[row]);
    if (info.executionStatus != ExecutionStatus::Running)
        m_pausing.remove(info.id);
    if (m_items[row].toJson() == info.toJson())
        return;
    m_items[row] = info;
    Q_EMIT dataChanged(index(row, 0), index(row, ColumnCount - 1));
    if (!neededAttention && Lifecycle::needsAttention(info))
        Q_EMIT attentionNeeded(info);
}

void ConversationListModel::upsert(const QList<ConversationInfo> &conversations)
{
    const bool announcesAdded = std::exchange(m_loaded, true);
    QList<ConversationInfo> added;
    for (const ConversationInfo &info : conversations) {
        const int row = m_rows.value(info.id, -1);
        if (row < 0) {
            added.append(info);
            continue;
        }
        // Older than the row: events counted since it was read (the stream's). A finished run
        // read before its end showed `running` again until the next refresh.
        const ConversationInfo &shown = m_items[row];
        if (info.createdAt == shown.createdAt && info.eventCount < shown.eventCount)
            continue;
        replaceRow(row, info);
    }
    if (added.isEmpty())
        return;
    beginInsertRows({}, int(m_items.size()), int(m_items.size() + added.size() - 1));
    for (const ConversationInfo &info : added) {
        m_rows.insert(info.id, int(m_items.size()));
        m_items.append(info);
    }
    endInsertRows();
    for (const ConversationInfo &info : added) {
        if (announcesAdded && Lifecycle::needsAttention(info))
            Q_EMIT attentionNeeded(info);
    }
}

void ConversationListModel::reset(const QList<ConversationInfo> &conversations)
{
    beginResetModel();
    m_items = conversations;
    m_rows.clear();
    for (int row = 0; row < m_items.size(); ++row)
        m_rows.insert(m_items[row].id, row);
    endResetModel();
}

void ConversationListModel::remove(const QUuid &id)
{
    remove(QSet<QUuid>{id});
}

void ConversationListModel::remove(const QSet<QUuid> &ids)
{
    // From the last row up, so that the rows still to look at keep their numbers.
    for (int last = int(m_items.size()) - 1; last >= 0; --last) {
        if (!ids.contains(m_items[last].id))
            continue;
        int first = last;
        while (first > 0 && ids.contains(m_items[first - 1].id))
            --first;
        beginRemoveRows({}, first, last);
        for (int row = first; row <= last; ++row)
            m_rows.remove(m_items[row].id);
        m_items.remove(first, last - first + 1);
        for (int row = first; row < m_items.size(); ++row)
            m_rows[m_items[row].id] = row;
        endRemoveRows();
        last = first;
    }
}

bool ConversationListModel::applyEvent(const QUuid &conversationId, const Event &event)
{
    const int row = m_rows.value(conversationId, -1);
    if (row < 0)
        return false;
    ConversationInfo info = m_items[row];
    if (event.seq <= info.eventCount)
        return true; // already counted (a replayed event)
    info.eventCount = event.seq;
    info.lastEventAt = event.timestamp;
    info.updatedAt = std::max(info.updatedAt, event.timestamp);
    if (event.kind == EventKind::StateUpdate &&
        event.fields.value(u"key"_s).toString() == u"execution_status"_s) {
        if (auto status = executionStatusFromString(event.fields.value(u"value"_s).toString())) {
            info.executionStatus = *status;
            // A live run means a live runtime, when its agent brings one up: an echo
            // conversation showed "available" while selected, "missing" otherwise.
            if (*status == ExecutionStatus::Running && Lifecycle::runsCommands(info))
                info.runtime = {RuntimeStatus::Available, true, std::nullopt};
            // A run's start acknowledges the outcome of the one before, as on the server: its
            // end, until the next refresh, asked for attention (and the tray said so) again.
            if (*status == ExecutionStatus::Running && info.outcome)
                info.outcome->dismissed = true;
        }
    }
    replaceRow(row, info);
    return true;
}

std::optional<ConversationInfo> ConversationListModel::conversation(const QUuid &id) const
{
    const int row = m_rows.value(id, -1);
    if (row < 0)
        return std::nullopt;
    return m_items[row];
}

ConversationFilterProxy::ConversationFilterProxy(ArchiveFilter partition, QObject *parent)
    : QSortFilterProxyModel(parent)
    , m_partition(partition)
{
    setDynamicSortFilter(true);
}

void ConversationFilterProxy::setSearch(const ConversationSearch &search)
{
    m_search = search;
    invalidateFilter();
    Q_EMIT searchChanged();
}

bool ConversationFilterProxy::filterAcceptsRow(int sourceRow, const QModelIndex &) const
{
    const auto *source = static_cast<const ConversationListModel *>(sourceModel());
    return m_search.matches(source->at(sourceRow), m_partition);
}

void ConversationFilterProxy::holdOrder(bool hold)
{
    if (m_held == hold)
        return;
    m_held = hold;
    m_heldKeys.clear();
    m_heldColumn = sortColumn();
    if (hold) {
        const auto *source = static_cast<const ConversationListModel *>(sourceModel());
        for (int row = 0; source && row < source->rowCount(); ++row)
            m_heldKeys.insert(source->at(row).id,
                              conversationSortKey(source->index(row, m_heldColumn)));
    } else {
        invalidate();
    }
}

QVariant conversationSortKey(const QModelIndex &index)
{
    if (index.column() == ConversationListModel::UpdatedColumn)
        return index.data(ConversationListModel::UpdatedAtRole);
    if (index.column() == ConversationListModel::DurationColumn)
        return index.data(ConversationListModel::DurationRole);
    return index.data();
}

namespace {
// The run of digits, or of anything else, that starts at `at`.
QStringView runAt(QStringView text, qsizetype at)
{
    const bool digits = text[at].isDigit();
    qsizetype end = at;
    while (end < text.size() && text[end].isDigit() == digits)
        ++end;
    return text.sliced(at, end - at);
}

// Text as people read it: runs of digits by their value, the rest without regard to case.
// (QCollator's numeric mode does nothing in the C locale, which a server's console may run in.)
int naturalCompare(QStringView left, QStringView right)
{
    qsizetype i = 0, j = 0;
    while (i < left.size() && j < right.size()) {
        const QStringView a = runAt(left, i), b = runAt(right, j);
        i += a.size();
        j += b.size();
        if (a[0].isDigit() && b[0].isDigit()) {
            QStringView x = a, y = b;
            while (x.size() > 1 && x[0] == u'0')
                x = x.sliced(1);
            while (y.size() > 1 && y[0] == u'0')
                y = y.sliced(1);
            if (x.size() != y.size())
                return x.size() < y.size() ? -1 : 1;
            if (const int order = x.compare(y); order != 0)
                return order;
        } else if (const int order = a.compare(b, Qt::CaseInsensitive); order != 0) {
            return order;
        }
    }
    if (i < left.size() || j < right.size())
        return i < left.size() ? 1 : -1;
    return left.compare(right);
}
} // namespace

bool conversationSortKeyLess(const QVariant &left, const QVariant &right, int column)
{
    if (column == ConversationListModel::UpdatedColumn)
        return left.toDateTime() < right.toDateTime();
    if (column == ConversationListModel::DurationColumn)
        return left.toLongLong() < right.toLongLong();
    return naturalCompare(left.toString(), right.toString()) < 0;
}

bool ConversationFilterProxy::lessThan(const QModelIndex &left, const QModelIndex &right) const
{
    QVariant leftKey;
    QVariant rightKey;
    if (m_held && left.column() == m_heldColumn) {
        const auto *source = static_cast<const ConversationListModel *>(sourceModel());
        leftKey = m_heldKeys.value(source->at(left.row()).id);
        rightKey = m_heldKeys.value(source->at(right.row()).id);
        // A row new since the hold began goes last, whichever the order.
        if (leftKey.isValid() != rightKey.isValid())
            return leftKey.isValid() == (sortOrder() == Qt::AscendingOrder);
    }
    if (!leftKey.isValid() || !rightKey.isValid()) {
        leftKey = conversationSortKey(left);
        rightKey = conversationSortKey(right);
    }
    return conversationSortKeyLess(leftKey, rightKey, left.column());
}

} // namespace AgentDeck
