#include "sandboxcontainers.h"

#include "dockerengine.h"
#include "egressfilter.h"
#include "logging.h"
#include "sandboxdisk.h"
#include "signalwait.h"
#include "wiretypes.h"

#include <QCryptographicHash>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QPointer>
#include <QSet>

using namespace Qt::StringLiterals;

namespace AgentDeck {

SandboxContainers::SandboxContainers(SandboxContainerSettings settings, QObject *parent)
    : QObject(parent)
    , m_settings(std::move(settings))
    , m_engine(std::make_unique<DockerEngine>(m_settings.dockerHost))
{
    m_engine->setTlsDirectory(m_settings.tlsDirectory);
    connect(&m_measuring, &QTimer::timeout, this,
            [this] { QCoro::connect(measure(), this, [] {}); });
    m_measuring.start(MeasureInterval);
    // One walk at a time, beside everything else the machine does.
    m_diskWalks.setMaxThreadCount(1);
    m_diskWalks.setThreadPriority(QThread::LowestPriority);
}

SandboxContainers::~SandboxContainers()
{
    // A walk in flight stops at its next file, and reports to no one.
    m_stopping = true;
    m_diskWalks.clear();
    m_diskWalks.waitForDone();
}

QString SandboxContainers::imageOf(const SandboxPolicy &policy) const
{
    return policy.image.isEmpty() ? m_settings.defaultImage : policy.image;
}

QString SandboxContainers::nameOf(const QUuid &conversationId) const
{
    // Unique per data dir, or per catalog with replicas (each finds the one the others made):
    // two servers on one engine each have their own container of a conversation id they both
    // know (a copied catalog, a test's fixed ids).
    const QString owner =
        m_settings.catalog.isEmpty() ? m_settings.runtimesRoot : u"catalog:"_s + m_settings.catalog;
    const QByteArray root =
        QCryptographicHash::hash(owner.toUtf8(), QCryptographicHash::Sha256).toHex().left(8);
    return u"agentdeck-%1-%2"_s.arg(QString::fromLatin1(root), toWireId(conversationId));
}

QString SandboxContainers::ownFilter() const
{
    return m_settings.catalog.isEmpty()
               ? u"%1=%2"_s.arg(QString::fromLatin1(RuntimesLabel), m_settings.runtimesRoot)
               : u"%1=%2"_s.arg(QString::fromLatin1(CatalogLabel), m_settings.catalog);
}

QCoro::Task<void> SandboxContainers::endCommandsIn(QString id)
{
    // Root without capabilities signals root's processes only (the engine's init and the shell
    // that keeps the container up, which stay); each other uid's `kill -9 -1` ends its own.
    static const QString ListUids = uR"sh(for f in /proc/[0-9]*/status; do
    while read -r key value rest; do
        [ "$key" = Uid: ] && { echo "$value"; break; }
    done < "$f"
done 2>/dev/null)sh"_s;
    QPointer<SandboxContainers> self(this);
    // Made before the co_await: GCC 12 fails on temporaries inside one.
    const QStringList list{u"/bin/sh"_s, u"-c"_s, ListUids};
    auto listing = m_engine->exec(id, list, std::chrono::seconds(10), {}, {}, u"0:0"_s);
    const DockerExecResult listed = co_await std::move(listing);
    if (!self)
        co_return;
    if (!listed.ok()) {
        qCWarning(lcRuntime).noquote() << "cannot look for commands left in the container"
                                       << id.left(12) << ":" << listed.error;
        co_return;
    }
    QSet<QByteArray> uids;
    for (const QByteArray &line : listed.standardOutput.split('\n')) {
        if (const QByteArray uid = line.trimmed(); !uid.isEmpty() && uid != "0")
            uids.insert(uid);
    }
    const QStringList kill{u"/bin/sh"_s, u"-c"_s, u"kill -9 -1"_s};
    for (const QByteArray &uid : std::as_const(uids)) {
        qCInfo(lcRuntime).noquote()
            << "ending what uid" << uid << "left running in the container" << id.left(12);
        auto killing =
            m_engine->exec(id, kill, std::chrono::seconds(10), {}, {}, QString::fromLatin1(uid));
        co_await std::move(killing);
        if (!self)
            co_return;
    }
}

