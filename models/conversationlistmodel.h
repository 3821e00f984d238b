#pragma once

#include "conversationfilter.h"
#include "wiretypes.h"

#include <QAbstractTableModel>
#include <QHash>
#include <QSet>
#include <QSortFilterProxyModel>

class QTimer;

namespace AgentDeck {

// The conversations a console knows about, one row each. Rows are updated in place from search
// pages (upsert) and from live events (applyEvent): one row's dataChanged, never a reset.
class ConversationListModel : public QAbstractTableModel
{
    Q_OBJECT
public:
    enum Column
    {
        TitleColumn,
        ExecutionColumn,
        RuntimeColumn,
        DurationColumn, // running for, or how long its last command ran
        UpdatedColumn,
        TagsColumn,
        ServerColumn, // the server's label: shown where several servers' rows are listed
        ColumnCount
    };

    // Semantic roles. Views decide colours and icons from these, never from display text.
    enum Role
    {
        IdRole = Qt::UserRole + 1, // QString, dashed UUID
        TitleRole,                 // QString
        ExecutionStatusRole,       // QString, wire value ("running", ...)
        RuntimeStatusRole,         // QString, wire value ("available", ...)
        RuntimeLabelRole,          // QString, badge words ("missing (resumable)", "expired")
        CanResumeRole,             // bool
        ArchivedRole,              // bool
        StaleRole,                 // bool, Lifecycle::isStale
        NeedsAttentionRole,        // bool, Lifecycle::needsAttention
        UpdatedAtRole,             // QDateTime (UTC)
        CreatedAtRole,             // QDateTime (UTC)
        TagsRole,                  // QVariantMap
        EventCountRole,            // qint64
        ConversationRole,          // QVariant holding the ConversationInfo
        OutcomeKindRole,           // QString, wire value of outcome.kind; empty when none
        OutcomeAttentionRole,      // bool, RunOutcome::needsAttention
        OutcomeLabelRole,          // QString, Lifecycle::outcomeLabel ("exit 2")
        ServerDownRole,            // bool, setStale(): its server does not answer
        DurationRole,              // qint64 ms: running for, or the last command ran; -1: none
    };
    Q_ENUM(Role)

    explicit ConversationListModel(QObject *parent = nullptr);

    int rowCount(const QModelIndex &parent = {}) const override;
    int columnCount(const QModelIndex &parent = {}) const override;
    QVariant data(const QModelIndex &index, int role) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role) const override;
    QHash<int, QByteArray> roleNames() const override;
    // The title and the tags are edited in place; the edit goes to the server (labelsEdited())
    // and the row changes when its answer comes, never before: a refused edit left nothing
    // on screen that the server does not have.
    Qt::ItemFlags flags(const QModelIndex &index) const override;
    bool setData(const QModelIndex &index, const QVariant &value, int role) override;

    // How long, in words: "12 s", "2 min 5 s", "1 h 3 min", "2 d 4 h".
    static QString durationText(qint64 ms);

    // Tags as the Tags column shows and edits them: "team=ops, env=prod"; a bare name is a tag
    // with an empty value. Parsing names what it cannot take in *error (an empty name, a name
    // twice).
    static QString tagsText(const QMap<QString, QString> &tags);
    static std::optional<QMap<QString, QString>> tagsFromText(const QString &text, QString *error);

    // Inserts new conversations and updates known ones (only rows that changed emit), unless
    // a copy is older than its row: fewer events counted than the row has.
    void upsert(const QList<ConversationInfo> &conversations);
    // Replaces the whole set with a fresh listing (a first load, or a full refresh).
    void reset(const QList<ConversationInfo> &conversations);
    void remove(const QUuid &id);
    // One removal per run of adjacent rows.
    void remove(const QSet<QUuid> &ids);
    // Applies one live event to its conversation's row; returns false if the row is unknown.
    bool applyEvent(const QUuid &conversationId, const Event &event);

