#include "console.h"

#include "logging.h"

#include "commandline.h"
#include "consolecontroller.h"
#include "consoleserverfile.h"
#include "embeddedserver.h"
#include "fleetwindow.h"
#include "mainwindow.h"
#include "serverconnection.h"
#include "unixsignals.h"

#include <QApplication>
#include <QMessageBox>
#include <QQuickWindow>

#include <cstdio>
#include <cstdlib>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {

QtMessageHandler qtHandler = nullptr;

// Qt ends the process with abort(), a core and status 134, when no window system answers: a
// DISPLAY naming a server that is gone, a Wayland socket left behind. Said as a refusal instead.
void refuseWithoutWindowSystem(QtMsgType type, const QMessageLogContext &context,
                               const QString &message)
{
    if (qtHandler)
        qtHandler(type, context, message);
    if (type != QtFatalMsg)
        return;
    std::fputs("agentdeck: the console cannot open a window on this display. To run the server "
               "alone, use agentdeck --headless.\n",
               stderr);
    std::_Exit(2);
}

} // namespace

int runConsole(int argc, char *argv[], const Options &options)
{
    // Without a GPU (offscreen, Xvfb, remote X) the QML pane renders in software.
    if (qEnvironmentVariable("QT_QPA_PLATFORM") == u"offscreen"_s ||
        qEnvironmentVariableIsSet("AGENTDECK_SOFTWARE_RENDERING"))
        QQuickWindow::setGraphicsApi(QSGRendererInterface::Software);
    qtHandler = qInstallMessageHandler(refuseWithoutWindowSystem);
    QApplication app(argc, argv);
    qInstallMessageHandler(qtHandler);
    app.setApplicationName(u"agentdeck"_s);
    app.setApplicationDisplayName(u"AgentDeck"_s);
    app.setApplicationVersion(QStringLiteral(AGENTDECK_VERSION));
    ServerConnection::setClientName(u"console"_s);
    // SIGTERM and Ctrl-C stop the embedded server as gracefully as a closed window (below),
    // rather than ending the process with its runs in flight. Caught from the start: the
    // server answers before the window is up.
    UnixSignals signals;
    QObject::connect(&signals, &UnixSignals::terminationRequested, &app, [&app](int signal) {
        qCInfo(lcServer) << "signal" << signal << "received, stopping";
        // A dialog waiting for an answer (the embedded server could not start) is one: before
        // the main loop runs, quit() ends nothing.
        if (QWidget *dialog = QApplication::activeModalWidget())
            dialog->close();
        // The signal is the answer already: quit() closes the window, which asks no question
        // about its runs then (offscreen, nobody would answer it, and the console never ended).
        for (QWidget *widget : QApplication::topLevelWidgets()) {
            if (auto *window = qobject_cast<MainWindow *>(widget))
                window->setEmbedded(false);
        }
        app.quit();
    });

    // Several servers (given, or watched the last time in All servers): the All servers
    // window.
    QList<QUrl> watched = FleetWindow::rememberedServers();
    for (const QUrl &server : std::as_const(options.connectUrls)) {
        if (!watched.contains(server))
            watched.append(server);
    }
    if (options.mode == Mode::Connect && watched.size() > 1) {
        FleetWindow fleet;
        for (const QUrl &server : std::as_const(watched)) {
            if (!options.connectUrls.contains(server))
                fleet.addServer(server);
        }
        // The key given on the command line is for the servers given with it.
        const QString key =
            options.server.apiKeys.isEmpty() ? QString() : options.server.apiKeys.first();
        for (const QUrl &server : std::as_const(options.connectUrls))
            fleet.addServer(server, key);
        fleet.show();
        return app.exec();
    }

    std::unique_ptr<EmbeddedServer> embedded;
    QUrl url;
    QString apiKey = options.server.apiKeys.isEmpty() ? QString() : options.server.apiKeys.first();
    if (options.mode == Mode::Connect) {
        url = options.connectUrl;
    } else {
        ServerConfig config = options.server;
        // The embedded server is for this console only: loopback, and a free port unless asked.
        config.address = QHostAddress::LocalHost;
        if (!options.listenGiven)
            config.port = 0;
        // And for this user only: loopback is every local user's, so it asks for a key of its
        // data dir's (see docs/SECURITY.md), which ctl finds beside its URL.
        QString error;
        if (apiKey.isEmpty()) {
            apiKey = consoleApiKey(config.dataDir, &error);
            if (apiKey.isEmpty()) {
                qCCritical(lcServer).noquote() << error;
                return 1;
            }
            config.apiKeys = {apiKey};
        }
        embedded = std::make_unique<EmbeddedServer>(config);
        url = embedded->start(&error);
        if (url.isEmpty()) {
            qCCritical(lcServer).noquote() << "the embedded server cannot start:" << error;
            QMessageBox::critical(nullptr, u"AgentDeck"_s,
                                  QObject::tr("The embedded server cannot start: %1").arg(error));
            return 1;
        }
        qCInfo(lcServer).noquote() << "listening on" << url.toString();
        // Where `agentdeck ctl` finds it without --server.
        if (!writeConsoleServer(config.dataDir, url, apiKey))
            qCWarning(lcServer).noquote() << "cannot write" << consoleServerFile(config.dataDir)
                                          << "; ctl needs --server" << url.toString();
        // As the headless server does: stopped gracefully, exit 1.
        QObject::connect(embedded.get(), &EmbeddedServer::cannotGoOn, &app,
                         [&app](const QString &reason) {
                             qCCritical(lcServer).noquote() << reason;
                             app.exit(1);
                         });
    }

    ServerConnection connection(url);
    if (!apiKey.isEmpty())
        connection.setApiKey(apiKey);
    ConsoleController controller(&connection);
    MainWindow window(&controller, url);
    // Its loopback URL changes with every start; the data dir names it.
    if (embedded) {
        window.setWindowTitle(QObject::tr("Embedded server · %1").arg(options.server.dataDir));
        window.setEmbedded(true);
        QObject::connect(&window, &MainWindow::keptRunsEnded, &app, &QCoreApplication::quit);
    }
    window.show();
    controller.startRefreshing(std::chrono::seconds(3));
    const int status = app.exec();
    if (embedded) {
        removeConsoleServer(options.server.dataDir);
        embedded->stop();
    }
    return status;
}

} // namespace AgentDeck
