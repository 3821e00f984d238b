#pragma once

#include <QDateTime>
#include <QJsonObject>
#include <QString>

#include <optional>

namespace AgentDeck {

// What `GET /api/conversations/{id}/runtime` tells beside the runtime info, for an operator
// looking at one conversation: the sandbox's process and who holds the conversation. Read for
// one conversation at a time (it asks the lease table), never for a page.
struct RuntimeDetails
{
    // The sandbox host's process, when this server keeps the conversation's sandbox.
    std::optional<qint64> sandboxPid;
    std::optional<QDateTime> startedAt;
    // Since when it has run nothing; none while a command runs.
    std::optional<QDateTime> idleSince;
    QString runtimeDir; // where the sandbox keeps its home and socket; empty without one

    // The lease on the conversation, when one is held: the owner instance, its replica and
    // where it answers, and how long the lease has left by the database's clock (<= 0: lapsed).
    QString leaseOwner;
    QString ownerReplica;
    QString ownerUrl;
    qint64 leaseEpoch = 0;
    std::optional<qint64> leaseMsLeft;
    // Whether that owner is this server.
    bool ownedHere = false;

    QJsonObject toJson() const;
    static RuntimeDetails fromJson(const QJsonValue &value);
    friend bool operator==(const RuntimeDetails &, const RuntimeDetails &) = default;
};

} // namespace AgentDeck