    std::optional<ConversationInfo> conversation(const QUuid &id) const;
    int rowOf(const QUuid &id) const { return m_rows.value(id, -1); }
    // A pause was asked of the running `id` and has not taken effect: its badge says
    // "pausing…" until its status changes.
    void markPausing(const QUuid &id);
    bool isPausing(const QUuid &id) const { return m_pausing.contains(id); }
    // The server these rows are of, as the Server column names it.
    void setServerLabel(const QString &label);
    QString serverLabel() const { return m_serverLabel; }
    // Rows of a server that does not answer are what it last said, at `asOf` (ServerDownRole):
    // greyed, their badges saying "as of HH:MM:SS".
    void setStale(bool stale, const QDateTime &asOf = {});
    bool isStale() const { return m_stale; }
    QDateTime staleAsOf() const { return m_staleAsOf; }
    const ConversationInfo &at(int row) const { return m_items[row]; }

Q_SIGNALS:
    // A conversation became one that needs attention (the tray listens); also one first seen
    // needing it, except in the first upsert: opening the console announced every row that
    // needed attention, one notification each.
    void attentionNeeded(const AgentDeck::ConversationInfo &info);
    // The operator edited a title or the tags in place: what the server is to be asked for.
    // `error` is set instead when the text could not be read (the tags' syntax).
    void labelsEdited(const QUuid &id, const AgentDeck::ConversationLabels &labels);
    void labelsRefused(const QUuid &id, const QString &error);

private:
    void replaceRow(int row, const ConversationInfo &info);
    // "as of 14:02:11", when the rows are stale.
    QString asOfText() const;
    // A badge's words, with how old they are when the server does not answer.
    QString withAsOf(const QString &words) const
    {
        return m_stale ? words + u" · " + asOfText() : words;
    }

    // ms running, or that its last command ran; -1 when neither (DurationRole).
    qint64 durationOf(const ConversationInfo &info) const;
    // While a row runs, its Duration counts up: once a second.
    void tickDurations();

    QList<ConversationInfo> m_items;
    QHash<QUuid, int> m_rows;
    QTimer *m_durationTick;
    QSet<QUuid> m_pausing;
    QString m_serverLabel;
    bool m_stale = false;
    QDateTime m_staleAsOf;
    bool m_loaded = false; // an upsert has been made
};

// One partition (active or archived) with the filter box's search, over the same source model.
// The predicate is ConversationSearch::matches, made of ConversationFilter::matches, the one
// the server's SQL search implements.
class ConversationFilterProxy : public QSortFilterProxyModel
{
    Q_OBJECT
public:
    explicit ConversationFilterProxy(ArchiveFilter partition, QObject *parent = nullptr);
    void setSearch(const ConversationSearch &search);
    void setText(const QString &text) { setSearch(ConversationSearch::parse(text)); }
    const ConversationSearch &search() const { return m_search; }
    ArchiveFilter partition() const { return m_partition; }

Q_SIGNALS:
    void searchChanged();

public:
    // While held, rows keep their order: each sorts by its key as it was when the hold began,
    // and rows new since go last. The list refreshes every few seconds and rows sorted by
    // their update time moved under the pointer, so that a click meant for one conversation
    // selected another. Filtering stays live. Letting go sorts by the current keys again.
    void holdOrder(bool hold);
    bool isOrderHeld() const { return m_held; }

protected:
    bool filterAcceptsRow(int sourceRow, const QModelIndex &sourceParent) const override;
    bool lessThan(const QModelIndex &left, const QModelIndex &right) const override;

private:
    ArchiveFilter m_partition;
    ConversationSearch m_search;
    bool m_held = false;
    QHash<QUuid, QVariant> m_heldKeys; // of the sort column, when the hold began
    int m_heldColumn = -1;
};

// How the list's rows sort by a column, in a server's window and in All servers alike: the
// update time as a time; text as people read it, numbers by their value (build-2 before
// build-10), letters without regard to case.
QVariant conversationSortKey(const QModelIndex &index);
bool conversationSortKeyLess(const QVariant &left, const QVariant &right, int column);

} // namespace AgentDeck

Q_DECLARE_METATYPE(AgentDeck::ConversationInfo)
