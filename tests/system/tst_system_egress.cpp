// The `egress` network reaches public addresses only: a command's connections, tried as an
// attacker's would, against listeners in network namespaces the test makes itself (EgressWorld).
#include <QJsonArray>
#include <QJsonObject>
#include <QProcess>
#include <QStandardPaths>
#include <QTest>

#include "egressworld.h"
#include "serverprocess.h"

#include <unistd.h>

using namespace Qt::StringLiterals;
using namespace AgentDeck::Testing;

class SystemEgressTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        QString problem;
        QVERIFY2(m_fleet.findBinary(&problem), qPrintable(problem));
        if (::geteuid() != 0)
            QSKIP("the network namespaces of this test take root");
        QProcess bwrap;
        bwrap.start(u"bwrap"_s, {u"--ro-bind"_s, u"/"_s, u"/"_s, u"--unshare-net"_s, u"true"_s});
        if (!bwrap.waitForFinished(5000) || bwrap.exitCode() != 0)
            QSKIP("bubblewrap cannot create namespaces here");
        if (QStandardPaths::findExecutable(u"slirp4netns"_s).isEmpty() ||
            ::access("/dev/net/tun", R_OK | W_OK) != 0)
            QSKIP("slirp4netns is not installed, or there is no /dev/net/tun");
        QVERIFY2(!QStandardPaths::findExecutable(u"ip"_s).isEmpty(), "iproute2's ip is missing");
        problem = m_world.setUp();
        QVERIFY2(problem.isEmpty(), qPrintable(problem));
    }

    void cleanupTestCase() { m_fleet.cleanUp(); }

    void cleanup() { m_fleet.cleanUp(); }

    // Public addresses are reached; the host's own, private, shared, link-local ones and the
    // host's loopback are not, whatever the command does to the routing; an allowed range is.
    void egressReachesPublicAddressesOnly_data()
    {
        QTest::addColumn<bool>("unprivileged");
        QTest::addColumn<QStringList>("allowed");
        for (const bool unprivileged : {false, true}) {
            const char *user = unprivileged ? "nobody" : "root";
            QTest::addRow("server as %s", user) << unprivileged << QStringList();
            QTest::addRow("server as %s, 10.203.0.0/24 allowed", user)
                << unprivileged << QStringList{u"10.203.0.0/24"_s};
        }
    }
    void egressReachesPublicAddressesOnly()
    {
        QFETCH(bool, unprivileged);
        QFETCH(QStringList, allowed);
        QStringList arguments{u"--sandbox-network"_s, u"egress"_s};
        for (const QString &range : std::as_const(allowed))
            arguments << u"--sandbox-egress-allow"_s << range;
        ServerProcess &server = m_fleet.add({}, arguments);
        if (unprivileged)
            server.runAsUser(Nobody, NoGroup);
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));

        const QString row = QString::fromLatin1(QTest::currentDataTag()).replace(u' ', u'_');
        const QUuid id = server.create(
            QJsonObject{{u"agent"_s, QJsonObject{{u"kind"_s, u"shell"_s}}},
                        {u"initial_message"_s, userMessage(m_world.probeCommand(row), true)}});
        QVERIFY(!id.isNull());
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        const QString output = lastCommandOutput(server.events(id));
        QString problem = m_world.checkEgress(output, row, !allowed.isEmpty());
        QVERIFY2(problem.isEmpty(), qPrintable(problem));

        // Clients are told what is refused, in the conversation's runtime_info and /server_info.
        const QJsonObject inConversation = server.conversation(id)
                                               .value(u"runtime_info"_s)
                                               .toObject()
                                               .value(u"sandbox"_s)
                                               .toObject()
                                               .value(u"egress"_s)
                                               .toObject();
        const QJsonObject inServer = server.get(u"/server_info"_s)
                                         .object()
                                         .value(u"sandbox"_s)
                                         .toObject()
                                         .value(u"egress"_s)
                                         .toObject();
        QCOMPARE(inServer, inConversation);
        problem = EgressWorld::checkDescribed(inConversation, allowed);
        QVERIFY2(problem.isEmpty(), qPrintable(problem));
    }

    // A range that is not one stops the server at startup, saying so.
    void invalidAllowedRangeStopsStartup_data()
    {
        QTest::addColumn<QString>("range");
        QTest::addRow("prefix too long") << u"10.0.0.0/33"_s;
        QTest::addRow("IPv6") << u"fd00::/8"_s;
        QTest::addRow("not an address") << u"intranet"_s;
        QTest::addRow("empty") << QString();
    }
    void invalidAllowedRangeStopsStartup()
    {
        QFETCH(QString, range);
        ServerProcess &server = m_fleet.add(
            {}, {u"--sandbox-network"_s, u"egress"_s, u"--sandbox-egress-allow"_s, range});
        QVERIFY(!server.start());
        QVERIFY(server.waitForExit(10'000));
        QVERIFY(server.exitCode() != 0);
        QVERIFY2(server.stderrText().contains(u"--sandbox-egress-allow takes an IPv4 range"_s),
                 qPrintable(server.stderrText()));
    }

private:
    ServerFleet m_fleet;
    EgressWorld m_world;
};

QTEST_GUILESS_MAIN(SystemEgressTest)
#include "tst_system_egress.moc"
