#include "containerexec.h"

#include "dockerengine.h"

#include <QCommandLineParser>
#include <QCoreApplication>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcessEnvironment>
#include <QSocketNotifier>

#include <QCoroTask>
#include <QCoroTimer>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {

// Runs "$@", then ends what it left behind, and says on the standard error (in a write of its
// own, so a frame of its own) when the kernel killed a process for the memory limit meanwhile:
// see runContainerExec(). The count is the cgroup's own (v2's memory.events, v1's
// memory.oom_control), as the container sees it.
const QString Wrapper = uR"sh(ooms() {
    for f in /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control; do
        [ -r "$f" ] || continue
        while read -r key value; do
            [ "$key" = oom_kill ] && { echo "$value"; return; }
        done < "$f"
    done
    echo 0
}
before=$(ooms)
"$@"
status=$?
kill -9 -1 2>/dev/null
[ "$(ooms)" = "$before" ] || echo "%1" >&2
exit $status)sh"_s;
const QByteArray OomMarker = "agentdeck-container-exec: oom_kill\n";

void writeAll(int fd, QByteArrayView data)
{
    while (!data.isEmpty()) {
        const ssize_t written = ::write(fd, data.data(), size_t(data.size()));
        if (written < 0) {
            if (errno == EINTR)
                continue;
            return; // nobody reads any more: the command still runs to its end
        }
        data = data.sliced(written);
    }
}

struct ExecOptions
{
    QString host;
    QString container;
    QString user;
    QString workdir;
    qint64 memoryBytes = 0;
    QStringList command;
    int infoFd = -1; // with blockFd: the network's, see runContainerExec()
    int blockFd = -1;
};

// The pid of the container's init in this host's PID namespace, from the engine's inspect of
// it; 0 with *error when there is none to be seen here. The pid the engine gives is of its own
// namespace: a process here that is not in the container's cgroup is someone else's.
qint64 containerProcess(const QJsonObject &container, QString *error)
{
    const QString id = container.value("Id"_L1).toString();
    const qint64 pid = container.value("State"_L1).toObject().value("Pid"_L1).toInteger();
    if (pid <= 0 || id.size() < 12) {
        *error = u"the container is not running"_s;
        return 0;
    }
    QFile cgroup(u"/proc/%1/cgroup"_s.arg(pid));
    if (!cgroup.open(QIODevice::ReadOnly) || !cgroup.readAll().contains(id.toLatin1())) {
        *error = u"the container's process is not on this host (the engine's pid %1 is not in its "
                 "cgroup here)"_s.arg(pid);
        return 0;
    }
    return pid;
}

// Reports where the container's network namespace is (runContainerExec()) and waits until the
// network is up or given up on.
QCoro::Task<void> reportNetwork(DockerEngine &engine, const ExecOptions &options)
{
    auto inspecting = engine.inspectContainer(options.container);
    const DockerResult found = co_await std::move(inspecting);
    QString problem = found.error;
    qint64 pid = 0;
    if (found.ok()) {
        // Thawed first: the network is attached to a container whose command is about to run.
        if (found.json.object().value("State"_L1).toObject().value("Paused"_L1).toBool()) {
            auto thawing = engine.unpauseContainer(options.container);
            co_await std::move(thawing);
        }
        pid = containerProcess(found.json.object(), &problem);
    }
    const QByteArray info =
        pid > 0 ? QJsonDocument(QJsonObject{{u"child-pid"_s, pid}}).toJson(QJsonDocument::Compact)
                : QJsonDocument(QJsonObject{{u"error"_s, problem}}).toJson(QJsonDocument::Compact);
    writeAll(options.infoFd, info);
    ::close(options.infoFd);
    char go = 0;
    while (::read(options.blockFd, &go, 1) < 0 && errno == EINTR) {
    }
    ::close(options.blockFd);
}

