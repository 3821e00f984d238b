// Replicas on one PostgreSQL catalog (a throwaway cluster) sharing one dockerd of the test's own
// (`--runtime docker`): a conversation has one container whichever replica runs it, a replica
// that takes a lapsed run over goes on in that container, and what a replica sweeps is what the
// catalog no longer has. Root only, as dockerd is.
#include <QJsonArray>
#include <QJsonObject>
#include <QTest>

#include <QCoroTask>

#include "dockerdaemon.h"
#include "postgrescluster.h"
#include "runtime/dockerengine.h"
#include "runtime/sandboxcontainers.h"
#include "serverprocess.h"

#include <csignal>
#include <unistd.h>

using namespace Qt::StringLiterals;
using namespace std::chrono_literals;
using namespace AgentDeck;
using namespace AgentDeck::Testing;

namespace {

const QString TestImage = QString::fromLatin1(DockerDaemon::TestImage);
// As tst_system_replicas: renewal every second, a frozen owner's lease lapses after 3 s.
constexpr int LeaseTtlMs = 3000;

} // namespace

class SystemDockerReplicasTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void init();
    void cleanup();
    void cleanupTestCase();

    void aReplicaTakingARunOverGoesOnInItsContainer();
    void whatIsSweptIsWhatTheCatalogNoLongerHas();

private:
    // A replica on the current test's database and the test's engine.
    ServerProcess &startReplica(const QString &name, const QStringList &more = {});
    // The containers of the conversation on the engine (by its label), whichever server made
    // them.
    QJsonArray containersOf(const QUuid &id);
    // A container as a replica of `catalog` would leave it for the conversation `conversation`.
    QString leaveContainer(const QString &catalog, const QUuid &conversation);
    bool exists(const QString &container);
    QString catalogIdentity();

    PostgresCluster m_cluster;
    QString m_databaseName;
    QUrl m_databaseUrl;
    int m_databases = 0;
    ServerFleet m_fleet;
    DockerDaemon m_daemon;
    std::unique_ptr<DockerEngine> m_engine;
};

void SystemDockerReplicasTest::initTestCase()
{
    if (::geteuid() != 0)
        QSKIP("dockerd runs as root only");
    QString problem;
    QVERIFY2(m_fleet.findBinary(&problem), qPrintable(problem));
    QVERIFY2(m_cluster.start(&problem), qPrintable(problem));
    QVERIFY2(m_daemon.startWithTestImage(&problem), qPrintable(problem));
    m_engine = m_daemon.client();
}

void SystemDockerReplicasTest::init()
{
    m_databaseName = u"dockerreplicas_%1"_s.arg(++m_databases);
    QString error;
    m_databaseUrl = m_cluster.createDatabase(m_databaseName, &error);
    QVERIFY2(m_databaseUrl.isValid(), qPrintable(error));
}

void SystemDockerReplicasTest::cleanup()
{
    m_fleet.cleanUp();
}

void SystemDockerReplicasTest::cleanupTestCase()
{
    m_engine.reset();
    m_daemon.stop();
}

ServerProcess &SystemDockerReplicasTest::startReplica(const QString &name, const QStringList &more)
{
    ServerProcess &replica = m_fleet.add(
        {}, QStringList{u"--database"_s, m_databaseUrl.toString(), u"--replica-id"_s, name,
                        u"--lease-ttl"_s, u"%1ms"_s.arg(LeaseTtlMs), u"--shutdown-grace"_s, u"0"_s,
                        u"--runtime"_s, u"docker"_s, u"--docker-host"_s, m_daemon.host(),
                        u"--sandbox-image"_s, TestImage} +
                more);
    if (!replica.startReady())
        qWarning().noquote() << name << "did not start:" << replica.stderrText();
    return replica;
}

QJsonArray SystemDockerReplicasTest::containersOf(const QUuid &id)
{
    const DockerResult listed = QCoro::waitFor(m_engine->listContainers(
        {u"%1=%2"_s.arg(QLatin1StringView(SandboxContainers::ConversationLabel), wireId(id))}));
    return listed.json.array();
}

QString SystemDockerReplicasTest::leaveContainer(const QString &catalog, const QUuid &conversation)
{
    DockerContainerSpec spec;
    spec.image = TestImage;
    spec.command = {u"sleep"_s, u"3600"_s};
    spec.labels = {{QLatin1StringView(SandboxContainers::ConversationLabel), wireId(conversation)},
                   {QLatin1StringView(SandboxContainers::CatalogLabel), catalog}};
    const DockerResult created = QCoro::waitFor(m_engine->createContainer(spec));
    return created.json.object().value(u"Id"_s).toString();
}

bool SystemDockerReplicasTest::exists(const QString &container)
{
    return QCoro::waitFor(m_engine->inspectContainer(container)).status != 404;
}

QString SystemDockerReplicasTest::catalogIdentity()
{
    QString error;
    const QString id =
        m_cluster.psql(m_databaseName, u"SELECT id FROM catalog_identity"_s, &error).trimmed();
    if (id.isEmpty())
        qWarning().noquote() << "no catalog identity:" << error;
    return id;
}

