#include "sandboxcontainers.h"

#include "dockerengine.h"
#include "logging.h"
#include "wiretypes.h"

#include <QCryptographicHash>
#include <QJsonArray>
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
}

SandboxContainers::~SandboxContainers() = default;

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

QCoro::Task<SandboxContainers::Prepared> SandboxContainers::prepare(QUuid conversationId,
                                                                    QString workspace, QString home,
                                                                    SandboxPolicy policy,
                                                                    bool endCommands)
{
    const QString name = nameOf(conversationId);
    DockerResult found = co_await m_engine->inspectContainer(name);
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
        spec.binds = {workspace + u':' + workspace, home + u':' + home};
        spec.workingDir = workspace;
        // `egress` has no container counterpart yet: none, as runtime_info says.
        spec.networkMode = policy.network == SandboxPolicy::Network::Host ? u"host"_s : u"none"_s;
        spec.memoryBytes = policy.memoryBytes;
        spec.pidsLimit = policy.processes;
        if (policy.cpuSeconds > 0)
            spec.ulimits.insert(u"cpu"_s, policy.cpuSeconds);
        if (policy.fileSizeBytes > 0)
            spec.ulimits.insert(u"fsize"_s, policy.fileSizeBytes);
        spec.tmpfsOptions = u"rw,nosuid,nodev,mode=1777,size=%1"_s.arg(policy.tmpBytes());
        spec.shmBytes = policy.shmBytes();
        const DockerResult created = co_await m_engine->createContainer(spec, name);
        if (created.status == 404) {
            co_return Prepared{.error = created.error + u" (no registry is pulled from: load or "
                                                        "build the image on the engine)"_s};
        }
        // 409: another start of the same conversation made it meanwhile.
        if (!created.ok() && created.status != 409)
            co_return Prepared{.error = created.error};
        found = co_await m_engine->inspectContainer(name);
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
    QCoro::connect(running(m_engine.get(), name, what, call), this, [] {});
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
    auto listing = m_engine->listContainers(ours);
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
        usage.at = QDateTime::currentDateTimeUtc();
        measured.insert(*conversation, usage);
    }
    if (listed.ok())
        m_usage = std::move(measured);
    m_measuringNow = false;
}

QCoro::Task<QString> SandboxContainers::check()
{
    const DockerResult pinged = co_await m_engine->ping();
    if (!pinged.ok())
        co_return pinged.error;
    const DockerResult image = co_await m_engine->inspectImage(m_settings.defaultImage);
    if (image.status == 404)
        co_return u"the image %1 (--sandbox-image) is not on the Docker engine at %2"_s.arg(
            m_settings.defaultImage, m_settings.dockerHost);
    co_return image.error;
}

} // namespace AgentDeck
