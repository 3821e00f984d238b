#include "sandboxcgroups.h"

#include "processbudget.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

using namespace Qt::StringLiterals;

namespace AgentDeck::SandboxCgroups {

namespace {

const QString Mount = u"/sys/fs/cgroup"_s;
const QString Supervisor = u"supervisor"_s;
const QString SandboxPrefix = u"sandbox-"_s;
// What the sandbox host (a Qt process), bubblewrap and slirp4netns take beside the command.
constexpr qint64 HostMemoryBytes = qint64(64) << 20;

QString errnoText()
{
    return QString::fromLocal8Bit(std::strerror(errno));
}

// Writes `value` to the cgroup file `path` (one write: the kernel takes each as a whole).
bool writeFile(const QString &path, const QByteArray &value, QString *error)
{
    QFile file(path);
    if (!file.open(QIODevice::WriteOnly | QIODevice::Unbuffered) ||
        file.write(value) != value.size()) {
        *error = u"cannot write %1 to %2: %3"_s.arg(QString::fromUtf8(value.trimmed()), path,
                                                    file.errorString());
        return false;
    }
    return true;
}

QByteArray readFile(const QString &path)
{
    QFile file(path);
    return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
}

// The calling process's cgroup v2 path ("0::/system.slice/agentdeck.service").
QString ownCgroup()
{
    for (const QByteArray &line : readFile(u"/proc/self/cgroup"_s).split('\n'))
        if (line.startsWith("0::"))
            return QString::fromUtf8(line.mid(3));
    return {};
}

bool markedDelegated(const QString &dir, const char *attribute)
{
    char value[8] = {};
    const ssize_t size =
        ::getxattr(QFile::encodeName(dir).constData(), attribute, value, sizeof value - 1);
    return size > 0 && value[0] == '1';
}

bool isDelegated(const QString &dir)
{
    if (markedDelegated(dir, "trusted.delegate") || markedDelegated(dir, "user.delegate"))
        return true;
    // A root process may write every cgroup: only systemd's mark says which is its to manage.
    if (::geteuid() == 0)
        return false;
    struct stat status
    {};
    return ::stat(QFile::encodeName(dir).constData(), &status) == 0 &&
           status.st_uid == ::geteuid() &&
           ::access(QFile::encodeName(dir + u"/cgroup.subtree_control"_s).constData(), W_OK) == 0 &&
           ::access(QFile::encodeName(dir + u"/cgroup.procs"_s).constData(), W_OK) == 0;
}

QByteArray limitText(qint64 value)
{
    return value > 0 ? QByteArray::number(value) : "max"_ba;
}

// In the host's runtime dir, which its commands do not see: "MEMORY_MAX PIDS_MAX".
const QString LimitsFile = u"sandbox.cgroup"_s;

// A child that waits for the server to end (the pipe's other end, the server's only, closes
// then) and takes the controllers back. A fork of a process with threads: the child makes
// system calls only.
void startReleaser(const QString &root)
{
    const QByteArray control = QFile::encodeName(root + u"/cgroup.subtree_control"_s);
    int ends[2];
    if (::pipe2(ends, O_CLOEXEC) != 0)
        return;
    const pid_t child = ::fork();
    if (child == 0) {
        const int waiting = ends[0];
        // Nothing of the server's stays open in it: not its listener, not its data dir's lock.
        if (waiting > 0)
            ::syscall(SYS_close_range, 0U, static_cast<unsigned>(waiting) - 1, 0U);
        ::syscall(SYS_close_range, static_cast<unsigned>(waiting) + 1, ~0U, 0U);
        char byte;
        while (::read(waiting, &byte, 1) < 0 && errno == EINTR) {
        }
        if (const int file = ::open(control.constData(), O_WRONLY | O_CLOEXEC); file >= 0) {
            [[maybe_unused]] const ssize_t written = ::write(file, "-memory -pids", 13);
            ::close(file);
        }
        ::_exit(0);
    }
    ::close(ends[0]);
    // Kept open, and closed by the kernel as the server ends. Not inherited (O_CLOEXEC).
}

bool applyLimits(const QString &cgroup, qint64 memory, qint64 pids, QString *error)
{
    if (!writeFile(cgroup + u"/memory.max"_s, limitText(memory), error) ||
        !writeFile(cgroup + u"/pids.max"_s, limitText(pids), error))
        return false;
    // Swapped out, the memory would not count: a machine with swap holds it to memory.max too.
    // Without swap accounting the file is missing, and there is nothing to hold.
    return !QFileInfo::exists(cgroup + u"/memory.swap.max"_s) ||
           writeFile(cgroup + u"/memory.swap.max"_s, "0", error);
}

} // namespace

Delegation prepare()
{
    if (!QFileInfo::exists(Mount + u"/cgroup.controllers"_s))
        return {{}, u"no cgroup v2 at "_s + Mount};
    QString own = ownCgroup();
    if (own.isEmpty())
        return {{}, u"the process is in no cgroup v2"_s};
    // A server that was moved already (started again in the same process) stays where it is.
    if (own.endsWith(u'/' + Supervisor))
        own.chop(Supervisor.size() + 1);
    const QString root = Mount + own;
    if (own == u"/"_s || !isDelegated(root))
        return {{}, u"its cgroup %1 is not delegated to it (systemd's Delegate=yes)"_s.arg(own)};
    const QList<QByteArray> controllers =
        readFile(root + u"/cgroup.controllers"_s).trimmed().split(' ');
    if (!controllers.contains("memory") || !controllers.contains("pids"))
        return {{}, u"its delegated cgroup %1 has no memory and pids controllers"_s.arg(own)};

    // Every process of the delegated cgroup goes to the supervisor: the server, and whatever it
    // runs that systemd placed beside it.
    const QString supervisor = root + u'/' + Supervisor;
    if (::mkdir(QFile::encodeName(supervisor).constData(), 0755) != 0 && errno != EEXIST)
        return {{}, u"cannot create %1: %2"_s.arg(supervisor, errnoText())};
    QString error;
    const QByteArray self = QByteArray::number(::getpid());
    if (!writeFile(supervisor + u"/cgroup.procs"_s, self, &error))
        return {{}, error};
    for (const QByteArray &pid : readFile(root + u"/cgroup.procs"_s).split('\n'))
        if (!pid.isEmpty())
            writeFile(supervisor + u"/cgroup.procs"_s, pid, &error);
    if (!writeFile(root + u"/cgroup.subtree_control"_s, "+memory +pids", &error))
        return {{}, error};
    startReleaser(root);
    removeEnded(root);
    return {root, {}};
}

QString sandboxCgroup(const QString &root, const QString &wireId)
{
    return root + u'/' + SandboxPrefix + wireId;
}

void removeEnded(const QString &root)
{
    const QDir dir(root);
    for (const QString &name :
         dir.entryList({SandboxPrefix + u'*'}, QDir::Dirs | QDir::NoDotAndDotDot)) {
        // EBUSY while a process is in it: that sandbox is still running.
        ::rmdir(QFile::encodeName(dir.filePath(name)).constData());
    }
}

qint64 memoryMax(const SandboxPolicy &policy)
{
    return policy.memoryBytes > 0 ? policy.memoryBytes + policy.tmpfsBytes() + HostMemoryBytes : 0;
}

qint64 pidsMax(const SandboxPolicy &policy)
{
    return policy.processes > 0 ? policy.processes + SandboxOwnProcesses : 0;
}

bool enter(const QString &cgroup, const SandboxPolicy &policy, const QString &runtimeDir,
           QString *error)
{
    if (::mkdir(QFile::encodeName(cgroup).constData(), 0755) != 0 && errno != EEXIST) {
        *error = u"cannot create %1: %2"_s.arg(cgroup, errnoText());
        return false;
    }
    const qint64 memory = memoryMax(policy);
    const qint64 pids = pidsMax(policy);
    if (!applyLimits(cgroup, memory, pids, error))
        return false;
    QFile limits(QDir(runtimeDir).filePath(LimitsFile));
    if (!limits.open(QIODevice::WriteOnly | QIODevice::Truncate) ||
        limits.write(QByteArray::number(memory) + ' ' + QByteArray::number(pids) + '\n') < 0) {
        *error = u"cannot write "_s + limits.fileName();
        return false;
    }
    limits.close();
    return writeFile(cgroup + u"/cgroup.procs"_s, QByteArray::number(::getpid()), error);
}

void release(const QString &root)
{
    QString ignored;
    writeFile(root + u"/cgroup.subtree_control"_s, "-memory -pids", &ignored);
}

bool restore(const QString &root, const QString &wireId, const QString &runtimeDir, QString *error)
{
    const QList<QByteArray> limits =
        readFile(QDir(runtimeDir).filePath(LimitsFile)).trimmed().split(' ');
    if (limits.size() != 2) {
        *error = u"no limits in "_s + QDir(runtimeDir).filePath(LimitsFile);
        return false;
    }
    return applyLimits(sandboxCgroup(root, wireId), limits[0].toLongLong(), limits[1].toLongLong(),
                       error);
}

} // namespace AgentDeck::SandboxCgroups
