// The Docker Engine API client against a real dockerd of the test's own (no bridge, no iptables,
// its own data and socket) and an image imported from busybox-static, so no registry and no
// network are involved. A dockerd that cannot start fails the test: the client is only known to
// work against an engine.
#include <QElapsedTimer>
#include <QFile>
#include <QJsonArray>
#include <QJsonObject>
#include <QLocalServer>
#include <QScopeGuard>
#include <QTcpServer>
#include <QTemporaryDir>
#include <QTest>
#include <QUuid>

#include <QCoroTask>

#include <cstring>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "dockerdaemon.h"
#include "runtime/dockerengine.h"

using namespace Qt::StringLiterals;
using namespace std::chrono_literals;
using namespace AgentDeck;
using namespace AgentDeck::Testing;

namespace {
const QString TestImage = u"agentdeck-test:busybox"_s;
constexpr qint64 Memory = 64 * 1024 * 1024;
} // namespace

class DockerEngineTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void cleanup();
    void cleanupTestCase();

    void pingAndVersion();
    void inspectsImages();
    void containerLifecycle();
    void execTimesOut();
    void missingImageIsAClearError();
    void unreachableEngine_data();
    void unreachableEngine();
    void silentEngineTimesOut_data();
    void silentEngineTimesOut();
    void hostsAreChecked();
    void destroyedClientAnswersItsCalls();
    void demultiplexRejectsBrokenFrames();

private:
    // Creates and starts a container of the test image that sleeps; its id, or empty.
    QString startSleeper(const QString &workspace);

    DockerDaemon m_daemon;
    std::unique_ptr<DockerEngine> m_engine;
    // Every container of this run carries it, so cleanup() finds them all.
    const QString m_runLabel =
        u"agentdeck.test-run="_s + QUuid::createUuid().toString(QUuid::WithoutBraces);
};

void DockerEngineTest::initTestCase()
{
    QString error;
    QVERIFY2(m_daemon.start(&error), qPrintable(error));
    qInfo("dockerd answered /_ping %lld ms after it was started", m_daemon.startMilliseconds());
    QElapsedTimer imported;
    imported.start();
    QVERIFY2(m_daemon.importBusyboxImage(u"agentdeck-test"_s, u"busybox"_s, &error),
             qPrintable(error));
    qInfo("test image imported in %lld ms", imported.elapsed());
    m_engine = std::make_unique<DockerEngine>(m_daemon.host());
    m_engine->setDefaultTimeout(20s);
}

void DockerEngineTest::cleanup()
{
    const DockerResult listed = QCoro::waitFor(m_engine->listContainers({m_runLabel}));
    QVERIFY2(listed.ok(), qPrintable(listed.error));
    for (const QJsonValue &container : listed.json.array()) {
        const DockerResult removed = QCoro::waitFor(
            m_engine->removeContainer(container.toObject().value("Id"_L1).toString()));
        QVERIFY2(removed.ok(), qPrintable(removed.error));
    }
}

void DockerEngineTest::cleanupTestCase()
{
    m_engine.reset();
    QElapsedTimer stopping;
    stopping.start();
    m_daemon.stop();
    qInfo("dockerd stopped in %lld ms", stopping.elapsed());
}

QString DockerEngineTest::startSleeper(const QString &workspace)
{
    DockerContainerSpec spec;
    spec.image = TestImage;
    spec.command = {u"sleep"_s, u"3600"_s};
    const auto runLabel = m_runLabel.split(u'=');
    spec.labels = {{runLabel.at(0), runLabel.at(1)}, {u"agentdeck.conversation"_s, u"c1"_s}};
    spec.binds = {workspace + u":/workspace"_s};
    spec.workingDir = u"/workspace"_s;
    spec.environment = {u"FROM_SPEC=spec"_s};
    spec.memoryBytes = Memory;
    spec.pidsLimit = 32;
    const DockerResult created = QCoro::waitFor(m_engine->createContainer(spec));
    if (!created.ok()) {
        qWarning() << created.error;
        return {};
    }
    const QString id = created.json.object().value("Id"_L1).toString();
    const DockerResult started = QCoro::waitFor(m_engine->startContainer(id));
    if (!started.ok()) {
        qWarning() << started.error;
        return {};
    }
    return id;
}

