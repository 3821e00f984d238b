#include "procinfo.h"

#include "samples.h"

#include <QFile>
#include <QSysInfo>

#include <algorithm>

#include <unistd.h>

using namespace Qt::StringLiterals;

namespace AgentDeck::Bench {

namespace {
QByteArray readProcFile(const QString &path)
{
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly))
        return {};
    return file.readAll();
}

// "VmRSS:    12345 kB" -> 12345
qint64 kibField(const QByteArray &status, QByteArrayView name)
{
    for (const QByteArray &line : status.split('\n')) {
        if (line.startsWith(name) && line.size() > name.size() && line[name.size()] == ':')
            return line.mid(name.size() + 1).trimmed().split(' ').value(0).toLongLong();
    }
    return 0;
}
} // namespace

std::optional<ProcessMemory> readMemory(qint64 pid)
{
    const QByteArray status = readProcFile(u"/proc/%1/status"_s.arg(pid));
    if (status.isEmpty())
        return std::nullopt;
    return ProcessMemory{kibField(status, "VmRSS"), kibField(status, "VmHWM")};
}

qint64 cpuTimeNs(qint64 pid)
{
    const QByteArray stat =
        readProcFile(pid > 0 ? u"/proc/%1/stat"_s.arg(pid) : u"/proc/self/stat"_s);
    // The command name may hold spaces; the fields after it are space separated. utime and stime
    // are fields 14 and 15, i.e. the 12th and 13th after the closing parenthesis.
    const qsizetype close = stat.lastIndexOf(')');
    if (close < 0)
        return 0;
    const QList<QByteArray> fields = stat.mid(close + 2).split(' ');
    if (fields.size() < 13)
        return 0;
    const qint64 ticks = fields[11].toLongLong() + fields[12].toLongLong();
    return ticks * (1'000'000'000LL / sysconf(_SC_CLK_TCK));
}

MachineTimes machineTimes()
{
    // "cpu  user nice system idle iowait irq softirq steal guest guest_nice"
    const QByteArray stat = readProcFile(u"/proc/stat"_s);
    const QList<QByteArray> fields = stat.left(stat.indexOf('\n')).simplified().split(' ');
    if (fields.size() < 9 || fields[0] != "cpu")
        return {};
    qint64 busy = 0;
    for (int i = 1; i <= 8; ++i) {
        if (i != 4 && i != 5) // idle, iowait
            busy += fields[i].toLongLong();
    }
    const qint64 tick = 1'000'000'000LL / sysconf(_SC_CLK_TCK);
    return {busy * tick, fields[8].toLongLong() * tick};
}

CpuMeter::CpuMeter(qint64 serverPid)
    : m_serverPid(serverPid)
{
    restart();
}

void CpuMeter::restart()
{
    m_startNs = nowNs();
    m_serverStartNs = cpuTimeNs(m_serverPid);
    m_benchStartNs = cpuTimeNs(0);
    m_machineStart = machineTimes();
}

double CpuMeter::share(qint64 deltaNs) const
{
    const qint64 wall = nowNs() - m_startNs;
    return wall > 0 ? double(deltaNs) / double(wall) : 0;
}

double CpuMeter::serverShare() const
{
    return share(cpuTimeNs(m_serverPid) - m_serverStartNs);
}

double CpuMeter::benchShare() const
{
    return share(cpuTimeNs(0) - m_benchStartNs);
}

double CpuMeter::otherShare() const
{
    // Clock ticks make this coarse (10 ms): small negative values are rounding.
    const MachineTimes now = machineTimes();
    return std::max(0.0, share(now.busyNs - m_machineStart.busyNs) -
                             share(now.stealNs - m_machineStart.stealNs) - serverShare() -
                             benchShare());
}

double CpuMeter::stealShare() const
{
    return share(machineTimes().stealNs - m_machineStart.stealNs);
}

QString CpuMeter::report() const
{
    return u"CPU: server %1% of a core, bench %2%, other processes %3%, taken by the host %4%"_s
        .arg(qRound(serverShare() * 100))
        .arg(qRound(benchShare() * 100))
        .arg(qRound(otherShare() * 100))
        .arg(qRound(stealShare() * 100));
}

MachineInfo MachineInfo::read()
{
    MachineInfo info;
    info.cores = int(sysconf(_SC_NPROCESSORS_ONLN));
    for (const QByteArray &line : readProcFile(u"/proc/cpuinfo"_s).split('\n')) {
        if (line.startsWith("model name")) {
            info.cpuModel = QString::fromUtf8(line.mid(line.indexOf(':') + 1).trimmed());
            break;
        }
    }
    info.memTotalKiB = kibField(readProcFile(u"/proc/meminfo"_s), "MemTotal");
    info.kernel = QSysInfo::kernelType() + u' ' + QSysInfo::kernelVersion();
    info.qtVersion = QString::fromLatin1(qVersion());
    return info;
}

QString MachineInfo::describe() const
{
    return u"%1 cores (nproc), %2, %3 GiB RAM, %4, Qt %5"_s.arg(cores)
        .arg(cpuModel.isEmpty() ? u"unknown CPU"_s : cpuModel)
        .arg(double(memTotalKiB) / (1024.0 * 1024.0), 0, 'f', 1)
        .arg(kernel, qtVersion);
}

} // namespace AgentDeck::Bench
