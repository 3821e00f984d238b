// The console's Activity view, by clicking: who changed what, when and why, on a server with
// named keys (two operators, two clients), filtered by typing an actor's name and by result,
// a conversation's own records in its details pane, and every server's in All servers.
#include "activityloader.h"
#include "activityview.h"
#include "consolecontroller.h"
#include "consolesettings.h"
#include "detailspane.h"
#include "embeddedserver.h"
#include "fleetwindow.h"
#include "guitestmain.h"
#include "lifecyclefeed.h"
#include "mainwindow.h"

#include <QComboBox>
#include <QDockWidget>
#include <QFile>
#include <QLabel>
#include <QLineEdit>
#include <QListView>
#include <QPushButton>
#include <QScrollBar>
#include <QSignalSpy>
#include <QTabBar>
#include <QTabWidget>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>
#include <QToolBar>
#include <QToolButton>

using namespace Qt::StringLiterals;
using namespace AgentDeck;

namespace {
const QString AliceKey = u"alice-key-1f2e3d"_s;
const QString BobKey = u"bob-key-4c5b6a"_s;

// The rows `view` shows, each as "actor | action | conversation | reason | result".
QStringList rowsOf(const QTableView *view)
{
    QStringList rows;
    const QAbstractItemModel *model = view->model();
    for (int row = 0; row < model->rowCount(); ++row) {
        QStringList cells;
        for (const int column : {ActivityModel::ActorColumn, ActivityModel::ActionColumn,
                                 ActivityModel::ConversationColumn, ActivityModel::ReasonColumn,
                                 ActivityModel::ResultColumn})
            cells.append(model->index(row, column).data().toString());
        rows.append(cells.join(u" | "_s));
    }
    return rows;
}

QStringList columnOf(const QTableView *view, int column)
{
    QStringList cells;
    for (int row = 0; row < view->model()->rowCount(); ++row)
        cells.append(view->model()->index(row, column).data().toString());
    return cells;
}

void click(QWidget *widget)
{
    QTest::mouseClick(widget, Qt::LeftButton);
}

void clickRow(QTableView *view, int row)
{
    const QRect cell = view->visualRect(view->model()->index(row, 0));
    QTest::mouseClick(view->viewport(), Qt::LeftButton, {}, cell.center());
}
} // namespace

class GuiActivityTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { AGENTDECK_GUI_TEST_INIT(); }
    void init() { consoleSettings()->clear(); }
    void cleanup()
    {
        m_window.reset();
        m_fleet.reset();
        m_controller.reset();
        m_connection.reset();
        for (auto &server : m_servers)
            server->stop();
        m_servers.clear();
        m_dirs.clear();
        ServerConnection::setClientName(u"console"_s);
    }

    void whoDidWhatAndWhy()
    {
        const QUrl server = startServer(u"ops-alice %1\nops-bob %2\n"_s.arg(AliceKey, BobKey));
        QVERIFY(!server.isEmpty());
        // Alice archives one from the console, Bob deletes another with ctl, and tries to run
        // the archived one: refused.
        ServerConnection::setClientName(u"console"_s);
        const QUuid deploy = create(server, AliceKey, u"deploy web"_s);
        const QUuid old = create(server, AliceKey, u"old build"_s);
        QVERIFY(!deploy.isNull() && !old.isNull());
        QCOMPARE(change(server, AliceKey, "POST", deploy, u"archive"_s, u"ticket 42"_s), 200);
        ServerConnection::setClientName(u"ctl"_s);
        QCOMPARE(change(server, BobKey, "DELETE", old, {}, u"cleanup after the release"_s), 200);
        QCOMPARE(change(server, BobKey, "POST", deploy, u"run"_s, u"try again"_s), 409);
        ServerConnection::setClientName(u"console"_s);

        MainWindow *window = showWindow(server, AliceKey);
        QVERIFY(!window->activityDock()->isVisible());
        click(window->activityButton());
        QTRY_VERIFY(window->activityDock()->isVisible());
        ActivityView *activity = window->activity();
        QTableView *table = activity->table();
        QTRY_COMPARE_WITH_TIMEOUT(table->model()->rowCount(), 5, 10000);
        // Newest first; one server: no Server column.
        QCOMPARE(
            rowsOf(table),
            (QStringList{
                u"ops-bob via ctl | run | deploy web | try again | refused (409)"_s,
                u"ops-bob via ctl | delete | %1 | cleanup after the release | done"_s.arg(
                    ActivityModel::shortId(old)),
                u"ops-alice via console | archive | deploy web | ticket 42 | done"_s,
                u"ops-alice via console | create | %1 |  | done"_s.arg(ActivityModel::shortId(old)),
                u"ops-alice via console | create | deploy web |  | done"_s}));
        QVERIFY(table->isColumnHidden(ActivityModel::ServerColumn));
        QCOMPARE(activity->summary()->text(), u"5 records"_s);

        // Typing an actor's name asks the server for that one's records only.
        click(activity->actorFilter()->lineEdit());
        QTest::keyClicks(activity->actorFilter()->lineEdit(), u"ops-bob"_s);
        QTRY_COMPARE_WITH_TIMEOUT(columnOf(table, ActivityModel::ActorColumn),
                                  (QStringList{u"ops-bob via ctl"_s, u"ops-bob via ctl"_s}), 10000);
        QCOMPARE(activity->model()->query().actor, u"ops-bob"_s);
        // And the result filter, by keyboard: only what was refused.
        activity->resultFilter()->setFocus();
        QTest::keyClick(activity->resultFilter(), Qt::Key_End);
        QCOMPARE(activity->resultFilter()->currentText(), u"Refused"_s);
        QCOMPARE(columnOf(table, ActivityModel::ActionColumn), QStringList{u"run"_s});
        QTest::keyClick(activity->resultFilter(), Qt::Key_Home);
        // The actor picked from the list read so far, by clicking.
        activity->actorFilter()->lineEdit()->clear();
        QTRY_COMPARE_WITH_TIMEOUT(table->model()->rowCount(), 5, 10000);
        // Its arrow opens the list.
        QTest::mouseClick(
            activity->actorFilter(), Qt::LeftButton, {},
            QPoint(activity->actorFilter()->width() - 6, activity->actorFilter()->height() / 2));
        QAbstractItemView *choices = activity->actorFilter()->view();
        QTRY_VERIFY(choices->isVisible());
        const QModelIndexList alice = choices->model()->match(
            choices->model()->index(0, 0), Qt::DisplayRole, u"ops-alice"_s, 1, Qt::MatchExactly);
        QCOMPARE(alice.size(), 1);
        // The popup takes the row under the pointer, as a hand moves to it before clicking.
        const QPoint aliceAt = choices->visualRect(alice.first()).center();
        QTest::mouseMove(choices->viewport(), aliceAt);
        QTest::mouseClick(choices->viewport(), Qt::LeftButton, {}, aliceAt);
        QCOMPARE(activity->actorFilter()->currentText(), u"ops-alice"_s);
        QTRY_COMPARE_WITH_TIMEOUT(columnOf(table, ActivityModel::ActionColumn),
                                  (QStringList{u"archive"_s, u"create"_s, u"create"_s}), 10000);
        // Text finds in what was read: a reason.
        click(activity->textFilter());
        QTest::keyClicks(activity->textFilter(), u"ticket"_s);
        QCOMPARE(columnOf(table, ActivityModel::ReasonColumn), QStringList{u"ticket 42"_s});

        // The archived conversation selected: its own records in its details pane.
        QTabBar *tabs = window->tabs()->tabBar();
        QTest::mouseClick(tabs, Qt::LeftButton, {}, tabs->tabRect(1).center());
        QTableView *archived = window->archivedView();
        QTRY_COMPARE_WITH_TIMEOUT(archived->model()->rowCount(), 1, 10000);
        clickRow(archived, 0);
        QTRY_COMPARE(m_controller->selected(), deploy);
        // Folded at first; a click on Activity beside Details opens it.
        ActivityView *own = window->details()->activity();
        QVERIFY(!own->isVisible());
        click(window->details()->activityFold());
        QTRY_VERIFY(own->isVisible());
        QTRY_COMPARE_WITH_TIMEOUT(own->table()->model()->rowCount(), 3, 10000);
        QVERIFY(own->table()->isColumnHidden(ActivityModel::ConversationColumn));
        QCOMPARE(columnOf(own->table(), ActivityModel::ActorColumn),
                 (QStringList{u"ops-bob via ctl"_s, u"ops-alice via console"_s,
                              u"ops-alice via console"_s}));
        QCOMPARE(columnOf(own->table(), ActivityModel::ReasonColumn),
                 (QStringList{u"try again"_s, u"ticket 42"_s, QString()}));
        saveShot(window, "activity");
        // Folded away with a click.
        click(window->details()->activityFold());
        QVERIFY(!own->isVisible());
    }

    // A page is 100 records: the 101st is read once the list is scrolled to its end, and a
    // change made while the view is open comes by itself.
    void olderRecordsComeAtTheEndAndNewOnesByThemselves()
    {
        const QUrl server = startServer();
        QUuid last;
        for (int i = 0; i < 101; ++i)
            last = create(server, {}, u"conversation %1"_s.arg(i));
        QVERIFY(!last.isNull());
        MainWindow *window = showWindow(server, {});
        click(window->activityButton());
        ActivityView *activity = window->activity();
        QTableView *table = activity->table();
        QTRY_COMPARE_WITH_TIMEOUT(table->model()->rowCount(), 100, 10000);
        QTRY_VERIFY(activity->moreButton()->isVisible());
        QVERIFY2(activity->summary()->text().contains(u"scrolled to its end"_s),
                 qPrintable(activity->summary()->text()));
        table->setFocus();
        // Page Down to the last row.
        QScrollBar *scroll = table->verticalScrollBar();
        for (int page = 0; page < 50 && scroll->value() < scroll->maximum(); ++page)
            QTest::keyClick(table, Qt::Key_PageDown);
        QCOMPARE(scroll->value(), scroll->maximum());
        QTRY_COMPARE_WITH_TIMEOUT(table->model()->rowCount(), 101, 10000);
        QCOMPARE(table->model()->index(100, ActivityModel::ConversationColumn).data().toString(),
                 u"conversation 0"_s);
        QTRY_VERIFY(!activity->moreButton()->isVisible());
        QCOMPARE(activity->summary()->text(), u"101 records"_s);

        QCOMPARE(change(server, {}, "POST", last, u"archive"_s, u"while watching"_s), 200);
        QTRY_COMPARE_WITH_TIMEOUT(
            table->model()->rowCount(), 102,
            int(std::chrono::milliseconds(ActivityView::RefreshInterval).count()) + 5000);
        QCOMPARE(table->model()->index(0, ActivityModel::ReasonColumn).data().toString(),
                 u"while watching"_s);
    }

    // A change made comes from the server's lifecycle feed as it is made, not with the next
    // refresh: the row is there once the console has the record.
    void aChangeMadeShowsFromTheFeed()
    {
        const QUrl server = startServer();
        const QUuid id = create(server, {}, u"watched"_s);
        QVERIFY(!id.isNull());
        MainWindow *window = showWindow(server, {});
        m_controller->startRefreshing(std::chrono::hours(1));
        QTRY_VERIFY_WITH_TIMEOUT(m_controller->lifecycleFeed()->isConnected(), 10000);
        click(window->activityButton());
        QTableView *table = window->activity()->table();
        QTRY_COMPARE_WITH_TIMEOUT(table->model()->rowCount(), 1, 10000);

        QSignalSpy arrived(m_controller.get(), &ConsoleController::lifecycleRecord);
        QCOMPARE(change(server, {}, "POST", id, u"archive"_s, u"from the feed"_s), 200);
        QVERIFY(arrived.wait(10000));
        QCOMPARE(table->model()->rowCount(), 2);
        QCOMPARE(table->model()->index(0, ActivityModel::ReasonColumn).data().toString(),
                 u"from the feed"_s);
    }

    // All servers: every server's records in one list, newest first, with a Server column.
    void allServersShowEveryServersActivity()
    {
        const QUrl alpha = startServer();
        const QUrl beta = startServer();
        const QUuid onAlpha = create(alpha, {}, u"on alpha"_s);
        const QUuid onBeta = create(beta, {}, u"on beta"_s);
        QCOMPARE(change(alpha, {}, "POST", onAlpha, u"archive"_s, u"done with alpha"_s), 200);
        QCOMPARE(change(beta, {}, "POST", onBeta, u"archive"_s, u"done with beta"_s), 200);
        m_fleet = std::make_unique<FleetWindow>();
        m_fleet->addServer(alpha, {}, u"alpha"_s);
        m_fleet->addServer(beta, {}, u"beta"_s);
        m_fleet->show();
        QVERIFY(QTest::qWaitForWindowExposed(m_fleet.get()));
        QToolButton *button = nullptr;
        for (QToolBar *bar : m_fleet->findChildren<QToolBar *>()) {
            if (auto *found =
                    qobject_cast<QToolButton *>(bar->widgetForAction(m_fleet->activityAction())))
                button = found;
        }
        QVERIFY(button);
        click(button);
        QTRY_VERIFY(m_fleet->activityDock()->isVisible());
        QTableView *table = m_fleet->activity()->table();
        QTRY_COMPARE_WITH_TIMEOUT(table->model()->rowCount(), 4, 10000);
        QVERIFY(!table->isColumnHidden(ActivityModel::ServerColumn));
        QStringList servers = columnOf(table, ActivityModel::ServerColumn);
        servers.sort();
        QCOMPARE(servers, (QStringList{u"alpha"_s, u"alpha"_s, u"beta"_s, u"beta"_s}));
        QStringList reasons = columnOf(table, ActivityModel::ReasonColumn);
        reasons.removeAll(QString());
        reasons.sort();
        QCOMPARE(reasons, (QStringList{u"done with alpha"_s, u"done with beta"_s}));
        QStringList times;
        for (int row = 0; row < table->model()->rowCount(); ++row)
            times.append(table->model()
                             ->index(row, 0)
                             .data(ActivityModel::TimeRole)
                             .toDateTime()
                             .toString(Qt::ISODateWithMs));
        QStringList newestFirst = times;
        std::sort(newestFirst.begin(), newestFirst.end(), std::greater<>());
        QCOMPARE(times, newestFirst);
        // Named anew, the rows follow; removed, its rows go.
        m_fleet->setServerName(beta, u"db"_s);
        QVERIFY(columnOf(table, ActivityModel::ServerColumn).contains(u"db"_s));
        m_fleet->removeServer(alpha);
        QTRY_COMPARE(columnOf(table, ActivityModel::ServerColumn), (QStringList{u"db"_s, u"db"_s}));
        QVERIFY(table->isColumnHidden(ActivityModel::ServerColumn));
        saveShot(m_fleet.get(), "activity-fleet");
    }

