#include "agentdeckserver.h"

#include "runtime/sandboxisolation.h"

#include "clock.h"
#include "conversationservice.h"
#include "diskreserve.h"
#include "eventlog.h"
#include "execution/agent.h"
#include "http/apiauth.h"
#include "http/apiserver.h"
#include "http/controllers.h"
#include "http/httplistener.h"
#include "logging.h"
#include "metrics.h"
#include "runtime/localsandboxprovider.h"
#include "runtime/processbudget.h"
#include "runtime/processruntime.h"
#include "runtime/retentionreaper.h"
#include "runtime/sandboxcgroups.h"
#include "runtime/sandboxcontainers.h"
#include "runtime/warmsandboxes.h"
#include "runtime/workspacesandbox.h"
#include "storage/auditlog.h"
#include "storage/basheventstore.h"
#include "storage/conversationstore.h"
#include "storage/database.h"
#include "storage/integritycheck.h"
#include "storage/replicastore.h"
#include "streams/bashevents.h"
#include "streams/changerelay.h"
#include "streams/eventhub.h"
#include "streams/eventstreams.h"
#include "trash.h"
#include "webhookdelivery.h"
#include "workspacedisks.h"

#include <QCoreApplication>
#include <QCoroTask>
#include <QCoroTimer>
#include <QDateTime>
#include <QDeadlineTimer>
#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QHostInfo>
#include <QLockFile>
#include <QStorageInfo>
#include <QTcpSocket>
#include <QThread>
#include <QTimer>

#include <cerrno>
#include <csignal>
#include <sys/stat.h>
#include <unistd.h>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {
// Runs after startup, in batches (see ConversationService::removeOrphanedDirs).
QCoro::Task<> removeOrphanedDirs(QPointer<ConversationService> service, QStringList roots,
                                 qint64 catalogCreatedMs)
{
    try {
        auto removing = service->removeOrphanedDirs(roots, catalogCreatedMs);
        const OrphanSweep sweep = co_await std::move(removing);
        if (sweep.removed > 0)
            qCInfo(lcServer) << "removed" << sweep.removed
                             << "directories of conversations that no longer exist";
        if (sweep.kept > 0)
            qCWarning(lcServer).noquote()
                << u"kept %1 directories in %2 of conversations the catalog does not know, made "
                   "before it (%3): it was emptied or replaced. Restore the catalog they belong "
                   "to, or move them away if they are not needed."_s.arg(sweep.kept)
                       .arg(roots.join(u" and "_s),
                            QDateTime::fromMSecsSinceEpoch(catalogCreatedMs, Qt::UTC)
                                .toString(Qt::ISODateWithMs));
    } catch (const std::exception &error) {
        qCWarning(lcServer) << "cannot look for directories of deleted conversations:"
                            << error.what();
    }
}
RemoveTree discardInto(Trash &trash)
{
    return [&trash](const QString &path) { return trash.discard(path); };
}

// A lock file that names no owner is stale: a crash or a power cut between its creation and
// its write leaves it empty, and QLockFile, with no stale time, would keep it for good. One
// younger than a second may be another server's, being written this moment.
bool takeOverOwnerlessLock(QLockFile &lock, const QString &path)
{
    qint64 pid = 0;
    QString host, app;
    if (lock.error() != QLockFile::LockFailedError ||
        (lock.getLockInfo(&pid, &host, &app) && pid > 0))
        return false;
    const QFileInfo file(path);
    if (!file.exists() || file.lastModified().msecsTo(QDateTime::currentDateTimeUtc()) < 1000)
        return false;
    qCWarning(lcServer) << "taking over" << path << "which names no owner";
    return lock.removeStaleLockFile() && lock.tryLock(0);
}

// The data dir holds every conversation, key and workspace: other local users may not even
// list it. One made before (by hand, a package, an older version) with more open permissions
// is closed, when it is this user's.
void keepDataDirPrivate(const QString &dataDir)
{
    struct stat status
    {};
    const QByteArray path = QFile::encodeName(dataDir);
    if (::stat(path.constData(), &status) != 0 || (status.st_mode & 077) == 0 ||
        status.st_uid != ::geteuid())
        return;
    if (::chmod(path.constData(), status.st_mode & 07700) == 0)
        qCInfo(lcServer).noquote() << u"closed data dir %1 to other users (mode %2 to %3)"_s.arg(
            dataDir, QString::number(status.st_mode & 07777, 8),
            QString::number(status.st_mode & 07700, 8));
    else
        qCWarning(lcServer).noquote()
            << u"data dir %1 is open to other users (mode %2) and cannot be closed"_s.arg(
                   dataDir, QString::number(status.st_mode & 07777, 8));
}
} // namespace

