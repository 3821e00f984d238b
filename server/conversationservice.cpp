#include "conversationservice.h"

#include "apierror.h"
#include "clock.h"
#include "eventlog.h"
#include "execution/agent.h"
#include "execution/conversationrunner.h"
#include "logging.h"
#include "runtime/commandleader.h"
#include "runtime/runtime.h"
#include "runtime/warmsandboxes.h"
#include "storage/database.h"
#include "storage/replicastore.h"
#include "wirebytes.h"
#include "workspaceroots.h"

#include <QCoroProcess>
#include <QDir>
#include <QFileInfo>
#include <QPointer>
#include <QProcess>

#include <unistd.h>

using namespace Qt::StringLiterals;

// The conversations use case: creating, reading, changing and deleting conversations, and
// their files. Runs are in conversationruns.cpp, runtimes in conversationruntimes.cpp, leases
// and recovery in conversationleases.cpp, deletions in conversationremovals.cpp.

namespace AgentDeck {

namespace {

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

} // namespace

ApiError ConversationService::runtimeLimitReached(const RuntimeError &error)
{
    return {503, error.code,
            u"Cannot start the runtime: "_s + error.message +
                u"; try again when a run ends, or once a confirmation is answered"_s,
            5};
}

bool ConversationService::isRuntimeExpired(const ConversationInfo &info)
{
    return info.runtime.error && info.runtime.error->code == u"runtime_expired"_s;
}

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
    , m_lifecycles(this)
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

void ConversationService::mountWorkspace(const ConversationInfo &info) const
{
    if (!m_settings.disks || !info.workspaceOwnedByServer)
        return;
    if (const QString failed = m_settings.disks->mount(info.id, info.workingDir);
        !failed.isEmpty()) {
        qCWarning(lcServer).noquote() << failed;
        throw ApiError{503, u"workspace_unavailable"_s,
                       u"The conversation's workspace cannot be mounted: "_s + failed, 30};
    }
}

QCoro::Task<> ConversationService::makeWorkspaceDisk(QUuid id, QString dir)
{
    if (!m_settings.disks)
        co_return;
    auto making = m_settings.disks->make(id, dir);
    if (const QString failed = co_await std::move(making); !failed.isEmpty()) {
        qCWarning(lcServer).noquote() << failed;
        QDir().rmdir(dir);
        throw ApiError{
            503, u"workspace_unavailable"_s,
            u"The server cannot make the disk of the conversation's workspace: "_s + failed, 30};
    }
}

// A caller's working dir is mounted writable into the sandbox: it lies under a workspace root
// the operator chose, and never is, holds or lies in the data dir (the catalog, other
// conversations' workspaces and sandboxes) or the host's root. Returns its real path.
QString ConversationService::checkWorkingDir(const QString &path) const
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
    const QString dir = WorkspaceRoots::realPath(path);
    if (dir.isEmpty())
        throw ApiError::invalidParameter(
            u"workspace.working_dir %1 cannot be resolved (a link to nothing, or a directory "
            "the server may not enter)"_s.arg(path));
    const QString data = WorkspaceRoots::realPath(QFileInfo(m_settings.workspaceRoot).path());
    if (dir == u"/"_s || WorkspaceRoots::isInside(dir, data) || WorkspaceRoots::isInside(data, dir))
        throw ApiError::invalidParameter(
            u"workspace.working_dir cannot be %1: it is, holds or lies in the server's data dir "
            "or the root"_s.arg(path));
    if (!m_settings.workspaceRoots.holds(dir))
        throw m_settings.workspaceRoots.outside(path);
    return dir;
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

QByteArray ConversationService::runtimeMetrics() const
{
    return m_runtimes.metrics() + (m_settings.warm ? m_settings.warm->metrics() : QByteArray());
}

RuntimeInfo ConversationService::runtimeOf(const ConversationInfo &info) const
{
    RuntimeInfo runtime = m_runtimes.runtimeOf(info);
    describeHere(info, runtime);
    return runtime;
}

void ConversationService::describe(QList<ConversationInfo> &conversations) const
{
    m_runtimes.describe(conversations);
    for (ConversationInfo &info : conversations)
        describeHere(info, info.runtime);
}

void ConversationService::describeHere(const ConversationInfo &info, RuntimeInfo &runtime) const
{
    const SandboxPolicy policy = policyInForce(info.sandbox, m_settings.sandboxPolicy);
    const QString diskLimit = m_settings.disks
                                  ? m_settings.disks->describe(info.id, info.workspaceOwnedByServer)
                                  : QString();
    const auto same = [&](const DescribedPolicy &described) {
        return described.policy == policy && described.diskLimit == diskLimit;
    };
    auto described = std::find_if(m_described.begin(), m_described.end(), same);
    if (described == m_described.end()) {
        constexpr qsizetype Kept = 8;
        if (m_described.size() >= Kept)
            m_described.removeLast();
        const QJsonObject description = m_settings.isolation.describe(policy, diskLimit);
        QByteArray json;
        appendJsonValue(json, description);
        m_described.prepend(DescribedPolicy{policy, diskLimit, description, json});
        described = m_described.begin();
    }
    runtime.sandbox = described->description;
    runtime.sandboxJson = described->json;
    runtime.missingSecrets.clear();
    if (info.secretNames.isEmpty())
        return;
    const QMap<QString, QString> known = m_commandSecrets.value(info.id).values;
    for (const QString &name : info.secretNames) {
        if (!known.contains(name))
            runtime.missingSecrets.append(name);
    }
}

void ConversationService::requireUsableRuntime(const ConversationInfo &info) const
{
    if (info.isArchived())
        throw ApiError::conflict(
            u"conversation_archived"_s,
            u"Conversation is archived; unarchive it before using its runtime"_s);
    if (!isRuntimeExpired(info))
        return;
    // A workspace the conversation was given is never deleted, and the answer does not say so.
    const QString what = info.workspaceOwnedByServer
                             ? u"its workspace was deleted"_s
                             : u"its sandbox's files were deleted (the workspace it was given, "
                               "%1, was kept)"_s.arg(info.workingDir);
    throw ApiError{
        410, u"runtime_expired"_s,
        u"The runtime of this conversation expired and %1: nothing can run in it "
        "again as it was. Its history is still readable; start it again with an empty workspace "
        "(POST .../runtime/start_fresh), or continue in a new conversation"_s.arg(what)};
}

QCoro::Task<std::pair<ConversationInfo, bool>>
ConversationService::create(CreateConversationRequest request, ChangeCause cause)
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
                        auto sending = sendMessage(existing->id, *request.initialMessage, cause);
                        co_await std::move(sending);
                    } else if (request.initialMessage->run) {
                        auto waiting = m_lifecycles.turn(existing->id);
                        Turn turn = co_await std::move(waiting);
                        auto starting = startRun(std::move(turn), existing->id, cause);
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
    // A caller's working dir is kept as its real path: a link on the way that changes later
    // cannot move the workspace elsewhere.
    const QString givenDir =
        request.workingDir.isEmpty() ? QString() : checkWorkingDir(request.workingDir);
    std::optional<SandboxPolicy> sandbox;
    if (request.sandbox) {
        QString problem;
        sandbox = SandboxPolicy::fromRequest(*request.sandbox, m_settings.sandboxPolicy, &problem);
        if (!sandbox)
            throw ApiError::invalidParameter(problem);
    }

    ConversationInfo info;
    // A warm container's id, its workspace (and disk) made with it, when the conversation asks
    // for nothing the container was not made with.
    const std::optional<QUuid> warm =
        m_settings.warm && !request.id && request.workingDir.isEmpty()
            ? m_settings.warm->claim(policyInForce(sandbox, m_settings.sandboxPolicy))
            : std::nullopt;
    info.id = warm ? *warm : request.id.value_or(QUuid::createUuid());
    info.title = request.title.isEmpty() ? defaultTitle(info.id) : request.title;
    info.tags = request.tags;
    info.createdAt = info.updatedAt = m_clock.now();
    info.executionStatus = ExecutionStatus::Idle;
    info.agentKind = request.agentKind;
    info.agentConfig = agentConfig;
    info.workspaceOwnedByServer = request.workingDir.isEmpty();
    info.workingDir = info.workspaceOwnedByServer ? workspaceFor(info.id) : givenDir;
    info.alwaysConfirm = request.alwaysConfirm;
    info.sandbox = sandbox;
    const bool madeForCaller = !info.workspaceOwnedByServer && !QFileInfo::exists(info.workingDir);
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
    if (info.workspaceOwnedByServer && !warm) {
        auto making = makeWorkspaceDisk(info.id, info.workingDir);
        co_await std::move(making);
    }
    // A root server's commands run as their workspace's owner, and a dir of root's is never
    // given away unless the server made it: one made here for the caller goes to the
    // conversation's own uid now, as the workspaces the server makes for itself do on their
    // first command.
    if (madeForCaller && ::geteuid() == 0 &&
        !giveWorkspace(info.workingDir, sandboxUid(info.id), sandboxUid(info.id)))
        qCWarning(lcServer) << "cannot give the workspace" << info.workingDir << "to uid"
                            << sandboxUid(info.id);
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
            m_settings.removeTree(info.workingDir);
        if (warm)
            m_settings.removeTree(releaseLocalParts(info.id));
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
            auto sending = sendMessage(info.id, *request.initialMessage, cause);
            co_await std::move(sending);
        } catch (ApiError &error) {
            throw withTheConversationNamed(std::move(error), info.id);
        }
    }
    co_return std::pair{require(info.id), true};
}

