// The console watching a real server process that is frozen (SIGSTOP), thawed and killed:
// what it shows, and how soon.
#include "consolecontroller.h"
#include "consolesettings.h"
#include "detailspane.h"
#include "fleetwindow.h"
#include "guitestmain.h"
#include "mainwindow.h"
#include "serverprocess.h"

#include <QApplication>
#include <QColor>
#include <QElapsedTimer>
#include <QJsonObject>
#include <QLabel>
#include <QListWidget>
#include <QPushButton>
#include <QQuickWindow>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTableView>
#include <QTest>

#include <csignal>

using namespace AgentDeck;
using namespace AgentDeck::Testing;
using namespace Qt::StringLiterals;

class GuiOutageTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        QString problem;
        if (!m_fleet.findBinary(&problem))
            QSKIP(qPrintable(problem));
        // The window opens as it first does, whatever layout a developer's console left.
        QStandardPaths::setTestModeEnabled(true);
        consoleSettings()->clear();
    }
    void cleanup()
    {
        m_window.reset();
        m_controller.reset();
        m_connection.reset();
        if (m_server && m_server->isRunning())
            m_server->sendSignal(SIGCONT);
        m_fleet.cleanUp();
        m_server = nullptr;
    }

    // Frozen, the server answers nothing, but its socket is open: the list said "Connected" and
    // its rows stayed live for the 30 s a request waits. Within ~5 s now, and back as soon.
    void aFrozenServerIsShownWithinSeconds()
    {
        openConsole();
        m_server->sendSignal(SIGSTOP);
        const qint64 frozenMs = waitForReachability(false);
        qInfo("a frozen server shown as not answering after %lld ms", frozenMs);
        QVERIFY2(frozenMs >= 0 && frozenMs <= Deadline, qPrintable(QString::number(frozenMs)));
        QVERIFY2(m_window->connectionState()->text().contains(u"the list is as of"_s),
                 qPrintable(m_window->connectionState()->text()));
        QVERIFY(m_window->banner()->isVisible());
        QVERIFY(m_window->banner()->text().contains(u"does not answer"_s));
        // The row is what the server last said: no action on it, and the reason.
        QPushButton *archive = m_window->actionButton(ConsoleController::Action::Archive);
        QVERIFY(!archive->isEnabled());
        QVERIFY(archive->toolTip().contains(u"does not answer"_s));
        QVERIFY(m_window->activeView()->styleSheet().contains(u"gray"_s));

        m_server->sendSignal(SIGCONT);
        const qint64 thawedMs = waitForReachability(true);
        qInfo("a thawed server shown as answering after %lld ms", thawedMs);
        QVERIFY2(thawedMs >= 0 && thawedMs <= Deadline, qPrintable(QString::number(thawedMs)));
        QVERIFY(m_window->connectionState()->text().startsWith(u"Connected to"_s));
        QVERIFY(!m_window->banner()->isVisible());
        QTRY_VERIFY(archive->isEnabled());
        QVERIFY(m_window->activeView()->styleSheet().isEmpty());
    }

    void aKilledServerIsShownWithinSeconds()
    {
        openConsole();
        m_server->kill();
        const qint64 killedMs = waitForReachability(false);
        qInfo("a killed server shown as not answering after %lld ms", killedMs);
        QVERIFY2(killedMs >= 0 && killedMs <= Deadline, qPrintable(QString::number(killedMs)));
        QVERIFY(!m_window->actionButton(ConsoleController::Action::Archive)->isEnabled());
    }

    // All servers tells a frozen server from a stopped one: "not answering", tinted amber, and
    // "down"; both listed before the one that answers. A server window's details stop counting
    // its lease down.
    void aFrozenServerIsToldFromADownOne()
    {
        ServerProcess &answering = m_fleet.add();
        ServerProcess &frozen = m_fleet.add();
        ServerProcess &stopped = m_fleet.add();
        for (ServerProcess *server : {&answering, &frozen, &stopped})
            QVERIFY2(server->startReady(), qPrintable(server->stderrText()));
        // Running, it holds its lease.
        const Reply created =
            frozen.post(u"/api/conversations"_s,
                        QJsonObject{{u"agent"_s, QJsonObject{{u"kind"_s, u"shell"_s}}},
                                    {u"title"_s, u"f"_s},
                                    {u"initial_message"_s, userMessage(u"sleep 300"_s, true)}});
        QVERIFY2(created.status == 201, created.body.constData());
        FleetWindow fleet;
        for (ServerProcess *server : {&answering, &frozen, &stopped})
            fleet.addServer(server->url());
        fleet.show();
        QVERIFY(QTest::qWaitForWindowExposed(&fleet));
        QTRY_COMPARE_WITH_TIMEOUT(fleet.conversationsView()->model()->rowCount(), 1, 10000);
        QTRY_VERIFY(fleet.controllerOf(frozen.url())->lastRefreshed().isValid());
        // Its window, with the conversation's details read.
        MainWindow *window = fleet.windowOf(frozen.url());
        window->show();
        QTRY_COMPARE(window->activeView()->model()->rowCount(), 1);
        window->activeView()->selectRow(0);
        QTRY_VERIFY(window->details()->hasRuntimeDetails());
        QTRY_VERIFY_WITH_TIMEOUT(
            window->details()->text(DetailsPane::Row::Owner).contains(u" left"_s), 10000);

        m_server = &frozen; // thawed by cleanup()
        frozen.sendSignal(SIGSTOP);
        stopped.kill();
        const QString frozenLabel = FleetWindow::hostAndPort(frozen.url());
        const QString stoppedLabel = FleetWindow::hostAndPort(stopped.url());
        QListWidget *servers = fleet.serverList();
        const auto lineOf = [servers](const QString &label) -> QListWidgetItem * {
            for (int row = 0; row < servers->count(); ++row) {
                if (servers->item(row)->text().mid(2).startsWith(label + u' '))
                    return servers->item(row);
            }
            return nullptr;
        };
        QTRY_VERIFY_WITH_TIMEOUT(
            lineOf(frozenLabel) && lineOf(frozenLabel)->text().startsWith(u"⏸ "_s), Deadline * 2);
        QTRY_VERIFY_WITH_TIMEOUT(lineOf(stoppedLabel)->text().startsWith(u"✕ "_s), Deadline);
        QVERIFY2(lineOf(frozenLabel)->text().contains(u"is not answering since"_s),
                 qPrintable(lineOf(frozenLabel)->text()));
        QVERIFY2(lineOf(stoppedLabel)->text().contains(u"is down since"_s),
                 qPrintable(lineOf(stoppedLabel)->text()));
        QCOMPARE(lineOf(frozenLabel)->background().color(), QColor(0xfff3e0));
        QCOMPARE(lineOf(stoppedLabel)->background().color(), QColor(0xffebee));
        QVERIFY(servers->item(2)->text().startsWith(u"● "_s));
        QVERIFY(fleet.summary()->text().endsWith(u"3 servers, 1 down, 1 not answering"_s));

        // The frozen server's row: greyed badges as of its last answer, and no countdown.
        const QString asOf =
            fleet.controllerOf(frozen.url())->lastRefreshed().toString(u"HH:mm:ss"_s);
        const QModelIndex badge =
            fleet.conversationsView()->model()->index(0, ConversationListModel::RuntimeColumn);
        QVERIFY2(badge.data().toString().endsWith(u"as of "_s + asOf),
                 qPrintable(badge.data().toString()));
        const QString owner = window->details()->text(DetailsPane::Row::Owner);
        QVERIFY2(!owner.contains(u" left"_s) && !owner.contains(u"lapsed"_s) &&
                     owner.contains(u"as the server last said at "_s + asOf),
                 qPrintable(owner));
        window->close();
    }

