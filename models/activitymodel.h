#pragma once

#include "auditentry.h"

#include <QAbstractTableModel>
#include <QSet>
#include <QSortFilterProxyModel>

#include <functional>

namespace AgentDeck {

// The audit records of one server or of several (All servers) in one list, newest first: who
// did what, when, why, and how it ended. Each server is a source with its own cursor into its
// log; their pages are merged by time. Where several servers have older records still unread,
// a row is shown only once every server's records down to its time are read (the horizon):
// a server whose first page reaches back a day would otherwise sit between another's records
// of the last hour with a gap no one sees.
class ActivityModel : public QAbstractTableModel
{
    Q_OBJECT
public:
    enum Column
    {
        TimeColumn,
        ServerColumn,
        ActorColumn,
        ActionColumn,
        ConversationColumn,
        ReasonColumn,
        ResultColumn,
        ColumnCount
    };
    Q_ENUM(Column)
    // Semantic roles, the same for every column.
    enum Role
    {
        TimeRole = Qt::UserRole + 1, // QDateTime
        SourceRole,                  // int: the source (server) the record is from
        ActorRole,                   // the key's name ("server" for a policy)
        ActorDisplayRole,            // "ops-alice via console"
        ActionRole,
        ConversationIdRole, // dashed wire id; empty for a change to no one conversation
        ReasonRole,
        DoneRole,      // bool: the change was made (false: refused)
        StatusRole,    // int: the answer's HTTP status
        SearchTextRole // every field as one text, lowercase, for the text filter
    };
    Q_ENUM(Role)

    // A conversation's title as the console knows it; empty when it does not (deleted, or
    // not loaded).
    using TitleLookup = std::function<QString(const QUuid &)>;

    explicit ActivityModel(QObject *parent = nullptr);

    // A server whose records the list holds; its index names it in the calls below.
    int addSource(const QString &label, TitleLookup titles = {});
    // Its records leave the list; its index is not given to another.
    void removeSource(int source);
    void setSourceLabel(int source, const QString &label);
    QString sourceLabel(int source) const { return m_sources.value(source).label; }
    int sourceCount() const { return int(m_sources.size()); }
    // Sources added and not removed.
    QList<int> liveSources() const;

    // What every source is asked for; the list is emptied when it differs.
    void setQuery(const AuditQuery &query);
    AuditQuery query() const { return m_query; }
    // Empties the list; every source reads from its newest record again.
    void clear();

    // A page `source` answered. `newest`: its first page (a refresh): the records not held
    // yet join the list, and the source's cursor stays where older pages left it (unless the
    // page does not reach the records held: what came between is unknown, and the source
    // starts over with this page). Otherwise the page after the source's cursor.
    void addPage(int source, const AuditPage &page, bool newest);
    // A record as the lifecycle feed (or an /api/audit item) gives it, at its place by time
    // (the top, for a live one); false when it is no record, is held already or is not one
    // the query asks for.
    bool prependRecord(const QJsonObject &record, int source = 0);

    // Whether `source` answered a page since clear().
    bool isLoaded(int source) const;
    // Where `source`'s next page starts (empty: no more, or nothing read yet).
    QString nextPageId(int source) const;
    bool hasMore() const;
    // The sources whose next page moves the horizon: reading them shows more rows.
    QList<int> sourcesToReadMore() const;
    // How many records are held in all, shown or not.
    qsizetype heldCount() const { return m_all.size(); }

    const AuditEntry &entry(int row) const { return m_all.at(row).entry; }
    int sourceOf(int row) const { return m_all.at(row).source; }
    // The titles may have changed (the conversations were read again).
    void titlesChanged();
    // "3f2a9c1e": how a conversation whose title is not known is named.
    static QString shortId(const QUuid &id);

    int rowCount(const QModelIndex &parent = {}) const override;
    int columnCount(const QModelIndex &parent = {}) const override;
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation,
                        int role = Qt::DisplayRole) const override;
    QHash<int, QByteArray> roleNames() const override;

private:
    struct Row
    {
        int source;
        AuditEntry entry;
    };
    struct Source
    {
        QString label;
        TitleLookup titles;
        bool removed = false;
        bool loaded = false;
        QString nextPageId;
        QDateTime oldest; // of the records its pages gave
    };
    static bool newerFirst(const Row &a, const Row &b);
    // Puts `entry` at its place; false when it is held already.
    bool insert(int source, const AuditEntry &entry);
    // The time down to which every source's records are read (invalid: all are).
    QDateTime horizon() const;
    // Shows the rows down to the horizon, and no further.
    void showToHorizon();
    QString conversationText(const Row &row) const;

    QList<Row> m_all; // newest first; the first m_shown are the model's rows
    qsizetype m_shown = 0;
    QSet<std::pair<int, qint64>> m_held; // (source, number)
    QList<Source> m_sources;
    AuditQuery m_query;
};

// The list's text and result filters, on the rows the model shows: the text is found in any
// field (a conversation's title, its id, the reason, who, the action, the replica).
class ActivityFilter : public QSortFilterProxyModel
{
    Q_OBJECT
public:
    enum class Result
    {
        Any,
        Done,
        Refused
    };
    Q_ENUM(Result)

    using QSortFilterProxyModel::QSortFilterProxyModel;
    void setText(const QString &text);
    void setResult(Result result);
    QString text() const { return m_text; }
    Result result() const { return m_result; }

protected:
    bool filterAcceptsRow(int sourceRow, const QModelIndex &sourceParent) const override;

private:
    QString m_text;
    Result m_result = Result::Any;
};

} // namespace AgentDeck
