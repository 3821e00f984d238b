#include "activitymodel.h"

#include "wiretypes.h"

#include <algorithm>

using namespace Qt::StringLiterals;

namespace AgentDeck {

ActivityModel::ActivityModel(QObject *parent)
    : QAbstractTableModel(parent)
{}

int ActivityModel::addSource(const QString &label, TitleLookup titles)
{
    m_sources.append(Source{label, std::move(titles)});
    return int(m_sources.size() - 1);
}

void ActivityModel::removeSource(int source)
{
    if (source < 0 || source >= m_sources.size() || m_sources[source].removed)
        return;
    beginResetModel();
    m_sources[source] = Source{};
    m_sources[source].removed = true;
    m_all.removeIf([source](const Row &row) { return row.source == source; });
    m_held.removeIf([source](const std::pair<int, qint64> &key) { return key.first == source; });
    m_shown = 0;
    endResetModel();
    showToHorizon();
}

void ActivityModel::setSourceLabel(int source, const QString &label)
{
    if (source < 0 || source >= m_sources.size())
        return;
    m_sources[source].label = label;
    if (m_shown > 0)
        Q_EMIT dataChanged(index(0, ServerColumn), index(int(m_shown - 1), ServerColumn));
}

QList<int> ActivityModel::liveSources() const
{
    QList<int> live;
    for (int source = 0; source < m_sources.size(); ++source) {
        if (!m_sources[source].removed)
            live.append(source);
    }
    return live;
}

void ActivityModel::setQuery(const AuditQuery &query)
{
    if (query == m_query)
        return;
    m_query = query;
    clear();
}

void ActivityModel::clear()
{
    beginResetModel();
    m_all.clear();
    m_held.clear();
    m_shown = 0;
    for (Source &source : m_sources) {
        source.loaded = false;
        source.nextPageId.clear();
        source.oldest = QDateTime();
    }
    endResetModel();
}

bool ActivityModel::newerFirst(const Row &a, const Row &b)
{
    if (a.entry.at != b.entry.at)
        return a.entry.at > b.entry.at;
    if (a.source != b.source)
        return a.source < b.source;
    return a.entry.number > b.entry.number;
}

bool ActivityModel::insert(int source, const AuditEntry &entry)
{
    if (m_held.contains({source, entry.number}))
        return false;
    m_held.insert({source, entry.number});
    const Row row{source, entry};
    const qsizetype at =
        std::upper_bound(m_all.cbegin(), m_all.cend(), row, newerFirst) - m_all.cbegin();
    // Newer than a shown row: it is shown too.
    if (at < m_shown) {
        beginInsertRows({}, int(at), int(at));
        m_all.insert(at, row);
        ++m_shown;
        endInsertRows();
    } else {
        m_all.insert(at, row);
    }
    return true;
}

QDateTime ActivityModel::horizon() const
{
    QDateTime limit;
    for (const Source &source : m_sources) {
        if (source.removed || !source.loaded || source.nextPageId.isEmpty())
            continue;
        if (!limit.isValid() || source.oldest > limit)
            limit = source.oldest;
    }
    return limit;
}

void ActivityModel::showToHorizon()
{
    const QDateTime limit = horizon();
    qsizetype shown = m_all.size();
    if (limit.isValid())
        shown = std::partition_point(m_all.cbegin(), m_all.cend(),
                                     [&limit](const Row &row) { return row.entry.at >= limit; }) -
                m_all.cbegin();
    if (shown > m_shown) {
        beginInsertRows({}, int(m_shown), int(shown - 1));
        m_shown = shown;
        endInsertRows();
    } else if (shown < m_shown) {
        // A source read for the first time reaches back less far than the rows shown.
        beginRemoveRows({}, int(shown), int(m_shown - 1));
        m_shown = shown;
        endRemoveRows();
    }
}

void ActivityModel::addPage(int source, const AuditPage &page, bool newest)
{
    if (source < 0 || source >= m_sources.size() || m_sources[source].removed)
        return;
    Source &from = m_sources[source];
    if (newest && from.loaded && !page.nextPageId.isEmpty()) {
        const bool reaches = std::any_of(page.items.cbegin(), page.items.cend(),
                                         [this, source](const AuditEntry &entry) {
                                             return m_held.contains({source, entry.number});
                                         });
        const bool holdsAny = std::any_of(m_all.cbegin(), m_all.cend(), [source](const Row &row) {
            return row.source == source;
        });
        if (!reaches && holdsAny) {
            // More records came since than a page holds: the source starts over.
            beginResetModel();
            m_all.removeIf([source](const Row &row) { return row.source == source; });
            m_held.removeIf(
                [source](const std::pair<int, qint64> &key) { return key.first == source; });
            m_shown = std::min(m_shown, m_all.size());
            from.loaded = false;
            endResetModel();
        }
    }
    const bool continues = !newest || !from.loaded;
    for (const AuditEntry &entry : page.items) {
        insert(source, entry);
        if (continues && (!from.oldest.isValid() || entry.at < from.oldest))
            from.oldest = entry.at;
    }
    if (continues) {
        from.nextPageId = page.nextPageId;
        from.loaded = true;
    }
    showToHorizon();
}

bool ActivityModel::prependRecord(const QJsonObject &record, int source)
{
    if (source < 0 || source >= m_sources.size() || m_sources[source].removed)
        return false;
    const auto entry = AuditEntry::fromJson(record);
    if (!entry || !m_query.matches(*entry) || !insert(source, *entry))
        return false;
    showToHorizon();
    return true;
}

bool ActivityModel::isLoaded(int source) const
{
    return source >= 0 && source < m_sources.size() && m_sources[source].loaded;
}

QString ActivityModel::nextPageId(int source) const
{
    return source >= 0 && source < m_sources.size() ? m_sources[source].nextPageId : QString();
}

bool ActivityModel::hasMore() const
{
    return std::any_of(m_sources.cbegin(), m_sources.cend(), [](const Source &source) {
        return !source.removed && source.loaded && !source.nextPageId.isEmpty();
    });
}

QList<int> ActivityModel::sourcesToReadMore() const
{
    const QDateTime limit = horizon();
    QList<int> sources;
    if (!limit.isValid())
        return sources;
    for (int source = 0; source < m_sources.size(); ++source) {
        const Source &from = m_sources[source];
        if (!from.removed && from.loaded && !from.nextPageId.isEmpty() && from.oldest == limit)
            sources.append(source);
    }
    return sources;
}

void ActivityModel::titlesChanged()
{
    if (m_shown > 0)
        Q_EMIT dataChanged(index(0, ConversationColumn),
                           index(int(m_shown - 1), ConversationColumn));
}

QString ActivityModel::shortId(const QUuid &id)
{
    return toWireId(id).left(8);
}

int ActivityModel::rowCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : int(m_shown);
}

