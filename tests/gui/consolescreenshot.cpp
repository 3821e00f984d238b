// Renders the console with sample data to a PNG: an embedded server in a temporary data dir,
// a handful of conversations in different states, one of them cut short by a restart of the
// server and one failed, both flagged; the interrupted one selected with its details open.
// Usage: agentdeck_screenshot OUTPUT.png [--running | --fleet | --activity]
//   --running: the running one selected
//   --fleet: All servers on that server and two more, one of them down since its rows were read
//   --activity: the Activity view of a server with named keys: two operators, a bot and the
//     idle policy changing its conversations, one of them selected with its own activity
#include "activityview.h"
#include "consolecontroller.h"
#include "consolesettings.h"
#include "detailspane.h"
#include "embeddedserver.h"
#include "fleetwindow.h"
#include "mainwindow.h"

#include <QApplication>
#include <QDockWidget>
#include <QFile>
#include <QQuickWindow>
#include <QSettings>
#include <QStandardPaths>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>
#include <QToolButton>

#include <cstdio>

using namespace Qt::StringLiterals;
using namespace AgentDeck;

namespace {
QUuid create(ServerConnection &client, const QString &title, const QString &command,
             bool confirm = false, QMap<QString, QString> tags = {})
{
    CreateConversationRequest request;
    request.title = title;
    request.tags = std::move(tags);
    request.alwaysConfirm = confirm;
    if (!command.isEmpty())
        request.initialMessage = MessageRequest{u"user"_s, command, true};
    const ApiReply reply = QCoro::waitFor(client.createConversation(request));
    return parseWireId(reply.json.toObject().value(u"id"_s).toString()).value_or(QUuid());
}

QString status(ServerConnection &client, const QUuid &id)
{
    return QCoro::waitFor(client.get(ServerConnection::conversationPath(id)))
        .json.toObject()
        .value(u"execution_status"_s)
        .toString();
}
// A change to `id` by the holder of `key`, with a reason; its answer's status.
int change(const QUrl &server, const QString &key, const QByteArray &method, const QUuid &id,
           const QString &suffix, const QString &reason)
{
    ServerConnection client(server);
    client.setApiKey(key);
    QUrlQuery query;
    query.addQueryItem(u"reason"_s, reason);
    return QCoro::waitFor(
               client.request(method, ServerConnection::conversationPath(id, suffix), query))
        .status;
}

int activityShot(ServerConfig config, const char *output)
{
    QTemporaryDir dir;
    config.dataDir = dir.path();
    config.sandboxIdleTimeout = std::chrono::seconds(2);
    const QString alice = u"alice-0d1e2f"_s, bob = u"bob-3a4b5c"_s, bot = u"bot-6d7e8f"_s;
    QFile keys(dir.filePath(u"keys"_s));
    if (!keys.open(QIODevice::WriteOnly) ||
        keys.write(u"ops-alice %1\nops-bob %2\ndeploy-bot %3\n"_s.arg(alice, bob, bot).toUtf8()) <
            0)
        return 1;
    keys.close();
    config.apiKeyFile = keys.fileName();
    EmbeddedServer server(config);
    QString error;
    const QUrl url = server.start(&error);
    if (url.isEmpty()) {
        std::fprintf(stderr, "cannot start the server: %s\n", qPrintable(error));
        return 1;
    }
    ServerConnection asAlice(url), asBob(url), asBot(url);
    asAlice.setApiKey(alice);
    asBob.setApiKey(bob);
    asBot.setApiKey(bot);
    ServerConnection::setClientName(u"ci"_s);
    const QUuid deploy = create(asBot, u"Deploy to staging"_s, u"echo deploying"_s, false,
                                {{u"env"_s, u"staging"_s}});
    ServerConnection::setClientName(u"console"_s);
    const QUuid audit = create(asAlice, u"Last quarter's audit"_s, {});
    const QUuid scratch = create(asAlice, u"Scratch: try the new linter"_s, {});
    create(asAlice, u"Nightly data import"_s, {}, false, {{u"team"_s, u"data"_s}});
    change(url, alice, "POST", audit, u"archive"_s, u"quarter closed, ticket OPS-4711"_s);
    ServerConnection::setClientName(u"ctl"_s);
    change(url, bob, "DELETE", scratch, {}, u"cleanup after the release"_s);
    change(url, bob, "POST", audit, u"run"_s, u"rerun the report"_s);
    ServerConnection::setClientName(u"console"_s);
    // The idle policy stops the deploy's sandbox once its command is done.
    const bool stopped = QTest::qWaitFor(
        [&] {
            AuditQuery query;
            query.actor = u"server"_s;
            const auto page = QCoro::waitFor(asAlice.searchAudit(query));
            return page && !page->items.isEmpty();
        },
        20000);
    if (!stopped)
        std::fputs("warning: the idle policy did not stop the sandbox in time\n", stderr);

    ConsoleController controller(&asAlice);
    MainWindow window(&controller, url);
    window.resize(1400, 860);
    window.show();
    const bool shown = QTest::qWaitForWindowExposed(&window) &&
                       QCoro::waitFor(controller.refresh()) && window.selectConversation(deploy);
    window.activityDock()->show();
    // The selected conversation's own activity in place of its details.
    window.details()->foldButton()->setChecked(false);
    window.details()->activityFold()->setChecked(true);
    const bool read = QTest::qWaitFor(
        [&] {
            return window.activity()->model()->rowCount() >= 8 &&
                   window.details()->activity()->model()->rowCount() >= 2;
        },
        10000);
    if (!shown || !read)
        std::fputs("warning: the Activity view did not show the sample records in time\n", stderr);
    QTest::qWait(300); // let the QML pane lay out before the grab
    const bool saved = window.grab().save(QString::fromLocal8Bit(output));
    std::fprintf(stderr, "%s %s\n", saved ? "wrote" : "could not write", output);
    server.stop();
    return saved ? 0 : 1;
}
} // namespace