private:
    QUrl startServer(const QString &keyFile = {})
    {
        auto dir = std::make_unique<QTemporaryDir>();
        ServerConfig config;
        config.port = 0;
        config.dataDir = dir->path();
        config.sandboxProgram = qEnvironmentVariable("AGENTDECK_BINARY");
        config.shutdownGrace = std::chrono::seconds(2);
        if (!keyFile.isEmpty()) {
            QFile file(dir->filePath(u"keys"_s));
            if (!file.open(QIODevice::WriteOnly) || file.write(keyFile.toUtf8()) < 0)
                return {};
            config.apiKeyFile = file.fileName();
        }
        auto server = std::make_unique<EmbeddedServer>(config);
        QString error;
        const QUrl url = server->start(&error);
        if (url.isEmpty())
            qWarning("cannot start a server: %s", qPrintable(error));
        m_dirs.push_back(std::move(dir));
        m_servers.push_back(std::move(server));
        return url;
    }
    static QUuid create(const QUrl &server, const QString &key, const QString &title)
    {
        ServerConnection client(server);
        client.setApiKey(key);
        CreateConversationRequest request;
        request.title = title;
        const ApiReply reply = QCoro::waitFor(client.createConversation(request));
        return parseWireId(reply.json.toObject().value(u"id"_s).toString()).value_or(QUuid());
    }
    // A change to conversation `id` (`suffix`: its route under the conversation), with a reason.
    static int change(const QUrl &server, const QString &key, const QByteArray &method,
                      const QUuid &id, const QString &suffix, const QString &reason)
    {
        ServerConnection client(server);
        client.setApiKey(key);
        QUrlQuery query;
        query.addQueryItem(u"reason"_s, reason);
        return QCoro::waitFor(
                   client.request(method, ServerConnection::conversationPath(id, suffix), query))
            .status;
    }
    MainWindow *showWindow(const QUrl &server, const QString &key)
    {
        m_connection = std::make_unique<ServerConnection>(server);
        m_connection->setApiKey(key);
        m_controller = std::make_unique<ConsoleController>(m_connection.get());
        m_window = std::make_unique<MainWindow>(m_controller.get(), server);
        m_window->show();
        if (!QTest::qWaitForWindowExposed(m_window.get()))
            return m_window.get();
        QCoro::waitFor(m_controller->refresh());
        return m_window.get();
    }
    // AGENTDECK_ACTIVITY_SHOTS=DIR: the window as the test left it, to look at.
    static void saveShot(QWidget *window, const char *name)
    {
        const QString dir = qEnvironmentVariable("AGENTDECK_ACTIVITY_SHOTS");
        if (!dir.isEmpty())
            window->grab().save(dir + u'/' + QLatin1StringView(name) + u".png"_s);
    }

    std::vector<std::unique_ptr<QTemporaryDir>> m_dirs;
    std::vector<std::unique_ptr<EmbeddedServer>> m_servers;
    std::unique_ptr<ServerConnection> m_connection;
    std::unique_ptr<ConsoleController> m_controller;
    std::unique_ptr<MainWindow> m_window;
    std::unique_ptr<FleetWindow> m_fleet;
};

AGENTDECK_GUI_TEST_MAIN(GuiActivityTest)

#include "tst_gui_activity.moc"
