#include "workspacesandbox.h"

#include "signalwait.h"

#include <QDir>
#include <QFileInfo>
#include <QPointer>

using namespace Qt::StringLiterals;

namespace AgentDeck {

const QUuid WorkspaceSandbox::Id{u"5e7d2a1b-0c4f-4a8e-9d3b-77a0f5c1e001"_s};

WorkspaceSandbox::WorkspaceSandbox(RuntimeProvider &runtimes, QString workspaceDir,
                                   bool madeByServer, QObject *parent)
    : QObject(parent)
    , m_runtimes(runtimes)
    , m_madeByServer(madeByServer)
{
    QDir().mkpath(workspaceDir);
    const QString real = QFileInfo(workspaceDir).canonicalFilePath();
    m_directory =
        real.isEmpty() ? QDir::cleanPath(QFileInfo(workspaceDir).absoluteFilePath()) : real;
}

QCoro::Task<WorkspaceCommandResult> WorkspaceSandbox::run(QString command,
                                                          std::chrono::milliseconds timeout)
{
    ConversationInfo info;
    info.id = Id;
    info.workingDir = m_directory;
    info.workspaceOwnedByServer = m_madeByServer;
    return runIn(std::move(info), std::move(command), timeout);
}

QCoro::Task<WorkspaceCommandResult> WorkspaceSandbox::runIn(ConversationInfo conversation,
                                                            QString command,
                                                            std::chrono::milliseconds timeout)
{
    QPointer<WorkspaceSandbox> self(this);
    const QUuid id = conversation.id;
    const CommandDeadline deadline(timeout);
    while (self && m_busy.contains(id) && !deadline.passed()) {
        auto waiting = signalOrTimeout(this, &WorkspaceSandbox::freed,
                                       deadline.nextWait(std::chrono::seconds(1)));
        co_await std::move(waiting);
    }
    if (!self)
        co_return WorkspaceCommandResult{{}, {u"stopping"_s, u"the server is stopping"_s}};
    if (m_busy.contains(id))
        co_return WorkspaceCommandResult{CommandDeadline::timedOutWaiting(), {}};
    m_busy.insert(id);
    const QString workingDir = conversation.workingDir;
    auto acquiring = m_runtimes.acquire(std::move(conversation));
    const RuntimeAcquisition acquired = co_await std::move(acquiring);
    WorkspaceCommandResult outcome;
    if (!acquired.runtime) {
        outcome.error = acquired.error;
        outcome.atLimit = acquired.atLimit;
    } else if (deadline.passed()) {
        outcome.result = CommandDeadline::timedOutWaiting(); // the sandbox's start took it all
    } else {
        // Held for the command: a release meanwhile (the idle timeout) leaves it valid.
        const std::shared_ptr<Runtime> runtime = acquired.runtime;
        auto executing =
            runtime->execute(CommandRequest{command, workingDir, deadline.remaining(), {}});
        outcome.result = co_await std::move(executing);
    }
    if (self) {
        m_busy.remove(id);
        Q_EMIT freed();
    }
    co_return outcome;
}

} // namespace AgentDeck