QCoro::Task<ConversationInfo> ConversationService::fork(QUuid id, ForkConversationRequest request)
{
    require(id);
    // No run starts while the workspace is copied: the copy is of what the commands before
    // left, not of what a run writes meanwhile.
    auto waiting = m_lifecycles.turn(id);
    const Turn turn = co_await std::move(waiting);
    const ConversationInfo source = require(id);
    // A run's history ends in the middle of a step: its fork started with an action nobody
    // runs, or answers.
    if (m_lifecycles.isRunningHere(id) || source.executionStatus == ExecutionStatus::Running ||
        source.executionStatus == ExecutionStatus::WaitingForConfirmation)
        throw ApiError::conflict(
            u"conversation_running"_s,
            u"Conversation %1 is %2; pause it (or answer its confirmation) before forking it"_s.arg(
                toWireId(id), toString(source.executionStatus)));
    if (request.id && (m_store.isBeingRemoved(*request.id) || m_store.find(*request.id)))
        throw ApiError::conflict(u"conversation_exists"_s,
                                 u"Conversation %1 exists already"_s.arg(toWireId(*request.id)));

    ConversationInfo info;
    info.id = request.id.value_or(QUuid::createUuid());
    info.title = request.labels.title.value_or(source.title);
    info.tags = request.labels.tags.value_or(source.tags);
    info.createdAt = info.updatedAt = m_clock.now();
    info.executionStatus = ExecutionStatus::Idle;
    info.agentKind = source.agentKind;
    info.agentConfig = source.agentConfig;
    info.alwaysConfirm = source.alwaysConfirm;
    info.sandbox = source.sandbox;
    info.workspaceOwnedByServer = source.workspaceOwnedByServer;
    info.workingDir = source.workspaceOwnedByServer ? workspaceFor(info.id) : source.workingDir;
    if (info.workspaceOwnedByServer) {
        // Its files are the fork's own, to go another way with. Not their owner: a root
        // server gives the copy to the fork's uid when its runtime comes up. The source's
        // are on its disk, which a reboot unmounted.
        mountWorkspace(source);
        QDir().mkpath(info.workingDir);
        auto making = makeWorkspaceDisk(info.id, info.workingDir);
        co_await std::move(making);
        QProcess copy;
        copy.setProcessChannelMode(QProcess::MergedChannels);
        auto copying =
            qCoro(copy).start(u"cp"_s, {u"-dR"_s, u"--preserve=mode,timestamps,links"_s, u"--"_s,
                                        source.workingDir + u"/."_s, info.workingDir});
        const bool started = co_await std::move(copying);
        auto finishing = qCoro(copy).waitForFinished(WorkspaceCopyTimeout);
        const bool finished = started && co_await std::move(finishing);
        if (!finished || copy.exitStatus() != QProcess::NormalExit || copy.exitCode() != 0) {
            const QString said = QString::fromLocal8Bit(copy.readAll()).section(u'\n', 0, 0);
            m_settings.removeTree(info.workingDir);
            throw ApiError::conflict(
                u"workspace_copy_failed"_s,
                u"The workspace of conversation %1 could not be copied for its fork: %2"_s.arg(
                    toWireId(id), !finished ? u"it took longer than %1 s"_s.arg(
                                                  WorkspaceCopyTimeout.count() / 1000)
                                            : said));
        }
    }
    try {
        m_store.insert(info);
        m_store.copyHistory(id, info.id, !request.resetMetrics);
        if (!source.secretNames.isEmpty())
            m_store.setSecretNames(info.id, source.secretNames);
    } catch (...) {
        if (info.workspaceOwnedByServer)
            m_settings.removeTree(info.workingDir);
        throw;
    }
    if (const auto secret = m_secrets.constFind(id); secret != m_secrets.cend())
        m_secrets.insert(info.id, *secret);
    if (const auto secrets = m_commandSecrets.constFind(id); secrets != m_commandSecrets.cend())
        m_commandSecrets.insert(info.id, *secrets);
    qCInfo(lcServer) << "forked conversation" << id << "as" << info.id;
    co_return require(info.id);
}

