// The ranges of the `egress` filter: what --sandbox-egress-allow takes, and what is refused.
#include "runtime/egressfilter.h"
#include "runtime/sandboxisolation.h"

#include <QHostAddress>
#include <QJsonArray>
#include <QTest>

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
};

QTEST_GUILESS_MAIN(EgressFilterTest)
#include "tst_egressfilter.moc"
