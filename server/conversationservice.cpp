#include "conversationservice.h"

#include "apierror.h"
#include "clock.h"
#include "eventlog.h"
#include "execution/agent.h"
#include "execution/conversationrunner.h"
#include "logging.h"
#include "runtime/runtime.h"
#include "signalwait.h"
#include "storage/database.h"
#include "storage/replicastore.h"

#include <QCoroTimer>
#include <QDir>
#include <QDirIterator>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QJsonDocument>
#include <QPointer>
#include <QScopeGuard>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {

// Every runtime the server may keep is taken (by a run, or for a confirmation): a client tries
// again later.
ApiError runtimeLimitReached(const RuntimeError &error)
{
    return {503, error.code,
            u"Cannot start the runtime: "_s + error.message +
                u"; try again when a run ends, or once a confirmation is answered"_s,
            5};
}

// When a directory was made: its birth time where the file system keeps one, else the last
// change of its entries.
qint64 bornAtMs(const QString &path)
{
    const QFileInfo info(path);
    const QDateTime born = info.birthTime();
    return (born.isValid() ? born : info.lastModified()).toMSecsSinceEpoch();
}

// Why a conversation cannot be claimed: its owner renews (409, ask it or retry), or it stopped
// renewing and the lease has not lapsed yet (503 until it has). Both name the owner.
ApiError ownershipError(const LeaseHolder &holder, std::chrono::milliseconds livenessWindow)
{
    const QString owner = holder.replicaId.isEmpty() ? holder.owner : holder.replicaId;
    const int secondsLeft = int(std::max<qint64>(1, (holder.msLeft + 999) / 1000));
    // An owner missing from the replicas table is given the benefit of the doubt: it is live.
    // It is judged by its own window (one with a longer lease TTL beats less often).
    const bool renewing =
        !holder.replicaStopped &&
        (!holder.heartbeatAgeMs ||
         *holder.heartbeatAgeMs <= holder.livenessWindowMs.value_or(livenessWindow.count()));
    ApiError error;
    if (renewing) {
        error = ApiError::conflict(
            u"held_by_other_replica"_s,
            u"Conversation is held by another replica (%1); send the request there or retry in "
            "%2 s"_s.arg(owner)
                .arg(secondsLeft));
    } else {
        error = ApiError{503, u"owner_unresponsive"_s,
                         u"Conversation is held by replica %1, which stopped renewing its lease; "
                         "it can be taken over in %2 s"_s.arg(owner)
                             .arg(secondsLeft)};
    }
    error.retryAfterSeconds = secondsLeft;
    error.extra = QJsonObject{{u"owner"_s, owner},
                              {u"advertise_url"_s, holder.advertiseUrl.isEmpty()
                                                       ? QJsonValue()
                                                       : QJsonValue(holder.advertiseUrl)},
                              {u"retry_after"_s, secondsLeft}};
    return error;
}

// The runtime of a run whose agent runs no commands: nothing is brought up for it. A command
// it is asked for all the same (an action left in the history) is not run.
class NoRuntime final : public Runtime
{
public:
    QCoro::Task<CommandResult> execute(CommandRequest) override
    {
        co_return CommandResult{u"This conversation's agent runs no commands"_s, -1, false};
    }
    void interrupt() override {}
};

// The conversation of a create is there even when its initial message failed, and a client only
// told that the run failed would create it again: the answer says so, with its id.
ApiError withTheConversationNamed(ApiError error, const QUuid &id)
{
    error.detail = u"Conversation %1 was created; its initial message failed: %2"_s.arg(
        toWireId(id), error.detail);
    error.extra.insert(u"conversation_id"_s, toWireId(id));
    return error;
}

QString defaultTitle(const QUuid &id)
{
    return u"Conversation "_s + toWireId(id).left(8);
}

bool isExpired(const ConversationInfo &info)
{
    return info.runtime.error && info.runtime.error->code == u"runtime_expired"_s;
}

} // namespace

ConversationService::ConversationService(ConversationStore &store, LeaseStore &leases,
                                         ReplicaStore &replicas, EventLog &log,
                                         RuntimeProvider &runtimes, const AgentFactory &agents,
                                         const Clock &clock, ServiceSettings settings,
                                         QObject *parent)
    : QObject(parent)
    , m_store(store)
    , m_leases(leases)
    , m_replicas(replicas)
    , m_log(log)
    , m_runtimes(runtimes)
    , m_agents(agents)
    , m_clock(clock)
    , m_settings(std::move(settings))
{
    // Renewal at a third of the TTL: two ticks may be missed before a lease lapses.
    connect(&m_renewal, &QTimer::timeout, this, [this] {
        try {
            renewLeases();
        } catch (const std::exception &error) {
            qCWarning(lcExecution) << "lease renewal failed:" << error.what();
        }
    });
    m_renewal.start(std::max<qint64>(m_leases.ttl().count() / 3, 10));
    m_endRetry.setInterval(UnwrittenEndRetry);
    connect(&m_endRetry, &QTimer::timeout, this, &ConversationService::writeUnwrittenEnds);
    // An action waiting for confirmation runs in the sandbox it was proposed in: stopping that
    // one for being idle threw away what the commands before it left in it (its /tmp, say).
    m_runtimes.setIdleKeeper([this](const QUuid &id) {
        try {
            const auto info = m_store.find(id);
            return info && info->executionStatus == ExecutionStatus::WaitingForConfirmation;
        } catch (const StorageError &) {
            return true; // the next sweep asks again
        }
    });
}

void ConversationService::renewLeases()
{
    QHash<QUuid, qint64> held;
    for (const ConversationRunner *runner : m_lifecycles.runners())
        held.insert(runner->conversationId(), runner->lease().epoch);
    Transaction transaction(m_store.database());
    const bool stillTheReplica = m_replicas.heartbeat(m_settings.replicaId, m_settings.leaseOwner);
    const QHash<QUuid, LeaseState> states = m_leases.renew(m_settings.leaseOwner, held);
    transaction.commit();
    if (!stillTheReplica && !m_replaced) {
        m_replaced = true;
        Q_EMIT replacedAsReplica();
    }
    for (auto it = states.cbegin(); it != states.cend(); ++it) {
        if (auto *runner = m_lifecycles.runner(it.key()))
            runner->onLeaseState(it.value());
    }
    if (m_settings.sharedCatalog) {
        resolveLapsedRuns();
        if (!m_stopping)
            resumeRemovals();
    }
}

void ConversationService::writeUnwrittenEnds()
{
    const auto unwritten = [this] {
        return m_lifecycles.in(ConversationLifecycle::Run::EndUnwritten);
    };
    for (const QUuid &id : unwritten()) {
        try {
            writeUnwrittenEnd(id);
        } catch (const StorageError &) {
            // not yet
        }
    }
    if (unwritten().isEmpty())
        m_endRetry.stop();
}