void DockerEngineTest::pingAndVersion()
{
    const DockerResult pong = QCoro::waitFor(m_engine->ping());
    QVERIFY2(pong.ok(), qPrintable(pong.error));
    QCOMPARE(pong.status, 200);
    QCOMPARE(pong.body, "OK");
    const DockerResult version = QCoro::waitFor(m_engine->version());
    QVERIFY2(version.ok(), qPrintable(version.error));
    QVERIFY(!version.json.object().value("ApiVersion"_L1).toString().isEmpty());
}

void DockerEngineTest::inspectsImages()
{
    const DockerResult image = QCoro::waitFor(m_engine->inspectImage(TestImage));
    QVERIFY2(image.ok(), qPrintable(image.error));
    QVERIFY(image.json.object().value("RepoTags"_L1).toArray().contains(TestImage));
    const DockerResult absent = QCoro::waitFor(m_engine->inspectImage(u"agentdeck-test:absent"_s));
    QCOMPARE(absent.status, 404);
    QVERIFY2(absent.error.contains(u"HTTP 404"_s), qPrintable(absent.error));
}

void DockerEngineTest::containerLifecycle()
{
    QTemporaryDir workspace;
    QVERIFY(workspace.isValid());
    const QString id = startSleeper(workspace.path());
    QVERIFY(!id.isEmpty());

    // The limits and the containment asked for are the ones the engine applied.
    const DockerResult inspected = QCoro::waitFor(m_engine->inspectContainer(id));
    QVERIFY2(inspected.ok(), qPrintable(inspected.error));
    const QJsonObject container = inspected.json.object();
    const QJsonObject hostConfig = container.value("HostConfig"_L1).toObject();
    QCOMPARE(hostConfig.value("Memory"_L1).toInteger(), Memory);
    QCOMPARE(hostConfig.value("PidsLimit"_L1).toInteger(), 32);
    QCOMPARE(hostConfig.value("NetworkMode"_L1).toString(), u"none"_s);
    QCOMPARE(hostConfig.value("CapDrop"_L1).toArray(), QJsonArray{u"ALL"_s});
    QVERIFY(hostConfig.value("ReadonlyRootfs"_L1).toBool());
    QVERIFY(hostConfig.value("SecurityOpt"_L1).toArray().contains(u"no-new-privileges"_s));
    QCOMPARE(container.value("Config"_L1)
                 .toObject()
                 .value("Labels"_L1)
                 .toObject()
                 .value(u"agentdeck.conversation"_s),
             u"c1"_s);
    QVERIFY(container.value("State"_L1).toObject().value("Running"_L1).toBool());

    // Both streams come back apart, and the exit code with them.
    DockerExecResult ran = QCoro::waitFor(
        m_engine->exec(id, {u"sh"_s, u"-c"_s, u"echo hi; echo err >&2; exit 3"_s}, 20s));
    QVERIFY2(ran.ok(), qPrintable(ran.error));
    QCOMPARE(ran.standardOutput, "hi\n");
    QCOMPARE(ran.standardError, "err\n");
    QCOMPARE(ran.exitCode, 3);

    // The workspace is the host's directory.
    ran = QCoro::waitFor(m_engine->exec(id, {u"sh"_s, u"-c"_s, u"echo written > note.txt"_s}, 20s));
    QVERIFY2(ran.ok() && ran.exitCode == 0,
             qPrintable(ran.error + QString::fromUtf8(ran.standardError)));
    QFile note(workspace.filePath(u"note.txt"_s));
    QVERIFY(note.open(QIODevice::ReadOnly));
    QCOMPARE(note.readAll(), "written\n");

    // Read-only root, writable /tmp, no network but loopback.
    ran = QCoro::waitFor(m_engine->exec(id,
                                        {u"sh"_s, u"-c"_s,
                                         u"touch /etc/x 2>/dev/null && echo rootfs-writable; "
                                         "touch /tmp/x && echo tmp-writable; ls /sys/class/net"_s},
                                        20s));
    QVERIFY2(ran.ok(), qPrintable(ran.error));
    QCOMPARE(ran.standardOutput, "tmp-writable\nlo\n");

    // The limits reach the kernel: the container's cgroup (v2 or v1) says so.
    ran = QCoro::waitFor(m_engine->exec(
        id,
        {u"sh"_s, u"-c"_s,
         u"cat /sys/fs/cgroup/memory.max 2>/dev/null || "
         "cat /sys/fs/cgroup/memory/memory.limit_in_bytes; "
         "cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max"_s},
        20s));
    QVERIFY2(ran.ok(), qPrintable(ran.error));
    QCOMPARE(ran.standardOutput, QByteArray::number(Memory) + "\n32\n");

    // The container's environment, and an exec's own environment, directory and user.
    ran = QCoro::waitFor(
        m_engine->exec(id, {u"sh"_s, u"-c"_s, u"echo $FROM_SPEC $GREETING $(pwd) $(id -u)"_s}, 20s,
                       {u"GREETING=hello"_s}, u"/tmp"_s, u"65534:65534"_s));
    QVERIFY2(ran.ok(), qPrintable(ran.error));
    QCOMPARE(ran.standardOutput, "spec hello /tmp 65534\n");

    // Found by its labels, and only by its own.
    DockerResult listed =
        QCoro::waitFor(m_engine->listContainers({m_runLabel, u"agentdeck.conversation=c1"_s}));
    QVERIFY2(listed.ok(), qPrintable(listed.error));
    QCOMPARE(listed.json.array().size(), 1);
    QCOMPARE(listed.json.array().first().toObject().value("Id"_L1).toString(), id);
    listed = QCoro::waitFor(m_engine->listContainers({m_runLabel, u"agentdeck.conversation=c2"_s}));
    QVERIFY2(listed.ok(), qPrintable(listed.error));
    QCOMPARE(listed.json.array().size(), 0);

    // Paused, it runs nothing; unpaused, it does again.
    DockerResult changed = QCoro::waitFor(m_engine->pauseContainer(id));
    QVERIFY2(changed.ok(), qPrintable(changed.error));
    QCOMPARE(QCoro::waitFor(m_engine->inspectContainer(id))
                 .json.object()
                 .value("State"_L1)
                 .toObject()
                 .value("Status"_L1)
                 .toString(),
             u"paused"_s);
    ran = QCoro::waitFor(m_engine->exec(id, {u"true"_s}, 20s));
    QVERIFY2(!ran.ok() && ran.error.contains(u"paused"_s), qPrintable(ran.error));
    changed = QCoro::waitFor(m_engine->unpauseContainer(id));
    QVERIFY2(changed.ok(), qPrintable(changed.error));
    ran = QCoro::waitFor(m_engine->exec(id, {u"true"_s}, 20s));
    QVERIFY2(ran.ok() && ran.exitCode == 0, qPrintable(ran.error));

    // Stopped, then removed: gone from inspect and from the list.
    changed = QCoro::waitFor(m_engine->stopContainer(id, 1s));
    QVERIFY2(changed.ok(), qPrintable(changed.error));
    QVERIFY(!QCoro::waitFor(m_engine->inspectContainer(id))
                 .json.object()
                 .value("State"_L1)
                 .toObject()
                 .value("Running"_L1)
                 .toBool(true));
    changed = QCoro::waitFor(m_engine->stopContainer(id, 1s));
    QVERIFY2(changed.ok(), qPrintable(changed.error)); // already stopped is what was asked
    changed = QCoro::waitFor(m_engine->removeContainer(id));
    QVERIFY2(changed.ok(), qPrintable(changed.error));
    QCOMPARE(QCoro::waitFor(m_engine->inspectContainer(id)).status, 404);
    listed = QCoro::waitFor(m_engine->listContainers({m_runLabel}));
    QCOMPARE(listed.json.array().size(), 0);
}

