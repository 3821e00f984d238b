#pragma once

#include "benchmark.h"

#include <QByteArray>
#include <QCoroTask>
#include <QList>
#include <QProcess>
#include <QString>
#include <QStringList>

#include <memory>
#include <optional>

namespace AgentDeck::Bench {

// The sandbox policy the figures are measured under: every limit in force (the network is the
// default, none).
QStringList sandboxPolicyArguments();

struct SandboxFigureOptions
{
    QString binary;
    QString dataDir;
    int conversations = 30;
    int warmups = 2; // conversations resumed and run first, not counted
};

struct SandboxFigureResults
{
    QList<GoalResult> goals; // otherCpu measured for timings, -1 for sizes
    QStringList failures;
};

// /proc/PID/smaps_rollup, in KiB; nullopt when the process is gone.
struct SmapsRollup
{
    qint64 rssKiB = 0;
    qint64 pssKiB = 0;
    qint64 privateKiB = 0; // Private_Clean + Private_Dirty: what this process alone holds
};
std::optional<SmapsRollup> readSmapsRollup(qint64 pid);

// Starts a program and waits for it to exit 0; its wall time, or -1.
QCoro::Task<qint64> timeSpawn(QString program, QStringList arguments);

// Issue #32, containment stays cheap: the cold resume of a sandbox host with the policy in force
// and the first command after it, and the PSS of idle hosts, each beside a reference that the
// same run measures on the same machine. Runs a server of its own on an empty data dir.
class SandboxFigures
{
public:
    explicit SandboxFigures(SandboxFigureOptions options);
    ~SandboxFigures();

    QCoro::Task<SandboxFigureResults> run();
    // Kills the server (watchdog, early exit); the data dir's removal ends its hosts.
    void abort();

private:
    struct Sandbox
    {
        QByteArray id; // dashed
        qint64 hostPid = 0;
        bool counted = false;
    };

    QCoro::Task<bool> createConversations();
    QCoro::Task<bool> resumeAll();
    QCoro::Task<bool> runFirstCommands();
    // PSS of the idle hosts and of the idle reference processes, read together.
    void reportMemory(const QString &when, Samples *pss, qint64 *bashPssKiB);
    QCoro::Task<bool> startIdleReferences();
    QCoro::Task<> stopIdleReferences();
    QCoro::Task<> stopAll();
    QList<qint64> hostPids() const;
    void fail(const QString &problem);

    SandboxFigureOptions m_options;
    std::unique_ptr<ServerProcess> m_server;
    std::unique_ptr<HttpConnection> m_connection;
    std::vector<Sandbox> m_sandboxes;
    QStringList m_probeArguments; // bubblewrap's, as the host probes it; empty without it
    QString m_bwrap;
    SandboxFigureResults m_results;
    // An idle `bash` (reading its commands from a pipe) and an idle `sleep`: the reference sizes.
    QProcess m_idleBash;
    QProcess m_idleSleep;

    Samples m_resume;
    Samples m_versionReference;
    Samples m_probeReference;
    Samples m_firstCommand;
    Samples m_commandReference;
    double m_resumeInterference = -1;
    double m_commandInterference = -1;
};

} // namespace AgentDeck::Bench