void ConversationService::writeUnwrittenEnd(const QUuid &id)
{
    const ConversationLifecycle *lifecycle = m_lifecycles.find(id);
    if (!lifecycle || lifecycle->run() != ConversationLifecycle::Run::EndUnwritten)
        return;
    const ConversationLifecycle::UnwrittenEnd end = lifecycle->unwrittenEnd();
    const auto written = [this, &id] {
        m_lifecycles.at(id).endWritten();
        m_lifecycles.settle(id);
    };
    try {
        m_log.setStatus(id, ExecutionStatus::Error, unstoredOf(m_store, id, end.events), &end.lease,
                        !end.events.isEmpty() && end.events.last().kind == EventKind::AgentError
                            ? OutcomeChange::set(errorOutcome(end.events.last()))
                            : OutcomeChange{});
    } catch (const StorageError &) {
        throw;
    } catch (const std::exception &error) {
        // A delete, or a recovery by another replica once the lease lapsed, settled it.
        qCInfo(lcExecution) << "the end of the run of" << id << "is not needed:" << error.what();
        written();
        return;
    }
    written();
    qCInfo(lcExecution) << "wrote the end of the run of" << id << "now that storage is back";
    try {
        m_leases.release(id, end.lease);
    } catch (const std::exception &error) {
        qCWarning(lcExecution) << "cannot release the lease of" << id << ":" << error.what();
    }
}

void ConversationService::resolveLapsedRuns()
{
    // Runs a dead replica left `running` are resolved by whichever replica claims them first,
    // a few per tick, so nothing stays stuck until someone touches it.
    for (const QUuid &id : m_leases.lapsedRuns(LapsedRunsPerTick)) {
        try {
            if (auto info = m_store.find(id); info && resolveStale(*info))
                qCInfo(lcExecution) << "resolved" << id << "left running by a replica that stopped";
        } catch (const std::exception &error) {
            qCWarning(lcExecution)
                << "cannot resolve the lapsed run of" << id << ":" << error.what();
        }
    }
}

LeaseToken ConversationService::claimOrThrow(const QUuid &id)
{
    if (auto lease = m_leases.claim(id, m_settings.leaseOwner))
        return *lease;
    const auto holder = m_leases.holder(id);
    if (!holder) {
        if (!m_store.find(id))
            throw ApiError::notFound(u"Conversation %1 does not exist"_s.arg(toWireId(id)));
        // Released between the claim and the look: the next attempt gets it.
        ApiError error{503, u"lease_released"_s, u"Conversation was handed over just now; retry"_s};
        error.retryAfterSeconds = 1;
        throw error;
    }
    throw ownershipError(*holder, m_replicas.livenessWindow());
}

void ConversationService::refuseIfHeldElsewhere(const QUuid &id)
{
    if (m_lifecycles.isRunningHere(id))
        return;
    if (const auto holder = m_leases.holder(id);
        holder && holder->owner != m_settings.leaseOwner && holder->msLeft > 0)
        throw ownershipError(*holder, m_replicas.livenessWindow());
}

ConversationService::~ConversationService()
{
    m_runtimes.setIdleKeeper({});
    for (ConversationRunner *runner : m_lifecycles.runners())
        runner->abandon();
}

QString ConversationService::workspaceFor(const QUuid &id) const
{
    return QDir(m_settings.workspaceRoot).filePath(toWireId(id));
}

// A caller's working dir is mounted writable into the sandbox: the host's root, or the data dir
// (the catalog, other conversations' workspaces and sandboxes), or a dir holding it, would hand
// the sandbox what it is there to keep out.
void ConversationService::checkWorkingDir(const QString &path) const
{
    if (QDir::isRelativePath(path))
        throw ApiError::invalidParameter(u"workspace.working_dir must be an absolute path"_s);
    // Neither has a file name form: a NUL ends it, and a lone surrogate became a '?' in the dir
    // made while the path stored (SQLite text) had it joined to the character after it.
    if (path.contains(QChar(0)) || !path.isValidUtf16())
        throw ApiError::invalidParameter(
            u"workspace.working_dir cannot hold a NUL or a surrogate without its pair"_s);
    // Symbolic links resolved as far as the path exists: a dir not made yet under a link into
    // the data dir lies in it all the same.
    const auto canonical = [](const QString &dir) {
        QString existing = QDir::cleanPath(dir);
        QString rest;
        while (!QFileInfo::exists(existing) && existing != u"/"_s) {
            rest.prepend(u'/' + QFileInfo(existing).fileName());
            existing = QFileInfo(existing).path();
        }
        const QString resolved = QFileInfo(existing).canonicalFilePath();
        return QDir::cleanPath((resolved.isEmpty() ? existing : resolved) + rest);
    };
    const QString dir = canonical(path);
    const QString data = canonical(QFileInfo(m_settings.workspaceRoot).path());
    const auto within = [](const QString &inner, const QString &outer) {
        return inner == outer || inner.startsWith(outer + u'/');
    };
    if (dir == u"/"_s || within(dir, data) || within(data, dir))
        throw ApiError::invalidParameter(
            u"workspace.working_dir cannot be %1: it is, holds or lies in the server's data dir "
            "or the root"_s.arg(path));
}

ConversationInfo ConversationService::require(const QUuid &id)
{
    auto info = m_store.find(id);
    if (!info)
        throw ApiError::notFound(u"Conversation %1 does not exist"_s.arg(toWireId(id)));
    QList<ConversationInfo> one{*info};
    describe(one);
    return one.first();
}

RuntimeInfo ConversationService::runtimeOf(const ConversationInfo &info) const
{
    RuntimeInfo runtime = m_runtimes.runtimeOf(info);
    runtime.sandbox =
        m_settings.isolation.describe(policyInForce(info.sandbox, m_settings.sandboxPolicy));
    return runtime;
}

void ConversationService::describe(QList<ConversationInfo> &conversations) const
{
    m_runtimes.describe(conversations);
    for (ConversationInfo &info : conversations)
        info.runtime.sandbox =
            m_settings.isolation.describe(policyInForce(info.sandbox, m_settings.sandboxPolicy));
}

void ConversationService::requireUsableRuntime(const ConversationInfo &info) const
{
    if (info.isArchived())
        throw ApiError::conflict(
            u"conversation_archived"_s,
            u"Conversation is archived; unarchive it before using its runtime"_s);
    if (!isExpired(info))
        return;
    // A workspace the conversation was given is never deleted, and the answer does not say so.
    const QString what = info.workspaceOwnedByServer
                             ? u"its workspace was deleted"_s
                             : u"its sandbox's files were deleted (the workspace it was given, "
                               "%1, was kept)"_s.arg(info.workingDir);
    throw ApiError{
        410, u"runtime_expired"_s,
        u"The runtime of this conversation expired and %1: nothing can run in it "
        "again. Its history is still readable; continue in a new conversation"_s.arg(what)};
}