// Replica A runs a command that leaves a file in the container's /tmp and goes on running,
// and is frozen whole (server, sandbox host and the exec into the container, as a stopped
// machine is) past its lease. B takes the run over: its next command runs in the same
// container, the one the engine has of the conversation, with the file, and without A's
// command. A, back, lets the container be; a stop of the runtime through A, and a delete through
// B, remove it.
void SystemDockerReplicasTest::aReplicaTakingARunOverGoesOnInItsContainer()
{
    // A sweeps every second, and its sandbox host goes after 4 s idle.
    ServerProcess &a = startReplica(u"alpha"_s, {u"--sandbox-idle-timeout"_s, u"4s"_s});
    ServerProcess &b = startReplica(u"beta"_s);
    QVERIFY(a.isRunning() && b.isRunning());
    const QUuid id = a.create(shellCreate(u"echo kept > /tmp/mark; sleep 613"_s));
    QVERIFY(!id.isNull());
    // The sleep itself, in the container (the command lines of the host and the exec into the
    // container carry the whole command).
    const QByteArray sleeping("sleep\0"
                              "613\0",
                              10);
    QVERIFY2(QTest::qWaitFor([&] { return !processesWith(sleeping).isEmpty(); }, 30'000),
             qPrintable(observations(a, id).join(u'\n')));
    const QJsonArray before = containersOf(id);
    QCOMPARE(before.size(), 1);
    const QString container = before.at(0).toObject().value(u"Id"_s).toString();

    const QList<pid_t> frozen = processesWith(a.dataDir().toUtf8());
    QVERIFY(frozen.contains(pid_t(a.pid())));
    for (const pid_t pid : frozen)
        ::kill(pid, SIGSTOP);
    // Left stopped when the test fails: the fleet's clean-up kills them.
    const auto thaw = [&] {
        for (const pid_t pid : frozen)
            ::kill(pid, SIGCONT);
    };
    QVERIFY(QTest::qWaitFor(
        [&] { return b.post(conversationPath(id, u"recover"_s)).status == 200; }, 5 * LeaseTtlMs));
    QCOMPARE(b.status(id), u"paused"_s);

    // The same container: A's file in its /tmp, A's command ended.
    const QString output = runNext(b, id, u"cat /tmp/mark; ps -o args | grep -c '[s]leep 613'"_s);
    QVERIFY2(output.startsWith(u"kept\n0\n"_s), qPrintable(output + b.stderrText().right(3000)));
    const QJsonArray shared = containersOf(id);
    QCOMPARE(shared.size(), 1);
    QCOMPARE(shared.at(0).toObject().value(u"Id"_s).toString(), container);

    // A back: its fenced run lets its sandbox host go, and its sweeps run (one removes a
    // container of no conversation, left after A came back), but the container stays.
    thaw();
    // A's host has its runtime dir there (B's has its home there, the container's).
    const QByteArray hostOfA = "--runtime-dir\0"_ba +
                               QDir(a.dataDir()).filePath(u"runtimes/"_s + wireId(id)).toUtf8() +
                               "\0"_ba;
    QVERIFY2(QTest::qWaitFor([&] { return processesWith(hostOfA).isEmpty(); }, 5 * LeaseTtlMs),
             qPrintable(a.stderrText().right(3000)));
    const QString witness = leaveContainer(catalogIdentity(), QUuid::createUuid());
    QVERIFY(!witness.isEmpty());
    QTRY_VERIFY_WITH_TIMEOUT(!exists(witness), 15'000);
    QVERIFY(a.isRunning());
    QCOMPARE(containersOf(id).size(), 1);
    QCOMPARE(runNext(b, id, u"cat /tmp/mark"_s), u"kept\n"_s);
    QCOMPARE(containersOf(id).at(0).toObject().value(u"Id"_s).toString(), container);

    // A stop of the runtime through A is the conversation's: the container goes, though B's
    // sandbox took it last (and B, frozen, cannot remove it), and B's next command has a new
    // one.
    b.sendSignal(SIGSTOP);
    const bool stopped = a.call("DELETE", conversationPath(id, u"runtime"_s)).ok();
    const bool removed = QTest::qWaitFor([&] { return containersOf(id).isEmpty(); }, 15'000);
    b.sendSignal(SIGCONT);
    QVERIFY(stopped);
    QVERIFY(removed);
    QVERIFY(runNext(b, id, u"cat /tmp/mark"_s).contains(u"No such file"_s));
    QCOMPARE(containersOf(id).size(), 1);

    // Deleted through B, it goes.
    QVERIFY(b.call("DELETE", conversationPath(id)).ok());
    QTRY_COMPARE_WITH_TIMEOUT(containersOf(id).size(), 0, 15'000);
}

// Of the containers of the catalog, the one of a conversation it does not have is removed; one
// of a conversation it has, and one of another catalog, stay.
void SystemDockerReplicasTest::whatIsSweptIsWhatTheCatalogNoLongerHas()
{
    ServerProcess &a = startReplica(u"alpha"_s, {u"--sandbox-idle-timeout"_s, u"4s"_s});
    QVERIFY(a.isRunning());
    const QString catalog = catalogIdentity();
    QVERIFY(!catalog.isEmpty());
    const QUuid kept = a.create(QJsonObject{{u"agent"_s, QJsonObject{{u"kind"_s, u"shell"_s}}}});
    QVERIFY(!kept.isNull());
    const QString orphan = leaveContainer(catalog, QUuid::createUuid());
    const QString ofAConversation = leaveContainer(catalog, kept);
    const QString ofAnotherCatalog = leaveContainer(catalog + u"-other"_s, QUuid::createUuid());
    QVERIFY(!orphan.isEmpty() && !ofAConversation.isEmpty() && !ofAnotherCatalog.isEmpty());

    QTRY_VERIFY_WITH_TIMEOUT(!exists(orphan), 15'000);
    QVERIFY(exists(ofAConversation));
    QVERIFY(exists(ofAnotherCatalog));
    for (const QString &container : {ofAConversation, ofAnotherCatalog})
        QVERIFY(QCoro::waitFor(m_engine->removeContainer(container)).ok());
}

QTEST_GUILESS_MAIN(SystemDockerReplicasTest)
#include "tst_system_dockerreplicas.moc"
