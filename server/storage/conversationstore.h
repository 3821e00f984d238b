#pragma once

#include "conversationfilter.h"
#include "leasestore.h"
#include "wiretypes.h"

#include <QByteArray>
#include <QCache>
#include <QList>
#include <QSet>

#include <functional>

namespace AgentDeck {

class Database;

struct ConversationPageResult
{
    QList<ConversationInfo> items;
    QString nextPageId;
};

struct EventFilter
{
    QString kind;
    QString source;
    QString bodyContains;
    std::optional<qint64> timestampGteMs;
    std::optional<qint64> timestampLtMs;
    qint64 afterSeq = 0;
};

// A stored event as it goes on the wire: its seq and its JSON, serialized once at write time.
struct StoredEvent
{
    qint64 seq = 0;
    QByteArray json;
};

struct EventPageResult
{
    QList<StoredEvent> items;
    QString nextPageId;
};

struct ExpiryCandidate
{
    QUuid id;
    QString workingDir;
    bool workspaceOwned = false;
};

// Language model usage of one agent step, added to the conversation's counters.
struct LlmUsage
{
    qint64 promptTokens = 0;
    qint64 completionTokens = 0;
    qint64 requests = 0;
    qint64 retries = 0;
    bool isEmpty() const
    {
        return promptTokens == 0 && completionTokens == 0 && requests == 0 && retries == 0;
    }
};

// What a write does to the conversation's outcome (ConversationInfo::outcome).
struct OutcomeChange
{
    enum class Op
    {
        Keep,
        Set,    // `outcome`, at the write's time, not dismissed
        Dismiss // the operator acknowledged the one there is
    };
    Op op = Op::Keep;
    RunOutcome outcome;

    static OutcomeChange set(RunOutcome outcome) { return {Op::Set, std::move(outcome)}; }
    static OutcomeChange dismiss() { return {Op::Dismiss, {}}; }
};

// Field updates of PATCH; unset fields are left as they are.
struct ConversationUpdate
{
    std::optional<QString> title;
    std::optional<QMap<QString, QString>> tags;
    std::optional<bool> alwaysConfirm; // the confirmation policy
};

// The catalog of conversations and their histories, on top of Database. Every list route is one
// SQL statement per page; nothing here keeps the catalog in memory.
class ConversationStore
{
public:
    // `cacheBytes` bounds the cache of single-row reads (GET by id), by what its rows hold
    // (cachedBytes()): a count of rows allowed 600 MB with the largest titles and tags. The
    // store must be the only writer of its rows in this process; 0 turns the cache off
    // (several replicas).
    static constexpr qsizetype DefaultCacheBytes = 16 * 1024 * 1024;
    explicit ConversationStore(Database &db, qsizetype cacheBytes = DefaultCacheBytes);
    Database &database() { return m_db; }

    // Several replicas (PostgreSQL): this process's lease owner name. Every committed append
    // and delete is announced on ChangeChannel as "<instance> <id> <first seq> <last seq>" or
    // "<instance> <id> deleted" (see announce(); the service also announces pause, interrupt
    // and release), so that other replicas can stream what this one wrote; and rows whose live
    // lease another instance holds report their runtime as held by that replica. Empty (the
    // default, and always on SQLite): neither.
    static inline const QString ChangeChannel = QStringLiteral("agentdeck_changes");
    void setInstance(const QString &leaseOwner) { m_instance = leaseOwner; }
    // Announces `what` about the conversation to the other replicas when the current
    // transaction commits (at once outside one).
    void announce(const QUuid &id, const QString &what);
    // Whether announcements reach anyone: only replicas sharing PostgreSQL listen.
    bool announces() const;

    void insert(const ConversationInfo &info);
    std::optional<ConversationInfo> find(const QUuid &id);
    // GET by id: the row as wire JSON, with the runtime info that `runtimeOf` gives it. The bytes
    // are kept with the cached row and reused while the row is unchanged (every write of the row
    // drops both) and `runtimeOf` still gives the same runtime info.
    std::optional<QByteArray>
    findJson(const QUuid &id,
             const std::function<RuntimeInfo(const ConversationInfo &)> &runtimeOf);
    // One statement for the whole batch; the result keeps the order of `ids`.
    QList<std::optional<ConversationInfo>> findMany(const QList<QUuid> &ids);
    // Which of `ids` name a conversation (reads the ids alone).
    QSet<QUuid> existingIds(const QList<QUuid> &ids);
    // The conversations whose workspace is one of `dirs` (as stored), with it; at most 100 dirs.
    QList<QPair<QUuid, QString>> withWorkingDirs(const QStringList &dirs);
    // Throws ApiError 422 for a page id that is not one of ours.
    ConversationPageResult search(const ConversationFilter &filter, ConversationSort sort,
                                  const QString &pageId, int limit);
    qint64 count(const ConversationFilter &filter);
    bool update(const QUuid &id, const ConversationUpdate &update, qint64 nowMs);
    // A delete in steps. beginRemoval() marks the conversation as being deleted by `deleter` (a
    // lease owner name; false when there is no such conversation to delete): from then on every
    // read here, and on the other replicas, finds nothing. removeNewestEvents() deletes a batch
    // of its history and says how many went; remove() deletes the rest, the row and the mark.
    // The mark outlives a crash: takeOverRemovals() hands what a server that stopped meanwhile
    // left to delete to `deleter`.
    bool beginRemoval(const QUuid &id, const QString &deleter);
    bool isBeingRemoved(const QUuid &id);
    // The deletes of `deleter` to finish: all of them with `all`; otherwise those whose deleter
    // is no replica that beats (within its liveness window, or `window` for one that recorded
    // none: see ReplicaStore).
    QList<ConversationInfo> takeOverRemovals(const QString &deleter, bool all,
                                             std::chrono::milliseconds window);
    int removeNewestEvents(const QUuid &id, int count);
    bool remove(const QUuid &id);
    // Sets archived_at or clears it: true when it changed, false when the conversation was so
    // already (archived again, it keeps the first time), nothing when the row is gone.
    std::optional<bool> setArchived(const QUuid &id, std::optional<qint64> archivedAtMs);
    void setRuntimeError(const QUuid &id, const std::optional<RuntimeError> &error);
    // Marks the outcome dismissed; false when there is none not dismissed yet (or no row).
    bool dismissOutcome(const QUuid &id);
    // Adds an agent step's language model usage to the conversation's stats.
    void addUsage(const QUuid &id, const LlmUsage &usage, const LeaseToken &fence);