QCoro::Task<std::pair<ConversationInfo, bool>>
ConversationService::create(CreateConversationRequest request)
{
    if (request.id) {
        // A long history is deleted a batch at a time; until its row goes, the id is taken.
        if (m_store.isBeingRemoved(*request.id))
            throw ApiError{
                409, u"conversation_being_deleted"_s,
                u"Conversation %1 is being deleted; create it again once that is done"_s.arg(
                    toWireId(*request.id)),
                1};
        if (auto existing = m_store.find(*request.id)) {
            // A start of an archived conversation is refused, as its run is (OpenHands answers
            // 409 too): the answer was the archived record, as if it had started.
            if (existing->isArchived())
                requireUsableRuntime(*existing);
            // Creating it again is how a secret kept in memory only is sent again.
            QString secret;
            if (existing->agentKind == request.agentKind) {
                QJsonObject config = request.agentConfig;
                m_agents.validate(request.agentKind, config, &secret);
            }
            if (!secret.isEmpty())
                m_secrets.insert(*request.id, secret);
            // A retry of a create whose answer was an error to retry (503 at the sandbox limit,
            // storage gone meanwhile) finishes what that one left undone: the initial message is
            // stored if the history is empty, and run if the conversation never ran.
            if (request.initialMessage && existing->executionStatus == ExecutionStatus::Idle &&
                existing->eventCount <= 1) {
                try {
                    if (existing->eventCount == 0) {
                        auto sending = sendMessage(existing->id, *request.initialMessage);
                        co_await std::move(sending);
                    } else if (request.initialMessage->run) {
                        auto starting = startRun(*existing);
                        co_await std::move(starting);
                    }
                } catch (ApiError &error) {
                    throw withTheConversationNamed(std::move(error), existing->id);
                }
            }
            co_return std::pair{require(*request.id), false};
        }
    }
    if (!m_agents.knows(request.agentKind))
        throw ApiError::invalidParameter(u"Unknown agent kind \"%1\"; known kinds: %2"_s.arg(
            request.agentKind, m_agents.kinds().join(u", "_s)));
    QJsonObject agentConfig = request.agentConfig;
    QString secret;
    if (const QString problem = m_agents.validate(request.agentKind, agentConfig, &secret);
        !problem.isEmpty())
        throw ApiError::invalidParameter(problem);
    if (!request.workingDir.isEmpty())
        checkWorkingDir(request.workingDir);
    std::optional<SandboxPolicy> sandbox;
    if (request.sandbox) {
        QString problem;
        sandbox = SandboxPolicy::fromRequest(*request.sandbox, m_settings.sandboxPolicy, &problem);
        if (!sandbox)
            throw ApiError::invalidParameter(problem);
    }

    ConversationInfo info;
    info.id = request.id.value_or(QUuid::createUuid());
    info.title = request.title.isEmpty() ? defaultTitle(info.id) : request.title;
    info.tags = request.tags;
    info.createdAt = info.updatedAt = m_clock.now();
    info.executionStatus = ExecutionStatus::Idle;
    info.agentKind = request.agentKind;
    info.agentConfig = agentConfig;
    info.workspaceOwnedByServer = request.workingDir.isEmpty();
    info.workingDir = info.workspaceOwnedByServer ? workspaceFor(info.id) : request.workingDir;
    info.alwaysConfirm = request.alwaysConfirm;
    info.sandbox = sandbox;
    if (!QDir().mkpath(info.workingDir)) {
        // The caller's directory is the caller's to fix; the server's own is the server's.
        if (!info.workspaceOwnedByServer)
            throw ApiError::invalidParameter(
                u"Cannot create the workspace %1"_s.arg(info.workingDir));
        qCWarning(lcServer) << "cannot create the workspace" << info.workingDir;
        throw ApiError{503, u"workspace_unavailable"_s,
                       u"The server cannot create the conversation's workspace %1; its data dir "
                       "is not writable or is full"_s.arg(info.workingDir),
                       30};
    }
    // The same id may have been created at the same moment through another replica: its row
    // is there now, and the answer is that conversation (it was 503 storage_unavailable).
    std::optional<ConversationInfo> createdElsewhere;
    try {
        m_store.insert(info);
    } catch (const StorageError &) {
        createdElsewhere = request.id ? m_store.find(*request.id) : std::nullopt;
        // A create that failed (a full disk) leaves no workspace behind, nor does one that lost
        // a race, unless the winner's workspace is the same directory.
        if (info.workspaceOwnedByServer &&
            (!createdElsewhere || createdElsewhere->workingDir != info.workingDir))
            QDir(info.workingDir).removeRecursively();
        if (!createdElsewhere)
            throw;
    }
    if (createdElsewhere)
        co_return std::pair{require(info.id), false};
    if (!secret.isEmpty())
        m_secrets.insert(info.id, secret);
    qCInfo(lcServer) << "created conversation" << info.id << "agent" << info.agentKind;

    if (request.initialMessage) {
        try {
            auto sending = sendMessage(info.id, *request.initialMessage);
            co_await std::move(sending);
        } catch (ApiError &error) {
            throw withTheConversationNamed(std::move(error), info.id);
        }
    }
    co_return std::pair{require(info.id), true};
}

ConversationInfo ConversationService::get(const QUuid &id)
{
    return require(id);
}

QByteArray ConversationService::getJson(const QUuid &id)
{
    auto json =
        m_store.findJson(id, [this](const ConversationInfo &info) { return runtimeOf(info); });
    if (!json)
        throw ApiError::notFound(u"Conversation %1 does not exist"_s.arg(toWireId(id)));
    return *std::move(json);
}

QList<std::optional<ConversationInfo>> ConversationService::getMany(const QList<QUuid> &ids)
{
    QList<std::optional<ConversationInfo>> found = m_store.findMany(ids);
    QList<ConversationInfo> present;
    for (const auto &info : found) {
        if (info)
            present.append(*info);
    }
    describe(present);
    qsizetype next = 0;
    for (auto &info : found) {
        if (info)
            info = present[next++];
    }
    return found;
}

ConversationPageResult ConversationService::search(const ConversationFilter &filter,
                                                   ConversationSort sort, const QString &pageId,
                                                   int limit)
{
    ConversationPageResult page = m_store.search(filter, sort, pageId, limit);
    describe(page.items);
    return page;
}