void DockerEngineTest::execTimesOut()
{
    QTemporaryDir workspace;
    const QString id = startSleeper(workspace.path());
    QVERIFY(!id.isEmpty());
    QElapsedTimer elapsed;
    elapsed.start();
    const DockerExecResult ran = QCoro::waitFor(m_engine->exec(id, {u"sleep"_s, u"30"_s}, 500ms));
    QVERIFY(!ran.ok());
    QVERIFY2(ran.error.contains(u"within 500 ms"_s), qPrintable(ran.error));
    QCOMPARE(ran.exitCode, -1);
    QVERIFY2(elapsed.elapsed() < 5000, qPrintable(QString::number(elapsed.elapsed())));
}

void DockerEngineTest::missingImageIsAClearError()
{
    DockerContainerSpec spec;
    spec.image = u"agentdeck-test:absent"_s;
    spec.labels = {{m_runLabel.split(u'=').at(0), m_runLabel.split(u'=').at(1)}};
    const DockerResult created = QCoro::waitFor(m_engine->createContainer(spec));
    QVERIFY(!created.ok());
    QCOMPARE(created.status, 404);
    QVERIFY2(created.error.contains(u"has no image agentdeck-test:absent"_s),
             qPrintable(created.error));
}

void DockerEngineTest::unreachableEngine_data()
{
    QTest::addColumn<QString>("kind");
    QTest::addRow("no socket file") << u"absent"_s;
    QTest::addRow("a socket nobody listens on") << u"bound"_s;
    QTest::addRow("a loopback port nobody listens on") << u"tcp"_s;
}

