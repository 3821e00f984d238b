// The console watching several real servers at once (the All servers window): their rows in
// one list with a Server column, one count across them, one of them killed while the other
// keeps working, and the servers remembered for the next start.
#include "addserverdialog.h"
#include "banner.h"
#include "commandline.h"
#include "consolecontroller.h"
#include "consolesettings.h"
#include "conversationview.h"
#include "embeddedserver.h"
#include "fleetwindow.h"
#include "guitestmain.h"
#include "mainwindow.h"
#include "storage/conversationstore.h"
#include "storage/database.h"

#include <QAction>
#include <QApplication>
#include <QColor>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDir>
#include <QFile>
#include <QInputDialog>
#include <QJsonObject>
#include <QLabel>
#include <QListWidget>
#include <QMenu>
#include <QMessageBox>
#include <QPushButton>
#include <QQuickWindow>
#include <QSettings>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>

using namespace Qt::StringLiterals;
using namespace AgentDeck;

class GuiFleetTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        AGENTDECK_GUI_TEST_INIT();
        // This process's own (AGENTDECK_GUI_TEST_MAIN), not one another GUI test clears.
        const QString settings = consoleSettings()->fileName();
        QVERIFY2(settings.startsWith(QDir::tempPath()), qPrintable(settings));
    }
    void init() { consoleSettings()->clear(); }
    void cleanup()
    {
        m_fleet.reset();
        for (auto &server : m_servers) {
            if (server)
                server->stop();
        }
        m_servers.clear();
        m_dirs.clear();
    }

    void twoServersInOneListOneKilled()
    {
        const QUrl alpha = startServer();
        const QUrl beta = startServer();
        QVERIFY(!alpha.isEmpty() && !beta.isEmpty());
        const QUuid first = create(alpha, u"on alpha"_s, u"exit 3"_s);
        const QUuid second = create(beta, u"on beta"_s);
        QVERIFY(!first.isNull() && !second.isNull());

        // Beta is added first: listed first while both answer.
        m_fleet = std::make_unique<FleetWindow>();
        m_fleet->addServer(beta);
        m_fleet->addServer(alpha);
        m_fleet->show();
        QVERIFY(QTest::qWaitForWindowExposed(m_fleet.get()));
        QTableView *view = m_fleet->conversationsView();
        QTRY_COMPARE_WITH_TIMEOUT(view->model()->rowCount(), 2, 10000);
        // The failed command needs attention, whichever server it is on; one count for all.
        QTRY_COMPARE_WITH_TIMEOUT(m_fleet->summary()->text(),
                                  u"Active (2), 1 needs attention · 2 servers"_s, 15000);
        // Each server by host:port: the scheme, the same for all, cut the rest off.
        const QString alphaLabel = u"127.0.0.1:%1"_s.arg(alpha.port());
        QCOMPARE(serverOf(view, u"on alpha"_s), alphaLabel);
        QCOMPARE(serverOf(view, u"on beta"_s), u"127.0.0.1:%1"_s.arg(beta.port()));
        QCOMPARE(m_fleet->serverList()->count(), 2);
        QVERIFY(m_fleet->serverList()->item(0)->text().startsWith(u"● "_s +
                                                                  serverOf(view, u"on beta"_s)));
        const int alphaRow = rowOf(view, u"on alpha"_s);
        QVERIFY(!view->model()
                     ->index(alphaRow, ConversationListModel::RuntimeColumn)
                     .data()
                     .toString()
                     .contains(u"as of"_s));

        // Alpha goes away: shown down within seconds, first in the list and tinted, its rows
        // greyed and their badges dated; beta goes on.
        m_servers.front()->stop();
        QTRY_VERIFY_WITH_TIMEOUT(m_fleet->serverList()->item(0)->text().startsWith(
                                     u"✕ "_s + alphaLabel + u" is down since"_s),
                                 6000);
        QListWidgetItem *alphaLine = m_fleet->serverList()->item(0);
        QVERIFY2(alphaLine->text().contains(u"refuses connections"_s),
                 qPrintable(alphaLine->text()));
        QVERIFY(alphaLine->font().bold());
        QCOMPARE(alphaLine->background().color(), QColor(0xffebee));
        QVERIFY(!m_fleet->serverList()->item(1)->font().bold());
        QCOMPARE(m_fleet->summary()->text(),
                 u"Active (2), 1 needs attention · 2 servers, 1 down"_s);
        QCOMPARE(view->model()->index(alphaRow, 0).data(Qt::ForegroundRole).value<QColor>(),
                 QColor(Qt::gray));
        const QString asOf =
            u" · as of "_s + m_fleet->controllerOf(alpha)->lastRefreshed().toString(u"HH:mm:ss"_s);
        for (const int column : {int(ConversationListModel::ExecutionColumn),
                                 int(ConversationListModel::RuntimeColumn)}) {
            const QModelIndex badge = view->model()->index(alphaRow, column);
            QVERIFY2(badge.data().toString().endsWith(asOf), qPrintable(badge.data().toString()));
            QVERIFY(badge.data(Qt::ToolTipRole).toString().contains(u"does not answer"_s));
            QVERIFY(badge.data(ConversationListModel::ServerDownRole).toBool());
        }
        QVERIFY(!view->model()
                     ->index(rowOf(view, u"on beta"_s), ConversationListModel::RuntimeColumn)
                     .data()
                     .toString()
                     .contains(u"as of"_s));
        QVERIFY(
            !view->model()->index(rowOf(view, u"on beta"_s), 0).data(Qt::ForegroundRole).isValid());
        const QUuid third = create(beta, u"new on beta"_s);
        QTRY_COMPARE_WITH_TIMEOUT(view->model()->rowCount(), 3, 10000);
        // Archived, it moves to the Archived tab.
        QVERIFY(
            QCoro::waitFor(ServerConnection(beta).conversationAction(third, u"archive"_s)).ok());
        QTRY_COMPARE_WITH_TIMEOUT(m_fleet->archivedView()->model()->rowCount(), 1, 10000);
        QCOMPARE(view->model()->rowCount(), 2);
        QCOMPARE(m_fleet->tabs()->tabText(1), u"Archived (1)"_s);
        QCOMPARE(m_fleet->tabs()->tabText(0), u"Active (2), 1 needs attention"_s);
        QVERIFY(m_fleet->serverList()->item(1)->text().startsWith(u"● "_s +
                                                                  serverOf(view, u"on beta"_s)));

        // A row opens in its server's window, selected there.
        view->setFocus();
        view->setCurrentIndex(view->model()->index(rowOf(view, u"on beta"_s), 0));
        QTest::keyClick(view, Qt::Key_Return);
        MainWindow *betaWindow = m_fleet->windowOf(beta);
        QVERIFY(betaWindow);
        QTRY_VERIFY(betaWindow->isVisible());
        QCOMPARE(m_fleet->controllerOf(beta)->selected(), second);

        // Remembered for the next start, and forgotten when removed.
        QCOMPARE(FleetWindow::rememberedServers(), (QList<QUrl>{beta, alpha}));
        m_fleet->removeServer(alpha);
        QCOMPARE(FleetWindow::rememberedServers(), (QList<QUrl>{beta}));
        QTRY_COMPARE(view->model()->rowCount(), 1);
        QCOMPARE(m_fleet->summary()->text(), u"Active (1) · 1 server"_s);
    }

    // The filter box finds in every server's rows, and what was said in a conversation on
    // any server; a down one's rows too, as they last were.
    void theFilterFindsAcrossServers()
    {
        const QUrl alpha = startServer();
        const QUrl beta = startServer();
        create(alpha, u"deploy web"_s, {}, {{u"team"_s, u"ops"_s}});
        create(beta, u"deploy db"_s);
        const QUuid nightly = create(beta, u"nightly"_s, u"printf 'seg%s\\n' fault"_s);
        QTableView *view = showFleet({alpha, beta});
        QTRY_COMPARE_WITH_TIMEOUT(view->model()->rowCount(), 3, 10000);
        // Its command ran and printed.
        QTRY_VERIFY_WITH_TIMEOUT(m_fleet->controllerOf(beta)
                                         ->conversations()
                                         ->conversation(nightly)
                                         .value_or(ConversationInfo{})
                                         .executionStatus == ExecutionStatus::Finished,
                                 15000);
        m_fleet->filterBox()->setText(u"deploy"_s);
        QCOMPARE(view->model()->rowCount(), 2);
        m_fleet->filterBox()->setText(u"team=ops"_s);
        QCOMPARE(view->model()->rowCount(), 1);
        QCOMPARE(serverOf(view, u"deploy web"_s), FleetWindow::hostAndPort(alpha));
        m_fleet->filterBox()->setText(u"segfault"_s);
        QTRY_COMPARE_WITH_TIMEOUT(view->model()->rowCount(), 1, 10000);
        QCOMPARE(serverOf(view, u"nightly"_s), FleetWindow::hostAndPort(beta));
        m_fleet->filterBox()->setText(u"nobody wrote this"_s);
        QTRY_COMPARE(view->model()->rowCount(), 0);
        m_fleet->filterBox()->clear();
        QCOMPARE(view->model()->rowCount(), 3);
    }

    // Titles sort as people read them across servers: build-2 before build-10.
    void titlesSortNaturallyAcrossServers()
    {
        const QUrl alpha = startServer();
        const QUrl beta = startServer();
        create(alpha, u"build-10"_s);
        create(beta, u"build-2"_s);
        create(alpha, u"build-1"_s);
        QTableView *view = showFleet({alpha, beta});
        QTRY_COMPARE_WITH_TIMEOUT(view->model()->rowCount(), 3, 10000);
        view->sortByColumn(ConversationListModel::TitleColumn, Qt::AscendingOrder);
        QCOMPARE(rowOf(view, u"build-1"_s), 0);
        QCOMPARE(rowOf(view, u"build-2"_s), 1);
        QCOMPARE(rowOf(view, u"build-10"_s), 2);
    }

    // A server's rows past what a refresh reads come as the All servers list is scrolled.
    void theListReadsMoreAsItIsScrolled()
    {
        constexpr int Seeded = ConsoleController::RefreshedRows + 25;
        const QUrl big = startServer({}, Seeded);
        const QUrl small = startServer();
        create(small, u"on the small one"_s);
        m_fleet = std::make_unique<FleetWindow>();
        m_fleet->addServer(big);
        m_fleet->addServer(small);
        m_fleet->show();
        QVERIFY(QTest::qWaitForWindowExposed(m_fleet.get()));
        QTableView *view = m_fleet->conversationsView();
        QTRY_COMPARE_WITH_TIMEOUT(view->model()->rowCount(), ConsoleController::RefreshedRows + 1,
                                  10000);
        QVERIFY(m_fleet->controllerOf(big)->hasMore(ArchiveFilter::Active));
        view->scrollToBottom();
        QTRY_COMPARE_WITH_TIMEOUT(view->model()->rowCount(), Seeded + 1, 10000);
        QVERIFY(!m_fleet->controllerOf(big)->hasMore(ArchiveFilter::Active));
    }

    // Add server… asks for the URL, a name and the key; a wrong URL is said, and Add waits.
    void aServerIsAddedInTheWindow()
    {
        const QUrl server = startServer({u"added-key"_s});
        create(server, u"added later"_s, {}, {}, u"added-key"_s);
        m_fleet = std::make_unique<FleetWindow>();
        m_fleet->show();
        QVERIFY(QTest::qWaitForWindowExposed(m_fleet.get()));
        QAction *add = nullptr;
        for (QAction *action : m_fleet->findChildren<QAction *>()) {
            if (action->text() == u"Add server…"_s)
                add = action;
        }
        QVERIFY(add);
        bool checked = false;
        QTimer::singleShot(0, this, [&] {
            auto *dialog = qobject_cast<AddServerDialog *>(QApplication::activeModalWidget());
            if (!dialog)
                return;
            QPushButton *ok = dialog->buttons()->button(QDialogButtonBox::Ok);
            QTest::keyClicks(dialog->urlField(), u"no such thing::"_s);
            const bool refused =
                !ok->isEnabled() && dialog->problem()->text().contains(u"is no server URL"_s);
            dialog->urlField()->setText(server.authority());
            dialog->nameField()->setText(u"  build   farm "_s);
            dialog->keyField()->setText(u"added-key"_s);
            checked =
                refused && ok->isEnabled() && dialog->keyField()->echoMode() == QLineEdit::Password;
            ok->click();
        });
        add->trigger();
        QVERIFY(checked);
        QCOMPARE(m_fleet->servers(), QList<QUrl>{server});
        // The key given is used: the server asks for one.
        QTRY_COMPARE_WITH_TIMEOUT(m_fleet->conversationsView()->model()->rowCount(), 1, 10000);
        QCOMPARE(serverOf(m_fleet->conversationsView(), u"added later"_s), u"build farm"_s);
        QCOMPARE(m_fleet->serverName(server), u"build farm"_s);
        QCOMPARE(FleetWindow::rememberedServers(), QList<QUrl>{server});
        // The name is remembered with it; the key is not in the settings file.
        m_fleet = std::make_unique<FleetWindow>();
        m_fleet->addServer(server);
        QCOMPARE(m_fleet->serverName(server), u"build farm"_s);
        consoleSettings()->sync();
        QFile settings(consoleSettings()->fileName());
        QVERIFY(settings.open(QIODevice::ReadOnly));
        QVERIFY(!settings.readAll().contains("added-key"));
        // A name taken away: host:port again.
        m_fleet->setServerName(server, {});
        QCOMPARE(m_fleet->serverName(server), FleetWindow::hostAndPort(server));
    }

    // The window opens where and as large as it was closed.
    void theWindowKeepsItsGeometry()
    {
        m_fleet = std::make_unique<FleetWindow>();
        m_fleet->show();
        QVERIFY(QTest::qWaitForWindowExposed(m_fleet.get()));
        m_fleet->resize(913, 587);
        QTRY_COMPARE(m_fleet->size(), QSize(913, 587));
        m_fleet->close();
        m_fleet = std::make_unique<FleetWindow>();
        QCOMPARE(m_fleet->size(), QSize(913, 587));
    }

    // host:port names a server, the port even where the scheme implies it, never a password.
    void serversAreNamedByHostAndPort()
    {
        QCOMPARE(FleetWindow::hostAndPort(QUrl(u"http://10.0.0.2:8000"_s)), u"10.0.0.2:8000"_s);
        QCOMPARE(FleetWindow::hostAndPort(QUrl(u"https://ops.example"_s)), u"ops.example:443"_s);
        QCOMPARE(FleetWindow::hostAndPort(QUrl(u"http://admin:secret@[::1]:9000/agentdeck"_s)),
                 u"[::1]:9000/agentdeck"_s);
    }

    // All servers acts as a server's window does: the status filter finds what needs attention
    // and what failed on every server, an action is done to the selected row on its server,
    // several rows on several servers at once (one question, one summary), from the tool bar,
    // the context menu and the shortcuts.
    void actionsAreDoneFromAllServers()
    {
        const QUrl alpha = startServer();
        const QUrl beta = startServer();
        create(alpha, u"alpha failed"_s, u"exit 3"_s);
        create(alpha, u"alpha fine"_s, u"true"_s);
        create(beta, u"beta failed"_s, u"exit 2"_s);
        create(beta, u"beta fine"_s, u"true"_s);
        QTableView *view = showFleet({alpha, beta});
        QVERIFY(QTest::qWaitForWindowExposed(m_fleet.get()));
        QTRY_COMPARE_WITH_TIMEOUT(view->model()->rowCount(), 4, 10000);
        QTRY_COMPARE_WITH_TIMEOUT(m_fleet->summary()->text(),
                                  u"Active (4), 2 need attention · 2 servers"_s, 15000);
        // Every command ran: a running one would be asked about before it is archived.
        const auto running = [view] {
            int count = 0;
            for (int row = 0; row < view->model()->rowCount(); ++row)
                count += view->model()->index(row, 0).data(
                             ConversationListModel::ExecutionStatusRole) == u"running"_s;
            return count;
        };
        QTRY_COMPARE_WITH_TIMEOUT(running(), 0, 15000);
        // How long each command ran, in its own column.
        const QString ran =
            view->model()
                ->index(rowOf(view, u"beta failed"_s), ConversationListModel::DurationColumn)
                .data()
                .toString();
        QVERIFY2(ran.startsWith(u"ran for "_s) && ran.endsWith(u" s"_s), qPrintable(ran));
        QVERIFY(!view->isColumnHidden(ConversationListModel::DurationColumn));
        QComboBox *statuses = m_fleet->statusFilter();
        statuses->setCurrentIndex(statuses->findData(u"failed"_s));
        QCOMPARE(titles(view), (QStringList{u"alpha failed"_s, u"beta failed"_s}));
        statuses->setCurrentIndex(statuses->findData(u"needs_attention"_s));
        QCOMPARE(titles(view), (QStringList{u"alpha failed"_s, u"beta failed"_s}));

        // One row: Dismiss, from the tool bar's action, on its server.
        QAction *dismiss = m_fleet->action(ConsoleController::Action::Dismiss);
        QVERIFY(!dismiss->isEnabled());
        view->selectRow(rowOf(view, u"alpha failed"_s));
        QVERIFY(dismiss->isEnabled());
        dismiss->trigger();
        QTRY_COMPARE_WITH_TIMEOUT(titles(view), QStringList{u"beta failed"_s}, 10000);
        // Failed still, acknowledged.
        statuses->setCurrentIndex(statuses->findData(u"failed"_s));
        QCOMPARE(titles(view), (QStringList{u"alpha failed"_s, u"beta failed"_s}));

        // The context menu offers the actions, enabled as the tool bar's.
        statuses->setCurrentIndex(0);
        view->clearSelection();
        view->selectRow(rowOf(view, u"beta fine"_s));
        QStringList offered;
        QTimer::singleShot(0, this, [&offered] {
            if (auto *menu = qobject_cast<QMenu *>(QApplication::activePopupWidget())) {
                for (QAction *item : menu->actions()) {
                    if (item->isEnabled() && !item->isSeparator())
                        offered.append(item->text());
                }
                menu->close();
            }
        });
        QMetaObject::invokeMethod(view, "customContextMenuRequested", Qt::DirectConnection,
                                  Q_ARG(QPoint, view->visualRect(view->currentIndex()).center()));
        QVERIFY2(offered.contains(u"Archive"_s) && offered.contains(u"Delete"_s) &&
                     !offered.contains(u"Dismiss"_s) && offered.first().startsWith(u"Open in "_s),
                 qPrintable(offered.join(u", "_s)));

        // Several rows on both servers: Ctrl+E archives them all, without a question (none
        // runs).
        view->selectAll();
        QCOMPARE(view->selectionModel()->selectedRows().size(), 4);
        QAction *archive = m_fleet->action(ConsoleController::Action::Archive);
        QVERIFY(archive->isEnabled());
        QCOMPARE(archive->toolTip(), u"4 of the 4 selected"_s);
        QVERIFY(!m_fleet->action(ConsoleController::Action::Reject)->isEnabled());
        m_fleet->activateWindow();
        QVERIFY(QTest::qWaitForWindowActive(m_fleet.get()));
        view->setFocus();
        QTest::keyClick(view, Qt::Key_E, Qt::ControlModifier);
        QTRY_COMPARE_WITH_TIMEOUT(m_fleet->archivedView()->model()->rowCount(), 4, 10000);
        QTRY_VERIFY(m_fleet->statusBar()->currentMessage().startsWith(u"Archive: 4 of 4 done"_s));

        // Deleted on both servers after one question.
        m_fleet->tabs()->setCurrentIndex(1);
        QTableView *archived = m_fleet->archivedView();
        archived->selectAll();
        QString asked;
        QTimer::singleShot(0, this, [&asked] {
            if (auto *box = qobject_cast<QMessageBox *>(QApplication::activeModalWidget())) {
                asked = box->text();
                box->button(QMessageBox::Yes)->click();
            }
        });
        m_fleet->action(ConsoleController::Action::Delete)->trigger();
        QCOMPARE(asked, u"Delete 4 conversations permanently? Their histories and server-owned "
                        "workspaces are removed."_s);
        QTRY_COMPARE_WITH_TIMEOUT(archived->model()->rowCount(), 0, 10000);
        QCOMPARE(QCoro::waitFor(ServerConnection(alpha).countConversations({})).value_or(-1), 0);
        QCOMPARE(QCoro::waitFor(ServerConnection(beta).countConversations({})).value_or(-1), 0);
    }

    // `--connect` twice kept the last; each one given is watched, once.
    void connectIsRepeatable()
    {
        QString error, message;
        const auto options =
            parseOptions({u"--connect"_s, u"127.0.0.1:8000"_s, u"--connect"_s,
                          u"http://10.0.0.2:8000"_s, u"--connect"_s, u"127.0.0.1:8000"_s},
                         &error, &message);
        QVERIFY2(options, qPrintable(error));
        QCOMPARE(options->connectUrls,
                 (QList<QUrl>{QUrl(u"http://127.0.0.1:8000"_s), QUrl(u"http://10.0.0.2:8000"_s)}));
        QCOMPARE(options->connectUrl, QUrl(u"http://127.0.0.1:8000"_s));
        QVERIFY(!parseOptions({u"--connect"_s, u"127.0.0.1:8000"_s, u"--connect"_s, u"::bad"_s},
                              &error, &message));
        QVERIFY2(error.startsWith(u"--connect takes"_s), qPrintable(error));
    }

    // A server that wants a key says so in the list of servers, and its own window, opened
    // afterwards, offers to enter it (it said "Connected", with no rows).
    void aServerAskingForItsKeySaysSoInBothWindows()
    {
        const QUrl keyed = startServer({u"fleet-key"_s});
        QVERIFY(!keyed.isEmpty());
        m_fleet = std::make_unique<FleetWindow>();
        m_fleet->addServer(keyed);
        m_fleet->show();
        QTRY_VERIFY_WITH_TIMEOUT(
            m_fleet->serverList()->item(0)->text().startsWith(
                u"⚠ "_s + FleetWindow::hostAndPort(keyed) + u" asks for its session API key"_s),
            10000);
        QCOMPARE(m_fleet->summary()->text(), u"Active (0) · 1 server, 1 asks for its key"_s);
        MainWindow *window = m_fleet->windowOf(keyed);
        window->show();
        QVERIFY(QTest::qWaitForWindowExposed(window));
        QVERIFY(window->bannerBar()->isVisible());
        QCOMPARE(window->bannerBar()->actionButton()->text(), u"Enter key…"_s);
        QCOMPARE(window->connectionState()->text(),
                 keyed.toString() + u" asks for its session API key"_s);
        // One server's rows: no Server column.
        QVERIFY(window->activeView()->isColumnHidden(ConversationListModel::ServerColumn));
    }