ConversationInfo ConversationService::update(const QUuid &id, const ConversationUpdate &given)
{
    const ConversationInfo current = require(id);
    ConversationUpdate update = given;
    // Cleared, the title is the one a create without a title gives.
    if (update.title && update.title->isEmpty())
        update.title = defaultTitle(id);
    // What changes nothing moves nothing: updated_at orders the lists and starts the retention.
    if ((!update.title || *update.title == current.title) &&
        (!update.tags || *update.tags == current.tags))
        return current;
    if (!m_store.update(id, update, m_clock.nowMs()))
        throw ApiError::notFound(u"Conversation %1 does not exist"_s.arg(toWireId(id)));
    return require(id);
}

QCoro::Task<> ConversationService::remove(QUuid id)
{
    const ConversationInfo info = require(id);
    const QString runtimeDir = releaseLocalParts(id);
    // Marked first, in its own transaction: from here the conversation is gone to every request,
    // and a server stopped or killed before the end finishes the delete when it starts again.
    if (!m_store.beginRemoval(id, m_settings.leaseOwner))
        throw ApiError::notFound(u"Conversation %1 does not exist"_s.arg(toWireId(id)));
    Q_EMIT deleted(id);
    auto erasing = eraseRemoved(info, runtimeDir);
    co_await std::move(erasing);
}

QCoro::Task<> ConversationService::eraseRemoved(ConversationInfo info, QString runtimeDir)
{
    // One statement for a long history held the thread: 220,000 events took 5.3 s, with every
    // other request waiting.
    const QUuid id = info.id;
    QPointer<ConversationService> self(this);
    while (m_store.removeNewestEvents(id, DeleteBatch) == DeleteBatch) {
        auto turn = QCoro::sleepFor(std::chrono::milliseconds(0));
        co_await std::move(turn);
        if (!self || m_stopping)
            co_return; // the next start finishes it
    }
    m_store.remove(id);
    // The row is the source of truth and is gone; the files follow. A crash in between leaves a
    // directory nothing refers to, never a conversation without its workspace.
    removeFilesOf(info, runtimeDir);
    qCInfo(lcServer) << "deleted conversation" << id;
}

void ConversationService::resumeRemovals()
{
    // Alone on its catalog, a server takes every delete left: it began them all. Replicas take
    // those whose server stopped beating (at start, its own earlier instance's too); a live one
    // is still at its own.
    const auto left = m_store.takeOverRemovals(m_settings.leaseOwner, !m_settings.sharedCatalog,
                                               m_replicas.livenessWindow());
    for (const ConversationInfo &info : left) {
        qCInfo(lcServer) << "finishing the delete of" << info.id
                         << "that a stopped server left half done";
        eraseRemoved(info, releaseLocalParts(info.id));
    }
}

QCoro::Task<OrphanSweep> ConversationService::removeOrphanedDirs(QStringList roots,
                                                                 qint64 catalogCreatedMs)
{
    constexpr qsizetype Batch = 100;
    QPointer<ConversationService> self(this);
    OrphanSweep sweep;
    for (const QString &root : std::as_const(roots)) {
        QDirIterator entries(root, QDir::Dirs | QDir::NoDotAndDotDot);
        while (entries.hasNext()) {
            QList<QUuid> batch;
            while (batch.size() < Batch && entries.hasNext()) {
                if (const auto id = parseWireId(entries.next().section(u'/', -1)))
                    batch.append(*id);
            }
            // Checked when removed: a create makes its directory and its row in one turn.
            const QSet<QUuid> existing = m_store.existingIds(batch);
            for (const QUuid &id : std::as_const(batch)) {
                if (existing.contains(id))
                    continue;
                const QString path = QDir(root).filePath(toWireId(id));
                // Made before the catalog, it is not this catalog's to remove: the catalog was
                // lost, emptied or replaced, and the files may be all that is left.
                if (bornAtMs(path) <= catalogCreatedMs) {
                    ++sweep.kept;
                    continue;
                }
                m_runtimes.release(id);
                if (m_settings.removeTree(path))
                    ++sweep.removed;
            }
            // A pause, not only a turn of the loop: a request takes several turns, and with the
            // next batch in each of them, search pages took 10-13 ms instead of 2-3 while a
            // sweep of 100,000 directories ran (now ~4 ms; the sweep takes ~3 s).
            auto turn = QCoro::sleepFor(std::chrono::milliseconds(2));
            co_await std::move(turn);
            if (!self || m_stopping)
                co_return sweep;
        }
    }
    co_return sweep;
}

QString ConversationService::releaseLocalParts(const QUuid &id)
{
    // A run starting, or an end waiting for storage, is of the conversation being deleted: a
    // conversation created again with the same id is not to be run, or ended, by them.
    if (ConversationLifecycle *lifecycle = m_lifecycles.find(id)) {
        if (ConversationRunner *runner = lifecycle->forget())
            runner->abandon();
        m_lifecycles.settle(id);
    }
    m_secrets.remove(id);
    m_runtimes.release(id);
    return m_runtimes.runtimeDirectory(id);
}

void ConversationService::removeFilesOf(const ConversationInfo &info, const QString &runtimeDir)
{
    if (!runtimeDir.isEmpty())
        m_settings.removeTree(runtimeDir);
    if (info.workspaceOwnedByServer && !info.workingDir.isEmpty())
        m_settings.removeTree(info.workingDir);
}

void ConversationService::forgetDeletedElsewhere(const QUuid &id)
{
    const QString runtimeDir = releaseLocalParts(id);
    if (!runtimeDir.isEmpty())
        m_settings.removeTree(runtimeDir);
    qCInfo(lcServer) << "conversation" << id << "was deleted by another replica";
    Q_EMIT deleted(id);
}

bool ConversationService::resolveStale(const ConversationInfo &info, QLatin1StringView cause)
{
    const ConversationLifecycle *lifecycle = m_lifecycles.find(info.id);
    if (info.executionStatus != ExecutionStatus::Running ||
        (lifecycle && lifecycle->isRunningHere()))
        return false;
    // A run of this server that ended while storage refused its end: not stale, only unwritten.
    if (lifecycle && lifecycle->run() == ConversationLifecycle::Run::EndUnwritten) {
        writeUnwrittenEnd(info.id);
        return true;
    }
    // Stale only if nobody else holds the run: the claim is the proof.
    const auto lease = m_leases.claim(info.id, m_settings.leaseOwner);
    if (!lease)
        return false;
    const bool resolved = resolveStaleUnder(info.id, *lease, cause);
    m_leases.release(info.id, *lease);
    return resolved;
}