ServerParts::ServerParts() = default;
ServerParts::ServerParts(ServerParts &&) noexcept = default;
ServerParts &ServerParts::operator=(ServerParts &&) noexcept = default;
ServerParts::~ServerParts() = default;

struct AgentDeckServer::Private
{
    // First, so that it goes last: the services discard trees into it until they go.
    Trash trash;
    // Before the services that make and remove workspaces.
    std::unique_ptr<WorkspaceDisks> disks;
    ServerParts parts;
    std::unique_ptr<QLockFile> lock;
    SandboxIsolation isolation;
    std::unique_ptr<Database> database;
    std::unique_ptr<ConversationStore> store;
    std::unique_ptr<LeaseStore> leases;
    std::unique_ptr<ReplicaStore> replicas;
    std::unique_ptr<ChangeRelay> relay;
    // The streams' thread: the hub and the streams live there (see EventStreams).
    QThread streamsThread;
    std::unique_ptr<EventHub> hub = std::make_unique<EventHub>();
    Metrics metrics;
    std::unique_ptr<EventLog> log;
    std::unique_ptr<ConversationService> service;
    std::unique_ptr<ApiAuth> auth;
    Router router;
    std::unique_ptr<ApiServer> http;
    HttpListener *listener = nullptr; // a child of http
    // The bash events of /api/bash, which the bash-events sockets follow.
    std::shared_ptr<BashEventLog> bashEvents = std::make_shared<BashEventLog>();
    std::unique_ptr<EventStreams> streams;
    std::unique_ptr<RetentionReaper> reaper;
    std::unique_ptr<AuditLog> audit;
    QTimer auditTrim;                          // --audit-retention
    std::unique_ptr<WebhookDelivery> webhooks; // --webhook
    // The server workspace's sandbox.
    std::unique_ptr<WorkspaceSandbox> workspace;
    std::unique_ptr<IntegrityCheck> integrity;     // SQLite: read once after startup
    std::unique_ptr<DiskReserve> reserve;          // SQLite: the catalog's room on its disk
    std::unique_ptr<SandboxContainers> containers; // --runtime docker
    LocalSandboxProvider *sandboxes = nullptr;     // when the runtime provider is the local one
    std::unique_ptr<WarmSandboxes> warm;           // --sandbox-warm
    QString runtimesRoot;                          // where the local one keeps its sandboxes
    ServerIdentity identity;
    quint16 port = 0;
    bool stopped = false;
};

AgentDeckServer::AgentDeckServer(ServerConfig config, ServerParts parts, QObject *parent)
    : QObject(parent)
    , m_config(std::move(config))
    , d(std::make_unique<Private>())
{
    d->parts = std::move(parts);
    if (!d->parts.clock)
        d->parts.clock = std::make_unique<SystemClock>();
    if (!d->parts.agents)
        d->parts.agents = std::make_unique<BuiltinAgentFactory>(LlmDefaults{
            m_config.llmBaseUrl, m_config.llmModel, m_config.llmApiKey, m_config.llmTimeout});
    if (m_config.replicaId.isEmpty())
        m_config.replicaId =
            QHostInfo::localHostName() + u'-' + QUuid::createUuid().toString(QUuid::Id128).left(6);
}

AgentDeckServer::~AgentDeckServer()
{
    // Sessions and runners refer to the store; they go first.
    d->relay.reset();
    inStreamsThread([this] { d->streams.reset(); });
    d->streamsThread.quit();
    d->streamsThread.wait();
    d->http.reset();
    d->service.reset();
}

void AgentDeckServer::inStreamsThread(const std::function<void()> &work)
{
    if (d->streamsThread.isRunning())
        QMetaObject::invokeMethod(d->hub.get(), work, Qt::BlockingQueuedConnection);
    else
        work();
}

Database &AgentDeckServer::database()
{
    return *d->database;
}

ConversationStore &AgentDeckServer::store()
{
    return *d->store;
}

ConversationService &AgentDeckServer::service()
{
    return *d->service;
}

