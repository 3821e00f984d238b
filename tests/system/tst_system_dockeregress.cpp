// `--runtime docker` with the `egress` network: a container's commands reach what a bubblewrap
// sandbox's reach, and nothing else, tried as an attacker's would against listeners in network
// namespaces the test makes itself (EgressWorld), with a dockerd of the test's own inside them
// (DockerDaemon). Root only, as dockerd is.
#include <QJsonArray>
#include <QJsonObject>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTest>

#include <QCoroTask>

#include "dockerdaemon.h"
#include "egressworld.h"
#include "runtime/dockerengine.h"
#include "runtime/sandboxcontainers.h"
#include "serverprocess.h"

#include <unistd.h>

using namespace Qt::StringLiterals;
using namespace std::chrono_literals;
using namespace AgentDeck;
using namespace AgentDeck::Testing;

namespace {

const QString TestImage = QString::fromLatin1(DockerDaemon::TestImage);

QJsonObject sandboxInfo(ServerProcess &server, const QUuid &id)
{
    return server.conversation(id)
        .value(u"runtime_info"_s)
        .toObject()
        .value(u"sandbox"_s)
        .toObject();
}

} // namespace

class SystemDockerEgressTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        QString problem;
        QVERIFY2(m_fleet.findBinary(&problem), qPrintable(problem));
        if (::geteuid() != 0)
            QSKIP("dockerd and the network namespaces of this test take root");
        if (QStandardPaths::findExecutable(u"slirp4netns"_s).isEmpty() ||
            ::access("/dev/net/tun", R_OK | W_OK) != 0)
            QSKIP("slirp4netns is not installed, or there is no /dev/net/tun");
        QVERIFY2(!QStandardPaths::findExecutable(u"ip"_s).isEmpty(), "iproute2's ip is missing");
        // The namespaces first: dockerd and its containers are made in them.
        problem = m_world.setUp();
        QVERIFY2(problem.isEmpty(), qPrintable(problem));
        QVERIFY2(m_daemon.startWithTestImage(&problem, true), qPrintable(problem));
        m_engine = m_daemon.client();
    }

    void cleanup() { m_fleet.cleanUp(); }

    void cleanupTestCase()
    {
        m_fleet.cleanUp();
        m_engine.reset();
        m_daemon.stop();
    }

    // Public addresses are reached; the host's own, private, shared, link-local ones and the
    // host's loopback are not, whatever the command does to the routing; an allowed range is.
    // The network is each command's: the second command of a container (whose namespace kept
    // the first one's rules) and one after the container was stopped and started again (a
    // namespace of its own) are filtered the same.
    void egressReachesPublicAddressesOnly_data()
    {
        QTest::addColumn<QStringList>("allowed");
        QTest::addRow("nothing allowed") << QStringList();
        QTest::addRow("10.203.0.0/24 allowed") << QStringList{u"10.203.0.0/24"_s};
    }
    void egressReachesPublicAddressesOnly()
    {
        QFETCH(QStringList, allowed);
        QStringList arguments{u"--sandbox-network"_s, u"egress"_s, u"--sandbox-idle-stop"_s,
                              u"3s"_s};
        for (const QString &range : std::as_const(allowed))
            arguments << u"--sandbox-egress-allow"_s << range;
        ServerProcess &server = dockerServer(m_daemon.host(), arguments);
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));

        const QString row = QString::fromLatin1(QTest::currentDataTag()).replace(u' ', u'_');
        const QUuid id = server.create(shellCreate(m_world.probeCommand(row + u"-1"_s)));
        QVERIFY(!id.isNull());
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        QString problem = m_world.checkEgress(observations(server, id).value(0), row + u"-1"_s,
                                              !allowed.isEmpty());
        QVERIFY2(problem.isEmpty(), qPrintable(problem));

        const QString again = runNext(server, id, m_world.probeCommand(row + u"-2"_s));
        problem = m_world.checkEgress(again, row + u"-2"_s, !allowed.isEmpty());
        QVERIFY2(problem.isEmpty(), qPrintable(problem));

        // Stopped for being idle, started again by the next command: a new namespace.
        QTRY_COMPARE_WITH_TIMEOUT(server.conversation(id)
                                      .value(u"runtime_info"_s)
                                      .toObject()
                                      .value(u"runtime_status"_s)
                                      .toString(),
                                  u"stopped"_s, 20'000);
        // The engine's stop (a second's grace) ends after runtime_info says so.
        const QString label =
            u"%1=%2"_s.arg(QLatin1StringView(SandboxContainers::ConversationLabel), wireId(id));
        QTRY_COMPARE_WITH_TIMEOUT(QCoro::waitFor(m_engine->listContainers({label}))
                                      .json.array()
                                      .at(0)
                                      .toObject()
                                      .value(u"State"_s)
                                      .toString(),
                                  u"exited"_s, 20'000);
        const QString restarted = runNext(server, id, m_world.probeCommand(row + u"-3"_s));
        problem = m_world.checkEgress(restarted, row + u"-3"_s, !allowed.isEmpty());
        QVERIFY2(problem.isEmpty(), qPrintable(problem));

        // Clients are told what is refused, as for the local runtime.
        const QJsonObject sandbox = sandboxInfo(server, id);
        QVERIFY2(sandbox.value(u"not_enforced"_s).toArray().isEmpty(),
                 QJsonDocument(sandbox).toJson().constData());
        problem = EgressWorld::checkDescribed(sandbox.value(u"egress"_s).toObject(), allowed);
        QVERIFY2(problem.isEmpty(), qPrintable(problem));
    }

    // With network none the container reaches nothing at all.
    void noNetworkReachesNothing()
    {
        ServerProcess &server = dockerServer(m_daemon.host(), {u"--sandbox-network"_s, u"none"_s});
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QUuid id = server.create(shellCreate(m_world.probeCommand(u"none"_s)));
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        const QString problem = m_world.checkNoNetwork(observations(server, id).value(0));
        QVERIFY2(problem.isEmpty(), qPrintable(problem));
    }

    // An engine on another host (tcp://): the network would be attached here, to a namespace
    // that is not here. The command runs without one, and runtime_info says so.
    void aRemoteEngineGivesNoNetwork()
    {
        ServerProcess &server =
            dockerServer(m_daemon.tlsHost(), {u"--docker-tls-dir"_s, m_daemon.tlsDirectory(),
                                              u"--sandbox-network"_s, u"egress"_s});
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QUuid id = server.create(shellCreate(m_world.probeCommand(u"remote"_s)));
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        const QString problem = m_world.checkNoNetwork(observations(server, id).value(0));
        QVERIFY2(problem.isEmpty(), qPrintable(problem));
        const QJsonObject sandbox = sandboxInfo(server, id);
        QVERIFY(!sandbox.contains(u"egress"_s));
        const QString unenforced = sandbox.value(u"not_enforced"_s).toArray().at(0).toString();
        QVERIFY2(unenforced.startsWith(u"network egress: the Docker engine is not on this host"_s),
                 qPrintable(unenforced));
    }

    // What a container's files take: its workspace and home, walked again as they change, and
    // its writable layer, in runtime_info.usage and, summed, in /metrics.
    void diskUseIsMeasured()
    {
        ServerProcess &server = dockerServer(m_daemon.host(), {});
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        constexpr qint64 Written = 3'000'000;
        const QUuid id = server.create(
            shellCreate(u"head -c %1 /dev/urandom > written && echo done"_s.arg(Written)));
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        QVERIFY2(observations(server, id).value(0).contains(u"done"_s),
                 qPrintable(observations(server, id).value(0)));
        const auto disk = [&server, &id] {
            return server.conversation(id)
                .value(u"runtime_info"_s)
                .toObject()
                .value(u"usage"_s)
                .toObject()
                .value(u"disk_bytes"_s)
                .toInteger(-1);
        };
        QTRY_VERIFY2_WITH_TIMEOUT(disk() >= Written, qPrintable(QString::number(disk())), 30'000);
        const QByteArray metrics = server.get(u"/metrics"_s).body;
        static const QRegularExpression total(u"^agentdeck_sandbox_disk_bytes (\\d+)$"_s,
                                              QRegularExpression::MultilineOption);
        QVERIFY2(total.match(QString::fromLatin1(metrics)).captured(1).toLongLong() >= Written,
                 metrics.constData());
        QVERIFY(runNext(server, id, u"rm written; echo gone"_s).contains(u"gone"_s));
        QTRY_VERIFY2_WITH_TIMEOUT(disk() >= 0 && disk() < Written,
                                  qPrintable(QString::number(disk())), 30'000);
        // Nothing limits the container's own layer, and nothing is written there.
        QVERIFY2(sandboxInfo(server, id)
                     .value(u"container_disk_limit"_s)
                     .toString()
                     .startsWith(u"not set"_s),
                 QJsonDocument(sandboxInfo(server, id)).toJson().constData());
    }

private:
    ServerProcess &dockerServer(const QString &engine, const QStringList &more)
    {
        return m_fleet.add({}, QStringList{u"--runtime"_s, u"docker"_s, u"--docker-host"_s, engine,
                                           u"--sandbox-image"_s, TestImage} +
                                   more);
    }

    ServerFleet m_fleet;
    EgressWorld m_world;
    DockerDaemon m_daemon;
    std::unique_ptr<DockerEngine> m_engine;
};

QTEST_GUILESS_MAIN(SystemDockerEgressTest)
#include "tst_system_dockeregress.moc"