private:
    static constexpr qint64 Deadline = 5'000;

    // A server with one conversation, and the console on it with that row selected.
    void openConsole()
    {
        m_server = &m_fleet.add();
        QVERIFY2(m_server->startReady(), qPrintable(m_server->stderrText()));
        const Reply created = m_server->post(
            u"/api/conversations"_s,
            QJsonObject{{u"agent"_s, QJsonObject{{u"kind"_s, u"echo"_s}}}, {u"title"_s, u"w"_s}});
        QVERIFY2(created.status == 201, created.body.constData());
        m_connection = std::make_unique<ServerConnection>(m_server->url());
        m_controller = std::make_unique<ConsoleController>(m_connection.get());
        m_window = std::make_unique<MainWindow>(m_controller.get(), m_server->url());
        m_window->show();
        QVERIFY(QTest::qWaitForWindowExposed(m_window.get()));
        m_controller->startRefreshing(std::chrono::seconds(3));
        QTRY_COMPARE(m_window->activeView()->model()->rowCount(), 1);
        m_window->activeView()->selectRow(0);
        QTRY_VERIFY(m_window->actionButton(ConsoleController::Action::Archive)->isEnabled());
    }

    // How long until the console says the server is (not) reachable; -1 if not in 10 s.
    qint64 waitForReachability(bool reachable)
    {
        QSignalSpy changes(m_controller.get(), &ConsoleController::reachabilityChanged);
        QElapsedTimer timer;
        timer.start();
        const bool changed = QTest::qWaitFor(
            [&] { return !changes.isEmpty() && changes.last().at(0).toBool() == reachable; },
            10'000);
        return changed ? timer.elapsed() : -1;
    }

    ServerFleet m_fleet;
    ServerProcess *m_server = nullptr;
    std::unique_ptr<ServerConnection> m_connection;
    std::unique_ptr<ConsoleController> m_controller;
    std::unique_ptr<MainWindow> m_window;
};

AGENTDECK_GUI_TEST_MAIN(GuiOutageTest)

#include "tst_gui_outage.moc"
