#pragma once

#include "wiretypes.h"

#include <QAbstractListModel>

namespace AgentDeck {

// One conversation's timeline, in seq order. Rows are appended as events arrive.
class EventListModel : public QAbstractListModel
{
    Q_OBJECT
    Q_PROPERTY(int count READ count NOTIFY countChanged)
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
    };
    Q_ENUM(Role)

    explicit EventListModel(QObject *parent = nullptr);
    int rowCount(const QModelIndex &parent = {}) const override;
    QVariant data(const QModelIndex &index, int role) const override;
    QHash<int, QByteArray> roleNames() const override;

    int count() const { return int(m_events.size()); }
    qint64 lastSeq() const { return m_events.isEmpty() ? 0 : m_events.last().seq; }
    // Appends an event after the last one; older or repeated seqs are ignored.
    void append(const Event &event);
    void clear();
    bool isFollowing() const { return m_following; }
    void setFollowing(bool following);
    bool isLive() const { return m_live; }
    void setLive(bool live);

    // The text a timeline shows for an event (bidirectional formatting characters shown, not
    // obeyed).
    static QString textOf(const Event &event);

Q_SIGNALS:
    void countChanged();
    void followingChanged();
    void liveChanged();

private:
    static QString storedTextOf(const Event &event);

    QList<Event> m_events;
    bool m_following = false;
    bool m_live = false;
};

} // namespace AgentDeck
