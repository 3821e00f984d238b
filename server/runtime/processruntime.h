#pragma once

#include "commandleader.h"
#include "runtime.h"

#include <QHash>
#include <QPointer>

class QProcess;

namespace AgentDeck {

// How the commands of one conversation run inside the server.
struct InServerCommands
{
    // The agentdeck binary, run as `agentdeck command-leader` around each command; empty: the
    // command's process group alone is stopped (what leaves it, a `setsid`, stays).
    QString leaderProgram;
    SandboxPolicy policy;
    // A root server's commands change to this user.
    std::optional<CommandUser> user;
};

// Runs each command as `bash -c` under a command leader, inside the server process.
class ProcessRuntime final : public Runtime
{
public:
    explicit ProcessRuntime(InServerCommands settings)
        : m_settings(std::move(settings))
    {}
    QCoro::Task<CommandResult> execute(CommandRequest request) override;
    void interrupt() override;

private:
    void stop();

    InServerCommands m_settings;
    QPointer<QProcess> m_process;
    bool m_interrupted = false;
};

// The in-server provider: a runtime is always available, since it needs nothing but bash.
class ProcessRuntimeProvider final : public RuntimeProvider
{
public:
    // `policy`: the server's sandbox policy; `leaderProgram`: see InServerCommands.
    explicit ProcessRuntimeProvider(SandboxPolicy policy = {}, QString leaderProgram = {})
        : m_policy(policy)
        , m_leaderProgram(std::move(leaderProgram))
    {}
    QCoro::Task<RuntimeAcquisition> acquire(ConversationInfo conversation) override;
    void release(const QUuid &conversationId) override;
    void describe(QList<ConversationInfo> &conversations) const override;
    RuntimeInfo runtimeOf(const ConversationInfo &conversation) const override
    {
        return conversation.runtime;
    }

private:
    SandboxPolicy m_policy;
    QString m_leaderProgram;
    QHash<QUuid, std::weak_ptr<ProcessRuntime>> m_runtimes;
};

} // namespace AgentDeck