void DockerEngineTest::unreachableEngine()
{
    QFETCH(QString, kind);
    QTemporaryDir dir;
    const QString path = dir.filePath(u"docker.sock"_s);
    QString host = u"unix://"_s + path;
    // Bound and never listening: the file is there, and connecting is refused.
    int bound = -1;
    if (kind == "bound"_L1) {
        bound = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_un address{};
        address.sun_family = AF_UNIX;
        const QByteArray encoded = QFile::encodeName(path);
        QVERIFY(size_t(encoded.size()) < sizeof address.sun_path);
        std::memcpy(address.sun_path, encoded.constData(), size_t(encoded.size()));
        QVERIFY(::bind(bound, reinterpret_cast<sockaddr *>(&address), sizeof address) == 0);
        QVERIFY(QFile::exists(path));
    }
    const auto closeBound = qScopeGuard([bound] {
        if (bound >= 0)
            ::close(bound);
    });
    if (kind == "tcp"_L1) {
        QTcpServer probe;
        QVERIFY(probe.listen(QHostAddress::LocalHost, 0));
        host = u"tcp://127.0.0.1:%1"_s.arg(probe.serverPort());
    }
    DockerEngine engine(host);
    QVERIFY(engine.hostError().isEmpty());
    QElapsedTimer elapsed;
    elapsed.start();
    const DockerResult pong = QCoro::waitFor(engine.ping());
    const qint64 ms = elapsed.elapsed();
    qInfo("unreachable engine answered in %lld ms: %s", ms, qPrintable(pong.error));
    QVERIFY(!pong.ok());
    QCOMPARE(pong.status, 0);
    QVERIFY2(pong.error.contains(u"The Docker engine at "_s + host + u" is not reachable ("_s),
             qPrintable(pong.error));
    QVERIFY2(ms < 2000, qPrintable(QString::number(ms)));
}