QCoro::Task<SandboxContainers::Prepared>
SandboxContainers::prepare(QUuid conversationId, QString workspace, QStringList workspaceAliases,
                           QString home, SandboxPolicy policy, bool endCommands)
{
    const QString name = nameOf(conversationId);
    // The server may stop while the engine is asked: nothing of this is touched after that.
    QPointer<SandboxContainers> self(this);
    const auto stopped = [] { return Prepared{.error = u"the server stopped"_s}; };
    // A removal (a reprovision, a runtime stop) or a stop still on its way would take the
    // container found now from under the host about to use it: it ends first.
    while (m_inBackground.contains(conversationId)) {
        auto waiting =
            signalOrTimeout(this, &SandboxContainers::backgroundEnded, std::chrono::seconds(5));
        co_await std::move(waiting);
        if (!self)
            co_return stopped();
    }
    DockerResult found = co_await m_engine->inspectContainer(name);
    if (!self)
        co_return stopped();
    const bool made = found.status == 404;
    if (made) {
        DockerContainerSpec spec;
        spec.image = imageOf(policy);
        // Up for good, whatever the image's own command: the engine's init reaps what commands
        // leave behind, and the shell it runs waits on a stdin that stays open.
        spec.command = {u"/bin/sh"_s};
        spec.init = true;
        spec.openStdin = true;
        spec.user = u"0:0"_s;
        spec.labels = {{QString::fromLatin1(ConversationLabel), toWireId(conversationId)},
                       {QString::fromLatin1(RuntimesLabel), m_settings.runtimesRoot},
                       {QString::fromLatin1(ReplicaLabel), m_settings.replicaId},
                       {QString::fromLatin1(HomeLabel), home}};
        if (!m_settings.catalog.isEmpty())
            spec.labels.insert(QString::fromLatin1(CatalogLabel), m_settings.catalog);
        if (const auto warm = m_warming.constFind(conversationId); warm != m_warming.cend())
            spec.labels.insert(QString::fromLatin1(WarmLabel), *warm);
        spec.binds = {workspace + u':' + workspace, home + u':' + home};
        for (const QString &alias : workspaceAliases)
            spec.binds.append(workspace + u':' + alias);
        spec.workingDir = workspace;
        // `egress`: none, to which each command's sandbox host attaches the filtered network
        // (UserModeNetwork), whose DNS forwarder is the resolver.
        spec.networkMode = policy.network == SandboxPolicy::Network::Host ? u"host"_s : u"none"_s;
        if (policy.network == SandboxPolicy::Network::Egress)
            spec.dns = {EgressFilter::dnsServer()};
        spec.memoryBytes = policy.memoryBytes;
        spec.pidsLimit = policy.processes;
        if (policy.cpuSeconds > 0)
            spec.ulimits.insert(u"cpu"_s, policy.cpuSeconds);
        if (policy.fileSizeBytes > 0)
            spec.ulimits.insert(u"fsize"_s, policy.fileSizeBytes);
        spec.tmpfsOptions = u"rw,nosuid,nodev,mode=1777,size=%1"_s.arg(policy.tmpBytes());
        spec.shmBytes = policy.shmBytes();
        const DockerResult created = co_await m_engine->createContainer(spec, name);
        if (!self)
            co_return stopped();
        if (created.status == 404) {
            co_return Prepared{.error = created.error + u" (no registry is pulled from: load or "
                                                        "build the image on the engine)"_s};
        }
        // 409: another start of the same conversation made it meanwhile.
        if (!created.ok() && created.status != 409)
            co_return Prepared{.error = created.error};
        found = co_await m_engine->inspectContainer(name);
        if (!self)
            co_return stopped();
    }
    if (!found.ok())
        co_return Prepared{.error = found.error};
    const QJsonObject container = found.json.object();
    const QString id = container.value("Id"_L1).toString();
    const QJsonObject state = container.value("State"_L1).toObject();
    // Made by another replica, it binds the home at that replica's path: the one its files are
    // in, and the only one it sees.
    const QString boundHome = container.value("Config"_L1)
                                  .toObject()
                                  .value("Labels"_L1)
                                  .toObject()
                                  .value(QLatin1StringView(HomeLabel))
                                  .toString(home);
    const bool wasRunning = state.value("Running"_L1).toBool();
    DockerResult woken;
    if (state.value("Paused"_L1).toBool())
        woken = co_await m_engine->unpauseContainer(id);
    else if (!wasRunning)
        woken = co_await m_engine->startContainer(id);
    if (!woken.ok())
        co_return Prepared{.error = woken.error};
    // A stopped one runs nothing, and a new one nothing yet.
    if (!made && wasRunning && endCommands)
        co_await endCommandsIn(id);
    co_return Prepared{.id = id, .home = boundHome};
}

