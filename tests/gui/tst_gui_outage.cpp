// The console watching a real server process that is frozen (SIGSTOP), thawed and killed:
// what it shows, and how soon.
#include "consolecontroller.h"
#include "consolesettings.h"
#include "guitestmain.h"
#include "mainwindow.h"
#include "serverprocess.h"

#include <QApplication>
#include <QElapsedTimer>
#include <QJsonObject>
#include <QLabel>
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
