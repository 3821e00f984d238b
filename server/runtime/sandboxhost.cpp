#include "sandboxhost.h"

#include "commandenvironment.h"
#include "commandoutput.h"
#include "containerexec.h"
#include "dockerengine.h"
#include "logging.h"
#include "mountaliases.h"
#include "openfiles.h"
#include "sandboxcgroups.h"
#include "usernamespacefilter.h"

#include <QCommandLineParser>
#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QLocalServer>
#include <QLocalSocket>
#include <QProcess>
#include <QSaveFile>
#include <QScopeGuard>
#include <QStandardPaths>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <pwd.h>
#include <unistd.h>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {

// The command record: its state (JSON, replaced whole) and what it printed (raw, as it comes).
const QString CommandStateFile = u"command.json"_s;
const QString CommandOutputFile = u"command.out"_s;
// How often a host looks whether its runtime dir is still there.
constexpr auto OrphanCheckInterval = std::chrono::seconds(2);
// How long a new host waits for its server at least: as long as the server waits for it to come
// up (LocalSandboxSettings::startTimeout). With a shorter idle timeout (0, 1 ms) it exited before
// the server connected, and every start failed.
constexpr int FirstClientWaitMs = 10'000;

// The system a sandbox sees, read-only: what programs need to run, not the host's homes, its
// /run (the database's and other services' sockets), /srv, /mnt or /root.
const char *const SystemDirs[] = {"/usr", "/etc", "/opt", "/var"};
// Often links into /usr (merged /usr): made as the same links.
const char *const SystemLinks[] = {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"};

// Where the dirs commands do not see are: their real paths, and the other names a bind mount
// gives them.
QStringList hiddenPaths(const QStringList &dirs)
{
    QStringList paths;
    for (const QString &dir : dirs) {
        const QString canonical = QFileInfo(dir).canonicalFilePath();
        if (canonical.isEmpty())
            continue;
        paths << canonical << mountAliasesOf(canonical);
    }
    return paths;
}

// The dirs above `path`, outermost first ("/a/b/c": "/a", "/a/b").
QStringList parentsOf(const QString &path)
{
    QStringList parents;
    for (QString parent = QFileInfo(path).path(); parent != u"/"_s && !parent.isEmpty();
         parent = QFileInfo(parent).path())
        parents.prepend(parent);
    return parents;
}

// A file of the sandbox's view of /etc: every user reads it, as the host's own (the server's
// umask would leave it to the server's user, and a command's uid could not read it).
bool writeForEveryone(const QString &path, const QByteArray &content)
{
    QFile file(path);
    return file.open(QIODevice::WriteOnly | QIODevice::Truncate) &&
           file.write(content) == content.size() &&
           file.setPermissions(QFile::ReadOwner | QFile::WriteOwner | QFile::ReadGroup |
                               QFile::ReadOther);
}

// In the forked child of a command's process, before exec.
void inCommandChild()
{
    ::setsid();
    // When the sandbox's processes together pass its cgroup's memory, the kernel kills one of
    // the command's, not the host that reports how the command ended.
    if (const int adj = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC); adj >= 0) {
        [[maybe_unused]] const ssize_t written = ::write(adj, "500", 3);
        ::close(adj);
    }
}

} // namespace

SandboxHost::SandboxHost(SandboxHostOptions options, QObject *parent)
    : QObject(parent)
    , m_options(std::move(options))
{
    m_idle.setSingleShot(true);
    connect(&m_idle, &QTimer::timeout, this, [this] {
        if (!m_process && !m_client && !m_keepWhileAlone) {
            qCInfo(lcRuntime) << "sandbox idle for" << m_options.idleTimeoutMs << "ms; exiting";
            if (m_options.container.isEmpty() || m_options.containerShared)
                quit();
            else
                QCoro::connect(stopContainerAndQuit(), this, [] {});
        } else {
            touch();
        }
    });
    connect(&m_orphanCheck, &QTimer::timeout, this, [this] {
        if (!QFileInfo::exists(m_options.runtimeDir)) {
            qCInfo(lcRuntime) << "the runtime dir is gone; exiting";
            quit();
        }
    });
    m_commandTimeout.setSingleShot(true);
    connect(&m_commandTimeout, &QTimer::timeout, this, [this] {
        m_timedOut = true;
        interruptCommand();
    });
    m_ownerSilence.setSingleShot(true);
    connect(&m_ownerSilence, &QTimer::timeout, this, [this] {
        qCWarning(lcRuntime) << "no word from the server for" << m_ownerSilence.interval()
                             << "ms; stopping its command";
        m_ownerSilent = true;
        interruptCommand();
    });
}