    // Retention: rows to expire (inactive, not running or waiting) and rows whose expiry was
    // marked but whose files were not all deleted yet.
    QList<ExpiryCandidate> expiryCandidates(qint64 inactiveBeforeMs);
    bool markExpired(const QUuid &id, qint64 inactiveBeforeMs, qint64 nowMs);
    void markCleaned(const QUuid &id);
    // Lifts the expiry of a runtime whose files are gone (markCleaned()); false while they are
    // still being deleted, or when it is not expired.
    bool clearExpiry(const QUuid &id);

    QList<QUuid> idsWithStatus(ExecutionStatus status);
    QList<QPair<QString, qint64>> countByStatus();

    // Appends `events` in one transaction, giving them the next seqs, and sets the execution
    // status and the outcome when asked. Returns the events as stored. Throws ApiError 404 when the
    // conversation no longer exists, and LeaseLostError when `fence` no longer matches the row's
    // lease (then nothing is written). Without `activity` updated_at stays: the events record a
    // change made to the conversation (an idle stop of its sandbox), which is no use of it that
    // the retention or the list's order would count.
    QList<StoredEvent> append(const QUuid &id, QList<Event> events,
                              std::optional<ExecutionStatus> status, qint64 nowMs,
                              const LeaseToken *fence = nullptr, const OutcomeChange &outcome = {},
                              bool activity = true);

    // The names of the conversation's secrets (values are never stored).
    void setSecretNames(const QUuid &id, const QStringList &names);
    // Copies the history of `from` into `to` (a fork, whose row exists and has none), with the
    // counts kept beside it, and with `usage` its token counts too; in one transaction. The
    // copies have the same seqs and new ids, and name each other by them.
    void copyHistory(const QUuid &from, const QUuid &to, bool usage);

    // Events after `afterSeq` in order: at most `limit`, and with `maxBytes`, none after the one
    // that brings the total to it.
    QList<StoredEvent> eventsAfter(const QUuid &id, qint64 afterSeq, int limit,
                                   qsizetype maxBytes = -1);
    // The events after `afterSeq`, parsed; at most `limit` of them (-1: all).
    QList<Event> history(const QUuid &id, qint64 afterSeq, qsizetype limit = -1);
    // The seq up to which every user message has its agent's answer (each agent message answers
    // the oldest open one): an agent that only answers messages need not read further back. 0
    // when one was always open, and for an unknown conversation.
    qint64 answeredThrough(const QUuid &id);
    // The events after the last message of the agent: where the actions it has not seen the
    // end of are (an agent writes its message after its actions are done). A read of the
    // newest events, whatever the length of the history.
    QList<Event> historySinceAgentMessage(const QUuid &id);
    // At most `limit` events, and fewer when they would add up to more than MaxEventPageBytes
    // (a page always holds one): a hundred command outputs of 1 MiB would otherwise make one
    // answer of 100 MiB.
    EventPageResult searchEvents(const QUuid &id, const EventFilter &filter, bool descending,
                                 const QString &pageId, int limit);
    static constexpr qsizetype MaxEventPageBytes = 8 * 1024 * 1024;
    qint64 countEvents(const QUuid &id, const EventFilter &filter);
    std::optional<StoredEvent> event(const QUuid &id, const QUuid &eventId);
    // In the order asked for, null for an unknown id. Events adding up to more than
    // MaxEventPageBytes are refused with 422: a batch cannot be paged.
    QList<std::optional<StoredEvent>> events(const QUuid &id, const QList<QUuid> &eventIds);

private:
    struct CachedRow
    {
        ConversationInfo info;
        QByteArray json; // the row's JSON with `jsonRuntime`; empty until asked for
        RuntimeInfo jsonRuntime;
    };
    // What a cached row of `info` comes to, its wire JSON included, roughly.
    static qsizetype cachedBytes(const ConversationInfo &info);
    void cache(const QUuid &id, std::unique_ptr<CachedRow> row);

    QString columns() const;
    // Whether any conversation is being deleted (see beginRemoval()).
    bool anyBeingRemoved();

    Database &m_db;
    QCache<QUuid, CachedRow> m_cache;
    QString m_instance;
};

} // namespace AgentDeck
