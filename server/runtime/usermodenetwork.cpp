#include "usermodenetwork.h"

#include <QByteArray>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QScopeGuard>
#include <QStandardPaths>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {

// Reads what `fd` gives until `done` says it is enough, for at most `timeoutMs`.
QByteArray readUntil(int fd, int timeoutMs, const std::function<bool(const QByteArray &)> &done)
{
    QByteArray read;
    for (int waited = 0; waited < timeoutMs && !done(read); waited += 10) {
        pollfd ready{fd, POLLIN, 0};
        if (::poll(&ready, 1, 10) <= 0)
            continue;
        char buffer[256];
        const ssize_t got = ::read(fd, buffer, sizeof buffer);
        if (got <= 0)
            break;
        read.append(buffer, got);
    }
    return read;
}

void closeFd(int &fd)
{
    if (fd >= 0)
        ::close(fd);
    fd = -1;
}

} // namespace

UserModeNetwork::UserModeNetwork() = default;

UserModeNetwork::~UserModeNetwork()
{
    stop();
}

bool UserModeNetwork::isAvailable()
{
    return !QStandardPaths::findExecutable(u"slirp4netns"_s).isEmpty();
}

bool UserModeNetwork::prepare(QString *error)
{
    closeAll();
    if (::pipe2(m_info, O_CLOEXEC) != 0 || ::pipe2(m_block, O_CLOEXEC) != 0) {
        *error = u"cannot make the pipes of the network: %1"_s.arg(
            QString::fromLocal8Bit(std::strerror(errno)));
        closeAll();
        return false;
    }
    return true;
}

QStringList UserModeNetwork::childArguments() const
{
    return {u"--info-fd"_s, QString::number(InfoFd), u"--block-fd"_s, QString::number(BlockFd)};
}

void UserModeNetwork::inChild() const
{
    // dup2() leaves close-on-exec off on the copy; the fds are far above any the host holds.
    ::dup2(m_info[1], InfoFd);
    ::dup2(m_block[0], BlockFd);
}

