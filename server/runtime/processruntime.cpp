#include "processruntime.h"

#include "commandenvironment.h"
#include "commandoutput.h"
#include "logging.h"
#include "openfiles.h"
#include "sandboxisolation.h"

#include <QCoroProcess>
#include <QCoroSignal>
#include <QDir>
#include <QProcess>

#include <csignal>
#include <sys/prctl.h>
#include <unistd.h>

using namespace Qt::StringLiterals;

namespace AgentDeck {

QCoro::Task<CommandResult> ProcessRuntime::execute(CommandRequest request)
{
    // Before the process, which may still signal while it goes.
    CommandOutputSink output(request.environment, request.onOutput);
    auto process = std::make_unique<QProcess>();
    m_process = process.get();
    m_interrupted = false;
    process->setProcessChannelMode(QProcess::MergedChannels);
    process->setWorkingDirectory(request.workingDir);
    process->setStandardInputFile(QProcess::nullDevice());
    QProcessEnvironment environment = commandEnvironment();
    for (auto it = request.environment.cbegin(); it != request.environment.cend(); ++it)
        environment.insert(it.key(), it.value());
    if (m_settings.user)
        environment.insert(u"HOME"_s, request.workingDir);
    process->setProcessEnvironment(environment);
    // A process group of its own, so that an interrupt, a timeout and the command's end stop
    // its children too, and its leader dies with the server, ending the command's whole tree.
    // It also gets the limit of open files the server was started with, not the server's own.
    const bool led = !m_settings.leaderProgram.isEmpty();
    process->setChildProcessModifier([openFiles = OpenFiles::startingLimit(), led] {
        ::setsid();
        ::prctl(PR_SET_PDEATHSIG, led ? SIGTERM : SIGKILL);
        OpenFiles::setLimit(openFiles);
    });
    QObject::connect(process.get(), &QProcess::readyRead, process.get(),
                     [&output, source = process.get()] { output.add(source->readAll()); });
    // "--": a command that starts with a dash is a command, not bash's options.
    const QStringList bash{u"-c"_s, u"--"_s, request.command};
    if (led) {
        // Without a user namespace the count of processes is every process of the server's
        // user: it is only limited for a command with a uid of its own.
        SandboxPolicy limits = m_settings.policy;
        if (!m_settings.user)
            limits.processes = 0;
        process->start(m_settings.leaderProgram,
                       commandLeaderArguments(limits, m_settings.user, u"bash"_s, bash));
    } else {
        process->start(u"bash"_s, bash);
    }

    CommandResult result;
    auto starting = qCoro(process.get()).waitForStarted();
    if (!co_await std::move(starting)) {
        result.output = u"cannot start bash: "_s + process->errorString();
        result.exitCode = 127;
        co_return result;
    }
    const auto group = static_cast<pid_t>(process->processId());
    bool finished = true;
    if (request.timeout.count() > 0) {
        auto finishing = qCoro(process.get()).waitForFinished(request.timeout);
        finished = co_await std::move(finishing);
    } else {
        auto finishing = qCoro(process.get(), &QProcess::finished);
        co_await std::move(finishing);
    }
    if (!finished) {
        stop();
        auto reaping = qCoro(process.get()).waitForFinished(std::chrono::seconds(5));
        co_await std::move(reaping);
    }
    // What the command left running in the background ends with it, as in a sandbox (whose
    // commands run in a PID namespace of their own): `sleep 600 &` outlived its command, and
    // the server.
    ::kill(-group, SIGKILL);
    const bool timedOut = !finished && !m_interrupted;
    output.add(process->readAll());
    output.finish();
    result.output = output.result(timedOut);
    result.interrupted = m_interrupted;
    result.exitCode = process->exitStatus() == QProcess::NormalExit ? process->exitCode() : -1;
    if (timedOut)
        result.exitCode = 124;
    if (!result.interrupted && !timedOut) {
        if (const QString note = limitNote(m_settings.policy, result.exitCode, result.output);
            !note.isEmpty())
            result.output +=
                (result.output.endsWith(u'\n') || result.output.isEmpty() ? QString() : u"\n"_s) +
                note + u'\n';
    }
    co_return result;
}

void ProcessRuntime::interrupt()
{
    if (!m_process || m_process->state() == QProcess::NotRunning)
        return;
    m_interrupted = true;
    stop();
}

void ProcessRuntime::stop()
{
    const auto pid = static_cast<pid_t>(m_process ? m_process->processId() : 0);
    if (pid <= 0)
        return;
    // A leader ends the command's whole tree on SIGTERM, then itself.
    if (!m_settings.leaderProgram.isEmpty())
        ::kill(pid, SIGTERM);
    else
        ::kill(-pid, SIGKILL);
}

QCoro::Task<RuntimeAcquisition> ProcessRuntimeProvider::acquire(ConversationInfo conversation)
{
    if (!QDir().mkpath(conversation.workingDir))
        co_return RuntimeAcquisition{
            nullptr,
            {u"provision_failed"_s, u"cannot create workspace "_s + conversation.workingDir}};
    auto runtime = m_runtimes.value(conversation.id).lock();
    if (!runtime) {
        InServerCommands commands{m_leaderProgram, policyInForce(conversation.sandbox, m_policy),
                                  std::nullopt};
        // Root's commands are never root, here either.
        if (::geteuid() == 0 && !m_leaderProgram.isEmpty()) {
            QString error;
            commands.user =
                commandUserFor(conversation.workingDir, conversation.workspaceOwnedByServer, {},
                               sandboxUid(conversation.id), &error);
            if (!commands.user)
                co_return RuntimeAcquisition{nullptr, {u"provision_failed"_s, error}};
        }
        runtime = std::make_shared<ProcessRuntime>(std::move(commands));
        m_runtimes.insert(conversation.id, runtime);
    }
    co_return RuntimeAcquisition{runtime, {}};
}

void ProcessRuntimeProvider::release(const QUuid &conversationId)
{
    if (auto runtime = m_runtimes.take(conversationId).lock())
        runtime->interrupt();
}

void ProcessRuntimeProvider::describe(QList<ConversationInfo> &) const
{
    // Stored runtime errors are already on the rows; an in-server runtime is otherwise available.
}

} // namespace AgentDeck