SandboxHost::~SandboxHost()
{
    stopCommand();
}

bool SandboxHost::start(QString *error)
{
    QDir().mkpath(m_options.runtimeDir);
    QDir().mkpath(m_options.home);
    m_isolation = m_options.container.isEmpty()
                      ? SandboxIsolation::probe()
                      : SandboxIsolation::forContainers(m_options.dockerHost);
    qCInfo(lcRuntime).noquote() << "sandbox isolation:"
                                << (m_isolation.isWeak() ? u"none (%1)"_s.arg(m_isolation.reason)
                                                         : m_isolation.mechanismName());
    // Before any command: what the host starts is counted in the cgroup from the first process.
    if (!m_options.cgroup.isEmpty()) {
        QString problem;
        if (SandboxCgroups::enter(m_options.cgroup, m_options.policy, m_options.runtimeDir,
                                  &problem))
            qCInfo(lcRuntime).noquote()
                << "sandbox cgroup:" << m_options.cgroup << "memory.max"
                << SandboxCgroups::memoryMax(m_options.policy) << "pids.max"
                << SandboxCgroups::pidsMax(m_options.policy) << "(0: no limit)";
        else
            qCWarning(lcRuntime).noquote()
                << "sandbox cgroup: none, the limits are per process only:" << problem;
    }
    if (!chooseCommandUser(error))
        return false;

    // The socket's path, then the pid, each written whole, before listening: whoever connects
    // to the socket finds the files that name it.
    const QDir dir(m_options.runtimeDir);
    for (const auto &[name, content] :
         {std::pair{u"sandbox.socket"_s, m_options.socketPath.toUtf8()},
          std::pair{u"sandbox.pid"_s, QByteArray::number(QCoreApplication::applicationPid())}}) {
        QSaveFile file(dir.filePath(name));
        if (!file.open(QIODevice::WriteOnly) || file.write(content) != content.size() ||
            !file.commit()) {
            *error = u"cannot write "_s + file.fileName();
            return false;
        }
    }
    QLocalServer::removeServer(m_options.socketPath);
    m_server = new QLocalServer(this);
    m_server->setSocketOptions(QLocalServer::UserAccessOption);
    if (!m_server->listen(m_options.socketPath)) {
        *error = u"cannot listen on %1: %2"_s.arg(m_options.socketPath, m_server->errorString());
        return false;
    }
    connect(m_server, &QLocalServer::newConnection, this, &SandboxHost::onNewConnection);

    m_idle.start(std::max(m_options.idleTimeoutMs, FirstClientWaitMs));
    m_orphanCheck.start(OrphanCheckInterval);
    prestartExec();
    return true;
}

void SandboxHost::touch()
{
    m_idle.start(m_options.idleTimeoutMs);
}

void SandboxHost::onNewConnection()
{
    while (QLocalSocket *socket = m_server->nextPendingConnection()) {
        if (m_client) {
            m_client->disconnect(this);
            m_client->abort();
            m_client->deleteLater();
        }
        m_client = socket;
        m_buffer.clear();
        m_keepWhileAlone = false; // this server decides anew when it stops
        connect(socket, &QLocalSocket::readyRead, this, &SandboxHost::onReadyRead);
        connect(socket, &QLocalSocket::disconnected, socket, &QObject::deleteLater);
        touch();
    }
}

void SandboxHost::onReadyRead()
{
    if (!m_client)
        return;
    m_buffer += m_client->readAll();
    qsizetype newline;
    while ((newline = m_buffer.indexOf('\n')) >= 0) {
        const QByteArray line = m_buffer.left(newline);
        m_buffer.remove(0, newline + 1);
        const QJsonDocument document = QJsonDocument::fromJson(line);
        if (document.isObject())
            handle(document.object());
        else
            send({{u"type"_s, u"error"_s}, {u"detail"_s, u"not a JSON object"_s}});
    }
}

