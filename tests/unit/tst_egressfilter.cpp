// The ranges of the `egress` filter: what --sandbox-egress-allow takes, and what is refused; and
// the tap device's frame filter, on a tap of the test's own in a network namespace of its own.
#include "runtime/egressfilter.h"
#include "runtime/sandboxisolation.h"

#include <QHostAddress>
#include <QJsonArray>
#include <QProcess>
#include <QScopeGuard>
#include <QTest>

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace Qt::StringLiterals;
using namespace AgentDeck;

class EgressFilterTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void rangesAreParsed_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<QString>("range"); // empty: refused
        QTest::addRow("network") << u"10.20.0.0/16"_s << u"10.20.0.0/16"_s;
        QTest::addRow("host bits cleared") << u"10.20.30.40/16"_s << u"10.20.0.0/16"_s;
        QTest::addRow("bare address") << u"192.168.1.7"_s << u"192.168.1.7/32"_s;
        QTest::addRow("spaces") << u" 172.16.0.0/12 "_s << u"172.16.0.0/12"_s;
        QTest::addRow("everything") << u"0.0.0.0/0"_s << u"0.0.0.0/0"_s;
        QTest::addRow("prefix too long") << u"10.0.0.0/33"_s << QString();
        QTest::addRow("negative prefix") << u"10.0.0.0/-1"_s << QString();
        QTest::addRow("IPv6") << u"fd00::/8"_s << QString();
        QTest::addRow("IPv6 address") << u"fe80::1"_s << QString();
        QTest::addRow("name") << u"intranet"_s << QString();
        QTest::addRow("empty") << QString() << QString();
        QTest::addRow("no prefix after slash") << u"10.0.0.0/"_s << QString();
    }
    void rangesAreParsed()
    {
        QFETCH(QString, text);
        QFETCH(QString, range);
        const auto parsed = Ipv4Range::parse(text);
        QCOMPARE(parsed.has_value(), !range.isEmpty());
        if (parsed)
            QCOMPARE(parsed->toString(), range);
    }

    void nonPublicAddressesAreBlocked_data()
    {
        QTest::addColumn<QString>("address");
        QTest::addColumn<bool>("blocked");
        for (const char *address :
             {"0.1.2.3", "10.1.2.3", "100.64.0.1", "100.127.255.254", "127.0.0.1",
              "169.254.169.254", "172.16.0.1", "172.31.255.255", "192.0.0.170", "192.168.1.1",
              "198.18.0.1", "198.19.255.255", "224.0.0.251", "239.255.255.250", "240.0.0.1",
              "255.255.255.255"})
            QTest::addRow("%s", address) << QString::fromLatin1(address) << true;
        for (const char *address :
             {"1.1.1.1", "8.8.8.8", "100.63.255.255", "100.128.0.0", "172.15.255.255", "172.32.0.0",
              "192.169.0.1", "198.20.0.1", "198.51.100.1", "223.255.255.255"})
            QTest::addRow("%s", address) << QString::fromLatin1(address) << false;
    }
    void nonPublicAddressesAreBlocked()
    {
        QFETCH(QString, address);
        QFETCH(bool, blocked);
        const quint32 host = QHostAddress(address).toIPv4Address();
        const auto &ranges = EgressFilter::blockedRanges();
        const bool inRange =
            std::any_of(ranges.cbegin(), ranges.cend(),
                        [host](const Ipv4Range &range) { return range.contains(host); });
        QCOMPARE(inRange, blocked);
    }

    // runtime_info.sandbox.egress, where egress is enforced; the sentence of not_enforced where
    // it is not.
    void runtimeInfoSaysWhatIsBlocked()
    {
        SandboxPolicy policy;
        policy.network = SandboxPolicy::Network::Egress;
        SandboxIsolation isolation;
        isolation.mechanism = SandboxIsolation::Mechanism::Bubblewrap;
        isolation.userModeNetwork = true;
        isolation.egressAllowed = {u"10.20.0.0/16"_s};
        const QJsonObject egress = isolation.describe(policy).value(u"egress"_s).toObject();
        QVERIFY(egress.value(u"blocked"_s).toArray().contains(u"169.254.0.0/16"_s));
        QCOMPARE(egress.value(u"blocked_host_addresses"_s).toBool(), true);
        QCOMPARE(egress.value(u"allowed"_s).toArray(), QJsonArray{u"10.20.0.0/16"_s});
        QCOMPARE(egress.value(u"dns"_s).toString(), u"10.0.2.3:53"_s);

        isolation.userModeNetwork = false;
        QVERIFY(!isolation.describe(policy).contains(u"egress"_s));
        policy.network = SandboxPolicy::Network::None;
        isolation.userModeNetwork = true;
        QVERIFY(!isolation.describe(policy).contains(u"egress"_s));
    }

    // A container's namespace outlives the command: the next command's filter goes in after
    // clear() took the one before it away, with nothing of it left.
    void clearRemovesAnEarlierFilter()
    {
        if (::geteuid() != 0)
            QSKIP("a network namespace and a tap device take root");
        if (::unshare(CLONE_NEWNET) != 0)
            QSKIP(qPrintable(u"no network namespace here: "_s +
                             QString::fromLocal8Bit(std::strerror(errno))));
        // slirp4netns's tap0, and the routes through it, go with each command.
        int tap = ::open("/dev/net/tun", O_RDWR | O_CLOEXEC | O_NONBLOCK);
        if (tap < 0)
            QSKIP("no /dev/net/tun here");
        const auto closeTap = qScopeGuard([&tap] { ::close(tap); });
        QVERIFY(bringTapUp(tap));
        const auto nextCommand = [&tap] {
            ::close(tap);
            tap = ::open("/dev/net/tun", O_RDWR | O_CLOEXEC | O_NONBLOCK);
            return bringTapUp(tap);
        };
        const auto rules = [] {
            QProcess ip;
            ip.start(u"ip"_s, {u"-4"_s, u"rule"_s});
            ip.waitForFinished(10'000);
            return QString::fromLocal8Bit(ip.readAllStandardOutput()).trimmed().split(u'\n');
        };
        const QStringList before = rules();
        QString error;
        QVERIFY2(EgressFilter::install(::getpid(), true, {}, &error), qPrintable(error));
        const QStringList filtered = rules();
        QVERIFY(filtered.size() > before.size());
        QVERIFY(nextCommand());
        // The rules stay: another filter cannot go on top of them.
        QVERIFY(!EgressFilter::install(::getpid(), true, {*Ipv4Range::parse(u"10.9.0.0/16"_s)},
                                       &error));
        QVERIFY2(EgressFilter::clear(::getpid(), true, &error), qPrintable(error));
        QCOMPARE(rules(), before);
        // Nothing to clear is no failure.
        QVERIFY2(EgressFilter::clear(::getpid(), true, &error), qPrintable(error));
        QVERIFY2(EgressFilter::install(::getpid(), true, {}, &error), qPrintable(error));
        QCOMPARE(rules(), filtered);
    }

    // Frames to slirp4netns's hosts and broadcast (ARP) leave the tap; multicast, sent from a
    // socket bound to it (which skips every routing rule), does not. The tap is this process's
    // own, as it is slirp4netns's: filterFrames() finds it in /proc and takes a copy of it.
    void onlyFramesToSlirpsHostsLeaveTheTap()
    {
        if (::geteuid() != 0)
            QSKIP("a network namespace and a tap device take root");
        if (::unshare(CLONE_NEWNET) != 0)
            QSKIP(qPrintable(u"no network namespace here: "_s +
                             QString::fromLocal8Bit(std::strerror(errno))));
        const int tap = ::open("/dev/net/tun", O_RDWR | O_CLOEXEC | O_NONBLOCK);
        if (tap < 0)
            QSKIP("no /dev/net/tun here");
        const auto closeTap = qScopeGuard([tap] { ::close(tap); });
        QVERIFY(bringTapUp(tap));

        QString error;
        QVERIFY2(EgressFilter::filterFrames(::getpid(), &error), qPrintable(error));

        // Multicast first, then a datagram to slirp4netns's gateway, which asks for its
        // address (ARP, broadcast): the tap keeps their order.
        const auto send = [](const char *to, bool bound) {
            const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
            if (bound)
                ::setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, "tap0", 5);
            sockaddr_in address{};
            address.sin_family = AF_INET;
            address.sin_port = htons(5353);
            address.sin_addr.s_addr = ::inet_addr(to);
            const bool sent = ::sendto(fd, "x", 1, 0, reinterpret_cast<sockaddr *>(&address),
                                       sizeof address) == 1;
            ::close(fd);
            return sent;
        };
        QVERIFY(send("224.0.0.251", true));
        QVERIFY(send("10.0.2.2", false));
        QList<QByteArray> frames;
        const auto isArp = [](const QByteArray &frame) {
            return frame.size() >= 14 && frame.mid(12, 2) == QByteArray::fromHex("0806");
        };
        QVERIFY(QTest::qWaitFor(
            [&] {
                char frame[2048];
                ssize_t size = 0;
                while ((size = ::read(tap, frame, sizeof frame)) > 0)
                    frames.append(QByteArray(frame, int(size)));
                return std::any_of(frames.cbegin(), frames.cend(), isArp);
            },
            5000));
        for (const QByteArray &frame : std::as_const(frames)) {
            // 01:00:5e: an IPv4 multicast group's; 33:33: an IPv6 one's.
            QVERIFY2(!frame.startsWith(QByteArray::fromHex("01005e")) &&
                         !frame.startsWith(QByteArray::fromHex("3333")),
                     frame.left(14).toHex().constData());
        }
    }

