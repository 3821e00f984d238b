#include "localsandboxprovider.h"

#include "commandenvironment.h"
#include "logging.h"
#include "openfiles.h"
#include "sandboxcgroups.h"
#include "sandboxcontainers.h"
#include "sandboxhost.h"
#include "sandboxisolation.h"
#include "signalwait.h"

#include <QCoroTimer>
#include <QCryptographicHash>
#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QProcess>

#include <cerrno>
#include <cstring>
#include <limits>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {

QString readSocketPath(const QString &runtimeDir)
{
    QFile file(QDir(runtimeDir).filePath(u"sandbox.socket"_s));
    if (!file.open(QIODevice::ReadOnly))
        return {};
    return QString::fromUtf8(file.readAll().trimmed());
}

// A host that goes away by SIGKILL leaves its socket behind, and each host has a socket of its
// own name; with a deep data dir it is in /tmp, where nothing else would remove it.
void removeSocketOf(const QString &runtimeDir)
{
    if (const QString socket = readSocketPath(runtimeDir); !socket.isEmpty())
        QFile::remove(socket);
}
// A duration as the options take it: "30m", "90s", "1500ms".
QString optionDuration(std::chrono::milliseconds duration)
{
    const qint64 ms = duration.count();
    for (const auto &[unit, suffix] : {std::pair{86'400'000LL, "d"}, std::pair{3'600'000LL, "h"},
                                       std::pair{60'000LL, "m"}, std::pair{1000LL, "s"}}) {
        if (ms >= unit && ms % unit == 0)
            return QString::number(ms / unit) + QLatin1StringView(suffix);
    }
    return QString::number(ms) + u"ms"_s;
}

// A sandbox frozen or stopped for being idle `idle` long, since `sinceMs`.
RuntimeInfo idleInfo(RuntimeStatus status, std::chrono::milliseconds idle, qint64 sinceMs)
{
    RuntimeInfo info{status, true, std::nullopt};
    info.statusReason = u"idle for %1"_s.arg(optionDuration(idle));
    info.statusSince = QDateTime::fromMSecsSinceEpoch(sinceMs, Qt::UTC);
    return info;
}
} // namespace

LocalSandboxProvider::LocalSandboxProvider(LocalSandboxSettings settings, QObject *parent)
    : QObject(parent)
    , m_settings(std::move(settings))
{
    QDir().mkpath(m_settings.runtimesRoot);
    connect(&m_sweep, &QTimer::timeout, this, &LocalSandboxProvider::sweepIdle);
    std::chrono::milliseconds shortest = m_settings.idleTimeout;
    for (const auto idle : {m_settings.idlePause, m_settings.idleStop}) {
        if (idle.count() > 0)
            shortest = std::min(shortest, idle);
    }
    m_sweep.start(std::clamp<qint64>(shortest.count() / 4, 1000, 60'000));
    // Those of other replicas on the same catalog are theirs to measure.
    if (m_settings.containers)
        m_settings.containers->measureOnly([this](const QUuid &id) { return m_live.contains(id); });
}

LocalSandboxProvider::~LocalSandboxProvider()
{
    detachAll();
}

QString LocalSandboxProvider::runtimeDirectory(const QUuid &id) const
{
    return QDir(m_settings.runtimesRoot).filePath(toWireId(id));
}

QString LocalSandboxProvider::newSocketPath(const QUuid &id) const
{
    // A fresh name per sandbox: an old host going away removes its own socket, never the
    // replacement's.
    const QString natural =
        QDir(runtimeDirectory(id))
            .filePath(u"sandbox-"_s + QUuid::createUuid().toString(QUuid::Id128).left(8) +
                      u".sock"_s);
    // Unix socket paths are limited to about 107 bytes; a deep data dir gets a short alias.
    if (natural.toLocal8Bit().size() < 100)
        return natural;
    const QByteArray hash =
        QCryptographicHash::hash(natural.toUtf8(), QCryptographicHash::Sha1).toHex().left(20);
    return QDir::tempPath() + u"/agentdeck-"_s + QString::fromLatin1(hash) + u".sock"_s;
}

int LocalSandboxProvider::stopLeftOver(const QString &runtimesRoot)
{
    int stopped = 0;
    const QDir root(runtimesRoot);
    for (const QString &name : root.entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
        const auto host = SandboxHostProcess::of(root.filePath(name));
        if (!host.isRunning())
            continue;
        host.kill();
        ++stopped;
    }
    return stopped;
}

QCoro::Task<int> LocalSandboxProvider::sweepContainers()
{
    // A conversation deleted while no server that would remove its container ran, or never
    // recorded. With replicas a runtime dir says nothing: the replica that made the container
    // may not be the one whose sandbox uses it.
    std::function<bool(const QUuid &)> kept = m_settings.catalog.has;
    if (!kept) {
        kept = [root = QDir(m_settings.runtimesRoot)](const QUuid &id) {
            return root.exists(toWireId(id));
        };
    }
    // The warm pool's reservations are no conversation's yet.
    if (m_settings.reserved) {
        kept = [kept = std::move(kept), reserved = m_settings.reserved](const QUuid &id) {
            return reserved(id) || kept(id);
        };
    }
    // Made before the co_await: GCC 12 destroys a temporary in one twice.
    auto sweeping = m_settings.containers->sweep(std::move(kept));
    co_return co_await std::move(sweeping);
}

bool LocalSandboxProvider::holdsContainer(const QUuid &id) const
{
    return !m_settings.catalog.heldHere || m_settings.catalog.heldHere(id);
}

int LocalSandboxProvider::adoptExisting()
{
    // In the background: an engine that is slow to answer must not hold the server's start.
    if (m_settings.containers) {
        QCoro::connect(sweepContainers(), this, [](int removed) {
            if (removed > 0)
                qCInfo(lcRuntime) << "removed" << removed << "containers of conversations gone";
        });
    }
    int adopted = 0;
    const QDir root(m_settings.runtimesRoot);
    for (const QString &name : root.entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
        const auto id = parseWireId(name);
        if (!id)
            continue;
        const auto host = SandboxHostProcess::of(root.filePath(name));
        if (!host.isRunning())
            continue;
        const qint64 pid = host.pid;
        auto runtime = std::make_shared<SandboxRuntime>(readSocketPath(root.filePath(name)), host,
                                                        m_settings.ownerSilenceLimit);
        if (!QCoro::waitFor(runtime->connectToHost(std::chrono::seconds(2)))) {
            qCWarning(lcRuntime) << "sandbox of" << *id << "(pid" << pid << ") does not answer";
            continue;
        }
        watch(*id, runtime.get());
        m_owned.insert(*id, runtime);
        m_live.insert(*id, runtime.get());
        ++adopted;
        qCInfo(lcRuntime) << "adopted sandbox of" << *id << "pid" << pid;
        QString problem;
        if (!m_settings.cgroupRoot.isEmpty() &&
            !SandboxCgroups::restore(m_settings.cgroupRoot, name, root.filePath(name), &problem))
            qCWarning(lcRuntime).noquote()
                << "the sandbox of" << *id << "keeps no cgroup limits:" << problem;
        // No run survives a restart: a command still going belongs to a run that is resolved
        // as interrupted, here or, with replicas, by the one that found it lapsed while this
        // server was down. Left going, it ran on next to the new runs on the same workspace.
        if (const auto record = readLastCommand(root.filePath(name)); record && !record->finished) {
            qCInfo(lcRuntime) << "stopping the command left running in the sandbox of" << *id;
            runtime->interrupt();
        }
    }
    return adopted;
}

QCoro::Task<RuntimeAcquisition> LocalSandboxProvider::acquire(ConversationInfo conversation)
{
    const QUuid id = conversation.id;
    // The provider may go (the server stopping) while a start waits: nothing of it is touched
    // after that.
    const QPointer<LocalSandboxProvider> self(this);
    const auto providerGone = [] {
        return RuntimeAcquisition{
            nullptr,
            {u"start_cancelled"_s, u"the server stopped while the sandbox started"_s},
            true};
    };
    // One start at a time per conversation: a resume and a reprovision sent together started
    // two hosts on one workspace, and the one not tracked stayed until its idle timeout.
    while (m_starting.contains(id)) {
        auto waiting =
            signalOrTimeout(this, &LocalSandboxProvider::startEnded, m_settings.startTimeout);
        co_await std::move(waiting);
        if (!self)
            co_return providerGone();
    }
    if (auto live = m_owned.value(id); live && live->isConnected()) {
        // Thawed ahead of the command, which would thaw it itself (container-exec).
        if (m_pausedAtMs.remove(id) && m_settings.containers)
            m_settings.containers->unpause(id);
        co_return RuntimeAcquisition{live, {}};
    }
    forget(id);
    // Nothing is awaited from here until the start is registered: two starts cannot both take
    // the last place.
    if (!makeRoom())
        co_return RuntimeAcquisition{.error = limitError(), .atLimit = true};

    const QString runtimeDir = runtimeDirectory(id);
    if (!QDir().mkpath(runtimeDir) || !QDir().mkpath(conversation.workingDir))
        co_return RuntimeAcquisition{
            nullptr,
            {u"provision_failed"_s, u"cannot create the runtime or workspace directory"_s}};
    if (!SandboxHostProcess::of(runtimeDir).isRunning())
        removeSocketOf(runtimeDir);
    QFile::remove(QDir(runtimeDir).filePath(u"sandbox.pid"_s));
    const QString socketPath = newSocketPath(id);
    const SandboxPolicy policy = policyInForce(conversation.sandbox, m_settings.policy);
    QString home = QDir(runtimeDir).filePath(u"home"_s);
    // The names links give the workspace: its commands see it by those too.
    const QStringList aliases = m_settings.roots.aliasesOf(conversation.workingDir);
    m_starting.insert(id, nullptr);
    m_releasedWhileStarting.remove(id);
    m_pausedAtMs.remove(id);
    m_stoppedAtMs.remove(id);
    QString container;
    if (m_settings.containers) {
        QDir().mkpath(home);
        // A command left in it by another replica's sandbox is of a run resolved as
        // interrupted, unless that replica holds the lease now (a workspace request here).
        const bool endCommands =
            !m_settings.catalog.leasedElsewhere || !m_settings.catalog.leasedElsewhere(id);
        auto preparing = m_settings.containers->prepare(id, conversation.workingDir, aliases, home,
                                                        policy, endCommands);
        const SandboxContainers::Prepared prepared = co_await std::move(preparing);
        if (!self)
            co_return providerGone();
        if (m_releasedWhileStarting.remove(id)) {
            m_settings.containers->remove(id);
            m_starting.remove(id);
            Q_EMIT startEnded(id);
            co_return RuntimeAcquisition{
                nullptr,
                {u"start_cancelled"_s, u"the sandbox was stopped while it started"_s},
                true};
        }
        if (!prepared.error.isEmpty()) {
            m_starting.remove(id);
            Q_EMIT startEnded(id);
            co_return RuntimeAcquisition{nullptr, {u"provision_failed"_s, prepared.error}};
        }
        container = prepared.id;
        home = prepared.home;
        if (m_settings.catalog.take)
            m_settings.catalog.take(id);
    }

    QProcess process;
    process.setProgram(m_settings.program);
    process.setArguments(
        {u"sandbox-host"_s, u"--runtime-dir"_s, runtimeDir, u"--socket"_s, socketPath,
         u"--workspace"_s, conversation.workingDir, u"--home"_s, home, u"--idle-timeout-ms"_s,
         QString::number(m_settings.idleTimeout.count()), u"--open-files"_s,
         QString::number(OpenFiles::startingLimit()),
         // The data dir (runtimesRoot is DATA/runtimes).
         u"--hide"_s, QFileInfo(m_settings.runtimesRoot).absolutePath(), u"--policy"_s,
         QString::fromUtf8(QJsonDocument(policy.toJson()).toJson(QJsonDocument::Compact)),
         u"--sandbox-uid"_s, QString::number(sandboxUid(id))});
    QStringList more;
    for (const QString &range : m_settings.egressAllowed)
        more << u"--egress-allow"_s << range;
    if (conversation.workspaceOwnedByServer)
        more << u"--workspace-made-by-server"_s;
    for (const QString &alias : aliases)
        more << u"--workspace-alias"_s << alias;
    if (!container.isEmpty())
        more << u"--container"_s << container << u"--docker-host"_s
             << m_settings.containers->dockerHost();
    if (!container.isEmpty() && m_settings.catalog.heldHere)
        more << u"--container-shared"_s;
    if (!container.isEmpty() && !m_settings.containers->tlsDirectory().isEmpty())
        more << u"--docker-tls-dir"_s << m_settings.containers->tlsDirectory();
    if (!m_settings.cgroupRoot.isEmpty()) {
        SandboxCgroups::removeEnded(m_settings.cgroupRoot);
        more << u"--cgroup"_s << SandboxCgroups::sandboxCgroup(m_settings.cgroupRoot, toWireId(id));
    }
    process.setArguments(process.arguments() + more);
    process.setWorkingDirectory(runtimeDir);
    process.setProcessEnvironment(commandEnvironment());
    process.setStandardInputFile(QProcess::nullDevice());
    process.setStandardOutputFile(QDir(runtimeDir).filePath(u"sandbox.log"_s), QIODevice::Append);
    process.setStandardErrorFile(QDir(runtimeDir).filePath(u"sandbox.log"_s), QIODevice::Append);
    qint64 pid = 0;
    if (!process.startDetached(&pid)) {
        // Qt names the step that failed ("Could not open input redirection for reading"), not
        // why; out of descriptors is the likely why, and the operator's to fix.
        const int why = errno;
        m_starting.remove(id);
        Q_EMIT startEnded(id);
        co_return RuntimeAcquisition{
            nullptr,
            {u"provision_failed"_s,
             why == EMFILE || why == ENFILE
                 ? u"cannot start the sandbox host: the server has too many open files (%1)"_s.arg(
                       QString::fromLocal8Bit(std::strerror(why)))
                 : u"cannot start the sandbox host: "_s + process.errorString()}};
    }
    auto runtime = std::make_shared<SandboxRuntime>(socketPath, SandboxHostProcess{pid, runtimeDir},
                                                    m_settings.ownerSilenceLimit);
    m_starting.insert(id, runtime.get());
    auto connecting = runtime->connectToHost(m_settings.startTimeout);
    const bool connected = co_await std::move(connecting);
    if (!self) {
        // Not adopted by anyone: the next server adopts what runs in DATA/runtimes.
        if (!connected)
            SandboxHostProcess{pid, runtimeDir}.kill();
        co_return providerGone();
    }
    m_starting.remove(id);
    if (!connected) {
        // Released meanwhile (a delete, an archive, a reprovision), or not up in time. A
        // released start waited out the start timeout for the host the release had killed, and held
        // a start of a conversation created again with the same id as long; still starting,
        // the host also made its files again after a delete had removed them. A host late to
        // come up stayed, unknown to the server, beside the one the next start brought up. It
        // is killed now, and waited for.
        const bool cancelled = runtime->isConnectCancelled();
        const SandboxHostProcess host{pid, runtimeDir};
        host.kill();
        for (int wait = 0; wait < 100 && host.isRunning(); ++wait) {
            auto pause = QCoro::sleepFor(std::chrono::milliseconds(10));
            co_await std::move(pause);
        }
        runtime->shutdown();
        if (!self)
            co_return providerGone();
        Q_EMIT startEnded(id);
        if (cancelled)
            co_return RuntimeAcquisition{
                nullptr,
                {u"start_cancelled"_s, u"the sandbox was stopped while it started"_s},
                true};
        co_return RuntimeAcquisition{
            nullptr,
            {u"provision_failed"_s, u"the sandbox host did not come up; see "_s +
                                        QDir(runtimeDir).filePath(u"sandbox.log"_s)}};
    }
    watch(id, runtime.get());
    m_owned.insert(id, runtime);
    m_live.insert(id, runtime.get());
    m_lost.remove(id);
    qCInfo(lcRuntime) << "started sandbox of" << id << "pid" << pid;
    Q_EMIT startEnded(id);
    co_return RuntimeAcquisition{runtime, {}};
}

void LocalSandboxProvider::prestart(const QUuid &id, const QString &workspace)
{
    // At --max-sandboxes, a warm host never makes a conversation's give way: it starts with
    // its first command instead.
    if (m_starting.contains(id) || (m_owned.contains(id) && m_owned.value(id)->isConnected()) ||
        atLimit())
        return;
    ConversationInfo conversation;
    conversation.id = id;
    conversation.workingDir = workspace;
    conversation.workspaceOwnedByServer = true;
    QCoro::connect(acquire(std::move(conversation)), this, [id](const RuntimeAcquisition &got) {
        // Its first command starts one then, as without the pool.
        if (!got.runtime && !got.cancelled)
            qCWarning(lcRuntime).noquote()
                << "cannot start the sandbox host of the warm container of" << toWireId(id) << ":"
                << got.error.message;
    });
}

void LocalSandboxProvider::watch(const QUuid &id, SandboxRuntime *runtime)
{
    // Queued: the runtime emits `lost` from its own socket's signal and must not be destroyed
    // under it; by the time this runs a newer sandbox may have replaced it.
    connect(
        runtime, &SandboxRuntime::lost, this,
        [this, id, runtime] {
            if (m_live.value(id) == runtime) {
                qCInfo(lcRuntime) << "sandbox of" << id << "went away";
                m_lost.insert(id, u"The sandbox host went away; the next run starts a new one"_s);
                forget(id);
            }
        },
        Qt::QueuedConnection);
}

void LocalSandboxProvider::forget(const QUuid &id)
{
    m_live.remove(id);
    m_owned.remove(id);
}

void LocalSandboxProvider::release(const QUuid &id)
{
    stopSandbox(id, false, true);
}

void LocalSandboxProvider::letGo(const QUuid &id)
{
    stopSandbox(id, false, false);
}

void LocalSandboxProvider::stopSandbox(const QUuid &id, bool keepContainer, bool forAll)
{
    m_lost.remove(id);
    if (SandboxRuntime *starting = m_starting.value(id))
        starting->cancelConnect();
    else if (m_starting.contains(id))
        m_releasedWhileStarting.insert(id);
    m_pausedAtMs.remove(id);
    m_stoppedAtMs.remove(id);
    // Taken by another replica's sandbox since, it is that one's to stop or remove for its own
    // reasons (or, once the conversation is gone, the sweep's).
    if (m_settings.containers && (forAll || holdsContainer(id))) {
        if (keepContainer) {
            m_settings.containers->stop(id);
            m_stoppedAtMs.insert(id, QDateTime::currentMSecsSinceEpoch());
        } else {
            m_settings.containers->remove(id);
        }
    }
    if (auto runtime = m_owned.value(id)) {
        runtime->disconnect(this);
        runtime->shutdown();
        qCInfo(lcRuntime) << "stopped sandbox of" << id;
    } else {
        // A sandbox this server never connected to (it failed to answer at adoption), or one
        // that went away (its pid may be another process's by now).
        SandboxHostProcess::of(runtimeDirectory(id)).kill();
    }
    forget(id);
    removeSocketOf(runtimeDirectory(id));
    QFile::remove(QDir(runtimeDirectory(id)).filePath(u"sandbox.pid"_s));
}

void LocalSandboxProvider::interruptOrphan(const QUuid &id)
{
    if (auto runtime = m_owned.value(id))
        runtime->interrupt();
}

std::optional<CommandRecord> LocalSandboxProvider::lastCommand(const QUuid &conversationId) const
{
    return readLastCommand(runtimeDirectory(conversationId));
}

void LocalSandboxProvider::detachAll()
{
    // Sandboxes outlive the server on purpose: the next instance adopts them. One whose
    // conversation waits for a confirmation must outlive a stop longer than its idle timeout
    // too (its host exited on its own, and the action ran in a fresh sandbox without what the
    // commands before it left).
    for (auto it = m_owned.cbegin(); it != m_owned.cend(); ++it) {
        if (m_idleKeeper && m_idleKeeper(it.key()))
            it.value()->keepWhileAlone();
        it.value()->disconnect(this);
    }
    m_owned.clear();
    m_live.clear();
    // The next server (systemd starts it in the delegated cgroup itself) could not start while
    // the children had controllers; it gives the adopted sandboxes their limits again.
    if (!m_settings.cgroupRoot.isEmpty())
        SandboxCgroups::release(m_settings.cgroupRoot);
}

void LocalSandboxProvider::describe(QList<ConversationInfo> &conversations) const
{
    for (ConversationInfo &info : conversations)
        info.runtime = runtimeOf(info);
}

RuntimeInfo LocalSandboxProvider::runtimeOf(const ConversationInfo &info) const
{
    if (info.runtime.error)
        return info.runtime; // expired or failed: the row says so
    if (m_starting.contains(info.id))
        return {RuntimeStatus::Starting, true, std::nullopt};
    if (const SandboxRuntime *live = m_live.value(info.id)) {
        // Thawed by a command since (container-exec does that by itself).
        const qint64 pausedAt = m_pausedAtMs.value(info.id, 0);
        RuntimeInfo runtime{RuntimeStatus::Available, true, std::nullopt};
        if (pausedAt > 0 && !live->isBusy() && live->lastActivityMs() <= pausedAt)
            runtime = idleInfo(RuntimeStatus::Paused, m_settings.idlePause, pausedAt);
        if (m_settings.containers)
            runtime.usage = m_settings.containers->usageOf(info.id);
        return runtime;
    }
    if (const qint64 stoppedAt = m_stoppedAtMs.value(info.id, 0); stoppedAt > 0)
        return idleInfo(RuntimeStatus::Stopped, m_settings.idleStop, stoppedAt);
    if (const auto lost = m_lost.constFind(info.id); lost != m_lost.cend())
        return {RuntimeStatus::Missing, true, RuntimeError{u"sandbox_lost"_s, *lost}};
    return {RuntimeStatus::Missing, true, std::nullopt};
}

void LocalSandboxProvider::describeProcess(const QUuid &id, RuntimeDetails &details) const
{
    const std::shared_ptr<SandboxRuntime> runtime = m_owned.value(id);
    if (!runtime)
        return;
    details.sandboxPid = runtime->pid();
    details.startedAt = runtime->host().startedAt();
    if (!runtime->isBusy())
        details.idleSince = QDateTime::fromMSecsSinceEpoch(runtime->lastActivityMs(), Qt::UTC);
}

QByteArray LocalSandboxProvider::metrics() const
{
    qint64 paused = 0;
    SandboxUsage total;
    for (auto it = m_live.cbegin(); it != m_live.cend(); ++it) {
        paused += m_pausedAtMs.contains(it.key()) ? 1 : 0;
        if (const auto usage =
                m_settings.containers ? m_settings.containers->usageOf(it.key()) : std::nullopt) {
            total.cpuSeconds += usage->cpuSeconds;
            total.memoryBytes += usage->memoryBytes;
            total.processes += usage->processes;
            total.diskBytes += usage->diskBytes;
        }
    }
    QByteArray out = "# HELP agentdeck_sandboxes Sandboxes this server keeps, by state.\n"
                     "# TYPE agentdeck_sandboxes gauge\n";
    for (const auto &[state, count] :
         {std::pair{"running", qint64(m_live.size()) - paused}, std::pair{"paused", paused},
          std::pair{"stopped", qint64(m_stoppedAtMs.size())},
          std::pair{"starting", qint64(m_starting.size())}})
        out += "agentdeck_sandboxes{state=\"" + QByteArray(state) + "\"} " +
               QByteArray::number(count) + '\n';
    if (!m_settings.containers)
        return out;
    // Summed over the containers, as last measured: a label per sandbox would grow without end.
    out += "# HELP agentdeck_sandbox_cpu_seconds_total CPU time of the running containers.\n"
           "# TYPE agentdeck_sandbox_cpu_seconds_total counter\n"
           "agentdeck_sandbox_cpu_seconds_total " +
           QByteArray::number(total.cpuSeconds, 'f', 3) + '\n';
    out += "# HELP agentdeck_sandbox_memory_bytes Memory of the running containers.\n"
           "# TYPE agentdeck_sandbox_memory_bytes gauge\n"
           "agentdeck_sandbox_memory_bytes " +
           QByteArray::number(total.memoryBytes) + '\n';
    out += "# HELP agentdeck_sandbox_processes Processes in the running containers.\n"
           "# TYPE agentdeck_sandbox_processes gauge\n"
           "agentdeck_sandbox_processes " +
           QByteArray::number(total.processes) + '\n';
    out += "# HELP agentdeck_sandbox_disk_bytes Disk of the running containers: their workspaces, "
           "homes and writable layers.\n"
           "# TYPE agentdeck_sandbox_disk_bytes gauge\n"
           "agentdeck_sandbox_disk_bytes " +
           QByteArray::number(total.diskBytes) + '\n';
    return out;
}

void LocalSandboxProvider::setIdleKeeper(std::function<bool(const QUuid &)> keeper)
{
    m_idleKeeper = std::move(keeper);
}

void LocalSandboxProvider::sweepIdle()
{
    if (m_settings.containers) {
        QCoro::connect(sweepContainers(), this, [](int) {});
        const qint64 now = QDateTime::currentMSecsSinceEpoch();
        QList<QUuid> toStop;
        for (auto it = m_owned.cbegin(); it != m_owned.cend(); ++it) {
            const qint64 idleMs = now - it.value()->lastActivityMs();
            if (!isIdle(it.key(), it.value()))
                continue;
            if (m_settings.idleStop.count() > 0 && idleMs >= m_settings.idleStop.count()) {
                toStop.append(it.key());
            } else if (m_settings.idlePause.count() > 0 && idleMs >= m_settings.idlePause.count() &&
                       m_pausedAtMs.value(it.key(), 0) <= it.value()->lastActivityMs() &&
                       holdsContainer(it.key())) {
                qCInfo(lcRuntime) << "pausing the idle container of" << it.key();
                m_settings.containers->pause(it.key());
                m_pausedAtMs.insert(it.key(), now);
                tellPolicy(it.key(), u"idle"_s, u"pause_runtime"_s,
                           u"idle for %1 (--sandbox-idle-pause)"_s.arg(
                               optionDuration(m_settings.idlePause)));
            }
        }
        for (const QUuid &id : std::as_const(toStop)) {
            qCInfo(lcRuntime) << "stopping the idle container of" << id << "(its disk kept)";
            stopSandbox(id, true, false);
            tellPolicy(id, u"idle"_s, u"stop_runtime"_s,
                       u"idle for %1 (--sandbox-idle-stop); its container's disk kept"_s.arg(
                           optionDuration(m_settings.idleStop)));
        }
    }
    const qint64 cutoff = QDateTime::currentMSecsSinceEpoch() - m_settings.idleTimeout.count();
    QList<QUuid> idle;
    for (auto it = m_owned.cbegin(); it != m_owned.cend(); ++it) {
        if (it.value()->lastActivityMs() < cutoff && isIdle(it.key(), it.value()))
            idle.append(it.key());
    }
    for (const QUuid &id : idle) {
        qCInfo(lcRuntime) << "stopping idle sandbox of" << id;
        letGo(id);
        tellPolicy(
            id, u"idle"_s, u"stop_runtime"_s,
            u"idle for %1 (--sandbox-idle-timeout)"_s.arg(optionDuration(m_settings.idleTimeout)));
    }
}

void LocalSandboxProvider::tellPolicy(const QUuid &id, const QString &policy, const QString &action,
                                      const QString &reason) const
{
    if (m_settings.policyActed)
        m_settings.policyActed(id, policy, action, reason);
}

bool LocalSandboxProvider::isIdle(const QUuid &id,
                                  const std::shared_ptr<SandboxRuntime> &runtime) const
{
    // use_count 1: no run holds the runtime, only this registry (`runtime` is its entry).
    return runtime.use_count() == 1 && !runtime->isBusy() && !(m_idleKeeper && m_idleKeeper(id)) &&
           !(m_settings.reserved && m_settings.reserved(id));
}

bool LocalSandboxProvider::atLimit() const
{
    const int limit = m_settings.maxSandboxes;
    return limit > 0 && m_owned.size() + m_starting.size() >= limit;
}

QUuid LocalSandboxProvider::idleTheLongest() const
{
    QUuid oldest;
    qint64 oldestActivityMs = std::numeric_limits<qint64>::max();
    for (auto it = m_owned.cbegin(); it != m_owned.cend(); ++it) {
        if (it.value()->lastActivityMs() < oldestActivityMs && isIdle(it.key(), it.value())) {
            oldest = it.key();
            oldestActivityMs = it.value()->lastActivityMs();
        }
    }
    return oldest;
}

bool LocalSandboxProvider::makeRoom()
{
    // As many as it takes: a server restarted with a lower limit adopts more sandboxes than
    // that, and stopping one per start kept it over the limit for good.
    while (atLimit()) {
        const QUuid oldest = idleTheLongest();
        if (oldest.isNull()) {
            qCWarning(lcRuntime) << "a start is refused: each of the" << m_settings.maxSandboxes
                                 << "sandboxes (--max-sandboxes) is held by a run or kept for a "
                                    "confirmation";
            return false;
        }
        qCInfo(lcRuntime) << "stopping the sandbox of" << oldest
                          << "idle the longest, to make room: --max-sandboxes"
                          << m_settings.maxSandboxes << "reached";
        letGo(oldest);
        tellPolicy(
            oldest, u"limit"_s, u"stop_runtime"_s,
            u"idle the longest when --max-sandboxes %1 was reached"_s.arg(m_settings.maxSandboxes));
    }
    return true;
}

std::optional<RuntimeError> LocalSandboxProvider::limitRefusal(const QUuid &id) const
{
    // A conversation with a sandbox, or one starting, takes no new place.
    if (!atLimit() || m_owned.contains(id) || m_starting.contains(id) || !idleTheLongest().isNull())
        return std::nullopt;
    return limitError();
}

RuntimeError LocalSandboxProvider::limitError() const
{
    return {u"sandbox_limit_reached"_s,
            u"every sandbox this server may keep (--max-sandboxes %1) is held by a run or kept "
            "for a conversation waiting for confirmation"_s.arg(m_settings.maxSandboxes)};
}

} // namespace AgentDeck
