#pragma once

#include <QJsonObject>
#include <QList>
#include <QString>
#include <QStringList>

#include <optional>
#include <sys/types.h>

namespace AgentDeck {

// An IPv4 network, `address/prefix` with the host bits cleared.
struct Ipv4Range
{
    quint32 address = 0; // host order
    int prefix = 32;

    // "10.0.0.0/8", or a bare address (a /32); nullopt for anything else, IPv6 included.
    static std::optional<Ipv4Range> parse(const QString &text);
    QString toString() const;
    bool contains(quint32 host) const;
    friend bool operator==(const Ipv4Range &, const Ipv4Range &) = default;
};

// The `egress` network reaches public addresses only. slirp4netns turns what the sandbox sends
// into connections of the host's, so whatever the sandbox can route to, the host connects to:
// the filter is routing policy inside the sandbox's network namespace, which the command, holding
// no capability there, cannot change. Rules, in order:
// - slirp4netns's DNS forwarder (10.0.2.3), port 53 only;
// - the rest of slirp4netns's network, never (its other addresses are the host's loopback);
// - the ranges the operator allows (--sandbox-egress-allow), which win over what follows;
// - never: the host's own addresses (found when each command starts) and the non-public ranges
//   (egressBlockedRanges()).
// A socket bound to the interface (SO_BINDTODEVICE, IP_PKTINFO) skips a refusing rule: the
// kernel then sends to the address as if it were on the link. Its lookups go to a table where
// every blocked range leads to a gateway nobody answers for, so that they end there.
// slirp4netns runs without IPv6: the sandbox has no IPv6 route at all.
namespace EgressFilter {

// The non-public ranges: this network, RFC 1918, shared address space (100.64/10), loopback,
// link-local, IETF protocol assignments, benchmarking (198.18/15), multicast and the reserved
// rest (240/4, the broadcast address in it).
const QList<Ipv4Range> &blockedRanges();

// The IPv4 addresses of this host's interfaces, in the calling process's network namespace.
QList<quint32> hostAddresses();

// The user namespace that owns the network namespace of `pid` (a descriptor, close-on-exec), -1
// with errno. bubblewrap's child moves on into a nested user namespace as it sets up
// (--disable-userns), whose capabilities do not reach its parent's network: whoever configures
// the network from outside enters this one.
int openNetworkOwner(pid_t pid);

// Puts the rules into the network namespace of `pid` (bubblewrap's child, slirp4netns attached
// as `tap0`). A server that is not root first enters the user namespace that owns it
// (openNetworkOwner()). False, with *error saying why, when any rule is missing.
bool install(pid_t pid, bool root, const QList<Ipv4Range> &allowed, QString *error);

// Removes the rules install() adds from the network namespace of `pid`, before slirp4netns is
// attached: a container's namespace outlives each command and keeps the rules of the one before
// (of the host's addresses then, and the ranges allowed then), which also refuse the route
// slirp4netns adds through its gateway. False, with *error saying why, when any is left.
bool clear(pid_t pid, bool root, QString *error);

// Lets only frames to slirp4netns's own hosts (its gateway and DNS forwarder) and broadcast (ARP)
// leave the sandbox's interface: multicast sent from a socket bound to it skips every routing
// rule and slirp4netns sent it on from the host, to the host's link (mDNS, SSDP). The filter
// is the tap device's own (TUNSETTXFILTER), set through a copy of slirp4netns's descriptor of
// it (pidfd_getfd): nothing in the sandbox can change it. `slirp` is slirp4netns's process,
// whose descriptor is looked for in /proc. False, with *error saying why, when it is not set.
bool filterFrames(pid_t slirp, QString *error);

// slirp4netns's DNS forwarder ("10.0.2.3"): the sandbox's resolver.
QString dnsServer();

// runtime_info's `egress`: what the filter refuses and allows.
QJsonObject describe(const QStringList &allowed);

} // namespace EgressFilter

} // namespace AgentDeck