int main(int argc, char *argv[])
{
    QQuickWindow::setGraphicsApi(QSGRendererInterface::Software);
    QApplication app(argc, argv);
    // The window as it first opens, whatever layout a developer's console left.
    QStandardPaths::setTestModeEnabled(true);
    consoleSettings()->clear();
    if (argc < 2) {
        std::fputs("usage: agentdeck_screenshot OUTPUT.png\n", stderr);
        return 2;
    }
    QTemporaryDir dir;
    ServerConfig config;
    config.port = 0;
    config.dataDir = dir.path();
    config.sandboxProgram = QStringLiteral(AGENTDECK_BINARY_PATH);
    config.shutdownGrace = std::chrono::milliseconds(500);
    if (argc > 2 && QByteArrayView(argv[2]) == "--activity")
        return activityShot(config, argv[1]);
    QString error;
    // A first server whose stop cuts a command short: the headline case of the console.
    QUuid interrupted;
    {
        EmbeddedServer first(config);
        const QUrl url = first.start(&error);
        if (url.isEmpty()) {
            std::fprintf(stderr, "cannot start the server: %s\n", qPrintable(error));
            return 1;
        }
        ServerConnection client(url);
        // Ten lines, then a mark that they are out, then a wait a restart cuts short.
        interrupted = create(client, u"Reindex search"_s,
                             u"for i in $(seq 10); do echo \"indexed shard $i of 600\"; done; "
                             "touch .printed; sleep 600"_s,
                             false, {{u"team"_s, u"search"_s}});
        const QString printed =
            dir.filePath(u"workspaces/"_s + toWireId(interrupted) + u"/.printed"_s);
        if (!QTest::qWaitFor([&] { return QFile::exists(printed); }, 10000))
            std::fputs("warning: the command to interrupt did not print\n", stderr);
        first.stop();
    }
    EmbeddedServer server(config);
    const QUrl url = server.start(&error);
    if (url.isEmpty()) {
        std::fprintf(stderr, "cannot start the server again: %s\n", qPrintable(error));
        return 1;
    }
    ServerConnection client(url);
    const QUuid build = create(client, u"Build the release"_s,
                               u"echo 'compiling 42 files'; echo 'linking agentdeck'; echo done"_s,
                               false, {{u"team"_s, u"infra"_s}});
    create(client, u"Deploy to staging"_s, u"echo deploying"_s, true, {{u"env"_s, u"staging"_s}});
    const QUuid longRun =
        create(client, u"Nightly data import"_s,
               u"for i in $(seq 60); do echo \"imported batch $i of 60\"; sleep 1; done"_s, false,
               {{u"team"_s, u"data"_s}});
    create(client, u"Run the test suite"_s,
           u"echo 'test_login ... ok'; echo 'test_upload ... FAIL'; exit 2"_s, false,
           {{u"team"_s, u"qa"_s}});
    const QUuid old = create(client, u"Last quarter's audit"_s, u"echo archived"_s);
    const bool seeded =
        QTest::qWaitFor([&] { return status(client, old) == u"finished"_s; }, 10000) &&
        QCoro::waitFor(client.conversationAction(old, u"archive"_s)).ok() &&
        QTest::qWaitFor([&] { return status(client, longRun) == u"running"_s; }, 10000) &&
        QTest::qWaitFor([&] { return status(client, build) == u"finished"_s; }, 10000);
    if (!seeded)
        std::fputs("warning: the sample data did not reach the expected states\n", stderr);

    if (argc > 2 && QByteArrayView(argv[2]) == "--fleet") {
        // Two more servers: one answering, one that goes down once its rows are read.
        QTemporaryDir secondDir, thirdDir;
        ServerConfig second = config, third = config;
        second.dataDir = secondDir.path();
        third.dataDir = thirdDir.path();
        EmbeddedServer staging(second);
        auto gpu = std::make_unique<EmbeddedServer>(third);
        const QUrl stagingUrl = staging.start(&error);
        const QUrl gpuUrl = gpu->start(&error);
        if (stagingUrl.isEmpty() || gpuUrl.isEmpty()) {
            std::fprintf(stderr, "cannot start the other servers: %s\n", qPrintable(error));
            return 1;
        }
        ServerConnection stagingClient(stagingUrl), gpuClient(gpuUrl);
        create(stagingClient, u"Publish the docs"_s, u"echo published"_s, false,
               {{u"team"_s, u"docs"_s}});
        create(stagingClient, u"Smoke test staging"_s, u"echo 'GET /health 503'; exit 1"_s, false,
               {{u"env"_s, u"staging"_s}});
        create(gpuClient, u"Render frames 1-500"_s,
               u"for i in $(seq 500); do echo \"frame $i\"; sleep 1; done"_s, false,
               {{u"team"_s, u"render"_s}});
        FleetWindow fleet;
        fleet.addServer(url, {}, u"build-farm"_s);
        fleet.addServer(stagingUrl, {}, u"staging"_s);
        fleet.addServer(gpuUrl, {}, u"gpu-box"_s);
        fleet.resize(1400, 700);
        fleet.show();
        const bool listed =
            QTest::qWaitForWindowExposed(&fleet) &&
            QTest::qWaitFor([&] { return fleet.conversationsView()->model()->rowCount() == 8; },
                            15000) &&
            QTest::qWaitFor([&] { return fleet.controllerOf(gpuUrl)->lastRefreshed().isValid(); },
                            10000);
        gpu->stop();
        gpu.reset();
        const bool down =
            QTest::qWaitFor([&] { return !fleet.controllerOf(gpuUrl)->isReachable(); }, 10000);
        if (!listed || !down)
            std::fputs("warning: All servers did not reach the expected state\n", stderr);
        QTest::qWait(300); // let the list repaint before the grab
        const bool saved = fleet.grab().save(QString::fromLocal8Bit(argv[1]));
        std::fprintf(stderr, "%s %s\n", saved ? "wrote" : "could not write", argv[1]);
        staging.stop();
        server.stop();
        return saved ? 0 : 1;
    }

    ServerConnection connection(url);
    ConsoleController controller(&connection);
    const bool running = argc > 2 && QByteArrayView(argv[2]) == "--running";
    MainWindow window(&controller, url);
    window.resize(1400, 800);
    window.show();
    const bool shown = QTest::qWaitForWindowExposed(&window) &&
                       QCoro::waitFor(controller.refresh()) &&
                       window.selectConversation(running ? longRun : interrupted) &&
                       QTest::qWaitFor([&] { return controller.timeline()->count() >= 3; }, 10000);
    if (running) // a few of its lines
        QTest::qWait(3000);
    else if (!QTest::qWaitFor([&] { return window.details()->hasRuntimeDetails(); }, 5000))
        std::fputs("warning: the details pane did not get the runtime's details\n", stderr);
    if (!shown)
        std::fputs("warning: the window did not show the sample conversation in time\n", stderr);
    QTest::qWait(300); // let the QML pane lay out the last rows before the grab
    const bool saved = window.grab().save(QString::fromLocal8Bit(argv[1]));
    std::fprintf(stderr, "%s %s\n", saved ? "wrote" : "could not write", argv[1]);

    // The sandboxes outlive a graceful stop; they exit on their own once the temporary data dir
    // is gone (within 2 s), and remove their sockets. Killed, they left those in /tmp, where
    // this dir's depth puts them.
    server.stop();
    return saved ? 0 : 1;
}