void SandboxHost::handle(const QJsonObject &message)
{
    touch();
    const QString op = message.value(u"op"_s).toString();
    if (op == u"exec"_s) {
        if (m_process && m_interrupted) {
            // The command in flight was stopped and is being reaped: this one follows it.
            m_queued = message;
            return;
        }
        if (m_process) {
            send({{u"type"_s, u"result"_s},
                  {u"request_id"_s, message.value(u"request_id"_s)},
                  {u"output"_s, u"the sandbox is busy with another command"_s},
                  {u"exit_code"_s, 125},
                  {u"interrupted"_s, false}});
            return;
        }
        startCommand(message);
    } else if (op == u"interrupt"_s) {
        interruptCommand();
    } else if (op == u"keep_while_alone"_s) {
        m_keepWhileAlone = true;
    } else if (op == u"owner_alive"_s) {
        if (m_ownerSilence.isActive())
            m_ownerSilence.start();
    } else if (op == u"status"_s) {
        send({{u"type"_s, u"status"_s},
              {u"busy"_s, m_process != nullptr},
              {u"request_id"_s, m_requestId},
              {u"command"_s, m_command},
              {u"pid"_s, QCoreApplication::applicationPid()},
              {u"isolation"_s, m_isolation.mechanismName()}});
    } else if (op == u"shutdown"_s) {
        interruptCommand();
        send({{u"type"_s, u"bye"_s}});
        if (m_client)
            m_client->flush();
        quit();
    } else {
        send({{u"type"_s, u"error"_s}, {u"detail"_s, u"unknown op \"%1\""_s.arg(op)}});
    }
}

void SandboxHost::startCommand(const QJsonObject &message)
{
    m_process = new QProcess(this);
    m_requestId = message.value(u"request_id"_s).toString();
    m_command = message.value(u"command"_s).toString();
    m_actionId = message.value(u"action_id"_s).toString();
    m_secrets.clear();
    const QJsonObject secrets = message.value(u"environment"_s).toObject();
    for (auto it = secrets.constBegin(); it != secrets.constEnd(); ++it)
        m_secrets.insert(it.key(), it.value().toString());
    const int timeoutMs = message.value(u"timeout_ms"_s).toInt();
    const int ownerSilenceMs = message.value(u"owner_silence_ms"_s).toInt();
    m_interrupted = false;
    m_timedOut = false;
    m_ownerSilent = false;
    m_output = std::make_unique<CommandOutputSink>(m_secrets, [this](const QString &piece) {
        send({{u"type"_s, u"output"_s}, {u"request_id"_s, m_requestId}, {u"text"_s, piece}});
    });
    // The output first, then the state naming the action: a record never pairs an action with
    // an earlier command's output.
    m_outputFile.close();
    m_outputFile.setFileName(QDir(m_options.runtimeDir).filePath(CommandOutputFile));
    if (!m_outputFile.open(QIODevice::WriteOnly | QIODevice::Truncate | QIODevice::Unbuffered))
        qCWarning(lcRuntime) << "cannot record the command's output:" << m_outputFile.errorString();
    recordCommand({{u"action_id"_s, m_actionId}, {u"finished"_s, false}});
    m_process->setProcessChannelMode(QProcess::MergedChannels);
    m_process->setStandardInputFile(QProcess::nullDevice());
    m_process->setWorkingDirectory(m_options.workspace);
    QProcessEnvironment environment = commandEnvironment();
    for (auto it = m_secrets.cbegin(); it != m_secrets.cend(); ++it)
        environment.insert(it.key(), it.value());
    environment.insert(u"HOME"_s, m_options.home);
    m_process->setProcessEnvironment(environment);
    m_networkProblem.clear();
    const bool inContainer = m_isolation.mechanism == SandboxIsolation::Mechanism::Container;
    const bool egress = !m_isolation.isWeak() &&
                        m_options.policy.network == SandboxPolicy::Network::Egress &&
                        m_isolation.userModeNetwork && m_network.prepare(&m_networkProblem);
    // A container-exec leads its command as a command-leader does.
    m_led = m_isolation.isWeak() || inContainer;
    // bubblewrap loads the filter from a descriptor this command alone inherits; a leader
    // installs it itself.
    const int seccompFile = m_led ? -1 : UserNamespaceFilter::programFile();
    const auto closeSeccompFile = qScopeGuard([seccompFile] {
        if (seccompFile >= 0)
            ::close(seccompFile);
    });
    m_process->setChildProcessModifier([egress, network = &m_network, seccompFile] {
        inCommandChild();
        if (seccompFile >= 0)
            ::fcntl(seccompFile, F_SETFD, 0);
        if (egress)
            network->inChild();
    });
    const QStringList bash{u"-c"_s, u"--"_s, m_command};
    if (inContainer && !egress && takeReadyExec()) {
        m_process->write(containerExecCommandLine(u"bash"_s, bash, environment));
        m_process->closeWriteChannel();
    } else if (inContainer) {
        watchCommand();
        // container-exec reports the container's process and waits, as bubblewrap does.
        const QStringList network = egress ? m_network.childArguments() : QStringList();
        m_process->start(QCoreApplication::applicationFilePath(),
                         containerExecArguments(containerEngine(), m_options.container,
                                                containerUser(), m_options.workspace,
                                                m_options.policy.memoryBytes, u"bash"_s, bash,
                                                network));
        attachNetwork(egress);
    } else if (!m_led && seccompFile < 0) {
        watchCommand();
        // Not run without it: the command could make a user namespace of its own.
        const QString why = u"cannot make the sandbox's seccomp filter: "_s +
                            QString::fromLocal8Bit(std::strerror(errno));
        qCWarning(lcRuntime).noquote() << why;
        m_process->start(u"/bin/sh"_s, {u"-c"_s, u"echo \"$0\" >&2; exit 126"_s, why});
    } else if (!m_led) {
        watchCommand();
        m_process->start(u"bwrap"_s, bubblewrapArguments(egress, seccompFile) << u"bash"_s << bash);
        attachNetwork(egress);
    } else {
        // No PID namespace: a leader of its own ends what the command leaves behind. The count
        // of processes is the server's user's, all of them, unless the command has a uid of its
        // own.
        SandboxPolicy limits = m_options.policy;
        if (!m_user)
            limits.processes = 0;
        watchCommand();
        m_process->start(QCoreApplication::applicationFilePath(),
                         commandLeaderArguments(limits, m_user, u"bash"_s, bash));
    }
    m_commandGroup = m_process->processId();
    if (timeoutMs > 0)
        m_commandTimeout.start(timeoutMs);
    if (ownerSilenceMs > 0)
        m_ownerSilence.start(ownerSilenceMs);
}

