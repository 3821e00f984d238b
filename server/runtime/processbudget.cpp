#include "processbudget.h"

#include <QFile>

#include <algorithm>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {

qint64 readNumber(const char *path)
{
    QFile file(QString::fromLatin1(path));
    if (!file.open(QIODevice::ReadOnly))
        return 0;
    return file.readAll().trimmed().toLongLong();
}

} // namespace

HostProcesses HostProcesses::read()
{
    return {readNumber("/proc/sys/kernel/pid_max"), readNumber("/proc/sys/kernel/threads-max")};
}

qint64 HostProcesses::limit() const
{
    if (pidMax > 0 && threadsMax > 0)
        return std::min(pidMax, threadsMax);
    return std::max(pidMax, threadsMax);
}

qint64 HostProcesses::room() const
{
    return std::max<qint64>(4096, limit() / 8);
}

QString fitSandboxProcesses(ServerConfig &config, const HostProcesses &host)
{
    if (config.runtime != ServerConfig::RuntimeKind::Local || host.limit() <= 0)
        return {};
    const QString what =
        u"kernel.pid_max %1 and kernel.threads-max %2 leave %3 processes for sandboxes, with %4 "
        "kept for the server and the rest of the host"_s.arg(host.pidMax)
            .arg(host.threadsMax)
            .arg(std::max<qint64>(0, host.forSandboxes()))
            .arg(host.room());
    const qint64 sandboxes = config.maxSandboxes;
    if (sandboxes == 0)
        return u"--max-sandboxes 0 (no limit) puts no bound on the processes of sandboxes; %1: "
               "give a number"_s.arg(what);
    const qint64 each = host.forSandboxes() / sandboxes - SandboxOwnProcesses;
    qint64 &processes = config.sandboxPolicy.processes;
    if (config.fitSandboxProcesses) {
        if (each < MinFittedProcesses)
            return u"--max-sandboxes %1 leaves fewer than %2 processes to each sandbox (%3): "
                   "lower --max-sandboxes"_s.arg(sandboxes)
                       .arg(MinFittedProcesses)
                       .arg(what);
        processes = processes > 0 ? std::min(processes, each) : each;
        return {};
    }
    if (processes == 0)
        return u"--sandbox-processes 0 (no limit) puts no bound on the processes of sandboxes; "
               "%1: give a number"_s.arg(what);
    if (processes > each)
        return u"--max-sandboxes %1 sandboxes of --sandbox-processes %2 (and %3 of each "
               "sandbox's own) would take %4 processes; %5: lower either"_s.arg(sandboxes)
                   .arg(processes)
                   .arg(SandboxOwnProcesses)
                   .arg(sandboxes * (processes + SandboxOwnProcesses))
                   .arg(what);
    return {};
}

} // namespace AgentDeck
