// The `egress` network reaches public addresses only: a command's connections, tried as an
// attacker's would, against listeners in network namespaces the test makes itself. The test
// process moves into a network namespace of its own ("the host", where the servers run) joined by
// a veth pair to a second one ("the world"):
//   host:  up0 198.51.100.2/24 and 10.203.0.1/24 (its own addresses), default via the world;
//          a listener on every address
//   world: down0 198.51.100.1/24 (public) and 10.203.0.2/24 (a private neighbour); on its
//          loopback 169.254.169.254 (metadata), 172.16.5.1 and 100.64.5.1; a listener on every
//          address, and one on port 53, the resolver slirp4netns's DNS forwarder asks (through a
//          resolv.conf in a mount namespace of the test's own)
// Nothing leaves these namespaces; they end with the test process.
#include <QFile>
#include <QJsonArray>
#include <QJsonObject>
#include <QProcess>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

#include "serverprocess.h"

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
using namespace AgentDeck::Testing;

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

// What has arrived on `fd` (receiveEverywhere()), one datagram a line.
QStringList received(int fd)
{
    QStringList datagrams;
    char buffer[512];
    ssize_t size = 0;
    while ((size = ::recv(fd, buffer, sizeof buffer, 0)) > 0)
        datagrams.append(QString::fromLatin1(buffer, int(size)));
    return datagrams;
}

} // namespace

class SystemEgressTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        QString problem;
        QVERIFY2(m_fleet.findBinary(&problem), qPrintable(problem));
        if (::geteuid() != 0)
            QSKIP("the network namespaces of this test take root");
        QProcess bwrap;
        bwrap.start(u"bwrap"_s, {u"--ro-bind"_s, u"/"_s, u"/"_s, u"--unshare-net"_s, u"true"_s});
        if (!bwrap.waitForFinished(5000) || bwrap.exitCode() != 0)
            QSKIP("bubblewrap cannot create namespaces here");
        if (QStandardPaths::findExecutable(u"slirp4netns"_s).isEmpty() ||
            ::access("/dev/net/tun", R_OK | W_OK) != 0)
            QSKIP("slirp4netns is not installed, or there is no /dev/net/tun");
        QVERIFY2(!QStandardPaths::findExecutable(u"ip"_s).isEmpty(), "iproute2's ip is missing");

        QVERIFY(setUpMounts());

        m_origin = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        QVERIFY(m_origin >= 0);
        // The world first, held by a descriptor; then the host, which this process stays in.
        QVERIFY2(::unshare(CLONE_NEWNET) == 0, std::strerror(errno));
        m_world = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        QVERIFY(m_world >= 0);
        QVERIFY(run({u"link", u"set", u"lo", u"up"}));
        for (const char *address : {"169.254.169.254/32", "172.16.5.1/32", "100.64.5.1/32"})
            QVERIFY(run({u"addr", u"add", QString::fromLatin1(address), u"dev", u"lo"}));
        m_worldPort = listenEverywhere(&m_worldListener);
        QVERIFY(m_worldPort > 0);
        QVERIFY(listenEverywhere(&m_worldDns, 53) == 53);
        QVERIFY2(::unshare(CLONE_NEWNET) == 0, std::strerror(errno));
        m_host = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        QVERIFY(m_host >= 0);
        const QString world = u"/proc/%1/fd/%2"_s.arg(::getpid()).arg(m_world);
        QVERIFY(run({u"link", u"set", u"lo", u"up"}));
        QVERIFY(run({u"link", u"add", u"up0", u"type", u"veth", u"peer", u"name", u"down0",
                     u"netns", world}));
        QVERIFY(run({u"addr", u"add", u"198.51.100.2/24", u"dev", u"up0"}));
        QVERIFY(run({u"addr", u"add", u"10.203.0.1/24", u"dev", u"up0"}));
        QVERIFY(run({u"link", u"set", u"up0", u"up"}));
        // ip -n takes names only: this thread steps into the world for its side of the pair.
        QVERIFY(::setns(m_world, CLONE_NEWNET) == 0);
        const bool worldUp = run({u"addr", u"add", u"198.51.100.1/24", u"dev", u"down0"}) &&
                             run({u"addr", u"add", u"10.203.0.2/24", u"dev", u"down0"}) &&
                             run({u"link", u"set", u"down0", u"up"});
        m_worldUdpPort = worldUp ? receiveEverywhere(&m_worldUdp, "198.51.100.1") : 0;
        QVERIFY(::setns(m_host, CLONE_NEWNET) == 0);
        QVERIFY2(m_worldUdpPort > 0, std::strerror(errno));
        QVERIFY(worldUp);
        QVERIFY(run({u"route", u"add", u"default", u"via", u"198.51.100.1"}));
        m_hostPort = listenEverywhere(&m_hostListener);
        QVERIFY(m_hostPort > 0);
        m_ready = true;
    }

    void cleanupTestCase()
    {
        m_fleet.cleanUp();
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

    void cleanup() { m_fleet.cleanUp(); }

    // Public addresses are reached; the host's own, private, shared, link-local ones and the
    // host's loopback are not, whatever the command does to the routing; an allowed range is.
    void egressReachesPublicAddressesOnly_data()
    {
        QTest::addColumn<bool>("unprivileged");
        QTest::addColumn<QStringList>("allowed");
        for (const bool unprivileged : {false, true}) {
            const char *user = unprivileged ? "nobody" : "root";
            QTest::addRow("server as %s", user) << unprivileged << QStringList();
            QTest::addRow("server as %s, 10.203.0.0/24 allowed", user)
                << unprivileged << QStringList{u"10.203.0.0/24"_s};
        }
    }
    void egressReachesPublicAddressesOnly()
    {
        QFETCH(bool, unprivileged);
        QFETCH(QStringList, allowed);
        QVERIFY(m_ready);
        QStringList arguments{u"--sandbox-network"_s, u"egress"_s};
        for (const QString &range : std::as_const(allowed))
            arguments << u"--sandbox-egress-allow"_s << range;
        ServerProcess &server = m_fleet.add({}, arguments);
        if (unprivileged)
            server.runAsUser(Nobody, NoGroup);
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));

        const QString host = QString::number(m_hostPort);
        const QString world = QString::number(m_worldPort);
        struct Target
        {
            QString name;
            QString address;
            QString port;
            bool reached;
        };
        const bool neighbourAllowed = !allowed.isEmpty();
        const QList<Target> targets{
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
        // A socket bound to the interface, which the kernel lets send to a refused address as if
        // it were on the link: slirp answers for its own addresses.
        const QList<Target> boundTargets{
            {u"bound-public"_s, u"198.51.100.1"_s, world, true},
            {u"bound-dns-other-port"_s, u"10.0.2.3"_s, world, false},
            {u"bound-neighbour"_s, u"10.203.0.2"_s, world, neighbourAllowed},
        };
        // The command first tries to take the filter away, as an attacker's would.
        QString command =
            u"ip rule flush 2>/dev/null; ip route flush table 200 2>/dev/null;"
            "p() { (exec 3<>/dev/tcp/$2/$3) 2>/dev/null && echo \"REACHED $1\" || "
            "echo \"REFUSED $1\"; };"
            "b() { python3 -c \"import socket, sys; s = socket.socket(); s.settimeout(5); "
            "s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, b'tap0'); "
            "s.connect((sys.argv[1], int(sys.argv[2])))\" $2 $3 2>/dev/null && "
            "echo \"REACHED $1\" || echo \"REFUSED $1\"; };"_s;
        for (const Target &target : targets)
            command += u" p %1 %2 %3;"_s.arg(target.name, target.address, target.port);
        command += u" command -v python3 >/dev/null && echo HAS-PYTHON;"_s;
        for (const Target &target : boundTargets)
            command += u" b %1 %2 %3;"_s.arg(target.name, target.address, target.port);
        // Datagrams to the link's multicast group from a socket bound to the interface and from
        // one that names it as its multicast interface, which skip every routing rule: neither
        // may reach the world. Then one to a public address, which does, after them: slirp4netns
        // and the link keep their order.
        const QString row = QString::fromLatin1(QTest::currentDataTag()).replace(u' ', u'_');
        received(m_worldUdp); // what earlier rows sent
        command += u" python3 -c \"import socket, sys; port = int(sys.argv[1]); tag = sys.argv[2]; "
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
        const QUuid id =
            server.create(QJsonObject{{u"agent"_s, QJsonObject{{u"kind"_s, u"shell"_s}}},
                                      {u"initial_message"_s, userMessage(command, true)}});
        QVERIFY(!id.isNull());
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        const QString output = lastCommandOutput(server.events(id));
        QVERIFY2(!output.contains(u"no network"_s), qPrintable(output));
        QList<Target> checked = targets;
        if (output.contains(u"HAS-PYTHON"_s))
            checked += boundTargets;
        else
            qWarning("no python3 in the sandbox: sockets bound to the interface are not tried");
        for (const Target &target : std::as_const(checked)) {
            const QString expected =
                (target.reached ? u"REACHED "_s : u"REFUSED "_s) + target.name + u'\n';
            QVERIFY2(output.contains(expected),
                     qPrintable(expected + u"expected in:\n"_s + output));
        }
        if (output.contains(u"HAS-PYTHON"_s)) {
            QVERIFY2(output.contains(u"SENT DATAGRAMS"_s), qPrintable(output));
            // The public one arrives; by then the multicast ones would have.
            QStringList datagrams;
            QVERIFY(QTest::qWaitFor(
                [&] {
                    datagrams += received(m_worldUdp);
                    return datagrams.contains(u"public:"_s + row);
                },
                5000));
            for (const QString &datagram : std::as_const(datagrams))
                QVERIFY2(!datagram.startsWith(u"multicast"_s), qPrintable(datagram));
        }

        // Clients are told what is refused, in the conversation's runtime_info and /server_info.
        const QJsonObject inConversation = server.conversation(id)
                                               .value(u"runtime_info"_s)
                                               .toObject()
                                               .value(u"sandbox"_s)
                                               .toObject()
                                               .value(u"egress"_s)
                                               .toObject();
        const QJsonObject inServer = server.get(u"/server_info"_s)
                                         .object()
                                         .value(u"sandbox"_s)
                                         .toObject()
                                         .value(u"egress"_s)
                                         .toObject();
        QCOMPARE(inServer, inConversation);
        const QJsonArray blocked = inConversation.value(u"blocked"_s).toArray();
        for (const QString &range : {u"0.0.0.0/8"_s, u"10.0.0.0/8"_s, u"100.64.0.0/10"_s,
                                     u"127.0.0.0/8"_s, u"169.254.0.0/16"_s, u"172.16.0.0/12"_s,
                                     u"192.168.0.0/16"_s, u"224.0.0.0/4"_s, u"240.0.0.0/4"_s})
            QVERIFY2(blocked.contains(range), qPrintable(range));
        QCOMPARE(inConversation.value(u"blocked_host_addresses"_s).toBool(), true);
        QCOMPARE(inConversation.value(u"allowed"_s).toArray(), QJsonArray::fromStringList(allowed));
        QCOMPARE(inConversation.value(u"ipv6"_s).toBool(true), false);
    }

    // A range that is not one stops the server at startup, saying so.
    void invalidAllowedRangeStopsStartup_data()
    {
        QTest::addColumn<QString>("range");
        QTest::addRow("prefix too long") << u"10.0.0.0/33"_s;
        QTest::addRow("IPv6") << u"fd00::/8"_s;
        QTest::addRow("not an address") << u"intranet"_s;
        QTest::addRow("empty") << QString();
    }
    void invalidAllowedRangeStopsStartup()
    {
        QFETCH(QString, range);
        ServerProcess &server = m_fleet.add(
            {}, {u"--sandbox-network"_s, u"egress"_s, u"--sandbox-egress-allow"_s, range});
        QVERIFY(!server.start());
        QVERIFY(server.waitForExit(10'000));
        QVERIFY(server.exitCode() != 0);
        QVERIFY2(server.stderrText().contains(u"--sandbox-egress-allow takes an IPv4 range"_s),
                 qPrintable(server.stderrText()));
    }

private:
    // A mount namespace of this process's own, the servers' too:
    // - an unprivileged server's slirp4netns opens /dev/net/tun as that user; where only root may
    //   (0600 here), a node of the same device everyone may open;
    // - slirp4netns's DNS forwarder asks the resolver of /etc/resolv.conf: the world's here, so
    //   that whatever reaches it stays in the test's namespaces.
    // The host's files stay as they are.
    bool setUpMounts()
    {
        struct stat tun
        {};
        if (!m_mountDir.isValid() || ::stat("/dev/net/tun", &tun) != 0 ||
            ::unshare(CLONE_NEWNS) != 0 ||
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
        return ::mount(QFile::encodeName(resolver.fileName()).constData(), "/etc/resolv.conf",
                       nullptr, MS_BIND, nullptr) == 0;
    }

    // `ip ARGUMENTS` in this thread's namespace; false, with what it said, when it fails.
    static bool run(const QList<QStringView> &arguments)
    {
        QStringList list;
        for (const QStringView argument : arguments)
            list << argument.toString();
        QProcess ip;
        ip.setProcessChannelMode(QProcess::MergedChannels);
        ip.start(u"ip"_s, list);
        const bool ok =
            ip.waitForFinished(10'000) && ip.exitStatus() == QProcess::NormalExit && !ip.exitCode();
        if (!ok)
            qWarning().noquote() << "ip" << list.join(u' ') << ":" << ip.readAll();
        return ok;
    }

    ServerFleet m_fleet;
    QTemporaryDir m_mountDir;
    int m_origin = -1;
    int m_world = -1;
    int m_host = -1;
    int m_worldListener = -1;
    int m_worldDns = -1;
    int m_worldUdp = -1; // receiveEverywhere()
    int m_worldUdpPort = 0;
    int m_hostListener = -1;
    int m_worldPort = 0;
    int m_hostPort = 0;
    bool m_ready = false;
};

QTEST_GUILESS_MAIN(SystemEgressTest)
#include "tst_system_egress.moc"