void SandboxHost::watchCommand()
{
    connect(m_process, &QProcess::readyRead, this, &SandboxHost::onOutput);
    connect(m_process, &QProcess::finished, this, &SandboxHost::onCommandFinished);
    connect(m_process, &QProcess::errorOccurred, this, [this](QProcess::ProcessError error) {
        if (error == QProcess::FailedToStart)
            onCommandFinished();
    });
}

ContainerEngine SandboxHost::containerEngine() const
{
    return {m_options.dockerHost, m_options.dockerTlsDirectory};
}

CommandUser SandboxHost::containerUser() const
{
    return m_user.value_or(CommandUser{::getuid(), ::getgid()});
}

void SandboxHost::prestartExec()
{
    if (m_readyExec || m_isolation.mechanism != SandboxIsolation::Mechanism::Container ||
        m_options.policy.network == SandboxPolicy::Network::Egress)
        return;
    m_readyExecArguments =
        containerExecWaitingArguments(containerEngine(), m_options.container, containerUser(),
                                      m_options.workspace, m_options.policy.memoryBytes);
    m_readyExec = new QProcess(this);
    m_readyExec->setProcessChannelMode(QProcess::MergedChannels);
    m_readyExec->setWorkingDirectory(m_options.workspace);
    m_readyExec->setProcessEnvironment(commandEnvironment());
    m_readyExec->setChildProcessModifier(inCommandChild);
    m_readyExec->start(QCoreApplication::applicationFilePath(), m_readyExecArguments);
}

bool SandboxHost::takeReadyExec()
{
    if (!m_readyExec)
        return false;
    QProcess *ready = std::exchange(m_readyExec, nullptr);
    // Started for another user or limit than the command's now, or gone: started anew.
    if (ready->state() != QProcess::Running ||
        m_readyExecArguments !=
            containerExecWaitingArguments(containerEngine(), m_options.container, containerUser(),
                                          m_options.workspace, m_options.policy.memoryBytes)) {
        discard(ready);
        return false;
    }
    delete m_process;
    m_process = ready;
    watchCommand();
    return true;
}

void SandboxHost::discard(QProcess *process)
{
    if (!process)
        return;
    process->disconnect();
    process->kill();
    process->waitForFinished(1000);
    delete process;
}

void SandboxHost::attachNetwork(bool egress)
{
    if (egress && !m_network.attach(m_isolation.root, m_options.egressAllowed, &m_networkProblem))
        qCWarning(lcRuntime).noquote() << "the command runs without network:" << m_networkProblem;
}

