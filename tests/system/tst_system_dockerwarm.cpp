// `--runtime docker --sandbox-warm N` end to end: the real binary against a dockerd of the test's
// own and an image made without a registry (see tst_system_docker). Root only, as dockerd is.
#include <QJsonArray>
#include <QJsonObject>
#include <QTest>

#include <QCoroTask>

#include "dockerdaemon.h"
#include "runtime/dockerengine.h"
#include "runtime/sandboxcontainers.h"
#include "runtime/warmsandboxes.h"
#include "serverprocess.h"

#include <algorithm>
#include <unistd.h>

using namespace Qt::StringLiterals;
using namespace std::chrono_literals;
using namespace AgentDeck;
using namespace AgentDeck::Testing;

namespace {

const QString TestImage = QString::fromLatin1(DockerDaemon::TestImage);
constexpr int FillTimeoutMs = 60'000;

struct Warm
{
    QUuid id;
    QString container;
    friend bool operator==(const Warm &, const Warm &) = default;
};

QString runtimesOf(const QString &dataDir)
{
    return QDir(dataDir).filePath(u"runtimes"_s);
}

QString markerOf(const QString &dataDir, const QUuid &id)
{
    return QDir(runtimesOf(dataDir))
        .filePath(wireId(id) + u'/' + QLatin1StringView(WarmSandboxes::MarkerName));
}

bool holds(const QList<Warm> &warm, const QUuid &id)
{
    return std::any_of(warm.cbegin(), warm.cend(), [&](const Warm &one) { return one.id == id; });
}

} // namespace

class SystemDockerWarmTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void cleanup();
    void cleanupTestCase();

    void newConversationsTakeWarmContainers();
    void createsOfTheirOwnAreCold_data();
    void createsOfTheirOwnAreCold();
    void freeOnesOutliveAKilledServer();
    void extraAndDeadOnesAreRemoved();
    void warmOnesAreNeverIdle();
    void aPoolThatCannotFillIsSaid();

private:
    ServerProcess &warmServer(int count, const QString &dataDir, const QStringList &more = {});
    // The warm containers of the server on `dataDir` (by their labels), running or not.
    QJsonArray warmContainers(const QString &dataDir);
    // Those of them that are free (their reservation's marker is there) and running, by id.
    QList<Warm> freeWarm(const QString &dataDir);
    QString containerOf(const QUuid &id);

    ServerFleet m_fleet;
    DockerDaemon m_daemon;
    std::unique_ptr<DockerEngine> m_engine;
};

void SystemDockerWarmTest::initTestCase()
{
    if (::geteuid() != 0)
        QSKIP("dockerd runs as root only");
    QString problem;
    QVERIFY2(m_fleet.findBinary(&problem), qPrintable(problem));
    QVERIFY2(m_daemon.startWithTestImage(&problem), qPrintable(problem));
    m_engine = m_daemon.client();
}

void SystemDockerWarmTest::cleanup()
{
    m_fleet.cleanUp();
}

void SystemDockerWarmTest::cleanupTestCase()
{
    m_engine.reset();
    m_daemon.stop();
}

ServerProcess &SystemDockerWarmTest::warmServer(int count, const QString &dataDir,
                                                const QStringList &more)
{
    return m_fleet.add(dataDir, QStringList{u"--runtime"_s, u"docker"_s, u"--docker-host"_s,
                                            m_daemon.host(), u"--sandbox-image"_s, TestImage,
                                            u"--sandbox-warm"_s, QString::number(count)} +
                                    more);
}

QJsonArray SystemDockerWarmTest::warmContainers(const QString &dataDir)
{
    return containersLabelled(
        *m_engine,
        {u"%1=%2"_s.arg(QLatin1StringView(SandboxContainers::RuntimesLabel), runtimesOf(dataDir)),
         QLatin1StringView(SandboxContainers::WarmLabel)});
}

QList<Warm> SystemDockerWarmTest::freeWarm(const QString &dataDir)
{
    QList<Warm> free;
    for (const QJsonValue &entry : warmContainers(dataDir)) {
        const QJsonObject container = entry.toObject();
        const QUuid id(container.value(u"Labels"_s)
                           .toObject()
                           .value(QLatin1StringView(SandboxContainers::ConversationLabel))
                           .toString());
        if (container.value(u"State"_s).toString() == u"running"_s &&
            QFile::exists(markerOf(dataDir, id)))
            free.append({id, container.value(u"Id"_s).toString()});
    }
    std::sort(free.begin(), free.end(),
              [](const Warm &a, const Warm &b) { return a.id.toString() < b.id.toString(); });
    return free;
}