bool ConversationService::resolveStaleUnder(const QUuid &id, const LeaseToken &lease,
                                            QLatin1StringView cause)
{
    // The row as it is under the lease: a status read before the claim may be of a run that
    // ended and let go of its lease since. Another replica's pause then wrote a false
    // "the server stopped" into a run that had finished, and paused it.
    const auto current = m_store.find(id);
    if (!current || current->executionStatus != ExecutionStatus::Running)
        return false;
    const ConversationInfo &info = *current;
    QList<Event> events;
    RunOutcome outcome = interruptedRunOutcome(cause);
    const QList<Event> history = m_store.historySinceAgentMessage(info.id);
    if (const QList<const Event *> pending = pendingActions(history); !pending.isEmpty()) {
        // The observation tells what the runtime saw of the command: what it printed, and how it
        // ended if it ended while no server watched. One still running in an adopted sandbox is
        // stopped, and the observation says so.
        const Event &action = *pending.first();
        CommandResult result{{}, -1, true};
        if (const auto record = m_runtimes.lastCommand(info.id);
            record && record->actionId == action.id)
            result = record->result;
        if (result.interrupted)
            m_runtimes.interruptOrphan(info.id);
        events.append(
            Event::observation(action, result.output, result.exitCode, result.interrupted));
        outcome = commandOutcome(action, result, cause, m_agents.offersRetry(info.agentKind));
        // A command cut short calls off the rest of its step, as an interrupt does: the next
        // run ran them. (One that had ended leaves them to run, as a pause does.)
        if (result.interrupted) {
            for (const Event *rest : pending.sliced(1))
                events.append(calledOffObservation(*rest));
        }
    }
    events.append(
        Event::agentError(u"run_interrupted"_s,
                          u"The run was interrupted because the server that executed it stopped. "
                          "Run the conversation again to continue."_s));
    m_log.setStatus(info.id, ExecutionStatus::Paused, events, &lease, OutcomeChange::set(outcome));
    qCDebug(lcExecution) << "resolved stale running conversation" << info.id;
    return true;
}

int ConversationService::recoverStale()
{
    // One transaction for the whole pass: startup time does not grow with a commit per row.
    Transaction transaction(m_store.database());
    const int adopted =
        m_settings.sharedCatalog
            ? m_leases.adoptEarlierInstances(m_settings.leaseOwner, m_settings.replicaId)
            : m_leases.adoptAll(m_settings.leaseOwner);
    if (adopted > 0)
        qCInfo(lcExecution) << "adopted" << adopted << "leases of an earlier instance";
    int recovered = 0;
    for (const QUuid &id : m_store.idsWithStatus(ExecutionStatus::Running)) {
        if (auto info = m_store.find(id); info && resolveStale(*info, InterruptCause::Restart))
            ++recovered;
    }
    transaction.commit();
    return recovered;
}

QCoro::Task<> ConversationService::startRun(ConversationInfo info,
                                            std::optional<ConfirmationAnswer> answer)
{
    requireUsableRuntime(info);
    if (m_lifecycles.isRunningHere(info.id))
        throw ApiError::conflict(u"conversation_already_running"_s,
                                 u"Conversation is already running"_s);
    writeUnwrittenEnd(info.id);
    const LeaseToken lease = claimOrThrow(info.id);
    // Running only once everything below succeeded; a failure leaves no lease held.
    const quint64 start = ++m_startCount;
    m_lifecycles.at(info.id).beginStart(start, lease);
    // Starting → None, and the lease let go, unless a delete called the start off meanwhile.
    const auto startFailed = [this, id = info.id, start, lease] {
        ConversationLifecycle *lifecycle = m_lifecycles.find(id);
        if (!lifecycle || !lifecycle->startFailed(start))
            return;
        m_lifecycles.settle(id);
        m_leases.release(id, lease);
    };
    const QUuid conversationId = info.id;
    AgentContext context{conversationId, info.agentConfig, m_secrets.value(conversationId),
                         [this, conversationId](const QJsonObject &frame) {
                             m_log.publishTransient(conversationId, frame);
                         }};
    std::unique_ptr<Agent> agent = m_agents.createFor(info.agentKind, context);
    std::shared_ptr<Runtime> runtime;
    QUuid confirmedActionId;
    try {
        // A kind this server does not have: a catalog shared with a newer replica.
        if (!agent)
            throw ApiError::conflict(
                u"unknown_agent"_s,
                u"This server has no agent of kind \"%1\" to run it"_s.arg(info.agentKind));
        resolveStaleUnder(info.id, lease);
        if (answer) {
            // Written once the run can start (below): a rejection written before a start that
            // failed (at the sandbox limit, say) left the conversation waiting with nothing to
            // answer, and the retry its 503 asked for was refused 409.
            awaitedAction(info.id, *answer);
            if (answer->accept)
                confirmedActionId = answer->actionId;
        }
        if (agent->runsCommands()) {
            auto bringingUp = bringUpRuntime(info);
            runtime = co_await std::move(bringingUp);
        } else {
            runtime = std::make_shared<NoRuntime>();
        }
    } catch (...) {
        startFailed();
        throw;
    }
    if (const ConversationLifecycle *lifecycle = m_lifecycles.find(info.id);
        !lifecycle || !lifecycle->isStart(start)) {
        // Deleted while its runtime came up, and maybe created again since, with a start of
        // its own: the lease was taken on a row that is gone, and the runtime is the new
        // conversation's if it has a run.
        if (!m_lifecycles.isRunningHere(info.id))
            m_runtimes.release(info.id);
        throw ApiError::notFound(
            u"Conversation %1 was deleted while its run started"_s.arg(toWireId(info.id)));
    }
    // Nothing is awaited from here on: it is still the start `start` when it runs.
    // A start that outlasted the server's grace must not begin a run the stop has not seen.
    if (m_stopping) {
        startFailed();
        throw ApiError{503, u"shutting_down"_s,
                       u"The server is stopping; the run was not started"_s, 1};
    }
    if (answer && !answer->accept) {
        try {
            const Event action = awaitedAction(info.id, *answer);
            m_log.append(info.id, {Event::userReject(action, answer->reason)}, std::nullopt,
                         &lease);
        } catch (...) {
            startFailed();
            throw;
        }
    }

    auto *runner = new ConversationRunner(
        info.id, lease, m_log, m_store, std::move(agent), std::move(runtime),
        RunSettings{info.workingDir, info.alwaysConfirm, m_settings.commandTimeout,
                    m_agents.offersRetry(info.agentKind)},
        this);
    const auto stopAsked = m_lifecycles.at(info.id).startSucceeded(start, runner);
    connect(runner, &ConversationRunner::stopped, this, [this, runner](const QUuid &id) {
        // Nullopt: a runner a delete let go of, whose conversation may have a run of its own
        // again (created again with the same id): it asked for no run after it.
        ConversationLifecycle *lifecycle = m_lifecycles.find(id);
        const std::optional<bool> stoppedHere =
            lifecycle ? lifecycle->runnerStopped(runner, {runner->lease(), runner->unwrittenEnd()})
                      : std::nullopt;
        const bool runsAgain = stoppedHere.value_or(false);
        const bool endUnwritten =
            lifecycle && lifecycle->run() == ConversationLifecycle::Run::EndUnwritten;
        m_lifecycles.settle(id);
        // A run that lost its lease leaves its sandbox to nobody: the new owner runs in one of
        // its own. It stayed up until its idle timeout, reported `available`, and a release
        // sent by the replica that archived the conversation meanwhile found this run still
        // registered and was ignored.
        if (runner->isAbandoned() && !m_lifecycles.isRunningHere(id))
            m_runtimes.release(id);
        if (stoppedHere && endUnwritten) {
            // Kept with its lease, which fences it off from a later run.
            m_endRetry.start();
            Q_EMIT runnerStopped(id);
            return;
        }
        try {
            m_leases.release(id, runner->lease());
        } catch (const std::exception &error) {
            qCWarning(lcExecution) << "cannot release the lease of" << id << ":" << error.what();
        }
        Q_EMIT runnerStopped(id);
        if (runsAgain && !runner->isAbandoned() && !m_stopping && !m_lifecycles.isRunningHere(id))
            runAgain(id);
    });
    if (stopAsked == ConversationLifecycle::StopAsked::Interrupt)
        runner->interrupt();
    else if (stopAsked == ConversationLifecycle::StopAsked::Pause)
        runner->requestPause();
    runner->start(confirmedActionId);
}

