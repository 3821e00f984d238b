#pragma once

#include "wiretypes.h"

#include <QAbstractListModel>
#include <QSet>

namespace AgentDeck {

// One conversation's timeline, in seq order: its newest events, appended as they arrive, and
// the earlier ones the operator asks for.
class EventListModel : public QAbstractListModel
{
    Q_OBJECT
    Q_PROPERTY(int count READ count NOTIFY countChanged)
    // How many events come before the first row and are not loaded.
    Q_PROPERTY(qint64 earlierCount READ earlierCount NOTIFY countChanged)
    // Whether the view shows the newest event. While it does, only the newest KeptEvents rows
    // are kept: a followed conversation's history grew in memory for as long as the console
    // ran (~1.5 KB an event). Scrolled up, nothing is let go under the reader's eyes.
    Q_PROPERTY(bool showingEnd READ isShowingEnd WRITE setShowingEnd NOTIFY showingEndChanged)
    // Whether a conversation is followed, and whether its event stream is connected now: the
    // timeline says "no events yet" or "connecting" rather than "select a conversation".
    Q_PROPERTY(bool following READ isFollowing NOTIFY followingChanged)
    Q_PROPERTY(bool live READ isLive NOTIFY liveChanged)
public:
    enum Role
    {
        SeqRole = Qt::UserRole + 1, // qint64
        KindRole,                   // QString, e.g. "ActionEvent"
        SourceRole,                 // QString: user, agent, environment
        TimestampRole,              // QDateTime (UTC)
        TextRole,                   // QString: message text, command, output or error
        ExitCodeRole,               // int, observations only (else -1)
        InterruptedRole,            // bool, observations only
        ErrorCodeRole,              // QString, AgentErrorEvent only
        // QString: what shows before a click: an output's last PreviewLines lines (where the
        // errors and the truncation marker are), after a line saying how many went before;
        // the first lines of anything else.
        PreviewRole,
        ExpandedRole, // bool: shown whole (setExpanded), kept while the row scrolls out
        // bool: an action whose command runs now: no observation or rejection of it yet, and
        // no stop of the run (a pause, a wait for confirmation, an end) after it.
        RunningRole,
        // QString: the last PreviewLines lines its command printed so far (addLiveOutput()),
        // running actions only.
        LiveOutputRole,
    };
    Q_ENUM(Role)

    static constexpr int PreviewLines = 12;
    // The operator shows an event whole, or its preview again.
    Q_INVOKABLE void setExpanded(qint64 seq, bool expanded);
    // An output's last lines, after a line saying how many went before (`text` whole when it
    // has at most PreviewLines).
    static QString tailOf(const QString &text);

    // The rows kept while the view shows the end, and the most a timeline opens with.
    static constexpr int KeptEvents = 1000;

    explicit EventListModel(QObject *parent = nullptr);
    int rowCount(const QModelIndex &parent = {}) const override;
    QVariant data(const QModelIndex &index, int role) const override;
    QHash<int, QByteArray> roleNames() const override;

    int count() const { return int(m_events.size()); }
    qint64 lastSeq() const { return m_events.isEmpty() ? m_startAfter : m_events.last().seq; }
    qint64 earlierCount() const
    {
        return m_events.isEmpty() ? m_startAfter : m_events.first().seq - 1;
    }
    // Appends an event after the last one; older or repeated seqs are ignored.
    void append(const Event &event);
    // What the command of action `actionId` printed next, from a transient CommandOutput
    // frame; shown under the action while it runs (the last LiveOutputBytes of it are kept).
    void addLiveOutput(const QUuid &actionId, const QString &piece);
    static constexpr qsizetype LiveOutputBytes = 64 * 1024;
    // Puts the events just before the first row in front of it (those that are not are
    // ignored), in seq order.
    void prepend(const QList<Event> &events);
    // Empties the timeline, which then begins after `afterSeq`: the events up to it are
    // earlier ones.
    void clear(qint64 afterSeq = 0);
    bool isShowingEnd() const { return m_showingEnd; }
    void setShowingEnd(bool showingEnd);
    // The operator asks for earlier events: the controller fetches them (earlierWanted()).
    Q_INVOKABLE void loadEarlier();
    bool isFollowing() const { return m_following; }
    void setFollowing(bool following);
    bool isLive() const { return m_live; }
    void setLive(bool live);

    // The text a timeline shows for an event (bidirectional formatting characters shown, not
    // obeyed; a line of over 5,000 characters in pieces of that many).
    static QString textOf(const Event &event);
    // A state event in words: what changed, who changed it and why, as far as the event says
    // ("archived by ops-alice via console", "sandbox stopped by server (idle): idle for 30m
    // (--sandbox-idle-timeout)", "execution status: finished").
    static QString stateUpdateText(const QJsonObject &fields);

Q_SIGNALS:
    void countChanged();
    void followingChanged();
    void liveChanged();
    void showingEndChanged();
    void earlierWanted();

private:
    static QString storedTextOf(const Event &event);
    void letGoOfOldest();
    bool isRunning(int row) const;
    // The row of the newest action, -1 without one.
    int newestActionRow() const;

    QList<Event> m_events;
    qint64 m_startAfter = 0;
    bool m_showingEnd = true;
    bool m_following = false;
    bool m_live = false;
    QSet<qint64> m_expanded; // seqs shown whole
    // What the running command printed so far, and whose it is.
    QUuid m_liveAction;
    QString m_liveOutput;
};

} // namespace AgentDeck
