#pragma once

#include "commandleader.h"
#include "commandoutput.h"
#include "containerexec.h"
#include "runtime.h"
#include "sandboxisolation.h"
#include "usermodenetwork.h"

#include <QFile>
#include <QJsonObject>
#include <QObject>
#include <QPointer>
#include <QTimer>

class QLocalServer;
class QLocalSocket;
class QProcess;

namespace AgentDeck {

struct SandboxHostOptions
{
    QString runtimeDir; // pid file and log live here
    QString socketPath;
    QString workspace;
    QString home;
    int idleTimeoutMs = 30 * 60 * 1000;
    // Dirs the commands do not see, under bubblewrap (the server's data dir: the catalog, the
    // other conversations' workspaces, and the hosts' sockets, through which a command took
    // over another conversation's sandbox). The workspace and home in them stay.
    QStringList hidden;
    // What the commands may use, the conversation's policy within the server's.
    SandboxPolicy policy;
    // The ranges an `egress` network reaches beside the public addresses
    // (--sandbox-egress-allow, see EgressFilter).
    QList<Ipv4Range> egressAllowed;
    // A root host's commands run as the workspace's owner, or, when root owns it, as this uid
    // (sandboxUid()), to which the home is then given, and the workspace if the server made it.
    uint sandboxUid = 0;
    bool workspaceMadeByServer = false;
    // Commands run in this container of the engine at `dockerHost` (--runtime docker), through
    // `agentdeck container-exec`, instead of under bubblewrap.
    QString container;
    QString dockerHost;
    QString dockerTlsDirectory; // empty: none
    // With replicas, another's sandbox may use the container (see SandboxContainers): this host,
    // idle and alone, leaves it running rather than stop it under that one's commands.
    bool containerShared = false;
    // Other names of the workspace (through a workspace root named by a link): links to it
    // there, which the private /tmp or the sandbox's own root would hide.
    QStringList workspaceAliases;
    // The cgroup the host moves into, with the policy's limits for all of the sandbox
    // (SandboxCgroups); empty: none.
    QString cgroup;
};

// The per-conversation sandbox process (`agentdeck sandbox-host`). It runs in a session of its
// own, so it outlives a killed server, and answers one client at a time over a Unix socket with
// newline-delimited JSON:
//   -> {"op": "exec", "request_id": S, "command": S, "timeout_ms": N, "action_id": S,
//       "owner_silence_ms": N}
//   <- {"type": "output", "request_id": S, "text": S}   what it prints while it runs (LiveOutput)
//   <- {"type": "result", "request_id": S, "output": S, "exit_code": N, "interrupted": B}
//   -> {"op": "interrupt"}            stops the command in flight (its result follows)
//   -> {"op": "owner_alive"}          the server still holds the conversation's lease
//   -> {"op": "status"}               <- {"type": "status", "busy": B, "request_id": S, ...}
//   -> {"op": "shutdown"}             <- {"type": "bye"}, then the process exits
// A newer client replaces an older one: that is how a restarted server adopts the sandbox.
// With `owner_silence_ms`, the command is stopped when no `owner_alive` came for that long: with
// replicas, a server frozen past its lease must not leave its command running next to the one
// the replica that took the conversation over starts (see LocalSandboxSettings).
// The command in flight writes what it prints (as much as a result carries) to the runtime dir
// as it comes, and how it ended once it has: see readLastCommand(). A host whose runtime dir is
// removed (its conversation deleted while no server watched it) ends itself and its command.
class SandboxHost : public QObject
{
    Q_OBJECT
public:
    explicit SandboxHost(SandboxHostOptions options, QObject *parent = nullptr);
    ~SandboxHost() override;

    bool start(QString *error);
    // Whether commands run inside bubblewrap; decided once at start.
    bool isolated() const { return !m_isolation.isWeak(); }

Q_SIGNALS:
    void finished();

private:
    void onNewConnection();
    void onReadyRead();
    void handle(const QJsonObject &message);
    void startCommand(const QJsonObject &message);
    // `seccompFile`: a descriptor of UserNamespaceFilter's program for bubblewrap to load.
    QStringList bubblewrapArguments(bool egress, int seccompFile) const;
    // With `egress`, attaches the network to the sandbox its starter reports (UserModeNetwork);
    // without one, the command goes all the same.
    void attachNetwork(bool egress);
    // Whom a root host's commands run as; gives them the workspace and home when needed.
    bool chooseCommandUser(QString *error);
    void stopCommand();
    void onOutput();
    // Writes what the result keeps of the output to the command's record.
    void record(QByteArrayView kept);
    void onCommandFinished();
    void recordCommand(const QJsonObject &state);
    void interruptCommand();
    void send(const QJsonObject &message);
    void touch();
    // Alone and idle with a container: stops it, then quits.
    QCoro::Task<> stopContainerAndQuit();
    void quit();
    // The command's process (m_process) reports to this host.
    void watchCommand();
    ContainerEngine containerEngine() const;
    CommandUser containerUser() const;
    // Starts the next command's container-exec ahead (not for `egress`, whose network is set up
    // with each command's process), and takes it for the command that starts now: false when
    // there is none fit for it.
    void prestartExec();
    bool takeReadyExec();
    static void discard(QProcess *process);

    SandboxHostOptions m_options;
    QLocalServer *m_server = nullptr;
    QPointer<QLocalSocket> m_client;
    QByteArray m_buffer;
    QProcess *m_process = nullptr;
    // With containers, the container-exec of the next command, started ahead and waiting for it
    // (containerExecWaitingArguments()), with the arguments it was started with.
    QProcess *m_readyExec = nullptr;
    QStringList m_readyExecArguments;
    qint64 m_commandGroup = 0; // the command's process group (its session), while it runs
    QString m_requestId;
    QString m_command;
    QString m_actionId;
    // The conversation's secrets the command has in its environment, masked out of its output.
    QMap<QString, QString> m_secrets;
    std::unique_ptr<CommandOutputSink> m_output; // while a command runs
    QFile m_outputFile;
    QJsonObject m_queued;
    bool m_interrupted = false;
    // Its last server asked it to stay while no server is connected: its conversation waits for
    // a confirmation, whose action runs here once the next server takes it.
    bool m_keepWhileAlone = false;
    bool m_timedOut = false;
    bool m_ownerSilent = false;
    SandboxIsolation m_isolation;
    std::optional<CommandUser> m_user;
    // Without bubblewrap, commands run under a CommandLeader that ends their process tree.
    bool m_led = false;
    // The command's `egress` network, while it runs; why it has none when that failed.
    UserModeNetwork m_network;
    QString m_networkProblem;
    QTimer m_idle;
    QTimer m_commandTimeout;
    QTimer m_ownerSilence;
    QTimer m_orphanCheck;
};

// The last command a sandbox host ran for an action, from the files it keeps in its runtime dir:
// what a server killed during the command reads back, whether the host is still there or not.
std::optional<CommandRecord> readLastCommand(const QString &runtimeDir);

// Runs the sandbox host mode of the binary; returns the process exit code.
int runSandboxHost(int argc, char *argv[]);

} // namespace AgentDeck