QCoro::Task<> ConversationService::runAgain(QUuid id)
{
    try {
        // Its own status decides, as a /run's would: an archive or a delete meanwhile, or a
        // run that ended in error, is not started again.
        const auto info = m_store.find(id);
        if (!info || info->executionStatus == ExecutionStatus::Error)
            co_return;
        auto starting = startRun(*info);
        co_await std::move(starting);
    } catch (const ApiError &error) {
        qCInfo(lcExecution) << "the run a message asked for in" << id
                            << "did not start:" << error.detail;
    } catch (const std::exception &error) {
        qCWarning(lcExecution) << "the run a message asked for in" << id
                               << "did not start:" << error.what();
    }
}

QCoro::Task<std::shared_ptr<Runtime>> ConversationService::bringUpRuntime(ConversationInfo info)
{
    // A supplied workspace is checked again: what it names may have become a link into the
    // data dir since (made by a command of another conversation), which the sandbox then
    // mounted writable, the catalog with it.
    if (!info.workspaceOwnedByServer)
        checkWorkingDir(info.workingDir);
    // Bringing a runtime up is activity: the retention counts from here (an update of nothing
    // moves updated_at only), and no retention pass of this server expires the conversation
    // while its runtime comes up (isInUse()). Expired on the way by another replica's pass, it
    // is refused below.
    m_store.update(info.id, {}, m_clock.nowMs());
    m_lifecycles.at(info.id).bringUpBegan();
    const auto broughtUp = qScopeGuard([self = QPointer(this), id = info.id] {
        if (!self)
            return;
        if (ConversationLifecycle *lifecycle = self->m_lifecycles.find(id))
            lifecycle->bringUpEnded();
        self->m_lifecycles.settle(id);
    });
    auto acquiring = m_runtimes.acquire(info);
    RuntimeAcquisition acquisition = co_await std::move(acquiring);
    // The conversation may have been deleted or archived while the sandbox started: an archive
    // then found no runtime to stop, and this one stayed up.
    const auto now = m_store.find(info.id);
    // Deleted meanwhile, and maybe created again since (a row made at another time): the
    // runtime is then the new conversation's if it has a start or a run of its own, and so are
    // the files; an error of this start is not the new row's either.
    if (!now || now->createdAt != info.createdAt) {
        if (acquisition.runtime && !m_lifecycles.isRunningHere(info.id))
            m_runtimes.release(info.id);
        // The delete removed the files before the sandbox made them again.
        if (!now)
            removeFilesOf(info, m_runtimes.runtimeDirectory(info.id));
        throw ApiError::notFound(
            u"Conversation %1 was deleted while its runtime started"_s.arg(toWireId(info.id)));
    }
    if (now->isArchived() || isExpired(*now)) {
        if (acquisition.runtime)
            m_runtimes.release(info.id);
        requireUsableRuntime(*now);
    }
    if (acquisition.atLimit)
        throw runtimeLimitReached(acquisition.error);
    if (acquisition.cancelled && m_stopping)
        throw ApiError{503, u"shutting_down"_s,
                       u"The server is stopping; the run was not started"_s, 1};
    if (acquisition.cancelled)
        throw ApiError::conflict(u"runtime_start_cancelled"_s,
                                 u"The runtime was stopped while it started, by a request made "
                                 "meanwhile (a reprovision, an archive)"_s);
    if (!acquisition.runtime) {
        m_store.setRuntimeError(info.id, acquisition.error);
        throw ApiError{502, acquisition.error.code,
                       u"Cannot start the runtime: "_s + acquisition.error.message};
    }
    if (info.runtime.error)
        m_store.setRuntimeError(info.id, std::nullopt);
    // The conversation is run here from now on: a replica that ran it before stops the sandbox
    // it kept, which stayed up beside this one, `available`, until its idle timeout. Not worth
    // failing the start for: unannounced, that sandbox stops at its idle timeout as before.
    try {
        m_store.announce(info.id, u"release"_s);
    } catch (const std::exception &error) {
        qCWarning(lcRuntime) << "cannot announce that" << info.id << "runs here:" << error.what();
    }
    co_return acquisition.runtime;
}

QCoro::Task<> ConversationService::stopRunAndRuntime(QUuid id)
{
    // No run follows the one interrupted here (a message with run: true asked for one): the
    // archive waited while a new run went through the conversation's whole backlog. One
    // started meanwhile all the same (a /run) is interrupted too.
    m_lifecycles.at(id).haltBegan();
    const auto halted = qScopeGuard([self = QPointer(this), id] {
        if (!self)
            return;
        if (ConversationLifecycle *lifecycle = self->m_lifecycles.find(id))
            lifecycle->haltEnded();
        self->m_lifecycles.settle(id);
    });
    while (auto *runner = m_lifecycles.runner(id)) {
        runner->interrupt();
        auto stopped =
            signalOrTimeout(this, &ConversationService::runnerStopped, std::chrono::seconds(10));
        co_await std::move(stopped);
    }
    m_runtimes.release(id);
}