QCoro::Task<int> run(DockerEngine &engine, const ExecOptions &options, QStringList environment,
                     const bool *stopped)
{
    if (options.infoFd >= 0 && options.blockFd >= 0) {
        auto reporting = reportNetwork(engine, options);
        co_await std::move(reporting);
        // Stopped while the network came up: the command never starts.
        if (*stopped)
            co_return 128 + SIGTERM;
    }
    // The command's own deadline is its sandbox host's; a transfer never ends before it.
    constexpr std::chrono::milliseconds NoDeadline = std::chrono::hours(24 * 365);
    auto outOfMemory = std::make_shared<std::atomic<bool>>(false);
    const QString wrapper = Wrapper.arg(QString::fromLatin1(OomMarker.trimmed()));
    const QStringList command =
        QStringList{u"/bin/sh"_s, u"-c"_s, wrapper, u"agentdeck"_s} + options.command;
    // The engine may bring the marker in one frame with what the command wrote last to the
    // same stream ("Killed" from bash, say).
    DockerStreamDemuxer::Output output = [outOfMemory](int stream, QByteArrayView piece) {
        if (stream == 2 && piece.endsWith(QByteArrayView(OomMarker))) {
            outOfMemory->store(true);
            piece.chop(OomMarker.size());
        }
        writeAll(STDOUT_FILENO, piece);
    };
    // Made before the co_await: GCC 12 destroys a temporary in one twice.
    auto executing = engine.exec(options.container, command, NoDeadline, environment,
                                 options.workdir, options.user, output);
    DockerExecResult result = co_await std::move(executing);
    // Frozen for being idle (--sandbox-idle-pause): thawed for the command, which then runs.
    // The engine refuses an exec in a paused container before it starts anything.
    if (!result.ok() && result.error.contains(u"is paused"_s)) {
        auto thawing = engine.unpauseContainer(options.container);
        co_await std::move(thawing);
        auto again = engine.exec(options.container, command, NoDeadline, environment,
                                 options.workdir, options.user, output);
        result = co_await std::move(again);
    }
    if (!result.ok()) {
        std::fprintf(stderr, "agentdeck container-exec: %s\n", qPrintable(result.error));
        co_return 125;
    }
    if (outOfMemory->load()) {
        const QByteArray note =
            options.memoryBytes > 0
                ? "\n[the sandbox's limit of " + QByteArray::number(options.memoryBytes) +
                      " bytes of memory was reached: the kernel stopped a process of the "
                      "command]\n"
                : QByteArray("\n[the kernel stopped a process of the command: out of memory]\n");
        writeAll(STDOUT_FILENO, note);
    }
    co_return result.exitCode;
}

QCoro::Task<void> stop(DockerEngine &engine, const ExecOptions &options, const int *status)
{
    // Made before the co_await: GCC 12 fails on temporaries inside one.
    const QStringList kill{u"/bin/sh"_s, u"-c"_s, u"kill -9 -1"_s};
    // A stop that comes while the command's exec is still starting finds nothing of it to
    // kill, and the command then ran to its end: the kill comes again until its stream ends.
    while (*status < 0) {
        auto killing = engine.exec(options.container, kill, std::chrono::seconds(10), QStringList(),
                                   QString(), options.user);
        co_await std::move(killing);
        if (*status >= 0)
            break;
        auto pause = QCoro::sleepFor(std::chrono::milliseconds(100));
        co_await std::move(pause);
    }
}

// The command's environment, as the engine takes it: all of `environment` but PATH, which is
// the image's.
QStringList execEnvironment(const QProcessEnvironment &environment)
{
    QStringList variables;
    for (const QString &name : environment.keys()) {
        if (name != u"PATH"_s)
            variables << name + u'=' + environment.value(name);
    }
    return variables;
}

// What every container-exec is started with: engine, container, user, workdir, memory limit.
QStringList execArguments(const ContainerEngine &engine, const QString &container,
                          const CommandUser &user, const QString &workdir, qint64 memoryBytes,
                          const QStringList &network)
{
    const QStringList tls = engine.tlsDirectory.isEmpty()
                                ? QStringList()
                                : QStringList{u"--docker-tls-dir"_s, engine.tlsDirectory};
    return QStringList{u"container-exec"_s} + tls + network +
           QStringList{u"--memory-bytes"_s, QString::number(memoryBytes),
                       u"--docker-host"_s,  engine.host,
                       u"--container"_s,    container,
                       u"--user"_s,         u"%1:%2"_s.arg(user.uid).arg(user.gid),
                       u"--workdir"_s,      workdir};
}

} // namespace

QStringList containerExecArguments(const ContainerEngine &engine, const QString &container,
                                   const CommandUser &user, const QString &workdir,
                                   qint64 memoryBytes, const QString &program,
                                   const QStringList &arguments, const QStringList &network)
{
    return execArguments(engine, container, user, workdir, memoryBytes, network) +
           QStringList{u"--"_s, program} + arguments;
}

QStringList containerExecWaitingArguments(const ContainerEngine &engine, const QString &container,
                                          const CommandUser &user, const QString &workdir,
                                          qint64 memoryBytes)
{
    return execArguments(engine, container, user, workdir, memoryBytes, {}) +
           QStringList{u"--command-on-stdin"_s};
}

QByteArray containerExecCommandLine(const QString &program, const QStringList &arguments,
                                    const QProcessEnvironment &environment)
{
    return QJsonDocument(
               QJsonObject{
                   {u"command"_s, QJsonArray::fromStringList(QStringList{program} + arguments)},
                   {u"environment"_s, QJsonArray::fromStringList(execEnvironment(environment))}})
               .toJson(QJsonDocument::Compact) +
           '\n';
}