QStringList SandboxHost::bubblewrapArguments(bool egress, int seccompFile) const
{
    QStringList arguments{u"--seccomp"_s, QString::number(seccompFile)};
    for (const char *dir : SystemDirs) {
        if (QFileInfo(QFile::decodeName(dir)).isDir())
            arguments << u"--ro-bind"_s << QFile::decodeName(dir) << QFile::decodeName(dir);
    }
    for (const char *link : SystemLinks) {
        const QFileInfo info(QFile::decodeName(link));
        if (info.isSymLink())
            arguments << u"--symlink"_s << info.symLinkTarget() << info.filePath();
        else if (info.isDir())
            arguments << u"--ro-bind"_s << info.filePath() << info.filePath();
    }
    // /tmp as everywhere: anyone's to write in, the sticky bit keeping each to their files.
    // It and /dev/shm are memory no rlimit counts: sized, they hold the policy's tmpfsBytes().
    arguments << u"--dev"_s << u"/dev"_s << u"--proc"_s << u"/proc"_s;
    for (const auto &[dir, bytes] : {std::pair{u"/dev/shm"_s, m_options.policy.shmBytes()},
                                     std::pair{u"/tmp"_s, m_options.policy.tmpBytes()}}) {
        if (m_isolation.sizedTmpfs)
            arguments << u"--size"_s << QString::number(bytes);
        arguments << u"--perms"_s << u"1777"_s << u"--tmpfs"_s << dir;
    }
    // The data dir may be in the view (/var/lib/agentdeck), also under another name through a
    // bind mount: an empty dir in each place, before the workspace and home in it are bound.
    const QStringList hidden = hiddenPaths(m_options.hidden);
    for (const QString &dir : hidden)
        arguments << u"--tmpfs"_s << dir;
    // The dirs that lead to the workspace and home, where bubblewrap has to make them (in the
    // hidden data dir, in /tmp): it made them 0700 root's, which a command could not pass.
    for (const QString &dir : {m_options.workspace, m_options.home}) {
        for (const QString &parent : parentsOf(dir))
            arguments << u"--perms"_s << u"0755"_s << u"--dir"_s << parent;
    }
    arguments << u"--bind"_s << m_options.workspace << m_options.workspace << u"--bind"_s
              << m_options.home << m_options.home;
    // The workspace by the name its root was given, where the view does not show the host's
    // link already (the system dirs do).
    for (const QString &alias : std::as_const(m_options.workspaceAliases)) {
        const bool inSystemView =
            std::any_of(std::begin(SystemDirs), std::end(SystemDirs), [&alias](const char *dir) {
                const QString system = QFile::decodeName(dir);
                return alias.startsWith(system + u'/');
            });
        if (!QDir::isAbsolutePath(alias) || inSystemView || alias == m_options.workspace)
            continue;
        for (const QString &parent : parentsOf(alias))
            arguments << u"--perms"_s << u"0755"_s << u"--dir"_s << parent;
        arguments << u"--symlink"_s << m_options.workspace << alias;
    }
    arguments << u"--chdir"_s << m_options.workspace
              << SandboxIsolation::namespaceArguments(
                     m_isolation.root, m_options.policy.network == SandboxPolicy::Network::Host)
              << u"--die-with-parent"_s << u"--new-session"_s;
    // A uid of its own has no name on the host: git, ssh and the shell's prompt look it up.
    if (m_user && ::getpwuid(m_user->uid) == nullptr) {
        for (const auto &[name, line] :
             {std::pair{u"passwd"_s,
                        u"sandbox:x:%1:%2:AgentDeck sandbox:%3:/bin/bash\n"_s.arg(m_user->uid)
                            .arg(m_user->gid)
                            .arg(m_options.home)},
              std::pair{u"group"_s, u"sandbox:x:%1:\n"_s.arg(m_user->gid)}}) {
            QFile host(u"/etc/"_s + name);
            const QString own = QDir(m_options.runtimeDir).filePath(name);
            if (host.open(QIODevice::ReadOnly) &&
                writeForEveryone(own, host.readAll() + line.toUtf8()))
                arguments << u"--ro-bind"_s << own << host.fileName();
        }
    }
    if (egress) {
        arguments << m_network.childArguments();
        // The host's resolver may be on its loopback, which the sandbox does not reach;
        // slirp4netns answers DNS itself. A resolv.conf that is a link is left as it is.
        const QString resolver = QDir(m_options.runtimeDir).filePath(u"resolv.conf"_s);
        if (!QFileInfo(u"/etc/resolv.conf"_s).isSymLink() &&
            writeForEveryone(resolver, "nameserver " + EgressFilter::dnsServer().toLatin1() + '\n'))
            arguments << u"--ro-bind"_s << resolver << u"/etc/resolv.conf"_s;
    }
    // The other tmpfs, of no size (the root bubblewrap makes, /dev, the hidden dirs), read-only:
    // a command wrote gigabytes into them. The mounts in them (the workspace, /tmp) stay as
    // they are.
    arguments << u"--remount-ro"_s << u"/"_s << u"--remount-ro"_s << u"/dev"_s;
    for (const QString &dir : hidden)
        arguments << u"--remount-ro"_s << dir;
    arguments << u"--"_s;
    if (m_user)
        arguments << u"setpriv"_s << u"--reuid=%1"_s.arg(m_user->uid)
                  << u"--regid=%1"_s.arg(m_user->gid) << u"--clear-groups"_s << u"--no-new-privs"_s
                  << u"--bounding-set=-all"_s << u"--inh-caps=-all"_s << u"--"_s;
    if (const QStringList limits = prlimitArguments(m_options.policy); !limits.isEmpty())
        arguments << u"prlimit"_s << limits << u"--"_s;
    return arguments;
}

