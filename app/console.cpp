#include "console.h"

#include "commandline.h"
#include "consolecontroller.h"
#include "embeddedserver.h"
#include "mainwindow.h"
#include "unixsignals.h"

#include <QApplication>
#include <QMessageBox>
#include <QQuickWindow>

#include <cstdio>

using namespace Qt::StringLiterals;

namespace AgentDeck {

int runConsole(int argc, char *argv[], const Options &options)
{
    // Without a GPU (offscreen, Xvfb, remote X) the QML pane renders in software.
    if (qEnvironmentVariable("QT_QPA_PLATFORM") == u"offscreen"_s ||
        qEnvironmentVariableIsSet("AGENTDECK_SOFTWARE_RENDERING"))
        QQuickWindow::setGraphicsApi(QSGRendererInterface::Software);
    QApplication app(argc, argv);
    app.setApplicationName(u"agentdeck"_s);
    app.setApplicationDisplayName(u"AgentDeck"_s);
    app.setApplicationVersion(QStringLiteral(AGENTDECK_VERSION));
    // SIGTERM and Ctrl-C stop the embedded server as gracefully as a closed window (below),
    // rather than ending the process with its runs in flight. Caught from the start: the
    // server answers before the window is up.
    UnixSignals signals;
    QObject::connect(&signals, &UnixSignals::terminationRequested, &app, [&app](int signal) {
        std::fprintf(stderr, "agentdeck: signal %d received, stopping\n", signal);
        app.quit();
    });

    std::unique_ptr<EmbeddedServer> embedded;
    QUrl url;
    if (options.mode == Mode::Connect) {
        url = options.connectUrl;
    } else {
        ServerConfig config = options.server;
        // The embedded server is for this console only: loopback, and a free port unless asked.
        config.address = QHostAddress::LocalHost;
        if (!options.listenGiven)
            config.port = 0;
        embedded = std::make_unique<EmbeddedServer>(config);
        QString error;
        url = embedded->start(&error);
        if (url.isEmpty()) {
            QMessageBox::critical(nullptr, u"AgentDeck"_s,
                                  QObject::tr("The embedded server cannot start: %1").arg(error));
            return 1;
        }
        std::fprintf(stderr, "listening on %s\n", qPrintable(url.toString()));
    }

    ServerConnection connection(url);
    if (!options.server.apiKeys.isEmpty())
        connection.setApiKey(options.server.apiKeys.first());
    ConsoleController controller(&connection);
    MainWindow window(&controller, url);
    window.show();
    controller.startRefreshing(std::chrono::seconds(3));
    const int status = app.exec();
    if (embedded)
        embedded->stop();
    return status;
}

} // namespace AgentDeck