void SandboxContainers::inBackground(const QUuid &conversationId, const char *what,
                                     QCoro::Task<DockerResult> (*call)(DockerEngine *, QString))
{
    const QString name = nameOf(conversationId);
    auto running =
        [](DockerEngine *engine, QString name, const char *what,
           QCoro::Task<DockerResult> (*call)(DockerEngine *, QString)) -> QCoro::Task<void> {
        const DockerResult result = co_await call(engine, name);
        // 404: gone already; 409: paused or running already.
        if (!result.ok() && result.status != 404 && result.status != 409)
            qCWarning(lcRuntime).noquote()
                << "cannot" << what << "the container" << name << ":" << result.error;
    };
    ++m_inBackground[conversationId];
    QCoro::connect(running(m_engine.get(), name, what, call), this, [this, conversationId] {
        if (--m_inBackground[conversationId] <= 0)
            m_inBackground.remove(conversationId);
        Q_EMIT backgroundEnded(conversationId);
    });
}

void SandboxContainers::remove(const QUuid &conversationId)
{
    inBackground(conversationId, "remove", [](DockerEngine *engine, QString name) {
        return engine->removeContainer(std::move(name));
    });
}

void SandboxContainers::pause(const QUuid &conversationId)
{
    inBackground(conversationId, "pause", [](DockerEngine *engine, QString name) {
        return engine->pauseContainer(std::move(name));
    });
}

void SandboxContainers::stop(const QUuid &conversationId)
{
    // Nothing in it waits for a SIGTERM: its commands are gone with the host.
    inBackground(conversationId, "stop", [](DockerEngine *engine, QString name) {
        return engine->stopContainer(std::move(name), std::chrono::seconds(1));
    });
}

void SandboxContainers::unpause(const QUuid &conversationId)
{
    inBackground(conversationId, "unpause", [](DockerEngine *engine, QString name) {
        return engine->unpauseContainer(std::move(name));
    });
}

QCoro::Task<int> SandboxContainers::sweep(std::function<bool(const QUuid &)> kept)
{
    QPointer<SandboxContainers> self(this);
    // Built before the co_await: GCC 12 fails on an initializer list inside one.
    const QStringList ours{ownFilter()};
    const DockerResult listed = co_await m_engine->listContainers(ours);
    if (!self)
        co_return 0;
    if (!listed.ok()) {
        qCWarning(lcRuntime).noquote() << "cannot look for left-over containers:" << listed.error;
        co_return 0;
    }
    int removed = 0;
    for (const QJsonValue &entry : listed.json.array()) {
        const QJsonObject container = entry.toObject();
        const auto conversation = parseWireId(container.value("Labels"_L1)
                                                  .toObject()
                                                  .value(QLatin1StringView(ConversationLabel))
                                                  .toString());
        if (conversation && kept(*conversation))
            continue;
        const QString id = container.value("Id"_L1).toString();
        const DockerResult gone = co_await m_engine->removeContainer(id);
        if (!self)
            co_return removed;
        if (gone.ok()) {
            ++removed;
            qCInfo(lcRuntime).noquote() << "removed the container" << id.left(12)
                                        << "of a conversation this server no longer keeps";
        } else {
            qCWarning(lcRuntime).noquote()
                << "cannot remove the left-over container" << id.left(12) << ":" << gone.error;
        }
    }
    co_return removed;
}