QCoro::Task<ConversationInfo> ConversationService::archive(QUuid id)
{
    const ConversationInfo info = require(id);
    // Only the owner can stop its run and sandbox: archiving here left them going.
    refuseIfHeldElsewhere(id);
    // A run whose owner went quiet past its lease is taken over and resolved first: archived
    // without, it went on when its frozen owner woke, which found its lease still its own.
    resolveStale(info);
    auto stopping = stopRunAndRuntime(id);
    co_await std::move(stopping);
    if (!m_store.setArchived(id, m_clock.nowMs()))
        throw ApiError::notFound(u"Conversation %1 does not exist"_s.arg(toWireId(id)));
    // Archiving is acting on the outcome: unarchived, it does not ask for attention again.
    m_store.dismissOutcome(id);
    // Its runtime is stopped, as by a stop, which clears a failed start's error (an expiry
    // stays: it is no error of a start).
    if (info.runtime.error)
        m_store.setRuntimeError(id, std::nullopt);
    m_store.announce(id, u"release"_s);
    qCInfo(lcServer) << "archived conversation" << id;
    co_return require(id);
}

ConversationInfo ConversationService::unarchive(const QUuid &id)
{
    if (!m_store.setArchived(id, std::nullopt))
        throw ApiError::notFound(u"Conversation %1 does not exist"_s.arg(toWireId(id)));
    return require(id);
}

QCoro::Task<ConversationInfo> ConversationService::resumeRuntime(QUuid id)
{
    const ConversationInfo info = require(id);
    requireUsableRuntime(info);
    // A second sandbox on the workspace of a run going on elsewhere.
    refuseIfHeldElsewhere(id);
    auto bringingUp = bringUpRuntime(info);
    co_await std::move(bringingUp);
    co_return require(id);
}

QCoro::Task<ConversationInfo> ConversationService::reprovisionRuntime(QUuid id)
{
    const ConversationInfo info = require(id);
    requireUsableRuntime(info);
    refuseIfHeldElsewhere(id);
    if (m_lifecycles.isRunningHere(id))
        throw ApiError::conflict(u"conversation_already_running"_s,
                                 u"Conversation is running; pause it before reprovisioning"_s);
    m_runtimes.release(id);
    auto bringingUp = bringUpRuntime(info);
    co_await std::move(bringingUp);
    co_return require(id);
}

QCoro::Task<ConversationInfo> ConversationService::stopRuntime(QUuid id)
{
    require(id);
    refuseIfHeldElsewhere(id);
    auto stopping = stopRunAndRuntime(id);
    co_await std::move(stopping);
    m_store.setRuntimeError(id, std::nullopt);
    m_store.announce(id, u"release"_s);
    co_return require(id);
}

QCoro::Task<ConversationInfo> ConversationService::recover(QUuid id)
{
    ConversationInfo info = require(id);
    requireUsableRuntime(info);
    if (!m_lifecycles.isRunningHere(id)) {
        // Continued, the shell agent's run only said "[command interrupted]" and finished:
        // the crash read as a success. The runtime comes up, and the offer to run the command
        // again stays.
        if (m_agents.offersRetry(info.agentKind) && resolveStale(info))
            info = require(id);
        if (info.executionStatus != ExecutionStatus::Running && info.outcome &&
            !info.outcome->retryCommand.isEmpty() && !info.outcome->dismissed) {
            refuseIfHeldElsewhere(id);
            auto bringingUp = bringUpRuntime(info);
            co_await std::move(bringingUp);
            co_return require(id);
        }
        auto starting = startRun(info);
        co_await std::move(starting);
    }
    co_return require(id);
}

ConversationInfo ConversationService::dismissOutcome(const QUuid &id)
{
    require(id);
    m_store.dismissOutcome(id);
    return require(id);
}

QCoro::Task<ConversationInfo> ConversationService::retry(QUuid id)
{
    const ConversationInfo info = require(id);
    if (!info.outcome || info.outcome->retryCommand.isEmpty() || info.outcome->dismissed ||
        m_lifecycles.isRunningHere(id))
        throw ApiError::conflict(u"nothing_to_retry"_s,
                                 u"The conversation has no interrupted command to run again"_s);
    try {
        auto sending = sendMessage(id, MessageRequest{u"user"_s, info.outcome->retryCommand, true});
        co_await std::move(sending);
    } catch (const ApiError &error) {
        // Stored but not run (the answer says so): offered again, it would be stored twice.
        if (error.extra.contains(u"seq"_s))
            m_store.dismissOutcome(id);
        throw;
    }
    co_return require(id);
}

QCoro::Task<ConversationInfo> ConversationService::run(QUuid id)
{
    auto starting = startRun(require(id));
    co_await std::move(starting);
    co_return require(id);
}

ConversationInfo ConversationService::pause(const QUuid &id)
{
    const ConversationInfo info = require(id);
    ConversationLifecycle *lifecycle = m_lifecycles.find(id);
    if (auto *runner = m_lifecycles.runner(id)) {
        runner->requestPause();
        m_log.append(id, {Event::pause()});
    } else if (lifecycle && lifecycle->askStop(ConversationLifecycle::StopAsked::Pause)) {
        // Its runtime is still coming up: the run pauses before its first step. (Answered and
        // dropped, the run went on to run its command.)
        m_log.append(id, {Event::pause()});
    } else if (resolveStale(info)) {
        // Nobody ran it: it is paused now.
    } else if (info.executionStatus == ExecutionStatus::WaitingForConfirmation) {
        m_log.setStatus(id, ExecutionStatus::Paused, {Event::pause()});
    } else if (info.executionStatus == ExecutionStatus::Running) {
        askOwnerToStop(id, LeaseStore::Cancel::Pause);
        m_log.append(id, {Event::pause()});
    }
    return require(id);
}

ConversationInfo ConversationService::interrupt(const QUuid &id)
{
    const ConversationInfo info = require(id);
    ConversationLifecycle *lifecycle = m_lifecycles.find(id);
    if (auto *runner = m_lifecycles.runner(id))
        runner->interrupt();
    else if (lifecycle && lifecycle->run() == ConversationLifecycle::Run::Starting)
        lifecycle->askStop(ConversationLifecycle::StopAsked::Interrupt); // at once, once it starts
    else if (!resolveStale(info) && info.executionStatus == ExecutionStatus::Running)
        askOwnerToStop(id, LeaseStore::Cancel::Interrupt);
    return require(id);
}

void ConversationService::askOwnerToStop(const QUuid &id, LeaseStore::Cancel how)
{
    // Another replica runs it. A cancellation is not an ownership problem: the request is
    // recorded on the row, where the owner's next renewal finds it, and announced so that the
    // owner acts at once.
    Transaction transaction(m_store.database());
    m_leases.requestCancel(id, how);
    m_store.announce(id, how == LeaseStore::Cancel::Interrupt ? u"interrupt"_s : u"pause"_s);
    transaction.commit();
}

