#pragma once

#include <QHash>
#include <QList>
#include <QString>
#include <QUuid>

#include <chrono>
#include <optional>
#include <stdexcept>

namespace AgentDeck {

class Database;

// Who may write a conversation's run state, and since when: the fencing token. Every write of
// a run carries it and is checked against the row in the same transaction.
struct LeaseToken
{
    QString owner;
    qint64 epoch = 0;
};

enum class LeaseState
{
    Held,
    LostToAnotherOwner,
    CancelRequested,    // pause at the next safe point (asked on another replica)
    InterruptRequested, // cancel the step in flight (asked on another replica)
    Deleted
};

// A run's write was fenced off: another owner holds the conversation now. Nothing was written.
class LeaseLostError : public std::runtime_error
{
public:
    using std::runtime_error::runtime_error;
};

struct LeaseHolder
{
    QString owner;
    qint64 epoch = 0;
    qint64 msLeft = 0; // by the database clock; <= 0: lapsed
    // The owner as the replicas table knows it; empty/nullopt for an owner it does not list.
    QString replicaId;
    QString advertiseUrl;
    std::optional<qint64> heartbeatAgeMs;
    std::optional<qint64> livenessWindowMs; // the owner's own, when it recorded one
    bool replicaStopped = false;
};

// Leases on conversation rows. Expiry is always computed in SQL with agentdeck_now_ms(), the
// database's clock, never with this process's.
class LeaseStore
{
public:
    LeaseStore(Database &db, std::chrono::milliseconds ttl);

    std::chrono::milliseconds ttl() const { return m_ttl; }
    // Claims when free, lapsed or already ours, in one conditional statement that increments
    // the epoch. nullopt: another owner holds a live lease (or the row is gone).
    std::optional<LeaseToken> claim(const QUuid &id, const QString &owner);
    std::optional<LeaseHolder> holder(const QUuid &id);
    // Extends every lease in `held` still matching owner and epoch, in one statement, then
    // reports each one's state. A holder that was frozen but not taken over just continues.
    QHash<QUuid, LeaseState> renew(const QString &owner, const QHash<QUuid, qint64> &held);
    void release(const QUuid &id, const LeaseToken &token);
    int releaseAll(const QString &owner);
    // Single node: the data dir lock proves every other owner dead, so their leases are taken
    // over at once, whatever their expiry says. Returns how many.
    int adoptAll(const QString &owner);
    // Several replicas: only the leases of earlier instances of this replica (owner names
    // starting with "<replicaId>/") are provably dead; they are taken over at once.
    int adoptEarlierInstances(const QString &owner, const QString &replicaId);
    // Conversations `running` whose lease has lapsed (or that have none): their owner is gone.
    QList<QUuid> lapsedRuns(int limit);
    // Asks the owner of a run to stop it; the owner finds out at its next renewal.
    enum class Cancel
    {
        Pause = 1,
        Interrupt = 2
    };
    void requestCancel(const QUuid &id, Cancel how = Cancel::Pause);
    // The replica whose sandbox took the conversation's container last (empty: none recorded),
    // and recording that `replicaId` takes it.
    QString sandboxHolder(const QUuid &id);
    void setSandboxHolder(const QUuid &id, const QString &replicaId);

private:
    // Takes over every other owner's lease whose owner name starts with `ownerPrefix`.
    int adopt(const QString &owner, const QString &ownerPrefix);

    Database &m_db;
    std::chrono::milliseconds m_ttl;
};

} // namespace AgentDeck
