#pragma once

#include <QDateTime>
#include <QJsonObject>
#include <QList>
#include <QString>
#include <QUrlQuery>
#include <QUuid>

#include <optional>

namespace AgentDeck {

// One record of a server's audit log, as GET /api/audit (and the lifecycle feed) gives it: who
// changed what, when, why, and how it ended.
struct AuditEntry
{
    qint64 number = 0;    // the record's id: the order the server wrote them in
    QDateTime at;         // the database's clock
    QString actor;        // a key's name, "server", or empty (no keys, or a wrong key)
    QString client;       // "console", "ctl", ...; the policy for the server
    QString actorDisplay; // "ops-alice via console", "server (idle)"
    QString action;
    QUuid conversationId; // null: a change to no one conversation
    QString replica;
    QString reason;
    bool done = true; // false: refused, with `status`
    int status = 200;

    // Nothing for an object that is no record (no id or no time).
    static std::optional<AuditEntry> fromJson(const QJsonObject &object);
};

// What GET /api/audit is asked for: the server filters on each field given.
struct AuditQuery
{
    QString actor; // a key's name, or "server"
    QString action;
    QUuid conversationId;
    int limit = 100; // a page, 1..100

    void writeTo(QUrlQuery &query) const;
    // Whether `entry` is one this query asks for.
    bool matches(const AuditEntry &entry) const;
    bool operator==(const AuditQuery &) const = default;
};

struct AuditPage
{
    QList<AuditEntry> items;
    QString nextPageId; // empty: no more
};

// The actions the audit log records, for the console's filter (the server names them).
QStringList knownAuditActions();

} // namespace AgentDeck