bool UserModeNetwork::attach(bool root, const QList<Ipv4Range> &allowed, QString *error)
{
    closeFd(m_info[1]);
    closeFd(m_block[0]);
    const auto go = [this] {
        if (m_block[1] >= 0)
            (void)!::write(m_block[1], "1", 1);
        closeFd(m_block[1]);
        closeFd(m_info[0]);
    };
    static const QRegularExpression childPid(u"\"child-pid\"\\s*:\\s*(\\d+)"_s);
    static const QRegularExpression reported(u"\"error\"\\s*:"_s);
    const QByteArray info = readUntil(m_info[0], 3000, [](const QByteArray &read) {
        const QString text = QString::fromUtf8(read);
        return childPid.match(text).hasMatch() || reported.match(text).hasMatch();
    });
    const auto match = childPid.match(QString::fromUtf8(info));
    if (!match.hasMatch()) {
        const QString problem = QJsonDocument::fromJson(info).object().value(u"error"_s).toString();
        *error = !problem.isEmpty() ? problem
                                    : u"the sandbox's starter did not say where its sandbox is"_s;
        go();
        return false;
    }
    const QString pid = match.captured(1);
    // Never the host's own network: rules there would be the host's (a pid gone and reused).
    struct stat own
    {};
    struct stat theirs
    {};
    if (::stat("/proc/self/ns/net", &own) != 0 ||
        ::stat(QByteArray("/proc/" + pid.toLatin1() + "/ns/net").constData(), &theirs) != 0 ||
        (own.st_dev == theirs.st_dev && own.st_ino == theirs.st_ino)) {
        *error = u"the sandbox's process %1 has no network namespace of its own"_s.arg(pid);
        go();
        return false;
    }
    // bubblewrap's child brings its loopback up while the parent has already said where it is;
    // slirp4netns brings the loopback up too, and the one that came second failed ("bwrap:
    // loopback: Failed RTM_NEWADDR"). It starts once the loopback is there.
    QFile routes(u"/proc/%1/net/fib_trie"_s.arg(pid));
    for (int waited = 0; waited < 3000; waited += 5) {
        if (!routes.open(QIODevice::ReadOnly))
            break;
        const bool up = routes.readAll().contains("127.0.0.1");
        routes.close();
        if (up)
            break;
        ::usleep(5000);
    }
    // A user namespace's network is only that namespace's to configure: slirp4netns enters the
    // one that owns it, not the nested one bubblewrap's child may be in by then.
    const int owner = root ? -1 : EgressFilter::openNetworkOwner(pid.toInt());
    if (!root && owner < 0) {
        *error = u"cannot open the user namespace of the sandbox's network: "_s +
                 QString::fromLocal8Bit(std::strerror(errno));
        go();
        return false;
    }
    const auto closeOwner = qScopeGuard([owner] {
        if (owner >= 0)
            ::close(owner);
    });
    // What an earlier command's network left in a namespace that outlived it.
    if (!EgressFilter::clear(pid.toInt(), root, error)) {
        go();
        return false;
    }
    int ready[2];
    int exit[2];
    if (::pipe2(ready, O_CLOEXEC) != 0) {
        *error = u"cannot make the pipe of slirp4netns"_s;
        go();
        return false;
    }
    if (::pipe2(exit, O_CLOEXEC) != 0) {
        ::close(ready[0]);
        ::close(ready[1]);
        *error = u"cannot make the pipe of slirp4netns"_s;
        go();
        return false;
    }
    m_exit = exit[1];
    m_slirp = std::make_unique<QProcess>();
    m_slirp->setProcessChannelMode(QProcess::ForwardedChannels);
    m_slirp->setStandardInputFile(QProcess::nullDevice());
    m_slirp->setChildProcessModifier([write = ready[1], owner, exitRead = exit[0]] {
        // Copies first: any may be 3, 4 or 5.
        const int readyCopy = ::fcntl(write, F_DUPFD_CLOEXEC, 10);
        const int ownerCopy = owner >= 0 ? ::fcntl(owner, F_DUPFD_CLOEXEC, 10) : -1;
        const int exitCopy = ::fcntl(exitRead, F_DUPFD_CLOEXEC, 10);
        ::dup2(readyCopy, 3);
        if (ownerCopy >= 0)
            ::dup2(ownerCopy, 4);
        ::dup2(exitCopy, 5);
    });
    QStringList arguments{u"--configure"_s, u"--mtu=65520"_s, u"--disable-host-loopback"_s,
                          u"--ready-fd=3"_s, u"--exit-fd=5"_s};
    if (!root)
        arguments << u"--userns-path=/proc/self/fd/4"_s;
    arguments << pid << u"tap0"_s;
    m_slirp->start(u"slirp4netns"_s, arguments);
    ::close(ready[1]);
    ::close(exit[0]);
    const QByteArray said =
        readUntil(ready[0], 5000, [](const QByteArray &read) { return !read.isEmpty(); });
    ::close(ready[0]);
    if (said.isEmpty()) {
        *error = u"slirp4netns did not bring the network up"_s;
        stop();
        go();
        return false;
    }
    // Before the command goes: without the filter, the network goes (tap0 ends with slirp4netns).
    if (!EgressFilter::install(pid.toInt(), root, allowed, error) ||
        !EgressFilter::filterFrames(pid_t(m_slirp->processId()), error)) {
        stop();
        go();
        return false;
    }
    go();
    return true;
}

void UserModeNetwork::stop()
{
    if (m_slirp && m_slirp->state() != QProcess::NotRunning) {
        m_slirp->kill();
        m_slirp->waitForFinished(1000);
    }
    m_slirp.reset();
    closeFd(m_exit);
    closeAll();
}

void UserModeNetwork::closeAll()
{
    for (int *fd : {&m_info[0], &m_info[1], &m_block[0], &m_block[1]})
        closeFd(*fd);
}

} // namespace AgentDeck
