#pragma once

#include "runtime.h"

#include <QObject>
#include <QUuid>

namespace AgentDeck {

// What a command in the workspace sandbox came to: its result, or why the sandbox is not there.
struct WorkspaceCommandResult
{
    std::optional<CommandResult> result;
    RuntimeError error; // when result is empty
    bool atLimit = false;
};

// The sandbox of the server workspace (`--workspace-dir`): a sandbox like a conversation's, from
// the same provider and under the same policy, keyed by a fixed id that no conversation has. Its
// commands run one after another: a sandbox runs one command at a time.
class WorkspaceSandbox : public QObject
{
    Q_OBJECT
public:
    static const QUuid Id;

    WorkspaceSandbox(RuntimeProvider &runtimes, QString workspaceDir, QObject *parent = nullptr);
    // The server workspace, as the real path of the directory (made if missing).
    QString directory() const { return m_directory; }

    QCoro::Task<WorkspaceCommandResult> run(QString command, std::chrono::milliseconds timeout);

Q_SIGNALS:
    void freed();

private:
    RuntimeProvider &m_runtimes;
    QString m_directory;
    bool m_busy = false;
};

} // namespace AgentDeck
