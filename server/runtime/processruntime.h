#pragma once

#include "runtime.h"

#include <QHash>
#include <QPointer>

class QProcess;

namespace AgentDeck {

// Runs each command as `bash -c` in a process group of its own, inside the server process.
class ProcessRuntime final : public Runtime
{
public:
    QCoro::Task<CommandResult> execute(CommandRequest request) override;
    void interrupt() override;

private:
    QPointer<QProcess> m_process;
    bool m_interrupted = false;
};

// The in-server provider: a runtime is always available, since it needs nothing but bash.
class ProcessRuntimeProvider final : public RuntimeProvider
{
public:
    QCoro::Task<RuntimeAcquisition> acquire(ConversationInfo conversation) override;
    void release(const QUuid &conversationId) override;
    void describe(QList<ConversationInfo> &conversations) const override;
    RuntimeInfo runtimeOf(const ConversationInfo &conversation) const override
    {
        return conversation.runtime;
    }

private:
    QHash<QUuid, std::weak_ptr<ProcessRuntime>> m_runtimes;
};

} // namespace AgentDeck