void ConversationService::updateSecrets(const QUuid &id, const ConversationSecrets &secrets)
{
    const ConversationInfo info = require(id);
    QString problem;
    const auto merged = m_commandSecrets.value(id).merged(secrets, &problem);
    if (!merged)
        throw ApiError::invalidParameter(problem);
    // Those given before a restart stay named, their values still to be sent again.
    QStringList names = info.secretNames + merged->values.keys();
    names.sort();
    names.removeDuplicates();
    if (names != info.secretNames)
        m_store.setSecretNames(id, names);
    m_commandSecrets.insert(id, *merged);
    qCInfo(lcServer).noquote() << "conversation" << toWireId(id) << "has" << merged->values.size()
                               << "secrets";
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
        (!update.tags || *update.tags == current.tags) &&
        (!update.alwaysConfirm || *update.alwaysConfirm == current.alwaysConfirm))
        return current;
    if (!m_store.update(id, update, m_clock.nowMs()))
        throw ApiError::notFound(u"Conversation %1 does not exist"_s.arg(toWireId(id)));
    // A run going on asks (or stops asking) from its next action on.
    if (update.alwaysConfirm) {
        if (ConversationRunner *runner = m_lifecycles.runner(id))
            runner->setAlwaysConfirm(*update.alwaysConfirm);
    }
    return require(id);
}

} // namespace AgentDeck