private:
    // Makes `tap` (an open /dev/net/tun) this namespace's tap0, 10.0.2.100/24 and up: slirp4netns's
    // sandbox side.
    static bool bringTapUp(int tap)
    {
        ifreq request{};
        request.ifr_flags = IFF_TAP | IFF_NO_PI;
        std::strcpy(request.ifr_name, "tap0");
        if (::ioctl(tap, TUNSETIFF, &request) != 0)
            return false;
        const int control = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        const auto closeControl = qScopeGuard([control] { ::close(control); });
        const auto setAddress = [&](unsigned long which, const char *address) {
            auto *in = reinterpret_cast<sockaddr_in *>(&request.ifr_addr);
            in->sin_family = AF_INET;
            in->sin_addr.s_addr = ::inet_addr(address);
            return ::ioctl(control, which, &request) == 0;
        };
        if (!setAddress(SIOCSIFADDR, "10.0.2.100") ||
            !setAddress(SIOCSIFNETMASK, "255.255.255.0") ||
            ::ioctl(control, SIOCGIFFLAGS, &request) != 0)
            return false;
        request.ifr_flags |= IFF_UP;
        return ::ioctl(control, SIOCSIFFLAGS, &request) == 0;
    }
};

QTEST_GUILESS_MAIN(EgressFilterTest)
#include "tst_egressfilter.moc"