int runContainerExec(int argc, char *argv[])
{
    // Its parent (the sandbox host) dying is a stop like any other; the signals come through a
    // descriptor the event loop watches.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
    sigset_t stopping;
    sigemptyset(&stopping);
    for (const int signal : {SIGTERM, SIGINT, SIGHUP})
        sigaddset(&stopping, signal);
    ::sigprocmask(SIG_BLOCK, &stopping, nullptr);
    ::signal(SIGPIPE, SIG_IGN);
    if (::getppid() == 1)
        return 128 + SIGTERM;

    QCoreApplication app(argc, argv);
    QCommandLineParser parser;
    const QCommandLineOption host(u"docker-host"_s, u"The engine."_s, u"URL"_s);
    const QCommandLineOption container(u"container"_s, u"The container."_s, u"ID"_s);
    const QCommandLineOption user(u"user"_s, u"Whom the command runs as."_s, u"UID:GID"_s);
    const QCommandLineOption workdir(u"workdir"_s, u"Where it runs."_s, u"DIR"_s);
    const QCommandLineOption memory(u"memory-bytes"_s, u"The container's memory limit."_s,
                                    u"BYTES"_s);
    const QCommandLineOption tls(u"docker-tls-dir"_s, u"The engine's TLS certificates."_s,
                                 u"DIR"_s);
    const QCommandLineOption infoFd(u"info-fd"_s, u"Where to say the container's pid."_s, u"FD"_s);
    const QCommandLineOption blockFd(u"block-fd"_s, u"What to wait on before the command."_s,
                                     u"FD"_s);
    const QCommandLineOption onStdin(
        u"command-on-stdin"_s,
        u"Wait for the command and its environment on a line of the standard input."_s);
    parser.addOptions({host, container, user, workdir, memory, tls, infoFd, blockFd, onStdin});
    parser.addPositionalArgument(u"program"_s, u"The command."_s);
    if (!parser.parse(app.arguments().mid(1)) || !parser.isSet(host) || !parser.isSet(container) ||
        !parser.isSet(user) || parser.positionalArguments().isEmpty() == !parser.isSet(onStdin)) {
        std::fputs("usage: agentdeck container-exec --docker-host URL --container ID --user "
                   "UID:GID [--workdir DIR] (-- PROGRAM [ARGS...] | --command-on-stdin) (started "
                   "by a sandbox host)\n",
                   stderr);
        return 2;
    }
    const auto fd = [&parser](const QCommandLineOption &option) {
        bool ok = false;
        const int value = parser.value(option).toInt(&ok);
        return ok && value > 2 ? value : -1;
    };
    ExecOptions options{parser.value(host),
                        parser.value(container),
                        parser.value(user),
                        parser.value(workdir),
                        parser.value(memory).toLongLong(),
                        parser.positionalArguments(),
                        fd(infoFd),
                        fd(blockFd)};
    QStringList environment = execEnvironment(QProcessEnvironment::systemEnvironment());

    DockerEngine engine(options.host);
    engine.setTlsDirectory(parser.value(tls));
    if (parser.isSet(onStdin)) {
        // Started ahead of its command (SandboxHost), which comes as one line; an end of input
        // first is its host gone, or done with it.
        QFile input;
        if (!input.open(STDIN_FILENO, QIODevice::ReadOnly))
            return 2;
        const QJsonObject given = QJsonDocument::fromJson(input.readLine()).object();
        options.command = given.value(u"command"_s).toVariant().toStringList();
        environment = given.value(u"environment"_s).toVariant().toStringList();
        if (options.command.isEmpty())
            return 128 + SIGTERM;
    }
    int status = -1;
    bool stopped = false;
    const int signals = ::signalfd(-1, &stopping, SFD_CLOEXEC | SFD_NONBLOCK);
    QSocketNotifier notifier(signals, QSocketNotifier::Read);
    QObject::connect(&notifier, &QSocketNotifier::activated, &app, [&] {
        signalfd_siginfo info;
        while (::read(signals, &info, sizeof info) == sizeof info) {
        }
        if (std::exchange(stopped, true))
            return;
        // The command's stream ends once the kill has reached it, and run() returns then.
        QCoro::connect(stop(engine, options, &status), &app, [] {});
    });
    QCoro::connect(run(engine, options, environment, &stopped), &app, [&](int exitCode) {
        status = exitCode;
        QCoreApplication::exit(0);
    });
    if (status < 0)
        app.exec();
    ::close(signals);
    return stopped ? 128 + SIGTERM : status;
}

} // namespace AgentDeck
