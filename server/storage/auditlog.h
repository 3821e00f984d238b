#pragma once

#include "http/actor.h"

#include <QDeadlineTimer>
#include <QJsonObject>
#include <QList>
#include <QObject>
#include <QString>
#include <QTimer>
#include <QUuid>

#include <optional>

namespace AgentDeck {

class Database;

// One change to a conversation or a runtime, as the audit log keeps it.
struct AuditRecord
{
    qint64 number = 0; // the order records were written in
    qint64 atMs = 0;   // the database's clock
    Actor actor;
    QString action;
    QUuid conversationId; // null: the change was to no one conversation
    QString replica;
    QString reason;
    int status = 200; // the answer's: 2xx done, else refused

    QJsonObject toJson() const;
};

// The audit log (table audit_log): who changed what, when and why, on SQLite and PostgreSQL
// alike. Refused attempts are recorded too, but at most RefusedPerMinute of them a minute: a
// client that sends a flood of them cannot fill the disk.
//
// A record is written once the event loop turns, after the answer of its request is out, in one
// transaction with the others of that turn: written in the request, its commit added a fifth to
// a mutation's time. The time is the database's at the write, a turn after the change.
class AuditLog : public QObject
{
    Q_OBJECT
public:
    static constexpr int RefusedPerMinute = 120;
    // How long a record waits for others to be written with it.
    static constexpr std::chrono::milliseconds FlushDelay{20};

    // The PostgreSQL channel a write announces itself on, for the other replicas' feeds.
    static constexpr QLatin1StringView WrittenChannel{"agentdeck_audit"};

    AuditLog(Database &db, QString replica);
    ~AuditLog() override;

    // Writes the record soon; never throws (a change that was made stays made when its record
    // cannot be written: the failure is logged).
    void record(const Actor &actor, const QString &action, const QUuid &conversationId,
                const QString &reason, int status = 200);
    // Writes the records not written yet (a search and a stop do first).
    void flush();

    struct Query
    {
        std::optional<qint64> fromMs;   // at >=
        std::optional<qint64> beforeMs; // at <
        QString actor;                  // a key's name, or "server"
        QString client;                 // a client, or a policy of the server
        QString action;
        QUuid conversationId;
        enum class Results
        {
            All,
            Done,
            Refused
        };
        Results results = Results::All; // Done: the changes made, Refused: the attempts refused
        bool descending = true;         // newest first
        std::optional<qint64> after;    // paging: past this record's number in the order asked
        int limit = 100;
    };
    // A page of what matches, and whether more follow it.
    std::pair<QList<AuditRecord>, bool> search(const Query &query);
    // Deletes the records older than `ageMs` by the database's clock; returns how many.
    qint64 removeOlderThan(qint64 ageMs);
    // How many refused attempts went unrecorded, over the limit.
    qint64 refusedDropped() const { return m_refusedDropped; }

Q_SIGNALS:
    // Records were committed through this replica (others announce theirs on WrittenChannel).
    // Numbers commit in their order, so a reader past number N that reads again after this sees
    // every record after N, with no gap.
    void written();

private:
    bool admitRefused();

    Database &m_db;
    const QString m_replica;
    QList<AuditRecord> m_pending;
    QTimer m_flush;
    QDeadlineTimer m_window;
    int m_refusedInWindow = 0;
    qint64 m_refusedDropped = 0;
};

} // namespace AgentDeck
