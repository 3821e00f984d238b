// The console following a real server's lifecycle feed: a conversation changed through another
// client (created, archived, deleted) changes in the console's list at once, with its poll an
// hour away; and LifecycleFeed, the feed's client, follows across a SIGKILL and restart of the
// server with every change once and in order.
#include "consolecontroller.h"
#include "feedrecorder.h"
#include "guitestmain.h"
#include "lifecyclefeed.h"
#include "serverprocess.h"

#include <QSignalSpy>
#include <QTcpServer>

#include <csignal>

using namespace AgentDeck;
using namespace AgentDeck::Testing;
using namespace Qt::StringLiterals;

namespace {
// A loopback port free now, for a server that must come back on the same one.
quint16 freePort()
{
    QTcpServer probe;
    probe.listen(QHostAddress::LocalHost, 0);
    return probe.serverPort();
}
} // namespace

class GuiConsoleFeedTest : public QObject
{
    Q_OBJECT

    ServerFleet m_fleet;

private Q_SLOTS:
    void initTestCase()
    {
        QString problem;
        if (!m_fleet.findBinary(&problem))
            QSKIP(qPrintable(problem));
    }
    void cleanup() { m_fleet.cleanUp(); }

    void changesElsewhereShowAtOnce()
    {
        ServerProcess &server = m_fleet.add({}, {u"--runtime"_s, u"process"_s});
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        ServerConnection connection(server.url());
        ConsoleController controller(&connection);
        QSignalSpy refreshed(&controller, &ConsoleController::refreshed);
        QSignalSpy records(&controller, &ConsoleController::lifecycleRecord);
        // Only the first refresh and the one when the feed connects read the list.
        controller.startRefreshing(std::chrono::hours(1));
        QTRY_VERIFY(controller.lifecycleFeed() && controller.lifecycleFeed()->isConnected());
        QTRY_VERIFY(!refreshed.isEmpty());
        ConversationListModel &list = *controller.conversations();

        const QUuid id = server.create({});
        QVERIFY(!id.isNull());
        QTRY_VERIFY_WITH_TIMEOUT(list.rowOf(id) >= 0, 5'000);
        QVERIFY(server.post(conversationPath(id, u"archive"_s)).ok());
        QTRY_VERIFY_WITH_TIMEOUT(list.rowOf(id) >= 0 && list.at(list.rowOf(id)).isArchived(),
                                 5'000);
        QCOMPARE(server.call("DELETE"_ba, conversationPath(id)).status, 200);
        QTRY_COMPARE_WITH_TIMEOUT(list.rowOf(id), -1, 5'000);
        QCOMPARE(records.size(), 3);
        QCOMPARE(records.at(1).at(0).toJsonObject().value(u"action"_s).toString(), u"archive"_s);
    }

    void theFeedFollowsAcrossARestart()
    {
        const QString dataDir = m_fleet.newDataDir();
        const QString listen = u"127.0.0.1:%1"_s.arg(freePort());
        ServerProcess &first = m_fleet.add(dataDir, {u"--runtime"_s, u"process"_s}, listen);
        QVERIFY2(first.startReady(), qPrintable(first.stderrText()));
        ServerConnection connection(first.url());
        LifecycleFeed *feed = connection.openLifecycleFeed(0);
        QList<QJsonObject> received;
        connect(feed, &LifecycleFeed::recordArrived, this,
                [&](const QJsonObject &record) { received.append(record); });
        QVERIFY(!first.create({}).isNull());
        QTRY_COMPARE(received.size(), 1);
        first.sendSignal(SIGKILL);
        QVERIFY(first.waitForExit(10'000));
        QTRY_VERIFY(!feed->isConnected());

        ServerProcess &second = m_fleet.add(dataDir, {u"--runtime"_s, u"process"_s}, listen);
        QVERIFY2(second.startReady(), qPrintable(second.stderrText()));
        // Made before the feed is back: it resumes after the last record it got.
        QVERIFY(!second.create({}).isNull());
        QTRY_VERIFY_WITH_TIMEOUT(feed->isConnected(), 15'000);
        QVERIFY(!second.create({}).isNull());
        QTRY_COMPARE_WITH_TIMEOUT(received.size(), 3, 10'000);
        QCOMPARE(received, auditedChanges(second));
        delete feed;
    }
};

AGENTDECK_GUI_TEST_MAIN(GuiConsoleFeedTest)

#include "tst_gui_consolefeed.moc"
