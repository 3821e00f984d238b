#pragma once

#include "runtimedetails.h"
#include "wiretypes.h"

#include <QCoroTask>
#include <QString>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>

namespace AgentDeck {

struct CommandRequest
{
    QString command;
    QString workingDir;
    std::chrono::milliseconds timeout{0}; // 0: no limit
    QUuid actionId; // the ActionEvent whose command this is, if it is one (see CommandRecord)
    // Variables the conversation was given on purpose (its secrets), over the allow-listed
    // environment (commandEnvironment()); what the command prints of their values is masked.
    QMap<QString, QString> environment;
    // Called with what it prints while it runs, in pieces of whole lines (LiveOutput); the
    // result still carries all of it. Unset: only the result.
    std::function<void(const QString &piece)> onOutput;
};

struct CommandResult
{
    QString output;
    int exitCode = 0;
    bool interrupted = false;
};

// When a command with a timeout must have ended, counted from its request: the time it waits
// for its turn (behind the other commands of its sandbox) counts too. A command asked for with
// 2 s behind a long one answered after the long one, and 2 s more.
class CommandDeadline
{
public:
    using Clock = std::chrono::steady_clock;

    explicit CommandDeadline(std::chrono::milliseconds timeout)
        : m_at(timeout.count() > 0 ? Clock::now() + timeout : Clock::time_point::max())
    {}
    bool passed() const { return Clock::now() >= m_at; }
    // What is left of the timeout (at least 1 ms, for a deadline not passed); 0: none was set.
    std::chrono::milliseconds remaining() const
    {
        if (m_at == Clock::time_point::max())
            return std::chrono::milliseconds(0);
        return std::max(std::chrono::milliseconds(1),
                        std::chrono::ceil<std::chrono::milliseconds>(m_at - Clock::now()));
    }
    // How long to wait for a turn before looking again: `most`, or until the deadline.
    std::chrono::milliseconds nextWait(std::chrono::milliseconds most) const
    {
        const std::chrono::milliseconds left = remaining();
        return left.count() > 0 ? std::min(most, left) : most;
    }
    // The result of a command whose time ran out before it started: it did not run.
    static CommandResult timedOutWaiting()
    {
        return {QStringLiteral("[command timed out waiting for the sandbox's earlier commands; "
                               "it did not run]\n"),
                124, false};
    }

private:
    Clock::time_point m_at;
};

// What a runtime kept of the last command it ran for an action, for a server that did not see
// the command end (it was killed meanwhile): what it printed, and how it ended if it did.
struct CommandRecord
{
    QUuid actionId;
    bool finished = false;
    CommandResult result; // while not finished: the output so far, interrupted
};

// Where one conversation's commands run. Execution talks only to this interface, so the in-server
// process runner and a sandbox host process are interchangeable.
class Runtime
{
public:
    virtual ~Runtime() = default;
    virtual QCoro::Task<CommandResult> execute(CommandRequest request) = 0;
    // Stops the command in flight, if any; its execute() then returns with interrupted = true.
    virtual void interrupt() = 0;
    // The server renewed its lease on the conversation. A runtime that stops the commands of an
    // owner gone silent (LocalSandboxSettings::ownerSilenceLimit) hears it here.
    virtual void ownerAlive() {}
};

struct RuntimeAcquisition
{
    std::shared_ptr<Runtime> runtime;
    RuntimeError error; // set when runtime is null
    // The start was called off by a release (a delete, an archive, a reprovision): no fault of
    // the runtime's, and nothing to record.
    bool cancelled = false;
    // Every sandbox the server may keep is held by a run (the limit): a fault of nobody's, for a
    // client to try again later.
    bool atLimit = false;
};

// Turns a conversation into a runtime, and reports the status of runtimes in batch.
class RuntimeProvider
{
public:
    virtual ~RuntimeProvider() = default;
    virtual QCoro::Task<RuntimeAcquisition> acquire(ConversationInfo conversation) = 0;
    // Stops the conversation's runtime, keeping its history and workspace.
    virtual void release(const QUuid &conversationId) = 0;
    // Stops this server's part of it only (for idleness, a run that lost its lease, another
    // replica running the conversation): what it stands on may be shared with other replicas
    // (a container), and is left to the one that took it last.
    virtual void letGo(const QUuid &conversationId) { release(conversationId); }
    // Fills in runtime info for a page of conversations without touching the disk or a socket.
    virtual void describe(QList<ConversationInfo> &conversations) const = 0;
    // The same for one conversation, returning its runtime info (GET by id).
    virtual RuntimeInfo runtimeOf(const ConversationInfo &conversation) const
    {
        QList<ConversationInfo> one{conversation};
        describe(one);
        return one.first().runtime;
    }
    // Why a start for the conversation would be refused at the limit of runtimes, as things are
    // now (a start may still be, should others start meanwhile); nothing when it would not be.
    virtual std::optional<RuntimeError> limitRefusal(const QUuid &) const { return std::nullopt; }
    // Stops a command a previous server left running in a sandbox this one adopted.
    virtual void interruptOrphan(const QUuid &) {}
    // The last command run for an action in the conversation's runtime, if the runtime keeps it.
    virtual std::optional<CommandRecord> lastCommand(const QUuid &) const { return std::nullopt; }
    // Where the conversation's runtime keeps its files (sandbox home); empty when it keeps none.
    virtual QString runtimeDirectory(const QUuid &) const { return {}; }
    // Fills in what `details` says of the conversation's sandbox process (pid, start, idle
    // since), when this server keeps one.
    virtual void describeProcess(const QUuid &, RuntimeDetails &) const {}
    // The server is stopping: let go of runtimes without stopping them.
    virtual void detachAll() {}
    // Asked before a runtime is stopped for being idle: true keeps it. Empty: none is kept.
    virtual void setIdleKeeper(std::function<bool(const QUuid &)>) {}
    // Lines of /metrics about the runtimes (Prometheus text, labels of bounded sets only).
    virtual QByteArray metrics() const { return {}; }
};

} // namespace AgentDeck