int ActivityModel::columnCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QString ActivityModel::conversationText(const Row &row) const
{
    const QUuid &id = row.entry.conversationId;
    if (id.isNull())
        return {};
    const TitleLookup &titles = m_sources[row.source].titles;
    const QString title = titles ? titles(id) : QString();
    return title.isEmpty() ? shortId(id) : withControlsShown(title);
}

QVariant ActivityModel::data(const QModelIndex &index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const Row &row = m_all.at(index.row());
    const AuditEntry &entry = row.entry;
    switch (role) {
    case TimeRole:
        return entry.at;
    case SourceRole:
        return row.source;
    case ActorRole:
        return entry.actor;
    case ActorDisplayRole:
        return entry.actorDisplay;
    case ActionRole:
        return entry.action;
    case ConversationIdRole:
        return entry.conversationId.isNull() ? QString() : toWireId(entry.conversationId);
    case ReasonRole:
        return entry.reason;
    case DoneRole:
        return entry.done;
    case StatusRole:
        return entry.status;
    case SearchTextRole:
        return QStringList{entry.actorDisplay,
                           entry.action,
                           conversationText(row),
                           entry.conversationId.isNull() ? QString()
                                                         : toWireId(entry.conversationId),
                           entry.reason,
                           entry.replica,
                           m_sources[row.source].label}
            .join(u'\n')
            .toLower();
    case Qt::ToolTipRole:
        switch (index.column()) {
        case TimeColumn:
            return tr("%1, through replica %2").arg(toDisplayTime(entry.at), entry.replica);
        case ActorColumn:
            if (entry.actor == u"server"_s)
                return tr("The server, by its %1 policy").arg(entry.client);
            return tr("Key: %1; client: %2")
                .arg(entry.actor.isEmpty() ? tr("none, or a wrong one") : entry.actor,
                     entry.client.isEmpty() ? tr("not named") : entry.client);
        case ConversationColumn:
            return entry.conversationId.isNull() ? QVariant() : toWireId(entry.conversationId);
        case ReasonColumn:
            return entry.reason.isEmpty() ? QVariant() : withControlsShown(entry.reason);
        default:
            return {};
        }
    case Qt::DisplayRole:
        switch (index.column()) {
        case TimeColumn:
            return toDisplayTime(entry.at, /*dateUnlessToday=*/true);
        case ServerColumn:
            return m_sources[row.source].label;
        case ActorColumn:
            return entry.actorDisplay.isEmpty() ? tr("anonymous")
                                                : withControlsShown(entry.actorDisplay);
        case ActionColumn:
            return entry.action;
        case ConversationColumn:
            return conversationText(row);
        case ReasonColumn:
            // One line: the reason's own line breaks made a row several high.
            return withControlsShown(entry.reason).simplified();
        case ResultColumn:
            return entry.done ? tr("done") : tr("refused (%1)").arg(entry.status);
        default:
            return {};
        }
    default:
        return {};
    }
}