QString SystemDockerWarmTest::containerOf(const QUuid &id)
{
    const QJsonArray found = containersLabelled(
        *m_engine,
        {u"%1=%2"_s.arg(QLatin1StringView(SandboxContainers::ConversationLabel), wireId(id))});
    return found.size() == 1 ? found.at(0).toObject().value(u"Id"_s).toString() : QString();
}

void SystemDockerWarmTest::newConversationsTakeWarmContainers()
{
    const QString dataDir = m_fleet.newDataDir();
    ServerProcess &server = warmServer(2, dataDir);
    QVERIFY(server.startReady());
    QTRY_COMPARE_WITH_TIMEOUT(freeWarm(dataDir).size(), 2, FillTimeoutMs);
    QTRY_VERIFY_WITH_TIMEOUT(server.get(u"/metrics"_s).body.contains("agentdeck_sandboxes_warm 2"),
                             10'000);
    const QList<Warm> ready = freeWarm(dataDir);

    // The create takes one: its id, its container (running already), its workspace.
    const QUuid id = server.create(shellCreate(u"echo warm; pwd"_s));
    QVERIFY(!id.isNull());
    const auto taken =
        std::find_if(ready.cbegin(), ready.cend(), [&](const Warm &warm) { return warm.id == id; });
    QVERIFY2(taken != ready.cend(), qPrintable(wireId(id)));
    QVERIFY(!QFile::exists(markerOf(dataDir, id)));
    QVERIFY(server.waitForStatus(id, u"finished"_s));
    const QString workspace =
        server.conversation(id).value(u"workspace"_s).toObject().value(u"working_dir"_s).toString();
    QCOMPARE(workspace, QDir(dataDir).filePath(u"workspaces/"_s + wireId(id)));
    QCOMPARE(observations(server, id).value(0), u"warm\n"_s + workspace + u'\n');
    QCOMPARE(containerOf(id), taken->container);
    QVERIFY2(server.stderrText().contains(u"takes the warm container"_s),
             qPrintable(server.stderrText()));

    // The pool fills again, with another id.
    QTRY_COMPARE_WITH_TIMEOUT(freeWarm(dataDir).size(), 2, FillTimeoutMs);
    for (const Warm &warm : freeWarm(dataDir))
        QVERIFY(warm.id != id);
    QTRY_VERIFY_WITH_TIMEOUT(server.get(u"/metrics"_s).body.contains("agentdeck_sandboxes_warm 2"),
                             10'000);
    // A command after the first runs in the same container.
    QCOMPARE(runNext(server, id, u"echo again"_s), u"again\n"_s);
    QCOMPARE(containerOf(id), taken->container);
}

void SystemDockerWarmTest::createsOfTheirOwnAreCold_data()
{
    QTest::addColumn<QString>("own");
    QTest::addRow("its own id") << u"id"_s;
    QTest::addRow("its own working dir") << u"working dir"_s;
    QTest::addRow("its own sandbox settings") << u"sandbox"_s;
    QTest::addRow("its own image") << u"image"_s;
}

void SystemDockerWarmTest::createsOfTheirOwnAreCold()
{
    QFETCH(QString, own);
    QTemporaryDir callers(QDir::currentPath() + u"/callers-XXXXXX"_s);
    const QString dataDir = m_fleet.newDataDir();
    ServerProcess &server = warmServer(
        1, dataDir,
        {u"--workspace-root"_s, callers.path(), u"--sandbox-images"_s, u"agentdeck-test:*"_s});
    QVERIFY(server.startReady());
    QTRY_COMPARE_WITH_TIMEOUT(freeWarm(dataDir).size(), 1, FillTimeoutMs);
    const QList<Warm> ready = freeWarm(dataDir);

    QJsonObject body = shellCreate(u"echo cold"_s);
    const QUuid given = QUuid::createUuid();
    if (own == u"id"_s)
        body.insert(u"conversation_id"_s, wireId(given));
    else if (own == u"working dir"_s)
        body.insert(u"workspace"_s,
                    QJsonObject{{u"working_dir"_s, QDir(callers.path()).filePath(u"ws"_s)}});
    else if (own == u"sandbox"_s)
        body.insert(u"sandbox"_s, QJsonObject{{u"memory_bytes"_s, 256 * 1024 * 1024}});
    else
        body.insert(u"sandbox"_s, QJsonObject{{u"image"_s, u"agentdeck-test:other"_s}});
    if (own == u"image"_s) {
        // The same image under another name: not the one the warm containers were made of.
        QVERIFY(QCoro::waitFor(m_engine->request("POST", u"/images/%1/tag?repo=agentdeck-test&"
                                                         "tag=other"_s.arg(TestImage)))
                    .ok());
    }
    const QUuid id = server.create(body);
    QVERIFY(!id.isNull());
    if (own == u"id"_s)
        QCOMPARE(id, given);
    QVERIFY(server.waitForStatus(id, u"finished"_s));
    QCOMPARE(observations(server, id).value(0), u"cold\n"_s);
    // A container of its own; the warm one is still there, free.
    QVERIFY(id != ready.first().id);
    QVERIFY(!containerOf(id).isEmpty());
    QVERIFY(containerOf(id) != ready.first().container);
    QCOMPARE(freeWarm(dataDir), ready);
}

void SystemDockerWarmTest::freeOnesOutliveAKilledServer()
{
    const QString dataDir = m_fleet.newDataDir();
    ServerProcess &first = warmServer(2, dataDir);
    QVERIFY(first.startReady());
    QTRY_COMPARE_WITH_TIMEOUT(freeWarm(dataDir).size(), 2, FillTimeoutMs);
    const QList<Warm> before = freeWarm(dataDir);
    const QUuid claimed = first.create(shellCreate(u"echo one"_s));
    QVERIFY(holds(before, claimed));
    QVERIFY(first.waitForStatus(claimed, u"finished"_s));
    const QString claimedContainer = containerOf(claimed);
    first.kill();

    ServerProcess &second = warmServer(2, dataDir);
    QVERIFY(second.startReady());
    QTRY_COMPARE_WITH_TIMEOUT(freeWarm(dataDir).size(), 2, FillTimeoutMs);
    const QList<Warm> after = freeWarm(dataDir);
    // The free one the first server made is still there, the same container; the claimed one
    // is its conversation's, and not free again.
    for (const Warm &warm : before) {
        if (warm.id != claimed)
            QVERIFY(after.contains(warm));
    }
    QVERIFY(!holds(after, claimed));
    QCOMPARE(runNext(second, claimed, u"echo two"_s), u"two\n"_s);
    QCOMPARE(containerOf(claimed), claimedContainer);
    const QUuid next = second.create(shellCreate(u"echo three"_s));
    QVERIFY(next != claimed);
    QVERIFY(holds(after, next));
    QVERIFY(second.waitForStatus(next, u"finished"_s));
    QCOMPARE(observations(second, next).value(0), u"three\n"_s);
}

void SystemDockerWarmTest::extraAndDeadOnesAreRemoved()
{
    const QString dataDir = m_fleet.newDataDir();
    ServerProcess &first = warmServer(3, dataDir);
    QVERIFY(first.startReady());
    QTRY_COMPARE_WITH_TIMEOUT(freeWarm(dataDir).size(), 3, FillTimeoutMs);
    const QList<Warm> before = freeWarm(dataDir);
    first.kill();
    // One stops while no server runs.
    QVERIFY(QCoro::waitFor(m_engine->stopContainer(before.first().container, 1s)).ok());

    ServerProcess &second = warmServer(1, dataDir);
    QVERIFY(second.startReady());
    QTRY_COMPARE_WITH_TIMEOUT(warmContainers(dataDir).size(), 1, FillTimeoutMs);
    QTRY_COMPARE_WITH_TIMEOUT(freeWarm(dataDir).size(), 1, 10'000);
    const Warm kept = freeWarm(dataDir).first();
    QVERIFY(before.contains(kept));
    QVERIFY(kept != before.first());
    // The others went with their reservations' dirs.
    for (const Warm &warm : before) {
        if (warm == kept)
            continue;
        QTRY_VERIFY_WITH_TIMEOUT(
            !QFileInfo::exists(QDir(runtimesOf(dataDir)).filePath(wireId(warm.id))), 10'000);
        QVERIFY(!QFileInfo::exists(QDir(dataDir).filePath(u"workspaces/"_s + wireId(warm.id))));
    }
    QVERIFY2(second.stderrText().contains(u"--sandbox-warm is 1"_s),
             qPrintable(second.stderrText()));
    QTRY_VERIFY_WITH_TIMEOUT(second.get(u"/metrics"_s).body.contains("agentdeck_sandboxes_warm 1"),
                             10'000);
}

void SystemDockerWarmTest::warmOnesAreNeverIdle()
{
    const QString dataDir = m_fleet.newDataDir();
    ServerProcess &server = warmServer(
        1, dataDir, {u"--sandbox-idle-pause"_s, u"1s"_s, u"--sandbox-idle-timeout"_s, u"3s"_s});
    QVERIFY(server.startReady());
    QTRY_COMPARE_WITH_TIMEOUT(freeWarm(dataDir).size(), 1, FillTimeoutMs);
    const Warm warm = freeWarm(dataDir).first();
    // Its sandbox host is started ahead too.
    QFile pidFile(QDir(runtimesOf(dataDir)).filePath(wireId(warm.id) + u"/sandbox.pid"_s));
    QTRY_VERIFY_WITH_TIMEOUT(pidFile.exists(), 10'000);
    QVERIFY(pidFile.open(QIODevice::ReadOnly));
    const pid_t host = pidFile.readAll().trimmed().toInt();
    pidFile.close();
    QVERIFY(host > 0 && ::kill(host, 0) == 0);

    // A cold conversation beside it is paused, then its host stopped, for being idle...
    const QUuid cold = server.create(
        shellCreate(u"echo cold"_s, {{u"sandbox"_s, QJsonObject{{u"memory_bytes"_s, 1 << 28}}}}));
    QVERIFY(server.waitForStatus(cold, u"finished"_s));
    const auto status = [&](const QUuid &id) {
        return server.conversation(id)
            .value(u"runtime_info"_s)
            .toObject()
            .value(u"runtime_status"_s)
            .toString();
    };
    QTRY_COMPARE_WITH_TIMEOUT(status(cold), u"paused"_s, 15'000);
    QTRY_COMPARE_WITH_TIMEOUT(status(cold), u"missing"_s, 15'000);
    // ...while the warm one, idle as long, is neither.
    const QJsonObject state = QCoro::waitFor(m_engine->inspectContainer(warm.container))
                                  .json.object()
                                  .value(u"State"_s)
                                  .toObject();
    QVERIFY(state.value(u"Running"_s).toBool() && !state.value(u"Paused"_s).toBool());
    QCOMPARE(::kill(host, 0), 0);
    QCOMPARE(freeWarm(dataDir), QList<Warm>{warm});

    // Its conversation gets both.
    const QUuid id = server.create(shellCreate(u"echo warm"_s));
    QCOMPARE(id, warm.id);
    QVERIFY(server.waitForStatus(id, u"finished"_s));
    QCOMPARE(observations(server, id).value(0), u"warm\n"_s);
    QCOMPARE(server.get(conversationPath(id, u"runtime"_s))
                 .object()
                 .value(u"details"_s)
                 .toObject()
                 .value(u"sandbox_pid"_s)
                 .toInteger(),
             qint64(host));
    QCOMPARE(::kill(host, 0), 0);
}

void SystemDockerWarmTest::aPoolThatCannotFillIsSaid()
{
    // An image that is not on the engine: the engine's words in the log, no warm container, and
    // creates answered as without a pool.
    const QString dataDir = m_fleet.newDataDir();
    ServerProcess &server = m_fleet.add(
        dataDir, {u"--runtime"_s, u"docker"_s, u"--docker-host"_s, m_daemon.host(),
                  u"--sandbox-image"_s, u"agentdeck-test:absent"_s, u"--sandbox-warm"_s, u"2"_s});
    QVERIFY(server.startReady());
    QTRY_VERIFY2_WITH_TIMEOUT(server.stderrText().contains(u"cannot fill the warm pool"_s),
                              qPrintable(server.stderrText()), 20'000);
    QVERIFY2(server.stderrText().contains(u"agentdeck-test:absent"_s),
             qPrintable(server.stderrText()));
    QVERIFY(server.get(u"/metrics"_s).body.contains("agentdeck_sandboxes_warm 0"));
    QCOMPARE(warmContainers(dataDir).size(), 0);
    const QUuid id = server.create(QJsonObject{{u"title"_s, u"cold"_s}});
    QVERIFY(!id.isNull());
    QVERIFY(!QFile::exists(markerOf(dataDir, id)));
}

QTEST_GUILESS_MAIN(SystemDockerWarmTest)
#include "tst_system_dockerwarm.moc"