private:
    // `seeded` idle conversations are written into its catalogue before it starts.
    QUrl startServer(const QStringList &apiKeys = {}, int seeded = 0)
    {
        auto dir = std::make_unique<QTemporaryDir>();
        if (seeded > 0) {
            QString error;
            auto db = Database::openSqlite(dir->filePath(u"agentdeck.db"_s), &error);
            if (!db)
                return {};
            ConversationStore store(*db);
            Transaction transaction(*db);
            const QDateTime start = QDateTime::currentDateTimeUtc().addSecs(-seeded);
            for (int i = 0; i < seeded; ++i) {
                ConversationInfo info{QUuid::createUuid(), u"seeded %1"_s.arg(i)};
                info.createdAt = info.updatedAt = start.addSecs(i);
                info.agentKind = u"echo"_s;
                info.workingDir = dir->filePath(u"workspaces/"_s + toWireId(info.id));
                store.insert(info);
            }
            transaction.commit();
        }
        ServerConfig config;
        config.apiKeys = apiKeys;
        config.port = 0;
        config.dataDir = dir->path();
        config.sandboxProgram = qEnvironmentVariable("AGENTDECK_BINARY");
        config.shutdownGrace = std::chrono::seconds(2);
        auto server = std::make_unique<EmbeddedServer>(config);
        QString error;
        const QUrl url = server->start(&error);
        if (url.isEmpty())
            qWarning("cannot start a server: %s", qPrintable(error));
        m_dirs.push_back(std::move(dir));
        m_servers.push_back(std::move(server));
        return url;
    }
    static QUuid create(const QUrl &server, const QString &title, const QString &command = {},
                        QMap<QString, QString> tags = {}, const QString &apiKey = {})
    {
        ServerConnection client(server);
        client.setApiKey(apiKey);
        CreateConversationRequest request;
        request.title = title;
        request.tags = std::move(tags);
        if (!command.isEmpty())
            request.initialMessage = MessageRequest{u"user"_s, command, true};
        const ApiReply reply = QCoro::waitFor(client.createConversation(request));
        return parseWireId(reply.json.toObject().value(u"id"_s).toString()).value_or(QUuid());
    }
    // All servers on `servers`, shown; its Active list.
    QTableView *showFleet(const QList<QUrl> &servers)
    {
        m_fleet = std::make_unique<FleetWindow>();
        for (const QUrl &server : servers)
            m_fleet->addServer(server);
        m_fleet->show();
        return m_fleet->conversationsView();
    }
    static int rowOf(const QTableView *view, const QString &title)
    {
        for (int row = 0; row < view->model()->rowCount(); ++row) {
            if (view->model()->index(row, ConversationListModel::TitleColumn).data() == title)
                return row;
        }
        return -1;
    }
    static QStringList titles(const QTableView *view)
    {
        QStringList shown;
        for (int row = 0; row < view->model()->rowCount(); ++row)
            shown.append(
                view->model()->index(row, ConversationListModel::TitleColumn).data().toString());
        shown.sort();
        return shown;
    }
    static QString serverOf(const QTableView *view, const QString &title)
    {
        const int row = rowOf(view, title);
        return row < 0 ? QString()
                       : view->model()
                             ->index(row, ConversationListModel::ServerColumn)
                             .data()
                             .toString();
    }

    std::vector<std::unique_ptr<QTemporaryDir>> m_dirs;
    std::vector<std::unique_ptr<EmbeddedServer>> m_servers;
    std::unique_ptr<FleetWindow> m_fleet;
};

AGENTDECK_GUI_TEST_MAIN(GuiFleetTest)

#include "tst_gui_fleet.moc"