bool AgentDeckServer::start(QString *error)
{
    const QString dataDir = QDir(m_config.dataDir).absolutePath();
    if (!QDir().mkpath(dataDir) || !QFileInfo(dataDir).isWritable()) {
        *error = u"cannot use data dir %1: it cannot be created or is not writable"_s.arg(dataDir);
        return false;
    }
    keepDataDirPrivate(dataDir);
    // One server per data dir for its whole life. With stale time 0 a lock left by a killed
    // process is recognised by its dead PID, never by its age.
    const QString lockPath = QDir(dataDir).filePath(u"agentdeck.lock"_s);
    d->lock = std::make_unique<QLockFile>(lockPath);
    d->lock->setStaleLockTime(0);
    if (!d->lock->tryLock(0) && !takeOverOwnerlessLock(*d->lock, lockPath)) {
        qint64 pid = 0;
        QString host, app;
        d->lock->getLockInfo(&pid, &host, &app);
        // QLockFile takes over a lock whose process is gone by writing a new one; when it
        // cannot write (a full disk), it reports the dead PID's lock as held.
        const bool held = d->lock->error() == QLockFile::LockFailedError &&
                          (pid <= 0 || ::kill(pid_t(pid), 0) == 0 || errno != ESRCH);
        const QStorageInfo storage(dataDir);
        const QString why = storage.isValid() && storage.bytesAvailable() == 0
                                ? u": the disk is full"_s
                                : QString();
        *error =
            held ? u"data dir %1 is in use by another AgentDeck server (pid %2)"_s.arg(dataDir).arg(
                       pid)
                 : u"cannot lock data dir %1%2"_s.arg(dataDir, why);
        return false;
    }

    // Said before anything is served: commands that run less isolated than the operator thinks
    // are worse than a server that does not start.
    switch (m_config.runtime) {
    case ServerConfig::RuntimeKind::Process:
        d->isolation = SandboxIsolation::forProcessRuntime();
        break;
    case ServerConfig::RuntimeKind::Docker:
        d->isolation = SandboxIsolation::forContainers(m_config.dockerHost);
        break;
    case ServerConfig::RuntimeKind::Local:
        d->isolation = SandboxIsolation::probe();
        break;
    }
    d->isolation.egressAllowed = m_config.sandboxEgressAllow;
    if (d->isolation.isWeak()) {
        if (m_config.requireIsolation) {
            *error = u"--require-isolation: commands cannot be isolated: "_s + d->isolation.reason;
            m_refusedItsSettings = true;
            return false;
        }
        qCWarning(lcServer).noquote() << d->isolation.warning();
    }
    if (const QString problem = fitSandboxProcesses(m_config, HostProcesses::read());
        !problem.isEmpty()) {
        *error = problem;
        m_refusedItsSettings = true;
        return false;
    }
    const QString sandboxProgram = m_config.sandboxProgram.isEmpty()
                                       ? QCoreApplication::applicationFilePath()
                                       : m_config.sandboxProgram;

    const bool shared = !m_config.databaseUrl.isEmpty();
    QString dbError;
    // A session idle in a transaction past a quarter of the lease TTL (a second at least) is
    // ended, so that the row locks of a frozen replica go before the other replicas' renewals
    // miss their second tick.
    const PostgresTimeouts timeouts{
        std::chrono::milliseconds(500),
        std::max<std::chrono::milliseconds>(m_config.leaseTtl / 4, std::chrono::seconds(1))};
    d->database = shared ? Database::openPostgres(m_config.databaseUrl, &dbError,
                                                  Database::Migrations::Run, timeouts)
                         : Database::openSqlite(QDir(dataDir).filePath(u"agentdeck.db"_s), &dbError,
                                                d->parts.clock.get());
    if (!d->database) {
        *error = dbError;
        return false;
    }
    // The catalog's room on the file system the workspaces fill (PostgreSQL's is elsewhere).
    if (!shared) {
        d->reserve = std::make_unique<DiskReserve>(QDir(dataDir).filePath(u"disk-reserve"_s),
                                                   DiskReserve::DefaultBytes);
        d->reserve->start();
    }
    // A workspace of the server's own disk where this machine can mount one; otherwise the
    // reserve above is all that keeps a full workspace from stopping the catalog's writes.
    d->disks = std::make_unique<WorkspaceDisks>(
        QDir(dataDir).filePath(u"workspaces"_s), QDir(dataDir).filePath(u"workspace-disks"_s),
        m_config.sandboxDiskBytes,
        shared ? QString()
               : u"; the catalog keeps a %1 reserve"_s.arg(
                     WorkspaceDisks::sizeText(DiskReserve::DefaultBytes)));
    d->disks->probe();
    if (m_config.sandboxDiskBytes > 0 && !d->disks->enforced()) {
        const QString why = d->disks->whyNotEnforced();
        if (m_config.requireIsolation) {
            *error = u"--require-isolation: --sandbox-disk cannot be enforced: "_s + why;
            m_refusedItsSettings = true;
            return false;
        }
        qCWarning(lcServer).noquote()
            << u"--sandbox-disk %1 is not enforced: %2. A workspace may fill the data dir's file "
               "system; use --require-isolation to refuse to start instead"_s.arg(
                   WorkspaceDisks::sizeText(m_config.sandboxDiskBytes), why);
    }
    d->database->checkpointInBackground(std::chrono::milliseconds(200),
                                        int(m_config.walLimitBytes / Database::PageSize));
    d->runtimesRoot = QDir(dataDir).filePath(u"runtimes"_s);
    // Where callers' workspaces and the paths of the remote workspace routes may be.
    const QString serverWorkspace = m_config.workspaceDir.isEmpty()
                                        ? QDir(dataDir).filePath(u"workspace"_s)
                                        : m_config.workspaceDir;
    for (const QString &root : m_config.workspaceRoots) {
        if (!QFileInfo(root).isDir()) {
            *error = u"--workspace-root %1 is not a directory"_s.arg(root);
            return false;
        }
    }
    QDir().mkpath(serverWorkspace);
    QDir().mkpath(QDir(dataDir).filePath(u"workspaces"_s));
    const WorkspaceRoots roots(
        QStringList{QDir(dataDir).filePath(u"workspaces"_s), serverWorkspace} +
        m_config.workspaceRoots);
    if (!d->parts.runtimes) {
        if (m_config.runtime == ServerConfig::RuntimeKind::Process) {
            if (shared)
                qCWarning(lcServer) << "--runtime process: the commands of this replica run on "
                                       "if it freezes past its lease; --runtime local stops them";
            d->parts.runtimes =
                std::make_unique<ProcessRuntimeProvider>(m_config.sandboxPolicy, sandboxProgram);
        } else {
            // Two renewals missed: the command stops a third of the TTL before the lease lapses.
            const std::chrono::milliseconds ownerSilenceLimit =
                shared ? m_config.leaseTtl * 2 / 3 : std::chrono::milliseconds(0);
            LocalSandboxSettings settings{sandboxProgram, d->runtimesRoot,
                                          m_config.sandboxIdleTimeout, ownerSilenceLimit,
                                          m_config.maxSandboxes};
            settings.policy = m_config.sandboxPolicy;
            settings.egressAllowed = m_config.sandboxEgressAllow;
            settings.roots = roots;
            // The audit log and the service are made after the providers: asked for when a
            // policy acts. The history says what became of the runtime, and why.
            settings.policyActed = [d = d.get()](const QUuid &id, const QString &policy,
                                                 const QString &action, const QString &reason) {
                const ChangeCause cause = ChangeCause::server(policy, reason);
                if (d->audit)
                    d->audit->record(cause.actor, action, id, cause.reason);
                if (d->service)
                    d->service->noteRuntimeChange(
                        id, action == u"pause_runtime"_s ? u"paused"_s : u"stopped"_s, cause);
            };
            const SandboxCgroups::Delegation cgroups = SandboxCgroups::prepare();
            if (cgroups.isAvailable())
                qCInfo(lcServer).noquote()
                    << "sandbox limits: a cgroup per sandbox under" << cgroups.root;
            else
                qCInfo(lcServer).noquote()
                    << "sandbox limits: per process (rlimits), no cgroups:" << cgroups.problem;
            settings.cgroupRoot = cgroups.root;
            if (m_config.runtime == ServerConfig::RuntimeKind::Docker) {
                SandboxContainerSettings containers{
                    m_config.dockerHost, m_config.dockerTlsDirectory, m_config.sandboxPolicy.image,
                    d->runtimesRoot, m_config.replicaId};
                if (shared) {
                    try {
                        containers.catalog = d->database->identity();
                    } catch (const std::exception &failure) {
                        *error = u"cannot read the catalog's identity: "_s +
                                 QString::fromUtf8(failure.what());
                        return false;
                    }
                    // A storage error leaves the container alone: nothing is ended or removed
                    // on a guess.
                    const QString ours = m_config.replicaId + u'/';
                    settings.catalog.leasedElsewhere = [d = d.get(), ours](const QUuid &id) {
                        try {
                            const auto holder = d->leases->holder(id);
                            return holder && holder->msLeft > 0 && !holder->owner.startsWith(ours);
                        } catch (const std::exception &) {
                            return true;
                        }
                    };
                    settings.catalog.heldHere = [d = d.get(),
                                                 replica = m_config.replicaId](const QUuid &id) {
                        try {
                            const QString holder = d->leases->sandboxHolder(id);
                            return holder.isEmpty() || holder == replica;
                        } catch (const std::exception &) {
                            return false;
                        }
                    };
                    settings.catalog.take = [d = d.get(),
                                             replica = m_config.replicaId](const QUuid &id) {
                        try {
                            d->leases->setSandboxHolder(id, replica);
                        } catch (const std::exception &failure) {
                            qCWarning(lcServer) << "cannot record that this replica takes the "
                                                   "container of"
                                                << id << ":" << failure.what();
                        }
                    };
                }
                settings.catalog.has = [d = d.get()](const QUuid &id) {
                    try {
                        return d->store->find(id).has_value();
                    } catch (const std::exception &) {
                        return true; // unknown: kept
                    }
                };
                d->containers = std::make_unique<SandboxContainers>(std::move(containers));
                settings.containers = d->containers.get();
                settings.idlePause = m_config.sandboxIdlePause;
                settings.idleStop = m_config.sandboxIdleStop;
                d->warm = std::make_unique<WarmSandboxes>(
                    d->containers.get(),
                    WarmSandboxSettings{m_config.sandboxWarm, d->runtimesRoot,
                                        QDir(dataDir).filePath(u"workspaces"_s),
                                        policyInForce(std::nullopt, m_config.sandboxPolicy),
                                        d->disks.get(), d->disks->removing(discardInto(d->trash)),
                                        // Set before the pool starts (recover()).
                                        [this](const QUuid &id, const QString &workspace) {
                                            d->sandboxes->prestart(id, workspace);
                                        },
                                        [this](const QUuid &id) { d->sandboxes->release(id); },
                                        roots});
                settings.reserved = [warm = d->warm.get()](const QUuid &id) {
                    return warm->isReserved(id);
                };
                // Said once the engine answers (or does not), and by each start that fails for
                // it: an engine down now may be up by the first command, and a silent one must
                // not hold the server's start for its timeout.
                QCoro::connect(
                    d->containers->check(), d->containers.get(), [](const QString &problem) {
                        if (!problem.isEmpty())
                            qCWarning(lcServer).noquote() << "--runtime docker:" << problem;
                    });
            }
            auto sandboxes = std::make_unique<LocalSandboxProvider>(settings);
            d->sandboxes = sandboxes.get();
            d->parts.runtimes = std::move(sandboxes);
        }
    }
    const QString leaseOwner =
        m_config.replicaId + u'/' + QUuid::createUuid().toString(QUuid::Id128).left(8);
    // Other replicas write the same rows: a cache of rows would serve what they overwrote.
    d->store = std::make_unique<ConversationStore>(
        *d->database, shared ? 0 : ConversationStore::DefaultCacheBytes);
    if (shared)
        d->store->setInstance(leaseOwner);
    d->leases = std::make_unique<LeaseStore>(*d->database, m_config.leaseTtl);
    // Heartbeats go with the lease renewal every third of the TTL; one missed beat and a half
    // makes the owner unresponsive.
    d->replicas = std::make_unique<ReplicaStore>(*d->database, m_config.leaseTtl / 2);
    d->log = std::make_unique<EventLog>(*d->store, *d->hub, *d->parts.clock);
    d->workspace = std::make_unique<WorkspaceSandbox>(*d->parts.runtimes, serverWorkspace,
                                                      m_config.workspaceDir.isEmpty());
    // Its sandbox sees the workspace: one holding the data dir would show it the catalog.
    if (const QString real = QFileInfo(dataDir).canonicalFilePath();
        d->workspace->directory() == u"/"_s || real == d->workspace->directory() ||
        real.startsWith(d->workspace->directory() + u'/')) {
        *error = u"--workspace-dir %1 holds the data dir"_s.arg(d->workspace->directory());
        m_refusedItsSettings = true;
        return false;
    }
    d->service = std::make_unique<ConversationService>(
        *d->store, *d->leases, *d->replicas, *d->log, *d->parts.runtimes, *d->parts.agents,
        *d->parts.clock,
        ServiceSettings{QDir(dataDir).filePath(u"workspaces"_s), m_config.commandTimeout,
                        leaseOwner, m_config.replicaId, shared,
                        d->disks->removing(discardInto(d->trash)), m_config.sandboxPolicy,
                        d->isolation, roots, d->disks.get(), d->warm.get()});
    connect(d->service.get(), &ConversationService::replacedAsReplica, this, [this] {
        const QString reason =
            u"replica id %1 was taken over by a server started with it while this one was frozen "
            "or cut off from the database; this one stops"_s.arg(m_config.replicaId);
        qCCritical(lcServer).noquote() << reason;
        Q_EMIT cannotGoOn(reason);
    });
    // The name this replica is advertised by is one clients use.
    QStringList allowedHosts = m_config.allowedHosts;
    if (const QString advertised = QUrl(advertisedUrl()).host(); !advertised.isEmpty())
        allowedHosts.append(advertised);
    if (!m_config.apiKeyFile.isEmpty() && !ApiAuth::readKeyFile(m_config.apiKeyFile, error))
        return false;
    d->auth = std::make_unique<ApiAuth>(m_config.apiKeys,
                                        ApiAuth::Browsers{m_config.allowedOrigins, allowedHosts},
                                        m_config.apiKeyFile);
    const HttpLimits httpLimits{m_config.maxBodyBytes, m_config.httpRequestTimeout,
                                m_config.httpIdleTimeout};
    d->http = std::make_unique<ApiServer>(d->router, *d->auth, d->metrics, httpLimits);
    d->audit = std::make_unique<AuditLog>(*d->database, m_config.replicaId);
    d->http->setAuditLog(d->audit.get());
    d->service->setAuditLog(d->audit.get());
    d->identity = {QStringLiteral(AGENTDECK_VERSION), m_config.replicaId, d->parts.clock->nowMs(),
                   d->isolation.toJson(m_config.sandboxPolicy, d->disks->describeServer())};
    d->identity.workspaceDir = d->workspace->directory();
    d->identity.workspaceRoots = roots.dirs();
    if (!m_config.webhooks.isEmpty()) {
        d->webhooks = std::make_unique<WebhookDelivery>(
            *d->database, *d->audit, m_config.webhooks, m_config.webhookSecret, m_config.replicaId,
            !shared, WebhookDelivery::timingFromEnvironment());
        try {
            d->webhooks->start();
        } catch (const StorageError &failure) {
            *error = u"cannot set up the webhooks: "_s + QString::fromUtf8(failure.what());
            return false;
        }
        d->identity.webhooks = [webhooks = d->webhooks.get()] { return webhooks->status(); };
    }

    HealthController::registerRoutes(d->router, *d->http, d->identity);
    MetricsController::registerRoutes(
        d->router, d->metrics, *d->store, *d->log, *d->service,
        d->webhooks ? std::function<QByteArray()>(
                          [webhooks = d->webhooks.get()] { return webhooks->metrics(); })
                    : std::function<QByteArray()>());
    ConversationController::registerRoutes(d->router, *d->service);
    EventController::registerRoutes(d->router, *d->service, *d->store);
    RuntimeController::registerRoutes(d->router, *d->service);
    AuditController::registerRoutes(d->router, *d->audit);
    d->bashEvents->attach(std::make_unique<BashEventStore>(*d->database));
    WorkspaceController::registerRoutes(d->router, *d->workspace, *d->service, *d->store,
                                        d->bashEvents, m_config.maxDownloadBytes, roots);
    ReplicaController::registerRoutes(d->router, *d->replicas, d->identity);
    OpenApiController::registerRoutes(d->router, d->identity.version);

    // The listener hands WebSocket upgrades to the streams and everything else to the HTTP API.
    auto *tcp = new HttpListener(httpLimits, d->metrics, d->http.get());
    tcp->setRequestHandler([http = d->http.get()](HttpRequest request, QTcpSocket *socket) {
        http->handle(std::move(request), socket);
    });
    d->listener = tcp;
    StreamSettings streamSettings;
    streamSettings.sendBudgetBytes = m_config.streamBudgetBytes;
    streamSettings.totalSendBudgetBytes = m_config.streamTotalBudgetBytes;
    streamSettings.authTimeoutMs = m_config.streamAuthTimeoutMs;
    streamSettings.stallTimeoutMs = m_config.streamStallTimeoutMs;
    streamSettings.maxMessageBytes = m_config.maxBodyBytes;
    d->streamsThread.setObjectName(u"agentdeck-streams"_s);
    d->hub->moveToThread(&d->streamsThread);
    d->streamsThread.start();
    inStreamsThread([&] {
        d->streams = EventStreams::open(EventStreams::Context{*d->database, *d->hub, *d->service,
                                                              *d->auth, d->metrics, streamSettings,
                                                              d->bashEvents, d->audit.get()},
                                        &dbError);
    });
    if (!d->streams) {
        *error = u"cannot open the database for the event streams: "_s + dbError;
        return false;
    }
    d->streams->acceptFrom(*tcp);

    if (!tcp->listen(m_config.address, m_config.port)) {
        // As --listen takes it: an IPv6 address in brackets.
        const QString host = m_config.address.protocol() == QAbstractSocket::IPv6Protocol
                                 ? u'[' + m_config.address.toString() + u']'
                                 : m_config.address.toString();
        *error =
            u"cannot listen on %1:%2: %3"_s.arg(host).arg(m_config.port).arg(tcp->errorString());
        return false;
    }
    d->port = tcp->serverPort();

    try {
        // A second server with the same id took the first one's leases at once and stopped its
        // runs: ids are one per server, and a restart is the only one that may reuse one.
        if (shared) {
            if (const QString running = runningServerWithOurId(); !running.isEmpty()) {
                *error = running;
                return false;
            }
        }
        d->replicas->registerReplica(m_config.replicaId, leaseOwner, advertisedUrl());
    } catch (const std::exception &failure) {
        *error = u"cannot register replica %1: %2"_s.arg(m_config.replicaId,
                                                         QString::fromUtf8(failure.what()));
        return false;
    }
    if (shared) {
        d->relay = std::make_unique<ChangeRelay>(m_config.databaseUrl, leaseOwner, *d->store,
                                                 *d->hub, *d->service);
        if (!d->relay->start(&dbError)) {
            *error = dbError;
            return false;
        }
    }
    QTimer::singleShot(0, this, &AgentDeckServer::recover);
    return true;
}