QString SandboxContainers::warmFingerprint(const SandboxPolicy &policy) const
{
    QJsonObject made = policy.toJson();
    made.insert("image"_L1, imageOf(policy));
    return QString::fromLatin1(
        QCryptographicHash::hash(QJsonDocument(made).toJson(QJsonDocument::Compact),
                                 QCryptographicHash::Sha256)
            .toHex()
            .left(16));
}

QCoro::Task<SandboxContainers::Prepared>
SandboxContainers::prepareWarm(QUuid conversationId, QString workspace, QStringList aliases,
                               QString home, SandboxPolicy policy)
{
    QPointer<SandboxContainers> self(this);
    m_warming.insert(conversationId, warmFingerprint(policy));
    auto preparing =
        prepare(conversationId, std::move(workspace), std::move(aliases), std::move(home), policy);
    Prepared prepared = co_await std::move(preparing);
    if (self)
        m_warming.remove(conversationId);
    co_return prepared;
}

QCoro::Task<DockerResult> SandboxContainers::listWarm()
{
    // Made before the co_await: GCC 12 fails on an initializer list inside one.
    const QStringList warm{
        u"%1=%2"_s.arg(QString::fromLatin1(RuntimesLabel), m_settings.runtimesRoot),
        QString::fromLatin1(WarmLabel)};
    auto listing = m_engine->listContainers(warm);
    co_return co_await std::move(listing);
}

QCoro::Task<DockerResult> SandboxContainers::inspectDefaultImage()
{
    auto inspecting = m_engine->inspectImage(m_settings.defaultImage);
    co_return co_await std::move(inspecting);
}

QCoro::Task<QString> SandboxContainers::removeNow(QUuid conversationId)
{
    auto removing = m_engine->removeContainer(nameOf(conversationId));
    const DockerResult removed = co_await std::move(removing);
    // 409: its removal is under way already.
    co_return removed.ok() || removed.status == 404 || removed.status == 409 ? QString()
                                                                             : removed.error;
}

std::optional<SandboxUsage> SandboxContainers::usageOf(const QUuid &conversationId) const
{
    const auto found = m_usage.constFind(conversationId);
    return found == m_usage.cend() ? std::nullopt : std::optional(*found);
}