bool SandboxHost::chooseCommandUser(QString *error)
{
    if (!m_isolation.root)
        return true;
    m_user = commandUserFor(m_options.workspace, m_options.workspaceMadeByServer, {m_options.home},
                            m_options.sandboxUid, error);
    return m_user.has_value();
}

void SandboxHost::onOutput()
{
    if (m_process && m_output)
        record(m_output->add(m_process->readAll()));
}

void SandboxHost::record(QByteArrayView kept)
{
    if (!kept.isEmpty() && m_outputFile.isOpen())
        m_outputFile.write(kept.data(), kept.size());
}

void SandboxHost::onCommandFinished()
{
    if (!m_process)
        return;
    m_commandTimeout.stop();
    m_ownerSilence.stop();
    onOutput();
    record(m_output->finish());
    QString output = m_output->result(m_timedOut);
    if (m_ownerSilent)
        output += u"\n[stopped: the server running this conversation did not renew its lease "
                  "for %1 ms]\n"_s.arg(m_ownerSilence.interval());
    int exitCode = m_process->exitStatus() == QProcess::NormalExit ? m_process->exitCode() : -1;
    if (m_process->error() == QProcess::FailedToStart) {
        output = m_process->errorString();
        exitCode = 127;
    }
    if (m_timedOut)
        exitCode = 124;
    const bool interrupted = m_interrupted && !m_timedOut;
    if (!interrupted && !m_timedOut) {
        if (const QString note = limitNote(m_options.policy, exitCode, output); !note.isEmpty())
            output += (output.endsWith(u'\n') || output.isEmpty() ? u""_s : u"\n"_s) + note + u'\n';
    }
    m_network.stop();
    if (!m_networkProblem.isEmpty())
        output += (output.endsWith(u'\n') || output.isEmpty() ? u""_s : u"\n"_s) +
                  u"[the command had no network: %1]\n"_s.arg(m_networkProblem);
    m_outputFile.close();
    recordCommand({{u"action_id"_s, m_actionId},
                   {u"finished"_s, true},
                   {u"exit_code"_s, exitCode},
                   {u"interrupted"_s, interrupted},
                   {u"timed_out"_s, m_timedOut}});
    send({{u"type"_s, u"result"_s},
          {u"request_id"_s, m_requestId},
          {u"output"_s, output},
          {u"exit_code"_s, exitCode},
          {u"interrupted"_s, interrupted}});
    // What the command left running in the background ends with it. Bubblewrap's PID
    // namespace took care of that; without it, `sleep 1000 &` outlived the command, the
    // conversation's archive and its delete.
    if (m_commandGroup > 0)
        ::kill(-static_cast<pid_t>(m_commandGroup), SIGKILL);
    m_commandGroup = 0;
    m_process->deleteLater();
    m_process = nullptr;
    m_requestId.clear();
    m_command.clear();
    m_output.reset();
    touch();
    if (const QJsonObject next = std::exchange(m_queued, {}); !next.isEmpty())
        handle(next);
    else
        prestartExec();
}

