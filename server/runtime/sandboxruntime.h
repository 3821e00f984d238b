#pragma once

#include "runtime.h"

#include <QDateTime>
#include <QJsonObject>
#include <QObject>
#include <QQueue>

class QLocalSocket;

namespace AgentDeck {

// The server's end of one sandbox host: a Unix socket speaking the protocol of SandboxHost.
// The process of a conversation's sandbox host, known by its pid and runtime dir. A host that
// died leaves its pid file behind, and sooner or later the pid is another process's: nothing
// is sent a signal without its command line naming the host of this runtime dir.
struct SandboxHostProcess
{
    qint64 pid = 0;
    QString runtimeDir;

    // The host whose pid file is in `runtimeDir` (pid 0 when there is none).
    static SandboxHostProcess of(const QString &runtimeDir);
    bool isRunning() const;
    // When its process started, by the kernel's count (nothing when there is none).
    std::optional<QDateTime> startedAt() const;
    // SIGKILL, if it is running.
    void kill() const;
};

class SandboxRuntime final : public QObject, public Runtime
{
    Q_OBJECT
public:
    // `ownerSilenceLimit`: see LocalSandboxSettings (0: none).
    SandboxRuntime(const QString &socketPath, SandboxHostProcess host,
                   std::chrono::milliseconds ownerSilenceLimit, QObject *parent = nullptr);
    ~SandboxRuntime() override;

    QCoro::Task<bool> connectToHost(std::chrono::milliseconds timeout);
    // Ends connectToHost() soon, unconnected: the sandbox was released while it started.
    void cancelConnect() { m_connectCancelled = true; }
    bool isConnectCancelled() const { return m_connectCancelled; }
    // One command at a time: one sent while another runs (a run's, and one of the workspace
    // routes, see WorkspaceSandbox) waits for it to end.
    QCoro::Task<CommandResult> execute(CommandRequest request) override;
    void interrupt() override;
    void ownerAlive() override;
    // Asks the host to exit; kills it if it does not.
    void shutdown();
    // Asks the host not to exit when idle while no server is connected (until one connects).
    void keepWhileAlone();

    qint64 pid() const { return m_host.pid; }
    const SandboxHostProcess &host() const { return m_host; }
    bool isConnected() const;
    bool isBusy() const { return !m_pendingRequest.isEmpty(); }
    qint64 lastActivityMs() const { return m_lastActivityMs; }

    // How long a host may take to answer an interrupt, or to end a command past its timeout,
    // before it is taken for frozen and killed.
    static constexpr qint64 UnresponsiveMs = 5000;

Q_SIGNALS:
    void received(); // a message from the host is in the inbox
    void commandEnded();
    void lost();

private:
    QCoro::Task<CommandResult> executeNow(CommandRequest request);
    void send(const QJsonObject &message);
    void onReadyRead();
    bool m_executing = false;

    QString m_socketPath;
    SandboxHostProcess m_host;
    std::chrono::milliseconds m_ownerSilenceLimit;
    QLocalSocket *m_socket = nullptr;
    QByteArray m_buffer;
    QQueue<QJsonObject> m_inbox; // messages from the host not yet looked at
    QString m_pendingRequest;
    qint64 m_lastActivityMs = 0;
    qint64 m_interruptSentMs = 0; // while a command runs: when it was asked to stop
    bool m_connectCancelled = false;
};

} // namespace AgentDeck
