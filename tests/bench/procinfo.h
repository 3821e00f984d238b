#pragma once

#include <QString>

#include <optional>

namespace AgentDeck::Bench {

struct ProcessMemory
{
    qint64 rssKiB = 0; // VmRSS
    qint64 hwmKiB = 0; // VmHWM, the peak
};

// Read from /proc/PID/status; nullopt when the process is gone.
std::optional<ProcessMemory> readMemory(qint64 pid);

// User + system CPU time of a process (0: this one), from /proc/PID/stat.
qint64 cpuTimeNs(qint64 pid);

// The machine's time in every state but idle and iowait, and the part of it the hypervisor
// took ("steal": a virtual CPU was runnable but not running).
struct MachineTimes
{
    qint64 busyNs = 0;
    qint64 stealNs = 0;
};
MachineTimes machineTimes();

// CPU used by the server, by the bench and by everything else over a phase, each as a share of
// one core: the machine is shared, and a figure taken while something else ran says so.
class CpuMeter
{
public:
    explicit CpuMeter(qint64 serverPid);
    void restart();
    // "CPU: server 97% of a core, bench 41%, other processes 3%"
    QString report() const;
    double serverShare() const;
    double benchShare() const;
    // Other processes, not counting what the host took.
    double otherShare() const;
    // Time the hypervisor took from this machine's CPUs.
    double stealShare() const;

private:
    double share(qint64 deltaNs) const;

    qint64 m_serverPid;
    qint64 m_startNs = 0;
    qint64 m_serverStartNs = 0;
    qint64 m_benchStartNs = 0;
    MachineTimes m_machineStart;
};

struct MachineInfo
{
    int cores = 0;
    QString cpuModel;
    qint64 memTotalKiB = 0;
    QString kernel;
    QString qtVersion;

    static MachineInfo read();
    QString describe() const;
};

} // namespace AgentDeck::Bench