QCoro::Task<void> SandboxContainers::measure()
{
    if (m_measuringNow)
        co_return;
    m_measuringNow = true;
    QPointer<SandboxContainers> self(this);
    // Made before the co_await: GCC 12 fails on an initializer list inside one.
    const QStringList ours{ownFilter()};
    // With their writable layers' sizes: the engine adds up files a read-only root leaves
    // almost none of (0.5 ms more for 11 containers).
    auto listing = m_engine->listContainers(ours, true);
    const DockerResult listed = co_await std::move(listing);
    if (!self)
        co_return;
    QHash<QUuid, SandboxUsage> measured;
    for (const QJsonValue &entry : listed.json.array()) {
        const QJsonObject container = entry.toObject();
        const auto conversation = parseWireId(container.value("Labels"_L1)
                                                  .toObject()
                                                  .value(QLatin1StringView(ConversationLabel))
                                                  .toString());
        if (!conversation || container.value("State"_L1).toString() != "running"_L1 ||
            (m_measured && !m_measured(*conversation)))
            continue;
        // One sample, not the engine's default pair a second apart.
        const QString path = u"/containers/%1/stats?stream=false&one-shot=true"_s.arg(
            container.value("Id"_L1).toString());
        auto sampling = m_engine->request("GET", path);
        const DockerResult stats = co_await std::move(sampling);
        if (!self)
            co_return;
        if (!stats.ok())
            continue;
        const QJsonObject object = stats.json.object();
        const QJsonObject memory = object.value("memory_stats"_L1).toObject();
        SandboxUsage usage;
        usage.cpuSeconds = object.value("cpu_stats"_L1)
                               .toObject()
                               .value("cpu_usage"_L1)
                               .toObject()
                               .value("total_usage"_L1)
                               .toDouble() /
                           1e9;
        usage.memoryBytes = memory.value("usage"_L1).toInteger();
        usage.memoryPeakBytes = memory.value("max_usage"_L1).toInteger(); // cgroup v1 only
        usage.processes = object.value("pids_stats"_L1).toObject().value("current"_L1).toInteger();
        QStringList dirs;
        for (const QJsonValue &mount : container.value("Mounts"_L1).toArray()) {
            if (mount.toObject().value("Type"_L1).toString() == "bind"_L1)
                dirs << mount.toObject().value("Source"_L1).toString();
        }
        usage.diskBytes =
            measureDisk(*conversation, dirs, container.value("SizeRw"_L1).toInteger());
        usage.at = QDateTime::currentDateTimeUtc();
        measured.insert(*conversation, usage);
    }
    if (listed.ok()) {
        m_usage = std::move(measured);
        for (auto it = m_disk.begin(); it != m_disk.end();) {
            if (!m_usage.contains(it.key()) && !it->walking)
                it = m_disk.erase(it);
            else
                ++it;
        }
    }
    m_measuringNow = false;
}

qint64 SandboxContainers::measureDisk(const QUuid &conversationId, const QStringList &dirs,
                                      qint64 writable)
{
    DiskState &state = m_disk[conversationId];
    state.writableBytes = writable;
    const auto now = std::chrono::steady_clock::now();
    if (!state.walking && now >= state.due) {
        state.walking = true;
        m_diskWalks.start([this, conversationId, dirs] {
            const SandboxDisk::Measured measured = SandboxDisk::measure(dirs, m_stopping);
            if (m_stopping)
                return;
            // Back on the object's thread; dropped with it if it goes first (the destructor
            // waits for this walk).
            QMetaObject::invokeMethod(
                this,
                [this, conversationId, measured] {
                    const auto found = m_disk.find(conversationId);
                    if (found == m_disk.end())
                        return;
                    found->walking = false;
                    found->hostBytes = measured.bytes;
                    found->due = std::chrono::steady_clock::now() +
                                 SandboxDisk::nextAfter(measured.took, MeasureInterval);
                    if (const auto usage = m_usage.find(conversationId); usage != m_usage.end())
                        usage->diskBytes = found->hostBytes + found->writableBytes;
                },
                Qt::QueuedConnection);
        });
    }
    return state.hostBytes + state.writableBytes;
}

QCoro::Task<QString> SandboxContainers::check()
{
    // The server may stop while the engine is asked: nothing of this is touched after that.
    QPointer<SandboxContainers> self(this);
    const DockerResult pinged = co_await m_engine->ping();
    if (!self)
        co_return QString();
    if (!pinged.ok())
        co_return pinged.error;
    const DockerResult image = co_await m_engine->inspectImage(m_settings.defaultImage);
    if (!self)
        co_return QString();
    if (image.status == 404)
        co_return u"the image %1 (--sandbox-image) is not on the Docker engine at %2"_s.arg(
            m_settings.defaultImage, m_settings.dockerHost);
    co_return image.error;
}

} // namespace AgentDeck