QString AgentDeckServer::runningServerWithOurId()
{
    // This process listens on its advertised address now: an earlier instance there has gone.
    // Elsewhere, a running server beats again within a renewal interval; one that just crashed
    // does not. The wait keeps the event loop going (a console embeds this server).
    const auto first = d->replicas->recentBeatOf(m_config.replicaId);
    if (!first || (first->advertiseUrl == advertisedUrl() && !first->advertiseUrl.isEmpty()))
        return {};
    // It beats every third of its lease TTL (two thirds of its window), which may be longer
    // than this one's.
    const QDeadlineTimer deadline(
        std::max<std::chrono::milliseconds>(m_config.leaseTtl / 3, first->livenessWindow * 2 / 3) +
        std::chrono::milliseconds(250));
    while (!deadline.hasExpired()) {
        QCoro::waitFor(QCoro::sleepFor(std::chrono::milliseconds(50)));
        const auto later = d->replicas->recentBeatOf(m_config.replicaId);
        if (!later)
            return {}; // stopped, or silent past the liveness window
        if (later->atMs != first->atMs)
            return u"replica id %1 is in use by a server that is running (instance %2, %3): give "
                   "this one another --replica-id"_s.arg(m_config.replicaId, later->instance,
                                                         later->advertiseUrl.isEmpty()
                                                             ? u"no advertised URL"_s
                                                             : later->advertiseUrl);
    }
    return {};
}