void SandboxHost::recordCommand(const QJsonObject &state)
{
    // Replaced whole, so that a reader never sees half of it. Not synced: the record is for a
    // server that died, not for a machine that did.
    const QString path = QDir(m_options.runtimeDir).filePath(CommandStateFile);
    QFile file(path + u".new"_s);
    const QByteArray json = QJsonDocument(state).toJson(QJsonDocument::Compact);
    const bool written =
        file.open(QIODevice::WriteOnly | QIODevice::Truncate) && file.write(json) == json.size();
    file.close();
    if (!written || ::rename(QFile::encodeName(file.fileName()).constData(),
                             QFile::encodeName(path).constData()) != 0)
        qCWarning(lcRuntime) << "cannot record the command's state in" << path;
}

void SandboxHost::interruptCommand()
{
    if (!m_process || m_process->state() == QProcess::NotRunning)
        return;
    m_interrupted = true;
    stopCommand();
}

void SandboxHost::stopCommand()
{
    const auto pid = static_cast<pid_t>(m_process ? m_process->processId() : 0);
    if (pid <= 0)
        return;
    // A leader ends the whole tree on SIGTERM; bubblewrap's PID namespace ends with its group.
    ::kill(m_led ? pid : -pid, m_led ? SIGTERM : SIGKILL);
}

void SandboxHost::send(const QJsonObject &message)
{
    if (!m_client || m_client->state() != QLocalSocket::ConnectedState)
        return;
    m_client->write(QJsonDocument(message).toJson(QJsonDocument::Compact) + '\n');
}

QCoro::Task<> SandboxHost::stopContainerAndQuit()
{
    // No server watches (it would have stopped this host itself): the container would run on,
    // idle, until one comes back. Stopped, it keeps its disk, and the next start starts it.
    DockerEngine engine(m_options.dockerHost);
    engine.setTlsDirectory(m_options.dockerTlsDirectory);
    auto stopping = engine.stopContainer(m_options.container, std::chrono::seconds(1));
    if (const DockerResult stopped = co_await std::move(stopping);
        !stopped.ok() && stopped.status != 404)
        qCWarning(lcRuntime).noquote()
            << "cannot stop the container" << m_options.container.left(12) << ":" << stopped.error;
    quit();
}

void SandboxHost::quit()
{
    discard(std::exchange(m_readyExec, nullptr));
    stopCommand();
    if (m_process && m_led)
        m_process->waitForFinished(1000);
    // A newer sandbox of the same conversation may have replaced the pid file already.
    QFile pidFile(QDir(m_options.runtimeDir).filePath(u"sandbox.pid"_s));
    if (pidFile.open(QIODevice::ReadOnly) &&
        pidFile.readAll().trimmed().toLongLong() == QCoreApplication::applicationPid()) {
        pidFile.close();
        pidFile.remove();
    }
    if (m_server)
        m_server->close();
    Q_EMIT finished();
}

std::optional<CommandRecord> readLastCommand(const QString &runtimeDir)
{
    const QDir dir(runtimeDir);
    QFile stateFile(dir.filePath(CommandStateFile));
    if (!stateFile.open(QIODevice::ReadOnly))
        return std::nullopt;
    const QJsonObject state = QJsonDocument::fromJson(stateFile.readAll()).object();
    const auto actionId = parseWireId(state.value(u"action_id"_s).toString());
    if (!actionId)
        return std::nullopt;
    QFile outputFile(dir.filePath(CommandOutputFile));
    const QByteArray output =
        outputFile.open(QIODevice::ReadOnly) ? outputFile.read(MaxCommandOutputBytes + 1) : "";
    CommandRecord record;
    record.actionId = *actionId;
    record.finished = state.value(u"finished"_s).toBool();
    record.result.output = commandOutput(output, state.value(u"timed_out"_s).toBool());
    record.result.exitCode = record.finished ? state.value(u"exit_code"_s).toInt() : -1;
    record.result.interrupted = !record.finished || state.value(u"interrupted"_s).toBool();
    return record;
}

