#include "application.h"

#include "logging.h"
#include "logoutput.h"

#include "agentdeckserver.h"
#include "commandline.h"
#include "console.h"
#include "ctl.h"
#include "runtime/commandleader.h"
#include "runtime/containerexec.h"
#include "runtime/sandboxhost.h"
#include "systemdnotify.h"
#include "unixsignals.h"

#include <QCoreApplication>
#include <QProcessEnvironment>
#include <QUrl>

#include <cstdio>
#include <malloc.h>
#include <sys/stat.h>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {

void printErr(const QString &text)
{
    std::fputs(text.toLocal8Bit().constData(), stderr);
    std::fflush(stderr);
}

// The daemon runs on Qt's own event dispatcher, not GLib's: with GLib every socket notifier
// switched on or off (one per answer written through a socket's buffer) also woke the main
// loop through an eventfd, two writes more per request. Nothing of the daemon needs GLib's
// loop (the console keeps it, for the desktop's platform theme). QT_NO_GLIB set by the operator
// is left as it is.
void useQtEventDispatcher()
{
    if (!qEnvironmentVariableIsSet("QT_NO_GLIB"))
        qputenv("QT_NO_GLIB", "1");
}

int runHeadless(int argc, char *argv[], const Options &options)
{
    useQtEventDispatcher();
    QCoreApplication app(argc, argv);
    app.setApplicationName(u"agentdeck"_s);
    app.setApplicationVersion(QStringLiteral(AGENTDECK_VERSION));

    AgentDeckServer server(options.server);
    bool started = false;
    bool stopping = false;
    int signalWhileStarting = 0;
    // Stops the server gracefully, once, and then the process with `exitCode`.
    const auto stopWith = [&](int exitCode) {
        stopping = true;
        notifySystemdStopping();
        QCoro::connect(server.stop(), &app, [&app, exitCode] { app.exit(exitCode); });
    };
    const auto stopFor = [&](int signal) {
        if (stopping) {
            qCInfo(lcServer) << "signal" << signal
                             << "received, already stopping: runs are paused at a safe point first "
                                "(SIGKILL ends it at once)";
            return;
        }
        qCInfo(lcServer) << "signal" << signal << "received, stopping";
        stopWith(0);
    };
    // Caught before the start, which may take a while (migrations, the wait for a server with
    // the same replica id): a signal meanwhile ended the process at once. It stops the server
    // once it is up.
    UnixSignals signals;
    QObject::connect(&signals, &UnixSignals::terminationRequested, &app, [&](int signal) {
        if (started)
            stopFor(signal);
        else
            signalWhileStarting = signal;
    });
    QString error;
    if (!server.start(&error)) {
        qCCritical(lcServer).noquote() << error;
        return server.refusedItsSettings() ? 2 : 1;
    }
    started = true;
    if (options.server.apiKeys.isEmpty() && options.server.apiKeyFile.isEmpty() &&
        !options.server.address.isLoopback())
        qCWarning(lcServer) << "no session API key is configured and the server listens beyond "
                               "loopback; anyone who can reach it can use it";
    // Where it listens, all interfaces included (0.0.0.0 was shown as 127.0.0.1, which hid how
    // far it could be reached); server.url() is where this machine reaches it.
    QUrl listening = server.url();
    if (options.server.address == QHostAddress::Any ||
        options.server.address == QHostAddress::AnyIPv4 ||
        options.server.address == QHostAddress::AnyIPv6)
        listening.setHost(options.server.address.toString());
    qCInfo(lcServer).noquote() << "listening on" << listening.toString();
    QObject::connect(&server, &AgentDeckServer::ready, &app,
                     [&server] { notifySystemdReady(u"serving on "_s + server.url().toString()); });
    QObject::connect(&server, &AgentDeckServer::cannotGoOn, &app, [&](const QString &reason) {
        qCCritical(lcServer).noquote() << reason;
        if (!stopping)
            stopWith(1);
    });
    if (signalWhileStarting != 0)
        stopFor(signalWhileStarting);
    return app.exec();
}

bool hasDisplay()
{
    const auto env = QProcessEnvironment::systemEnvironment();
    return env.contains(u"DISPLAY"_s) || env.contains(u"WAYLAND_DISPLAY"_s) ||
           env.value(u"QT_QPA_PLATFORM"_s) == u"offscreen"_s;
}

} // namespace

int runApplication(int argc, char *argv[])
{
    // The modes the server starts answer --version too: which build a sandbox runs.
    for (const char *mode : {"command-leader", "sandbox-host"}) {
        if (argc == 3 && qstrcmp(argv[1], mode) == 0 && qstrcmp(argv[2], "--version") == 0) {
            std::printf("agentdeck %s %s\n", mode, AGENTDECK_VERSION);
            return 0;
        }
    }
    // Before anything else: the leader of a command is a small process, without Qt.
    if (argc > 1 && qstrcmp(argv[1], "command-leader") == 0)
        return runCommandLeader(argc, argv);
    // What the server makes is its user's alone: the data dir, the catalog, logs, keys and
    // workspaces (other local users are not trusted; see docs/SECURITY.md). Sandbox hosts and
    // their commands inherit it.
    ::umask(077);
    // Large blocks (frames and pages of command outputs) go back to the system when freed.
    // glibc's threshold for that rises to the largest block freed so far, after which such
    // blocks stay in the heap: eight stalled replays of a 40 MB history left 200-300 MB behind
    // every time they closed.
    mallopt(M_MMAP_THRESHOLD, 512 * 1024);

    LogOutput::install();
    if (argc > 1 && qstrcmp(argv[1], "sandbox-host") == 0)
        return runSandboxHost(argc, argv);
    if (argc > 1 && qstrcmp(argv[1], "container-exec") == 0)
        return runContainerExec(argc, argv);
    if (argc > 1 && qstrcmp(argv[1], "ctl") == 0)
        return runCtl(argc, argv);
    QStringList arguments;
    for (int i = 1; i < argc; ++i)
        arguments.append(QString::fromLocal8Bit(argv[i]));

    QString error, message;
    const auto options = parseOptions(arguments, &error, &message);
    if (!options) {
        if (!error.isEmpty()) {
            printErr(u"agentdeck: "_s + error + u"\nTry agentdeck --help.\n"_s);
            return 2;
        }
        std::fputs(message.toLocal8Bit().constData(), stdout);
        return 0;
    }
    LogOutput::install(options->logFormat);
    if (options->mode == Mode::Headless)
        return runHeadless(argc, argv, *options);
    if (!hasDisplay()) {
        printErr(u"agentdeck: no display found for the console. To run the server alone, use "
                 "agentdeck --headless.\n"_s);
        return 2;
    }
    return runConsole(argc, argv, *options);
}

} // namespace AgentDeck