QVariant ActivityModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return {};
    switch (section) {
    case TimeColumn:
        return tr("Time");
    case ServerColumn:
        return tr("Server");
    case ActorColumn:
        return tr("Who");
    case ActionColumn:
        return tr("Action");
    case ConversationColumn:
        return tr("Conversation");
    case ReasonColumn:
        return tr("Reason");
    case ResultColumn:
        return tr("Result");
    default:
        return {};
    }
}

QHash<int, QByteArray> ActivityModel::roleNames() const
{
    QHash<int, QByteArray> names = QAbstractTableModel::roleNames();
    names.insert({{TimeRole, "time"},
                  {SourceRole, "source"},
                  {ActorRole, "actor"},
                  {ActorDisplayRole, "actorDisplay"},
                  {ActionRole, "action"},
                  {ConversationIdRole, "conversationId"},
                  {ReasonRole, "reason"},
                  {DoneRole, "done"},
                  {StatusRole, "status"},
                  {SearchTextRole, "searchText"}});
    return names;
}

void ActivityFilter::setText(const QString &text)
{
    const QString lowered = text.trimmed().toLower();
    if (lowered == m_text)
        return;
    m_text = lowered;
    invalidateFilter();
}

void ActivityFilter::setResult(Result result)
{
    if (result == m_result)
        return;
    m_result = result;
    invalidateFilter();
}

bool ActivityFilter::filterAcceptsRow(int sourceRow, const QModelIndex &sourceParent) const
{
    const QModelIndex row = sourceModel()->index(sourceRow, 0, sourceParent);
    if (m_result != Result::Any &&
        row.data(ActivityModel::DoneRole).toBool() != (m_result == Result::Done))
        return false;
    if (m_text.isEmpty())
        return true;
    const QString text = row.data(ActivityModel::SearchTextRole).toString();
    const QStringList words = m_text.split(u' ', Qt::SkipEmptyParts);
    return std::all_of(words.cbegin(), words.cend(),
                       [&text](const QString &word) { return text.contains(word); });
}

} // namespace AgentDeck
