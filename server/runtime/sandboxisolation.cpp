#include "sandboxisolation.h"

#include "egressfilter.h"
#include "usermodenetwork.h"

#include <QJsonArray>
#include <QProcess>
#include <QStandardPaths>

#include <unistd.h>

using namespace Qt::StringLiterals;

namespace AgentDeck {

QStringList SandboxIsolation::namespaceArguments(bool root, bool hostNetwork)
{
    QStringList arguments{u"--unshare-pid"_s, u"--unshare-ipc"_s, u"--unshare-uts"_s,
                          u"--unshare-cgroup-try"_s};
    if (!hostNetwork)
        arguments << u"--unshare-net"_s;
    // Without root, bubblewrap's namespaces need a user namespace; with it, the command drops
    // root itself (setpriv) and a user namespace would map it back onto root.
    if (!root)
        arguments << u"--unshare-user"_s << u"--disable-userns"_s;
    return arguments;
}

SandboxIsolation SandboxIsolation::probe()
{
    SandboxIsolation isolation;
    isolation.root = ::geteuid() == 0;
    const QString bwrap = QStandardPaths::findExecutable(u"bwrap"_s);
    if (bwrap.isEmpty()) {
        isolation.reason = u"bubblewrap is not installed"_s;
        return isolation;
    }
    if (isolation.root && QStandardPaths::findExecutable(u"setpriv"_s).isEmpty()) {
        isolation.reason = u"setpriv (util-linux) is not installed"_s;
        return isolation;
    }
    // Installed is not enough: some containers forbid the namespaces it needs. A sized tmpfs
    // is tried too; a bubblewrap older than 0.8 knows no --size, and is tried again without.
    QProcess probe;
    probe.setProcessChannelMode(QProcess::MergedChannels);
    const auto run = [&](const QStringList &tmpfs) {
        probe.start(bwrap, QStringList{u"--ro-bind"_s, u"/"_s, u"/"_s, u"--dev"_s, u"/dev"_s,
                                       u"--proc"_s, u"/proc"_s} +
                               tmpfs + namespaceArguments(isolation.root, false) +
                               QStringList{u"true"_s});
        return probe.waitForFinished(5000) && probe.exitStatus() == QProcess::NormalExit &&
               probe.exitCode() == 0;
    };
    isolation.sizedTmpfs = run({u"--size"_s, u"1048576"_s, u"--tmpfs"_s, u"/tmp"_s});
    if (!isolation.sizedTmpfs && !run({})) {
        const QString said = QString::fromLocal8Bit(probe.readAll()).trimmed();
        isolation.reason =
            u"bubblewrap cannot create its namespaces here"_s +
            (said.isEmpty() ? QString() : u" ("_s + said.section(u'\n', 0, 0) + u')');
        return isolation;
    }
    isolation.mechanism = Mechanism::Bubblewrap;
    // slirp4netns opens the tun device as the server's user.
    isolation.userModeNetwork =
        UserModeNetwork::isAvailable() && ::access("/dev/net/tun", R_OK | W_OK) == 0;
    return isolation;
}

SandboxIsolation SandboxIsolation::forProcessRuntime()
{
    SandboxIsolation isolation;
    isolation.root = ::geteuid() == 0;
    isolation.inProcess = true;
    isolation.reason = u"commands run inside the server (--runtime process)"_s;
    return isolation;
}

SandboxIsolation SandboxIsolation::forContainers(const QString &dockerHost)
{
    SandboxIsolation isolation;
    isolation.mechanism = Mechanism::Container;
    isolation.root = ::geteuid() == 0;
    if (!dockerHost.startsWith(u"unix://"_s))
        isolation.noUserModeNetwork =
            u"the Docker engine is not on this host (%1), and the network is attached from "
            "here"_s.arg(dockerHost.section(u"://"_s, 0, 0) + u"://"_s);
    else if (!isolation.root)
        isolation.noUserModeNetwork =
            u"the server is not root, and a container's network namespace is the engine's"_s;
    else if (!UserModeNetwork::isAvailable() || ::access("/dev/net/tun", R_OK | W_OK) != 0)
        isolation.noUserModeNetwork = u"slirp4netns is not installed or cannot open /dev/net/tun"_s;
    isolation.userModeNetwork = isolation.noUserModeNetwork.isEmpty();
    return isolation;
}

QString SandboxIsolation::mechanismName() const
{
    switch (mechanism) {
    case Mechanism::Bubblewrap:
        return u"bubblewrap"_s;
    case Mechanism::Container:
        return u"container"_s;
    case Mechanism::None:
        break;
    }
    return u"none"_s;
}

QStringList SandboxIsolation::unenforced(const SandboxPolicy &policy) const
{
    QStringList parts;
    if (mechanism == Mechanism::Container) {
        if (policy.network == SandboxPolicy::Network::Egress && !userModeNetwork)
            parts << u"network egress: %1; commands have no network"_s.arg(noUserModeNetwork);
        return parts;
    }
    if (mechanism != Mechanism::Bubblewrap) {
        parts << u"file system: commands see the whole system and the data dir, with the "
                 "rights of %1 (%2)"_s.arg(root ? u"a uid of their own"_s : u"the server's user"_s,
                                           reason);
        if (policy.network != SandboxPolicy::Network::Host)
            parts << u"network: commands share the host's network, its loopback included"_s;
        parts << u"temporary files: commands write to the host's /tmp and /dev/shm, not to "
                 "sized ones of their own"_s;
        if (policy.processes > 0 && !root)
            parts << u"processes: not limited (without a user namespace, the limit would count "
                     "every process of the server's user)"_s;
    } else {
        if (policy.network == SandboxPolicy::Network::Egress && !userModeNetwork)
            parts << u"network egress: slirp4netns is not installed or cannot open "
                     "/dev/net/tun; commands have no network"_s;
        if (!sizedTmpfs)
            parts << u"temporary files: bubblewrap is older than 0.8 and cannot size /tmp and "
                     "/dev/shm"_s;
    }
    if (policy.memoryBytes > 0 || policy.cpuSeconds > 0)
        parts << u"memory and CPU time are limited per process, not for the command as a "
                 "whole (no cgroup)"_s;
    return parts;
}

QJsonObject SandboxIsolation::describe(const SandboxPolicy &policy, const QString &diskLimit) const
{
    QJsonObject object = policy.toJson();
    object.insert(u"isolation"_s, mechanismName());
    // What /tmp and /dev/shm hold at most: commands without bubblewrap use the host's.
    if (!isWeak() && sizedTmpfs)
        object.insert(u"tmpfs_bytes"_s, QJsonObject{{u"/tmp"_s, policy.tmpBytes()},
                                                    {u"/dev/shm"_s, policy.shmBytes()}});
    // Without a limit a workspace may fill the data dir's file system (docs/OPERATIONS.md, Disk).
    object.insert(u"disk_limit"_s, diskLimit.isEmpty() ? u"not enforced"_s : diskLimit);
    // The engine's storage size limit (StorageOpt size) is not asked for: few storage drivers
    // have one, and nothing is written where it would apply.
    if (mechanism == Mechanism::Container)
        object.insert(u"container_disk_limit"_s,
                      u"not set (the engine's storage size limit): the root is read-only, and "
                      "writes go to the workspace (disk_limit) and to /tmp, which is memory"_s);
    object.insert(u"not_enforced"_s, QJsonArray::fromStringList(unenforced(policy)));
    if (policy.network == SandboxPolicy::Network::Egress && !isWeak() && userModeNetwork)
        object.insert(u"egress"_s, EgressFilter::describe(egressAllowed));
    return object;
}

QJsonObject SandboxIsolation::toJson(const SandboxPolicy &serverPolicy,
                                     const QString &diskLimit) const
{
    QJsonObject object = describe(serverPolicy, diskLimit);
    object.insert(u"reason"_s, reason.isEmpty() ? QJsonValue() : QJsonValue(reason));
    // Whom the commands run as, on the host.
    object.insert(u"command_user"_s,
                  root ? u"a uid of each conversation's own"_s : u"the server's user"_s);
    return object;
}

QString SandboxIsolation::warning() const
{
    if (!isWeak())
        return {};
    return u"commands are not isolated: %1. They see the whole system and the host's network; "
           "use --require-isolation to refuse to start instead"_s.arg(reason);
}

uint sandboxUid(const QUuid &conversationId)
{
    return 1'800'000'000u + conversationId.data1 % 200'000'000u;
}

} // namespace AgentDeck