void ConversationService::stopRequestedElsewhere(const QUuid &id, LeaseStore::Cancel how)
{
    if (auto *runner = m_lifecycles.runner(id)) {
        if (how == LeaseStore::Cancel::Interrupt)
            runner->interrupt();
        else
            runner->requestPause();
    }
}

void ConversationService::releaseRequestedElsewhere(const QUuid &id)
{
    // A run started here since is this replica's own (the other one was refused while it ran).
    if (m_lifecycles.isRunningHere(id))
        return;
    m_runtimes.release(id);
}

QCoro::Task<StoredEvent> ConversationService::sendMessage(QUuid id, MessageRequest message)
{
    const ConversationInfo info = require(id);
    const bool starts = message.run && !m_lifecycles.isRunningHere(id);
    if (message.run) {
        requireUsableRuntime(info);
        // Stored and then refused, the message ran twice when the client sent it to the owner.
        refuseIfHeldElsewhere(id);
    }
    // The same with a client that sent it again after a 503's Retry-After. Asked of the agent
    // only at the limit: most agents need a runtime, and making one costs more than the check.
    if (starts) {
        if (const auto refusal = m_runtimes.limitRefusal(id)) {
            const auto agent = m_agents.create(info.agentKind);
            if (agent && agent->runsCommands())
                throw runtimeLimitReached(*refusal);
        }
    }
    resolveStale(info);
    const QList<StoredEvent> stored =
        m_log.append(id, {Event::message(EventSource::User, message.role, message.text)});
    // A run ending at a pause or an interrupt does not pick the message up: the message asks
    // for one after it. (Answered 200, the message was never run.)
    if (message.run && !starts) {
        if (ConversationLifecycle *lifecycle = m_lifecycles.find(id)) {
            const ConversationRunner *runner = lifecycle->runner();
            lifecycle->askRunAfterStop(runner && runner->isStopping());
        }
    }
    // A live run picks the message up at its next step; otherwise start one.
    if (starts) {
        try {
            auto starting = startRun(require(id));
            co_await std::move(starting);
        } catch (ApiError &error) {
            // The message is stored, and a client told only that the run failed sent it again
            // once the Retry-After had passed: twice in the history. The answer says so.
            const qint64 seq = stored.first().seq;
            error.detail = u"The message was stored (seq %1), but its run did not start: %2; "
                           "run the conversation to run it, rather than sending it again"_s.arg(
                               QString::number(seq), error.detail);
            error.extra.insert(u"seq"_s, seq);
            throw;
        }
    }
    co_return stored.first();
}

QCoro::Task<ConversationInfo> ConversationService::respondToConfirmation(QUuid id, bool accept,
                                                                         QString reason)
{
    const ConversationInfo info = require(id);
    if (info.executionStatus != ExecutionStatus::WaitingForConfirmation)
        throw ApiError::conflict(u"not_waiting_for_confirmation"_s,
                                 u"Conversation is not waiting for a confirmation (it is %1)"_s.arg(
                                     toString(info.executionStatus)));
    requireUsableRuntime(info);
    const QList<Event> history = m_store.historySinceAgentMessage(id);
    const Event *action = pendingAction(history);
    if (!action)
        throw ApiError::conflict(u"not_waiting_for_confirmation"_s,
                                 u"Conversation has no action waiting for a confirmation"_s);
    refuseIfHeldElsewhere(id);
    // The answer is written once the run is claimed: a rejection written before the claim
    // stayed when another replica's answer won it (and was answered 409), and that replica's
    // accept then found its action rejected.
    auto starting = startRun(require(id), ConfirmationAnswer{action->id, accept, reason});
    co_await std::move(starting);
    co_return require(id);
}

Event ConversationService::awaitedAction(const QUuid &id, const ConfirmationAnswer &answer)
{
    // Under the lease the row is what it is: an answer that came through another replica
    // first has moved it on.
    const auto answeredMeanwhile = [] {
        return ApiError::conflict(u"not_waiting_for_confirmation"_s,
                                  u"The action was answered meanwhile"_s);
    };
    const auto current = m_store.find(id);
    if (!current || current->executionStatus != ExecutionStatus::WaitingForConfirmation)
        throw answeredMeanwhile();
    const QList<Event> history = m_store.historySinceAgentMessage(id);
    const Event *action = pendingAction(history);
    if (!action || action->id != answer.actionId)
        throw answeredMeanwhile();
    return *action;
}

QString ConversationService::finalResponse(const QUuid &id)
{
    require(id);
    EventFilter filter;
    filter.kind = EventKind::Message;
    filter.source = EventSource::Agent;
    const EventPageResult page = m_store.searchEvents(id, filter, true, {}, 1);
    if (page.items.isEmpty())
        return {};
    const auto event = Event::fromJson(QJsonDocument::fromJson(page.items.first().json).object());
    return event ? event->messageText() : QString();
}

QCoro::Task<> ConversationService::shutdown(std::chrono::milliseconds grace)
{
    m_stopping = true;
    // Starts whose runtime is still coming up after the grace the requests had are called
    // off: their requests are answered before the process exits (503, and a message's answer
    // says that it was stored). They waited on, and the process exited without an answer.
    for (const QUuid &id : m_lifecycles.in(ConversationLifecycle::Run::Starting))
        m_runtimes.release(id);
    for (ConversationRunner *runner : m_lifecycles.runners())
        runner->requestPause();
    QElapsedTimer elapsed;
    elapsed.start();
    bool interrupted = false;
    while (m_lifecycles.runningCount() > 0) {
        const auto left = grace - std::chrono::milliseconds(elapsed.elapsed());
        if (left.count() <= 0 && !interrupted) {
            qCInfo(lcExecution) << "interrupting" << m_lifecycles.runningCount()
                                << "runs still in flight";
            for (ConversationRunner *runner : m_lifecycles.runners())
                runner->interrupt(InterruptCause::Restart);
            interrupted = true;
        }
        if (interrupted && elapsed.elapsed() > grace.count() + 5000)
            break;
        auto stoppedOne = signalOrTimeout(this, &ConversationService::runnerStopped,
                                          std::max(left, std::chrono::milliseconds(100)));
        co_await std::move(stoppedOne);
    }
    m_renewal.stop();
    // A clean stop hands over at once: nobody has to wait for these leases to lapse. Without
    // storage they lapse as after a crash; the stop goes on (it used to end here, and the
    // process never exited).
    try {
        Transaction transaction(m_store.database());
        m_leases.releaseAll(m_settings.leaseOwner);
        m_replicas.markStopped(m_settings.replicaId, m_settings.leaseOwner);
        transaction.commit();
    } catch (const StorageError &error) {
        qCWarning(lcServer) << "cannot hand over leases; they lapse after their TTL:"
                            << error.what();
    }
}

} // namespace AgentDeck