void DockerEngineTest::silentEngineTimesOut_data()
{
    QTest::addColumn<bool>("overTcp");
    QTest::addRow("unix socket") << false;
    QTest::addRow("loopback tcp") << true;
}

void DockerEngineTest::silentEngineTimesOut()
{
    // Accepts the connection (the kernel does) and never answers: only the deadline ends the call.
    QFETCH(bool, overTcp);
    QTemporaryDir dir;
    QLocalServer silent;
    QTcpServer silentTcp;
    QString host;
    if (overTcp) {
        QVERIFY(silentTcp.listen(QHostAddress::LocalHost, 0));
        host = u"tcp://127.0.0.1:%1"_s.arg(silentTcp.serverPort());
    } else {
        QVERIFY(silent.listen(dir.filePath(u"docker.sock"_s)));
        host = u"unix://"_s + silent.fullServerName();
    }
    DockerEngine engine(host);
    engine.setDefaultTimeout(700ms);
    QElapsedTimer elapsed;
    elapsed.start();
    const DockerResult pong = QCoro::waitFor(engine.ping());
    const qint64 ms = elapsed.elapsed();
    qInfo("silent engine answered in %lld ms: %s", ms, qPrintable(pong.error));
    QVERIFY2(pong.error.contains(u"did not finish GET /_ping within 700 ms"_s),
             qPrintable(pong.error));
    QVERIFY2(ms >= 650 && ms < 2000, qPrintable(QString::number(ms)));
}

void DockerEngineTest::hostsAreChecked()
{
    QCOMPARE(DockerEngine(u"ftp://example"_s).hostError(),
             u"The Docker host ftp://example is neither unix:///path nor tcp://host:port"_s);
    QVERIFY(DockerEngine(u"tcp://127.0.0.1:1"_s).hostError().isEmpty());
    QVERIFY(DockerEngine(u"tcp://[::1]:2375"_s).hostError().isEmpty());
    QVERIFY(!DockerEngine(u"tcp://127.0.0.1"_s).hostError().isEmpty());
    QVERIFY(!DockerEngine(u"unix://relative.sock"_s).hostError().isEmpty());
    // A host it cannot use answers every call with why, at once.
    const DockerResult pong = QCoro::waitFor(DockerEngine(u"ftp://example"_s).ping());
    QVERIFY2(pong.error.contains(u"neither unix"_s), qPrintable(pong.error));
}

void DockerEngineTest::destroyedClientAnswersItsCalls()
{
    QTemporaryDir dir;
    QLocalServer silent;
    QVERIFY(silent.listen(dir.filePath(u"docker.sock"_s)));
    auto engine = std::make_unique<DockerEngine>(u"unix://"_s + silent.fullServerName());
    QCoro::Task<DockerResult> call = engine->ping();
    engine.reset();
    const DockerResult pong = QCoro::waitFor(std::move(call));
    QVERIFY2(pong.error.contains(u"was shut down"_s), qPrintable(pong.error));
}

void DockerEngineTest::demultiplexRejectsBrokenFrames()
{
    QByteArray out, err;
    const QByteArray frames =
        QByteArray("\x01\0\0\0\0\0\0\x02", 8) + "ab" + QByteArray("\x02\0\0\0\0\0\0\x01", 8) + "c";
    QVERIFY(DockerEngine::demultiplex(frames, &out, &err));
    QCOMPARE(out, "ab");
    QCOMPARE(err, "c");
    QVERIFY(!DockerEngine::demultiplex(frames.chopped(1), &out, &err)); // cut short
    QVERIFY(!DockerEngine::demultiplex(QByteArray("\x07\0\0\0\0\0\0\0", 8), &out, &err));
}

QTEST_GUILESS_MAIN(DockerEngineTest)
#include "tst_dockerengine.moc"
