#pragma once

#include "runtime.h"

#include <QObject>
#include <QSet>
#include <QUuid>

namespace AgentDeck {

// What a command in the workspace sandbox came to: its result, or why the sandbox is not there.
struct WorkspaceCommandResult
{
    std::optional<CommandResult> result;
    RuntimeError error; // when result is empty
    bool atLimit = false;
};

// Where the remote workspace routes run commands. The server workspace (`--workspace-dir`) has a
// sandbox like a conversation's, from the same provider and under the same policy, keyed by a
// fixed id that no conversation has; a conversation's workspace uses the conversation's own.
// The commands of one sandbox run one after another.
class WorkspaceSandbox : public QObject
{
    Q_OBJECT
public:
    static const QUuid Id;

    // `madeByServer`: the server made the workspace (DATA/workspace), and a root server may give
    // it to its sandbox's uid; one the operator named keeps its owner and mode.
    WorkspaceSandbox(RuntimeProvider &runtimes, QString workspaceDir, bool madeByServer,
                     QObject *parent = nullptr);
    // The server workspace, as the real path of the directory (made if missing).
    QString directory() const { return m_directory; }

    // In the server workspace's sandbox.
    QCoro::Task<WorkspaceCommandResult> run(QString command, std::chrono::milliseconds timeout);
    // In the conversation's sandbox.
    QCoro::Task<WorkspaceCommandResult> runIn(ConversationInfo conversation, QString command,
                                              std::chrono::milliseconds timeout);

Q_SIGNALS:
    void freed();

private:
    RuntimeProvider &m_runtimes;
    QString m_directory;
    bool m_madeByServer = false;
    QSet<QUuid> m_busy;
};

} // namespace AgentDeck
