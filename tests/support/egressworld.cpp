#include "egressworld.h"

#include <QFile>
#include <QJsonArray>
#include <QProcess>
#include <QTest>

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace Qt::StringLiterals;

namespace AgentDeck::Testing {

namespace {

// A listening socket on every address of the calling thread's network namespace: the handshake
// completes in the kernel, no accept() needed. Its port (`port`, 0: any), or 0.
int listenEverywhere(int *fd, quint16 port = 0)
{
    *fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    socklen_t length = sizeof address;
    if (*fd < 0 || ::bind(*fd, reinterpret_cast<sockaddr *>(&address), sizeof address) != 0 ||
        ::listen(*fd, 64) != 0 ||
        ::getsockname(*fd, reinterpret_cast<sockaddr *>(&address), &length) != 0)
        return 0;
    return ntohs(address.sin_port);
}

// A UDP socket on every address of the calling thread's network namespace, also in the
// link-local multicast group 224.0.0.251 on the interface holding `interfaceAddress`. Its port,
// or 0.
int receiveEverywhere(int *fd, const char *interfaceAddress)
{
    *fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    socklen_t length = sizeof address;
    ip_mreq group{};
    group.imr_multiaddr.s_addr = ::inet_addr("224.0.0.251");
    group.imr_interface.s_addr = ::inet_addr(interfaceAddress);
    if (*fd < 0 || ::bind(*fd, reinterpret_cast<sockaddr *>(&address), sizeof address) != 0 ||
        ::setsockopt(*fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &group, sizeof group) != 0 ||
        ::getsockname(*fd, reinterpret_cast<sockaddr *>(&address), &length) != 0)
        return 0;
    return ntohs(address.sin_port);
}

// `ip ARGUMENTS` in this thread's namespace; false, with what it said, when it fails.
bool ip(const QList<QStringView> &arguments)
{
    QStringList list;
    for (const QStringView argument : arguments)
        list << argument.toString();
    QProcess process;
    process.setProcessChannelMode(QProcess::MergedChannels);
    process.start(u"ip"_s, list);
    const bool ok = process.waitForFinished(10'000) &&
                    process.exitStatus() == QProcess::NormalExit && !process.exitCode();
    if (!ok)
        qWarning().noquote() << "ip" << list.join(u' ') << ":" << process.readAll();
    return ok;
}

QString lastError(const char *what)
{
    return u"%1: %2"_s.arg(QLatin1StringView(what), QString::fromLocal8Bit(std::strerror(errno)));
}

} // namespace

EgressWorld::EgressWorld() = default;

EgressWorld::~EgressWorld()
{
    for (const int fd :
         {m_hostListener, m_worldListener, m_worldDns, m_worldUdp, m_world, m_host}) {
        if (fd >= 0)
            ::close(fd);
    }
    // The test's namespaces go with their last process and descriptor.
    if (m_origin >= 0) {
        ::setns(m_origin, CLONE_NEWNET);
        ::close(m_origin);
    }
}

QString EgressWorld::setUp()
{
    if (!setUpMounts())
        return lastError("cannot make the test's mount namespace");
    m_origin = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (m_origin < 0)
        return lastError("cannot open this process's network namespace");
    // The world first, held by a descriptor; then the host, which this process stays in.
    if (::unshare(CLONE_NEWNET) != 0)
        return lastError("cannot make the world's network namespace");
    m_world = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (m_world < 0 || !ip({u"link", u"set", u"lo", u"up"}))
        return u"cannot bring the world's loopback up"_s;
    for (const char *address : {"169.254.169.254/32", "172.16.5.1/32", "100.64.5.1/32"}) {
        if (!ip({u"addr", u"add", QString::fromLatin1(address), u"dev", u"lo"}))
            return u"cannot add %1 to the world"_s.arg(QLatin1StringView(address));
    }
    m_worldPort = listenEverywhere(&m_worldListener);
    if (m_worldPort <= 0 || listenEverywhere(&m_worldDns, 53) != 53)
        return lastError("cannot listen in the world");
    if (::unshare(CLONE_NEWNET) != 0)
        return lastError("cannot make the host's network namespace");
    m_host = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    const QString world = u"/proc/%1/fd/%2"_s.arg(::getpid()).arg(m_world);
    if (m_host < 0 || !ip({u"link", u"set", u"lo", u"up"}) ||
        !ip({u"link", u"add", u"up0", u"type", u"veth", u"peer", u"name", u"down0", u"netns",
             world}) ||
        !ip({u"addr", u"add", u"198.51.100.2/24", u"dev", u"up0"}) ||
        !ip({u"addr", u"add", u"10.203.0.1/24", u"dev", u"up0"}) ||
        !ip({u"link", u"set", u"up0", u"up"}))
        return u"cannot set the host's network up"_s;
    // ip -n takes names only: this thread steps into the world for its side of the pair.
    if (::setns(m_world, CLONE_NEWNET) != 0)
        return lastError("cannot enter the world");
    const bool worldUp = ip({u"addr", u"add", u"198.51.100.1/24", u"dev", u"down0"}) &&
                         ip({u"addr", u"add", u"10.203.0.2/24", u"dev", u"down0"}) &&
                         ip({u"link", u"set", u"down0", u"up"});
    m_worldUdpPort = worldUp ? receiveEverywhere(&m_worldUdp, "198.51.100.1") : 0;
    const QString udpError = lastError("cannot receive datagrams in the world");
    if (::setns(m_host, CLONE_NEWNET) != 0)
        return lastError("cannot enter the host again");
    if (!worldUp)
        return u"cannot set the world's network up"_s;
    if (m_worldUdpPort <= 0)
        return udpError;
    if (!ip({u"route", u"add", u"default", u"via", u"198.51.100.1"}))
        return u"cannot route the host to the world"_s;
    m_hostPort = listenEverywhere(&m_hostListener);
    if (m_hostPort <= 0)
        return lastError("cannot listen on the host");
    m_ready = true;
    return {};
}

// A mount namespace of this process's own, the servers' too:
// - an unprivileged server's slirp4netns opens /dev/net/tun as that user; where only root may
//   (0600 here), a node of the same device everyone may open;
// - slirp4netns's DNS forwarder asks the resolver of /etc/resolv.conf: the world's here, so
//   that whatever reaches it stays in the test's namespaces.
// The host's files stay as they are.
bool EgressWorld::setUpMounts()
{
    struct stat tun
    {};
    if (!m_mountDir.isValid() || ::stat("/dev/net/tun", &tun) != 0 || ::unshare(CLONE_NEWNS) != 0 ||
        ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
        return false;
    if ((tun.st_mode & 0006) != 0006) {
        const QByteArray node = QFile::encodeName(m_mountDir.filePath(u"tun"_s));
        if (::mknod(node.constData(), S_IFCHR | 0666, tun.st_rdev) != 0 ||
            ::chmod(node.constData(), 0666) != 0 ||
            ::mount(node.constData(), "/dev/net/tun", nullptr, MS_BIND, nullptr) != 0)
            return false;
    }
    QFile resolver(m_mountDir.filePath(u"resolv.conf"_s));
    if (!resolver.open(QIODevice::WriteOnly) || resolver.write("nameserver 198.51.100.1\n") < 0)
        return false;
    resolver.close();
    resolver.setPermissions(resolver.permissions() | QFileDevice::ReadOther);
    return ::mount(QFile::encodeName(resolver.fileName()).constData(), "/etc/resolv.conf", nullptr,
                   MS_BIND, nullptr) == 0;
}

QList<EgressWorld::Target> EgressWorld::targets(bool neighbourAllowed) const
{
    const QString host = QString::number(m_hostPort);
    const QString world = QString::number(m_worldPort);
    return {
        {u"public"_s, u"198.51.100.1"_s, world, true},
        {u"host-public"_s, u"198.51.100.2"_s, host, false},
        {u"host-private"_s, u"10.203.0.1"_s, host, neighbourAllowed},
        {u"neighbour"_s, u"10.203.0.2"_s, world, neighbourAllowed},
        {u"metadata"_s, u"169.254.169.254"_s, world, false},
        {u"private"_s, u"172.16.5.1"_s, world, false},
        {u"shared"_s, u"100.64.5.1"_s, world, false},
        {u"host-loopback"_s, u"10.0.2.2"_s, host, false},
        // slirp's DNS forwarder, which connects to the resolver (the world), any port.
        {u"dns"_s, u"10.0.2.3"_s, u"53"_s, true},
        {u"dns-other-port"_s, u"10.0.2.3"_s, world, false},
    };
}

// A socket bound to the interface, which the kernel lets send to a refused address as if it
// were on the link: slirp answers for its own addresses.
QList<EgressWorld::Target> EgressWorld::boundTargets(bool neighbourAllowed) const
{
    const QString world = QString::number(m_worldPort);
    return {
        {u"bound-public"_s, u"198.51.100.1"_s, world, true},
        {u"bound-dns-other-port"_s, u"10.0.2.3"_s, world, false},
        {u"bound-neighbour"_s, u"10.203.0.2"_s, world, neighbourAllowed},
    };
}

QString EgressWorld::probeCommand(const QString &row) const
{
    // The command first tries to take the filter away, as an attacker's would.
    QString command =
        u"ip rule flush 2>/dev/null; ip route flush table 200 2>/dev/null;"
        "p() { (exec 3<>/dev/tcp/$2/$3) 2>/dev/null && echo \"REACHED $1\" || "
        "echo \"REFUSED $1\"; };"
        "b() { python3 -c \"import socket, sys; s = socket.socket(); s.settimeout(5); "
        "s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, b'tap0'); "
        "s.connect((sys.argv[1], int(sys.argv[2])))\" $2 $3 2>/dev/null && "
        "echo \"REACHED $1\" || echo \"REFUSED $1\"; };"_s;
    for (const Target &target : targets(false))
        command += u" p %1 %2 %3;"_s.arg(target.name, target.address, target.port);
    command += u" command -v python3 >/dev/null && echo HAS-PYTHON;"_s;
    for (const Target &target : boundTargets(false))
        command += u" b %1 %2 %3;"_s.arg(target.name, target.address, target.port);
    // Datagrams to the link's multicast group from a socket bound to the interface and from
    // one that names it as its multicast interface, which skip every routing rule: neither
    // may reach the world. Then one to a public address, which does, after them: slirp4netns
    // and the link keep their order.
    received(); // what earlier rows sent
    command += u" command -v python3 >/dev/null && python3 -c \"import socket, sys; "
               "port = int(sys.argv[1]); tag = sys.argv[2]; "
               "b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
               "b.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, b'tap0'); "
               "b.sendto(('multicast-bound:' + tag).encode(), ('224.0.0.251', port)); "
               "i = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
               "i.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, "
               "socket.inet_aton('10.0.2.100')); "
               "i.sendto(('multicast-if:' + tag).encode(), ('224.0.0.251', port)); "
               "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
               "u.sendto(('public:' + tag).encode(), ('198.51.100.1', port)); "
               "print('SENT DATAGRAMS')\" %1 %2 2>&1;"_s.arg(m_worldUdpPort)
                   .arg(row);
    return command;
}

QString EgressWorld::checkEgress(const QString &output, const QString &row, bool neighbourAllowed)
{
    if (output.contains(u"no network"_s))
        return u"the command had no network:\n"_s + output;
    QList<Target> checked = targets(neighbourAllowed);
    const bool python = output.contains(u"HAS-PYTHON"_s);
    if (python)
        checked += boundTargets(neighbourAllowed);
    else
        qWarning("no python3 in the sandbox: sockets bound to the interface are not tried");
    for (const Target &target : std::as_const(checked)) {
        const QString expected =
            (target.reached ? u"REACHED "_s : u"REFUSED "_s) + target.name + u'\n';
        if (!output.contains(expected))
            return expected + u"expected in:\n"_s + output;
    }
    if (!python)
        return {};
    if (!output.contains(u"SENT DATAGRAMS"_s))
        return u"the datagrams were not sent:\n"_s + output;
    // The public one arrives; by then the multicast ones would have.
    QStringList datagrams;
    if (!QTest::qWaitFor(
            [&] {
                datagrams += received();
                return datagrams.contains(u"public:"_s + row);
            },
            5000))
        return u"the public datagram did not arrive"_s;
    for (const QString &datagram : std::as_const(datagrams)) {
        if (datagram.startsWith(u"multicast"_s))
            return u"a multicast datagram left the sandbox: "_s + datagram;
    }
    return {};
}

QString EgressWorld::checkNoNetwork(const QString &output) const
{
    for (const Target &target : targets(false)) {
        if (!output.contains(u"REFUSED "_s + target.name + u'\n'))
            return u"REFUSED "_s + target.name + u" expected in:\n"_s + output;
    }
    return {};
}

QString EgressWorld::checkDescribed(const QJsonObject &egress, const QStringList &allowed)
{
    const QJsonArray blocked = egress.value(u"blocked"_s).toArray();
    for (const QString &range : {u"0.0.0.0/8"_s, u"10.0.0.0/8"_s, u"100.64.0.0/10"_s,
                                 u"127.0.0.0/8"_s, u"169.254.0.0/16"_s, u"172.16.0.0/12"_s,
                                 u"192.168.0.0/16"_s, u"224.0.0.0/4"_s, u"240.0.0.0/4"_s}) {
        if (!blocked.contains(range))
            return range + u" is not said to be blocked"_s;
    }
    if (!egress.value(u"blocked_host_addresses"_s).toBool())
        return u"the host's addresses are not said to be blocked"_s;
    if (egress.value(u"allowed"_s).toArray() != QJsonArray::fromStringList(allowed))
        return u"the allowed ranges are not the server's"_s;
    if (egress.value(u"ipv6"_s).toBool(true))
        return u"IPv6 is not said to be off"_s;
    return {};
}

QStringList EgressWorld::received() const
{
    QStringList datagrams;
    char buffer[512];
    ssize_t size = 0;
    while (m_worldUdp >= 0 && (size = ::recv(m_worldUdp, buffer, sizeof buffer, 0)) > 0)
        datagrams.append(QString::fromLatin1(buffer, int(size)));
    return datagrams;
}

} // namespace AgentDeck::Testing