int runSandboxHost(int argc, char *argv[])
{
    // A session of its own: the sandbox survives its server and the server's process group.
    ::setsid();
    ::signal(SIGPIPE, SIG_IGN);
    QCoreApplication app(argc, argv);
    QCommandLineParser parser;
    const QCommandLineOption runtimeDir(u"runtime-dir"_s, u"Runtime dir."_s, u"DIR"_s);
    const QCommandLineOption socket(u"socket"_s, u"Unix socket path."_s, u"PATH"_s);
    const QCommandLineOption workspace(u"workspace"_s, u"Workspace dir."_s, u"DIR"_s);
    const QCommandLineOption home(u"home"_s, u"Sandbox home dir."_s, u"DIR"_s);
    const QCommandLineOption idle(u"idle-timeout-ms"_s, u"Exit when idle and unwatched."_s,
                                  u"MS"_s);
    const QCommandLineOption openFiles(
        u"open-files"_s, u"Soft limit of open files, for the commands too."_s, u"N"_s);
    const QCommandLineOption hide(u"hide"_s, u"A dir the commands do not see (repeatable)."_s,
                                  u"DIR"_s);
    const QCommandLineOption policy(u"policy"_s, u"The sandbox policy (JSON)."_s, u"JSON"_s);
    const QCommandLineOption sandboxUid(u"sandbox-uid"_s, u"The uid of a root host's commands."_s,
                                        u"UID"_s);
    const QCommandLineOption egressAllow(
        u"egress-allow"_s, u"A range the egress network reaches (repeatable)."_s, u"CIDR"_s);
    const QCommandLineOption madeByServer(
        u"workspace-made-by-server"_s,
        u"The server made the workspace: a root host may give it to the commands' uid."_s);
    const QCommandLineOption alias(u"workspace-alias"_s,
                                   u"Another name of the workspace (repeatable)."_s, u"PATH"_s);
    const QCommandLineOption container(u"container"_s, u"Run commands in this container."_s,
                                       u"ID"_s);
    const QCommandLineOption dockerHost(u"docker-host"_s, u"The container's engine."_s, u"URL"_s);
    const QCommandLineOption dockerTls(u"docker-tls-dir"_s, u"The engine's TLS certificates."_s,
                                       u"DIR"_s);
    const QCommandLineOption containerShared(
        u"container-shared"_s,
        u"Other replicas' sandboxes use the container too: it is not stopped with this host."_s);
    const QCommandLineOption cgroup(u"cgroup"_s, u"The sandbox's cgroup (v2) to move into."_s,
                                    u"DIR"_s);
    parser.addOptions({runtimeDir, socket, workspace, home, idle, openFiles, hide, policy,
                       sandboxUid, egressAllow, madeByServer, alias, container, dockerHost,
                       dockerTls, containerShared, cgroup});
    parser.process(app.arguments().mid(1));
    if (!parser.isSet(runtimeDir) || !parser.isSet(socket) || !parser.isSet(workspace)) {
        std::fputs("agentdeck sandbox-host: --runtime-dir, --socket and --workspace are required "
                   "(this mode is started by the server)\n",
                   stderr);
        return 2;
    }
    SandboxHostOptions options{
        parser.value(runtimeDir), parser.value(socket), parser.value(workspace),
        parser.value(home).isEmpty() ? QDir(parser.value(runtimeDir)).filePath(u"home"_s)
                                     : parser.value(home)};
    if (parser.isSet(idle))
        options.idleTimeoutMs = parser.value(idle).toInt();
    options.hidden = parser.values(hide);
    options.policy =
        SandboxPolicy::fromJson(QJsonDocument::fromJson(parser.value(policy).toUtf8()).object());
    options.sandboxUid = parser.value(sandboxUid).toUInt();
    for (const QString &text : parser.values(egressAllow)) {
        const auto range = Ipv4Range::parse(text);
        if (!range) {
            std::fputs(qPrintable(u"agentdeck sandbox-host: --egress-allow takes an IPv4 range "
                                  "(CIDR), not \"%1\"\n"_s.arg(text)),
                       stderr);
            return 2;
        }
        options.egressAllowed.append(*range);
    }
    options.workspaceMadeByServer = parser.isSet(madeByServer);
    options.workspaceAliases = parser.values(alias);
    options.container = parser.value(container);
    options.dockerHost = parser.value(dockerHost);
    options.dockerTlsDirectory = parser.value(dockerTls);
    options.containerShared = parser.isSet(containerShared);
    options.cgroup = parser.value(cgroup);
    // The server raised its own limit; the commands get the one it was started with.
    if (parser.isSet(openFiles))
        OpenFiles::setLimit(parser.value(openFiles).toLongLong());
    SandboxHost host(options);
    QObject::connect(&host, &SandboxHost::finished, &app, &QCoreApplication::quit,
                     Qt::QueuedConnection);
    QString error;
    if (!host.start(&error)) {
        std::fputs(qPrintable(u"agentdeck sandbox-host: "_s + error + u'\n'), stderr);
        return 1;
    }
    return app.exec();
}

} // namespace AgentDeck