void AgentDeckServer::recover()
{
    QElapsedTimer timer;
    timer.start();
    try {
        // Sandboxes first: a stale run whose command still runs in one gets it stopped.
        if (d->sandboxes) {
            const int adopted = d->sandboxes->adoptExisting();
            if (adopted > 0)
                qCInfo(lcServer) << "adopted" << adopted << "live sandboxes";
            if (d->warm)
                d->warm->start();
        } else if (m_config.runtime == ServerConfig::RuntimeKind::Process) {
            // Left by an instance with --runtime local: nothing here adopts them, and a command
            // recorded as interrupted below went on in one of them, beside the new runs.
            const int stopped = LocalSandboxProvider::stopLeftOver(d->runtimesRoot);
            if (stopped > 0)
                qCInfo(lcServer) << "stopped" << stopped
                                 << "sandboxes left by a server with --runtime local";
        }
        d->service->resumeRemovals();
        const int recovered = d->service->recoverStale();
        if (recovered > 0)
            qCInfo(lcServer) << "recovered" << recovered << "interrupted runs in" << timer.elapsed()
                             << "ms";

    } catch (const std::exception &error) {
        qCCritical(lcServer) << "recovery failed:" << error.what();
    }
    if (m_config.runtimeRetention.count() > 0) {
        d->reaper = std::make_unique<RetentionReaper>(*d->store, *d->parts.runtimes,
                                                      *d->parts.clock, m_config.runtimeRetention,
                                                      d->disks->removing(discardInto(d->trash)));
        d->reaper->setKeeper(
            [service = d->service.get()](const QUuid &id) { return service->isInUse(id); });
        d->reaper->setOnExpired(
            [audit = d->audit.get(), service = d->service.get(),
             cause = ChangeCause::server(
                 u"retention"_s, u"inactive for longer than the runtime retention (%1 s)"_s.arg(
                                     m_config.runtimeRetention.count() / 1000))](const QUuid &id) {
                audit->record(cause.actor, u"expire_runtime"_s, id, cause.reason);
                service->noteRuntimeChange(id, u"expired"_s, cause);
            });
        try {
            d->reaper->runPass();
        } catch (const std::exception &error) {
            qCWarning(lcServer) << "retention pass failed:" << error.what();
        }
        const auto interval =
            m_config.retentionInterval.count() > 0
                ? m_config.retentionInterval
                : std::clamp(m_config.runtimeRetention / 10, std::chrono::milliseconds(1000),
                             std::chrono::milliseconds(600'000));
        d->reaper->startPeriodic(interval);
    }
    if (m_config.auditRetention.count() > 0) {
        const auto trim = [this] {
            try {
                if (const qint64 removed =
                        d->audit->removeOlderThan(m_config.auditRetention.count());
                    removed > 0)
                    qCInfo(lcServer) << "removed" << removed << "audit records past the retention";
            } catch (const StorageError &error) {
                qCWarning(lcServer) << "cannot remove old audit records:" << error.what();
            }
        };
        trim();
        connect(&d->auditTrim, &QTimer::timeout, this, trim);
        d->auditTrim.start(std::clamp(m_config.auditRetention / 10, std::chrono::milliseconds(1000),
                                      std::chrono::milliseconds(3'600'000)));
    }
    d->http->setReady(true);
    Q_EMIT ready();
    checkIntegrity();
    const QDir dataDir(m_config.dataDir);
    const QStringList treeRoots{dataDir.filePath(u"workspaces"_s), dataDir.filePath(u"runtimes"_s)};
    d->trash.emptyLeftovers(treeRoots);
    try {
        removeOrphanedDirs(d->service.get(), treeRoots, d->database->createdAtMs());
    } catch (const StorageError &error) {
        qCWarning(lcServer) << "cannot look for directories of deleted conversations:"
                            << error.what();
    }
}

void AgentDeckServer::checkIntegrity()
{
    // PostgreSQL checks its pages as it reads them (checksums, where the cluster has them);
    // comparing its indexes with their tables takes the amcheck extension, which is the
    // database administrator's to install and run, not each replica's at its start.
    const QString path = d->database->sqlitePath();
    if (path.isEmpty())
        return;
    d->integrity = std::make_unique<IntegrityCheck>(
        path, [database = d->database.get()](bool hold) { database->holdLogRestarts(hold); });
    connect(d->integrity.get(), &IntegrityCheck::finished, this,
            [this, path](bool checked, const QString &problem, qint64 elapsedMs) {
                if (!checked) {
                    qCWarning(lcServer) << "the integrity check of" << path << "did not run";
                } else if (problem.isEmpty()) {
                    qCInfo(lcServer) << "checked the catalog's integrity in" << elapsedMs << "ms";
                } else {
                    // Requests still read what is intact; /ready turns 503 so that an
                    // orchestrator or an operator looks.
                    d->http->markStorageCorrupt();
                    qCCritical(lcServer).noquote()
                        << u"the database is damaged; restore %1 from a backup. %2 found: %3"_s.arg(
                               path, QString::fromLatin1(IntegrityCheck::Pragma), problem);
                }
            });
    d->integrity->start();
}

QCoro::Task<> AgentDeckServer::stop()
{
    if (d->stopped || !d->service)
        co_return;
    d->stopped = true;
    qCInfo(lcServer) << "stopping: pausing" << d->service->liveCount() << "runs";
    d->http->setStopping();
    // New connections are refused from now on: one accepted during the stop was reset when the
    // process exited, its client not knowing whether its request had been taken. Connections
    // already open get 503 `shutting_down` for what they send meanwhile.
    d->listener->close();
    d->reaper.reset();
    d->auditTrim.stop();
    d->integrity.reset();
    // Requests already in a handler finish first, within the grace: their clients get answers
    // (rather than a closed connection, not knowing whether a message was stored), and the runs
    // they start are paused below with the others.
    QElapsedTimer elapsed;
    elapsed.start();
    auto draining = d->http->drain(m_config.shutdownGrace);
    const bool drained = co_await std::move(draining);
    if (!drained)
        qCWarning(lcServer) << "the grace is over with requests still in their handlers; the "
                               "runs they start are called off";
    const auto left =
        std::max(m_config.shutdownGrace - std::chrono::milliseconds(elapsed.elapsed()),
                 std::chrono::milliseconds(0));
    try {
        auto pausing = d->service->shutdown(left);
        co_await std::move(pausing);
    } catch (const std::exception &error) {
        // The stop goes on whatever failed: a server that does not exit serves nobody.
        qCCritical(lcServer) << "pausing the runs failed:" << error.what();
    }
    // The requests whose run the shutdown called off are answered now, before storage closes.
    if (!drained) {
        auto answering = d->http->drain(std::chrono::seconds(2));
        if (!co_await std::move(answering))
            qCWarning(lcServer) << "stopping without answering some requests";
    }
    // Sandboxes keep running: the next instance adopts them.
    d->parts.runtimes->detachAll();
    inStreamsThread([this] {
        if (d->streams)
            d->streams->closeAll();
    });
    d->relay.reset();
    d->audit->flush();
    if (d->webhooks)
        d->webhooks->stop();
    d->database->close();
    d->lock->unlock();
    qCInfo(lcServer) << "stopped";
}

quint16 AgentDeckServer::port() const
{
    return d->port;
}

QUrl AgentDeckServer::url() const
{
    QUrl url;
    url.setScheme(u"http"_s);
    const QHostAddress address =
        m_config.address == QHostAddress::Any || m_config.address == QHostAddress::AnyIPv4
            ? QHostAddress(QHostAddress::LocalHost)
            : m_config.address;
    url.setHost(address.toString());
    url.setPort(d->port);
    return url;
}

QString AgentDeckServer::advertisedUrl() const
{
    if (!m_config.advertiseUrl.isEmpty())
        return m_config.advertiseUrl;
    // Listening on every interface: the host name is what other machines can use.
    if (m_config.address == QHostAddress::Any || m_config.address == QHostAddress::AnyIPv4 ||
        m_config.address == QHostAddress::AnyIPv6)
        return u"http://%1:%2"_s.arg(QHostInfo::localHostName()).arg(d->port);
    return url().toString();
}

bool AgentDeckServer::isReady() const
{
    return d->http && d->http->isReady();
}

} // namespace AgentDeck
