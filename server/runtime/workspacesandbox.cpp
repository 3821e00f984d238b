#include "workspacesandbox.h"

#include "signalwait.h"

#include <QDir>
#include <QFileInfo>
#include <QPointer>

using namespace Qt::StringLiterals;

namespace AgentDeck {

const QUuid WorkspaceSandbox::Id{u"5e7d2a1b-0c4f-4a8e-9d3b-77a0f5c1e001"_s};

WorkspaceSandbox::WorkspaceSandbox(RuntimeProvider &runtimes, QString workspaceDir, QObject *parent)
    : QObject(parent)
    , m_runtimes(runtimes)
{
    QDir().mkpath(workspaceDir);
    const QString real = QFileInfo(workspaceDir).canonicalFilePath();
    m_directory =
        real.isEmpty() ? QDir::cleanPath(QFileInfo(workspaceDir).absoluteFilePath()) : real;
}

QCoro::Task<WorkspaceCommandResult> WorkspaceSandbox::run(QString command,
                                                          std::chrono::milliseconds timeout)
{
    QPointer<WorkspaceSandbox> self(this);
    while (self && m_busy) {
        auto waiting = signalOrTimeout(this, &WorkspaceSandbox::freed, std::chrono::seconds(1));
        co_await std::move(waiting);
    }
    if (!self)
        co_return WorkspaceCommandResult{{}, {u"stopping"_s, u"the server is stopping"_s}};
    m_busy = true;
    ConversationInfo info;
    info.id = Id;
    info.workingDir = m_directory;
    info.workspaceOwnedByServer = false;
    auto acquiring = m_runtimes.acquire(info);
    const RuntimeAcquisition acquired = co_await std::move(acquiring);
    WorkspaceCommandResult outcome;
    if (!acquired.runtime) {
        outcome.error = acquired.error;
        outcome.atLimit = acquired.atLimit;
    } else {
        // Held for the command: a release meanwhile (the idle timeout) leaves it valid.
        const std::shared_ptr<Runtime> runtime = acquired.runtime;
        auto executing = runtime->execute(CommandRequest{command, m_directory, timeout, {}});
        outcome.result = co_await std::move(executing);
    }
    if (self) {
        m_busy = false;
        Q_EMIT freed();
    }
    co_return outcome;
}

} // namespace AgentDeck
