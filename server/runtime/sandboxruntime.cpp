#include "sandboxruntime.h"

#include "commandoutput.h"

#include "logging.h"
#include "signalwait.h"

#include <QCoreApplication>
#include <QCoroTimer>
#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QLocalSocket>
#include <QTimer>

#include <csignal>
#include <unistd.h>

using namespace Qt::StringLiterals;

namespace AgentDeck {

SandboxHostProcess SandboxHostProcess::of(const QString &runtimeDir)
{
    QFile file(QDir(runtimeDir).filePath(u"sandbox.pid"_s));
    const qint64 pid = file.open(QIODevice::ReadOnly) ? file.readAll().trimmed().toLongLong() : 0;
    return {pid, runtimeDir};
}

bool SandboxHostProcess::isRunning() const
{
    // Never 0 or below: kill() would signal a process group, the server's own included.
    if (pid <= 0)
        return false;
    QFile file(u"/proc/%1/cmdline"_s.arg(pid));
    if (!file.open(QIODevice::ReadOnly))
        return false;
    const QList<QByteArray> arguments = file.readAll().split('\0');
    const qsizetype at = arguments.indexOf("--runtime-dir");
    if (!arguments.contains("sandbox-host") || at <= 0 || at + 1 >= arguments.size())
        return false;
    // The same dir, under another name maybe (the data dir given through a link).
    const QString named = QFile::decodeName(arguments[at + 1]);
    return named == runtimeDir ||
           QFileInfo(named).canonicalFilePath() == QFileInfo(runtimeDir).canonicalFilePath();
}

std::optional<QDateTime> SandboxHostProcess::startedAt() const
{
    // Field 22 of /proc/PID/stat, in clock ticks since boot; the name before it (field 2) is in
    // parentheses and may hold spaces and parentheses of its own, so fields count from its end.
    QFile stat(u"/proc/%1/stat"_s.arg(pid));
    QFile system(u"/proc/stat"_s);
    if (pid <= 0 || !stat.open(QIODevice::ReadOnly) || !system.open(QIODevice::ReadOnly))
        return std::nullopt;
    const QByteArray line = stat.readAll();
    const QList<QByteArray> fields = line.mid(line.lastIndexOf(')') + 2).split(' ');
    constexpr int StartTimeAfterName = 22 - 3;
    if (fields.size() <= StartTimeAfterName)
        return std::nullopt;
    const qint64 ticks = fields[StartTimeAfterName].toLongLong();
    for (const QByteArray &entry : system.readAll().split('\n')) {
        if (entry.startsWith("btime ")) {
            const qint64 bootSeconds = entry.mid(6).trimmed().toLongLong();
            const qint64 hertz = ::sysconf(_SC_CLK_TCK);
            return QDateTime::fromMSecsSinceEpoch(bootSeconds * 1000 + ticks * 1000 / hertz,
                                                  Qt::UTC);
        }
    }
    return std::nullopt;
}

void SandboxHostProcess::kill() const
{
    if (isRunning())
        ::kill(static_cast<pid_t>(pid), SIGKILL);
}

SandboxRuntime::SandboxRuntime(const QString &socketPath, SandboxHostProcess host,
                               std::chrono::milliseconds ownerSilenceLimit, QObject *parent)
    : QObject(parent)
    , m_socketPath(socketPath)
    , m_host(std::move(host))
    , m_ownerSilenceLimit(ownerSilenceLimit)
    , m_socket(new QLocalSocket(this))
    , m_lastActivityMs(QDateTime::currentMSecsSinceEpoch())
{
    connect(m_socket, &QLocalSocket::readyRead, this, &SandboxRuntime::onReadyRead);
    connect(m_socket, &QLocalSocket::disconnected, this, [this] {
        m_inbox.enqueue({{u"type"_s, u"lost"_s}});
        Q_EMIT received();
        Q_EMIT lost();
    });
}

SandboxRuntime::~SandboxRuntime()
{
    m_socket->disconnect(this);
}

bool SandboxRuntime::isConnected() const
{
    return m_socket->state() == QLocalSocket::ConnectedState;
}

QCoro::Task<bool> SandboxRuntime::connectToHost(std::chrono::milliseconds timeout)
{
    const qint64 deadline = QDateTime::currentMSecsSinceEpoch() + timeout.count();
    // The deadline is looked at after a try, never before one: a server frozen (SIGSTOP, a
    // paused VM) past it woke to find the host up, and gave up on it without a look.
    while (!m_connectCancelled) {
        m_socket->connectToServer(m_socketPath);
        if (m_socket->waitForConnected(0) || m_socket->state() == QLocalSocket::ConnectedState)
            co_return true;
        if (m_socket->state() == QLocalSocket::ConnectingState) {
            auto connecting =
                signalOrTimeout(m_socket, &QLocalSocket::connected, std::chrono::seconds(1));
            co_await std::move(connecting);
            if (isConnected())
                co_return !m_connectCancelled;
        }
        m_socket->abort();
        if (QDateTime::currentMSecsSinceEpoch() >= deadline)
            break;
        auto pause = QCoro::sleepFor(std::chrono::milliseconds(25));
        co_await std::move(pause);
    }
    co_return false;
}

void SandboxRuntime::send(const QJsonObject &message)
{
    m_socket->write(QJsonDocument(message).toJson(QJsonDocument::Compact) + '\n');
}

void SandboxRuntime::onReadyRead()
{
    m_buffer += m_socket->readAll();
    qsizetype newline;
    while ((newline = m_buffer.indexOf('\n')) >= 0) {
        const QJsonDocument document = QJsonDocument::fromJson(m_buffer.left(newline));
        m_buffer.remove(0, newline + 1);
        if (document.isObject())
            m_inbox.enqueue(document.object());
    }
    if (!m_inbox.isEmpty())
        Q_EMIT received();
}

QCoro::Task<CommandResult> SandboxRuntime::execute(CommandRequest request)
{
    QPointer<SandboxRuntime> self(this);
    const CommandDeadline deadline(request.timeout);
    while (self && m_executing && !deadline.passed()) {
        auto waiting = signalOrTimeout(this, &SandboxRuntime::commandEnded,
                                       deadline.nextWait(std::chrono::seconds(1)));
        co_await std::move(waiting);
    }
    if (!self)
        co_return CommandResult{u"[the sandbox went away while the command ran]"_s, -1, true};
    if (m_executing)
        co_return CommandDeadline::timedOutWaiting();
    request.timeout = deadline.remaining();
    m_executing = true;
    auto running = executeNow(std::move(request));
    const CommandResult result = co_await std::move(running);
    if (self) {
        m_executing = false;
        Q_EMIT commandEnded();
    }
    co_return result;
}

QCoro::Task<CommandResult> SandboxRuntime::executeNow(CommandRequest request)
{
    // What the command printed, as its live pieces brought it: a sandbox that goes away sends no
    // result, and the observation said only that it went (a subscriber had seen the lines).
    OutputCollector printed;
    const auto endedWithout = [&printed](const QString &why) {
        QString output = commandOutput(printed.kept(), false);
        if (!output.isEmpty() && !output.endsWith(u'\n'))
            output += u'\n';
        return CommandResult{output + why, -1, true};
    };
    const QString wentAway = u"[the sandbox went away while the command ran]"_s;
    QPointer<SandboxRuntime> self(this);
    const QString requestId = QUuid::createUuid().toString(QUuid::WithoutBraces);
    m_pendingRequest = requestId;
    m_interruptSentMs = 0;
    m_inbox.clear(); // what came for earlier commands
    const qint64 startedMs = QDateTime::currentMSecsSinceEpoch();
    m_lastActivityMs = startedMs;
    QJsonObject environment;
    for (auto it = request.environment.cbegin(); it != request.environment.cend(); ++it)
        environment.insert(it.key(), it.value());
    send({{u"op"_s, u"exec"_s},
          {u"request_id"_s, requestId},
          {u"command"_s, request.command},
          {u"timeout_ms"_s, qint64(request.timeout.count())},
          {u"action_id"_s, request.actionId.isNull() ? QString() : toWireId(request.actionId)},
          {u"owner_silence_ms"_s, qint64(m_ownerSilenceLimit.count())},
          {u"environment"_s, environment}});
    for (;;) {
        if (!self)
            co_return endedWithout(wentAway);
        if (m_inbox.isEmpty()) {
            if (!isConnected())
                co_return endedWithout(wentAway);
            // A host that does not stop the command when asked, or at its timeout, is frozen
            // (SIGSTOP, a paused VM): only killing it ends the command.
            const qint64 now = QDateTime::currentMSecsSinceEpoch();
            const bool unanswered = m_interruptSentMs && now - m_interruptSentMs > UnresponsiveMs;
            const bool overdue = request.timeout.count() > 0 &&
                                 now - startedMs > request.timeout.count() + UnresponsiveMs;
            if (unanswered || overdue) {
                qCWarning(lcRuntime)
                    << "sandbox host" << m_host.pid << "does not answer; killing it";
                m_host.kill();
                m_socket->abort();
                m_pendingRequest.clear();
                co_return endedWithout(u"[the sandbox did not answer and was stopped]"_s);
            }
            auto waiting =
                signalOrTimeout(this, &SandboxRuntime::received, std::chrono::seconds(1));
            co_await std::move(waiting);
            continue;
        }
        const QJsonObject reply = m_inbox.dequeue();
        if (reply.value(u"type"_s) == u"output"_s) {
            if (reply.value(u"request_id"_s).toString() == requestId) {
                const QString piece = reply.value(u"text"_s).toString();
                printed.add(piece.toUtf8());
                if (request.onOutput)
                    request.onOutput(piece);
            }
            continue;
        }
        if (reply.value(u"type"_s) == u"lost"_s) {
            m_pendingRequest.clear();
            co_return endedWithout(wentAway);
        }
        if (reply.value(u"type"_s) == u"result"_s &&
            reply.value(u"request_id"_s).toString() == requestId) {
            m_pendingRequest.clear();
            m_lastActivityMs = QDateTime::currentMSecsSinceEpoch();
            co_return CommandResult{reply.value(u"output"_s).toString(),
                                    reply.value(u"exit_code"_s).toInt(),
                                    reply.value(u"interrupted"_s).toBool()};
        }
    }
}

void SandboxRuntime::interrupt()
{
    if (!isConnected())
        return;
    send({{u"op"_s, u"interrupt"_s}});
    if (!m_pendingRequest.isEmpty() && !m_interruptSentMs)
        m_interruptSentMs = QDateTime::currentMSecsSinceEpoch();
}

void SandboxRuntime::ownerAlive()
{
    if (!m_pendingRequest.isEmpty() && isConnected())
        send({{u"op"_s, u"owner_alive"_s}});
}

void SandboxRuntime::keepWhileAlone()
{
    if (!isConnected())
        return;
    send({{u"op"_s, u"keep_while_alone"_s}});
    m_socket->flush(); // the server is stopping
}

void SandboxRuntime::shutdown()
{
    if (isConnected()) {
        send({{u"op"_s, u"shutdown"_s}});
        m_socket->flush();
        m_socket->disconnectFromServer();
    }
    // A host that does not answer is not left behind.
    QTimer::singleShot(2000, QCoreApplication::instance(), [host = m_host] { host.kill(); });
}

} // namespace AgentDeck
