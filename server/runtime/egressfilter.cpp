#include "egressfilter.h"

#include <QHostAddress>
#include <QJsonArray>

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/fib_rules.h>
#include <linux/if_ether.h>
#include <linux/if_tun.h>
#include <linux/netlink.h>
#include <linux/nsfs.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace Qt::StringLiterals;

namespace AgentDeck {

std::optional<Ipv4Range> Ipv4Range::parse(const QString &text)
{
    const QString trimmed = text.trimmed();
    QHostAddress address;
    int prefix = 32;
    if (trimmed.contains(u'/')) {
        const auto subnet = QHostAddress::parseSubnet(trimmed);
        address = subnet.first;
        prefix = subnet.second;
    } else {
        address = QHostAddress(trimmed);
    }
    if (address.protocol() != QAbstractSocket::IPv4Protocol || prefix < 0 || prefix > 32)
        return std::nullopt;
    Ipv4Range range{address.toIPv4Address(), prefix};
    range.address &= prefix == 0 ? 0u : ~0u << (32 - prefix);
    return range;
}

QString Ipv4Range::toString() const
{
    return u"%1/%2"_s.arg(QHostAddress(address).toString()).arg(prefix);
}

bool Ipv4Range::contains(quint32 host) const
{
    return prefix == 0 || (host ^ address) >> (32 - prefix) == 0;
}

namespace EgressFilter {

namespace {

// slirp4netns's network (its default --cidr) and the interface it makes in the sandbox.
constexpr Ipv4Range SlirpNetwork{0x0a000200, 24};
constexpr quint32 SlirpGateway = 0x0a000202;
constexpr quint32 SlirpDns = 0x0a000203;
constexpr char TapName[] = "tap0";
// An address of slirp4netns's network it answers no ARP for: a gateway that leads nowhere.
constexpr quint32 NowhereGateway = 0x0a000201;
// Where the lookups of sockets bound to tap0 go: a route to NowhereGateway for each blocked range.
constexpr quint8 NowhereTable = 200;
// Rule priorities: after the sandbox's own addresses (the `local` table, 0), before `main`
// (32766). Rules of one priority apply in the order they were added.
constexpr quint32 DnsPriority = 100;
constexpr quint32 SlirpPriority = 110;
constexpr quint32 AllowedPriority = 200;
constexpr quint32 BlockedPriority = 300;

// One rtnetlink request, built whole before the fork (the child only sends it).
struct Message
{
    alignas(nlmsghdr) char bytes[160] = {};
    quint32 size = 0;
    // Where tap0's index goes, known only in the sandbox's namespace; 0: nowhere.
    quint32 interfaceAt = 0;
    // A deletion, sent again until nothing is left to delete.
    bool untilGone = false;
    QString what;

    Message(quint16 type, const void *header, size_t headerSize, QString description)
        : untilGone(type == RTM_DELRULE)
        , what(std::move(description))
    {
        nlmsghdr head{};
        head.nlmsg_type = type;
        head.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
        if (!untilGone)
            head.nlmsg_flags |= NLM_F_CREATE | NLM_F_EXCL;
        std::memcpy(bytes, &head, sizeof head);
        std::memcpy(bytes + NLMSG_HDRLEN, header, headerSize);
        size = NLMSG_HDRLEN + NLMSG_ALIGN(headerSize);
        finish();
    }

    void add(quint16 type, const void *data, size_t length)
    {
        Q_ASSERT(size + RTA_SPACE(length) <= sizeof bytes);
        rtattr attribute{};
        attribute.rta_len = RTA_LENGTH(length);
        attribute.rta_type = type;
        std::memcpy(bytes + size, &attribute, sizeof attribute);
        std::memcpy(bytes + size + RTA_LENGTH(0), data, length);
        size += RTA_SPACE(length);
        finish();
    }
    void add32(quint16 type, quint32 value) { add(type, &value, sizeof value); }
    void addAddress(quint16 type, quint32 address) { add32(type, htonl(address)); }

    void finish() { reinterpret_cast<nlmsghdr *>(bytes)->nlmsg_len = size; }
};

struct RuleMatch
{
    std::optional<Ipv4Range> to;
    bool boundToTap = false;
    quint8 protocol = 0; // with `port`
    quint16 port = 0;
};

// A rule: to `table`, or refused (FR_ACT_PROHIBIT: the sender gets EACCES at once).
Message rule(quint32 priority, const RuleMatch &match, quint8 action, quint8 table = 0)
{
    fib_rule_hdr header{};
    header.family = AF_INET;
    header.dst_len = match.to ? quint8(match.to->prefix) : 0;
    header.table = table;
    header.action = action;
    QString what = u"rule %1"_s.arg(priority);
    if (match.to)
        what += u" to "_s + match.to->toString();
    Message message(RTM_NEWRULE, &header, sizeof header, what);
    message.add32(FRA_PRIORITY, priority);
    if (match.to)
        message.addAddress(FRA_DST, match.to->address);
    if (table)
        message.add32(FRA_TABLE, table);
    if (match.boundToTap)
        message.add(FRA_OIFNAME, TapName, sizeof TapName);
    if (match.protocol) {
        message.add(FRA_IP_PROTO, &match.protocol, sizeof match.protocol);
        const fib_rule_port_range ports{match.port, match.port};
        message.add(FRA_DPORT_RANGE, &ports, sizeof ports);
    }
    return message;
}

// A route of the NowhereTable: `range` through a gateway that never answers.
Message nowhere(const Ipv4Range &range)
{
    rtmsg header{};
    header.rtm_family = AF_INET;
    header.rtm_dst_len = quint8(range.prefix);
    header.rtm_table = NowhereTable;
    header.rtm_protocol = RTPROT_STATIC;
    header.rtm_scope = RT_SCOPE_UNIVERSE;
    header.rtm_type = RTN_UNICAST;
    header.rtm_flags = RTNH_F_ONLINK;
    Message message(RTM_NEWROUTE, &header, sizeof header,
                    u"route to %1 in table %2"_s.arg(range.toString()).arg(NowhereTable));
    message.addAddress(RTA_DST, range.address);
    message.addAddress(RTA_GATEWAY, NowhereGateway);
    message.interfaceAt = message.size + RTA_LENGTH(0);
    message.add32(RTA_OIF, 0);
    return message;
}

// Deletes the rules of `priority`, whatever they match.
Message removal(quint32 priority)
{
    fib_rule_hdr header{};
    header.family = AF_INET;
    Message message(RTM_DELRULE, &header, sizeof header, u"rules %1"_s.arg(priority));
    message.add32(FRA_PRIORITY, priority);
    return message;
}

std::vector<Message> requests(const QList<Ipv4Range> &allowed)
{
    QList<Ipv4Range> blocked;
    for (const quint32 address : hostAddresses()) {
        if (const Ipv4Range own{address, 32}; !blocked.contains(own))
            blocked.append(own);
    }
    blocked.append(blockedRanges());

    std::vector<Message> messages;
    for (const quint8 protocol : {quint8(IPPROTO_UDP), quint8(IPPROTO_TCP)})
        messages.push_back(rule(DnsPriority, {Ipv4Range{SlirpDns, 32}, false, protocol, 53},
                                FR_ACT_TO_TBL, RT_TABLE_MAIN));
    messages.push_back(rule(SlirpPriority, {SlirpNetwork, true}, FR_ACT_TO_TBL, NowhereTable));
    messages.push_back(rule(SlirpPriority, {SlirpNetwork}, FR_ACT_PROHIBIT));
    messages.push_back(nowhere(SlirpNetwork));
    for (const Ipv4Range &range : allowed)
        messages.push_back(rule(AllowedPriority, {range}, FR_ACT_TO_TBL, RT_TABLE_MAIN));
    messages.push_back(rule(BlockedPriority, {std::nullopt, true}, FR_ACT_TO_TBL, NowhereTable));
    for (const Ipv4Range &range : std::as_const(blocked)) {
        messages.push_back(rule(BlockedPriority, {range}, FR_ACT_PROHIBIT));
        messages.push_back(nowhere(range));
    }
    return messages;
}

// What the child that enters the sandbox's namespaces reports when it fails.
struct Failure
{
    int step = 0; // < 0: a Step; from 0 on: the request of that index
    int error = 0;
};

enum Step
{
    EnterUserNamespace = -1,
    EnterNetworkNamespace = -2,
    FindInterface = -3,
    OpenNetlink = -4,
};

// In the forked child: only system calls on what the parent prepared.
[[noreturn]] void applyInChild(std::vector<Message> &messages, int userNamespace,
                               int networkNamespace, int report)
{
    const auto fail = [report](int step, int error) {
        const Failure failure{step, error};
        (void)!::write(report, &failure, sizeof failure);
        ::_exit(1);
    };
    if (userNamespace >= 0 && ::setns(userNamespace, CLONE_NEWUSER) != 0)
        fail(EnterUserNamespace, errno);
    if (::setns(networkNamespace, CLONE_NEWNET) != 0)
        fail(EnterNetworkNamespace, errno);
    ifreq interface {};
    std::memcpy(interface.ifr_name, TapName, sizeof TapName);
    const bool routes = std::any_of(messages.cbegin(), messages.cend(),
                                    [](const Message &message) { return message.interfaceAt; });
    const int probe = routes ? ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0) : -1;
    if (routes && (probe < 0 || ::ioctl(probe, SIOCGIFINDEX, &interface) != 0))
        fail(FindInterface, errno);
    const int link = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (link < 0)
        fail(OpenNetlink, errno);
    for (size_t index = 0; index < messages.size(); ++index) {
        Message &message = messages[index];
        if (message.interfaceAt)
            std::memcpy(message.bytes + message.interfaceAt, &interface.ifr_ifindex, sizeof(int));
        // A deletion goes again until the kernel finds nothing (at most as many times as
        // rules a filter adds).
        for (int sent = 0; sent < 1000; ++sent) {
            reinterpret_cast<nlmsghdr *>(message.bytes)->nlmsg_seq =
                quint32(index + 1) << 10 | quint32(sent);
            if (::send(link, message.bytes, message.size, 0) != ssize_t(message.size))
                fail(int(index), errno);
            alignas(nlmsghdr) char answer[512];
            const ssize_t got = ::recv(link, answer, sizeof answer, 0);
            const auto *reply = reinterpret_cast<const nlmsghdr *>(answer);
            if (got < ssize_t(NLMSG_LENGTH(sizeof(nlmsgerr))) || reply->nlmsg_type != NLMSG_ERROR)
                fail(int(index), got < 0 ? errno : EPROTO);
            const int error = static_cast<const nlmsgerr *>(NLMSG_DATA(reply))->error;
            if (message.untilGone && error == -ENOENT)
                break;
            if (error != 0)
                fail(int(index), -error);
            if (!message.untilGone)
                break;
        }
    }
    ::_exit(0);
}

int openNetwork(pid_t pid)
{
    return ::open(QByteArray("/proc/" + QByteArray::number(pid) + "/ns/net").constData(),
                  O_RDONLY | O_CLOEXEC);
}

QString describeFailure(const Failure &failure, const std::vector<Message> &messages)
{
    QString step;
    switch (failure.step) {
    case EnterUserNamespace:
        step = u"cannot enter the sandbox's user namespace"_s;
        break;
    case EnterNetworkNamespace:
        step = u"cannot enter the sandbox's network namespace"_s;
        break;
    case FindInterface:
        step = u"the sandbox has no %1"_s.arg(QLatin1StringView(TapName));
        break;
    case OpenNetlink:
        step = u"cannot open rtnetlink"_s;
        break;
    default:
        step = failure.step >= 0 && size_t(failure.step) < messages.size()
                   ? (messages[size_t(failure.step)].untilGone ? u"cannot remove the "_s
                                                               : u"cannot add the "_s) +
                         messages[size_t(failure.step)].what
                   : u"failed"_s;
    }
    return u"egress filter: %1 (%2)"_s.arg(step,
                                           QString::fromLocal8Bit(std::strerror(failure.error)));
}

} // namespace

const QList<Ipv4Range> &blockedRanges()
{
    static const QList<Ipv4Range> ranges = [] {
        QList<Ipv4Range> parsed;
        for (const QString &text :
             {u"0.0.0.0/8"_s, u"10.0.0.0/8"_s, u"100.64.0.0/10"_s, u"127.0.0.0/8"_s,
              u"169.254.0.0/16"_s, u"172.16.0.0/12"_s, u"192.0.0.0/24"_s, u"192.168.0.0/16"_s,
              u"198.18.0.0/15"_s, u"224.0.0.0/4"_s, u"240.0.0.0/4"_s})
            parsed.append(*Ipv4Range::parse(text));
        return parsed;
    }();
    return ranges;
}

QList<quint32> hostAddresses()
{
    QList<quint32> addresses;
    ifaddrs *list = nullptr;
    if (::getifaddrs(&list) != 0)
        return addresses;
    for (const ifaddrs *entry = list; entry; entry = entry->ifa_next) {
        if (!entry->ifa_addr || entry->ifa_addr->sa_family != AF_INET)
            continue;
        const quint32 address =
            ntohl(reinterpret_cast<const sockaddr_in *>(entry->ifa_addr)->sin_addr.s_addr);
        if (!addresses.contains(address))
            addresses.append(address);
    }
    ::freeifaddrs(list);
    return addresses;
}

int openNetworkOwner(pid_t pid)
{
    const int network = openNetwork(pid);
    if (network < 0)
        return -1;
    const int owner = ::ioctl(network, NS_GET_USERNS);
    const int error = errno;
    ::close(network);
    errno = error;
    return owner;
}

namespace {

// Sends `messages` in the network namespace of `pid`; see install().
bool apply(pid_t pid, bool root, std::vector<Message> messages, QString *error)
{
    const int networkNamespace = openNetwork(pid);
    const int userNamespace = root ? -1 : openNetworkOwner(pid);
    int report[2] = {-1, -1};
    const auto closeAll = [&] {
        for (const int fd : {userNamespace, networkNamespace, report[0], report[1]}) {
            if (fd >= 0)
                ::close(fd);
        }
    };
    if ((!root && userNamespace < 0) || networkNamespace < 0 || ::pipe2(report, O_CLOEXEC) != 0) {
        *error = u"egress filter: cannot open the sandbox's namespaces (%1)"_s.arg(
            QString::fromLocal8Bit(std::strerror(errno)));
        closeAll();
        return false;
    }
    // A child of its own: entering a user namespace takes a process with one thread, and the
    // host stays in its namespaces.
    const pid_t child = ::fork();
    const int forkError = errno;
    if (child == 0)
        applyInChild(messages, userNamespace, networkNamespace, report[1]);
    ::close(report[1]);
    report[1] = -1;
    int status = 0;
    bool exited = false;
    if (child > 0) {
        while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
        }
        exited = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    Failure failure;
    const bool reported = ::read(report[0], &failure, sizeof failure) == sizeof failure;
    closeAll();
    if (child < 0) {
        *error = u"egress filter: cannot fork (%1)"_s.arg(
            QString::fromLocal8Bit(std::strerror(forkError)));
        return false;
    }
    if (reported) {
        *error = describeFailure(failure, messages);
        return false;
    }
    if (!exited) {
        *error = u"egress filter: its process ended abnormally"_s;
        return false;
    }
    return true;
}

} // namespace

bool install(pid_t pid, bool root, const QList<Ipv4Range> &allowed, QString *error)
{
    return apply(pid, root, requests(allowed), error);
}

bool clear(pid_t pid, bool root, QString *error)
{
    std::vector<Message> messages;
    for (const quint32 priority : {DnsPriority, SlirpPriority, AllowedPriority, BlockedPriority})
        messages.push_back(removal(priority));
    return apply(pid, root, std::move(messages), error);
}

bool filterFrames(pid_t slirp, QString *error)
{
    const auto fail = [error](const QString &what) {
        *error =
            u"egress filter: %1 (%2)"_s.arg(what, QString::fromLocal8Bit(std::strerror(errno)));
        return false;
    };
    // slirp4netns's child opens the device in the sandbox's namespaces and hands it to its
    // parent, which keeps it: one descriptor of /dev/net/tun.
    int target = -1;
    const QByteArray fdDir = "/proc/" + QByteArray::number(slirp) + "/fd";
    DIR *fds = ::opendir(fdDir.constData());
    if (!fds)
        return fail(u"cannot read the descriptors of slirp4netns"_s);
    while (const dirent *entry = ::readdir(fds)) {
        char link[64] = {};
        const QByteArray path = fdDir + '/' + entry->d_name;
        if (::readlink(path.constData(), link, sizeof link - 1) > 0 &&
            std::strcmp(link, "/dev/net/tun") == 0)
            target = std::atoi(entry->d_name);
    }
    ::closedir(fds);
    if (target < 0) {
        errno = ENOENT;
        return fail(u"slirp4netns holds no tap device"_s);
    }
    const int process = int(::syscall(SYS_pidfd_open, slirp, 0));
    if (process < 0)
        return fail(u"cannot open slirp4netns's process"_s);
    const int tap = int(::syscall(SYS_pidfd_getfd, process, target, 0));
    const int getError = errno;
    ::close(process);
    errno = getError;
    if (tap < 0)
        return fail(u"cannot take slirp4netns's tap device"_s);
    // slirp4netns answers ARP for its hosts with 52:55 and their IPv4 address.
    const auto slirpHost = [](quint32 address, quint8 *mac) {
        mac[0] = 0x52;
        mac[1] = 0x55;
        for (int i = 0; i < 4; ++i)
            mac[2 + i] = quint8(address >> (24 - 8 * i));
    };
    constexpr int Addresses = 3;
    alignas(tun_filter) quint8 request[sizeof(tun_filter) + Addresses * ETH_ALEN] = {};
    auto *filter = reinterpret_cast<tun_filter *>(request);
    filter->flags = 0; // no other multicast: no hash of groups, no TUN_FLT_ALLMULTI
    filter->count = Addresses;
    slirpHost(SlirpGateway, filter->addr[0]);
    slirpHost(SlirpDns, filter->addr[1]);
    std::memset(filter->addr[2], 0xff, ETH_ALEN);
    const bool set = ::ioctl(tap, TUNSETTXFILTER, request) >= 0; // the exact addresses taken
    const int setError = errno;
    ::close(tap);
    errno = setError;
    return set || fail(u"cannot filter the tap device's frames"_s);
}

QString dnsServer()
{
    return QHostAddress(SlirpDns).toString();
}

QJsonObject describe(const QStringList &allowed)
{
    QJsonArray blocked;
    for (const Ipv4Range &range : blockedRanges())
        blocked.append(range.toString());
    return QJsonObject{{u"blocked"_s, blocked},
                       {u"blocked_host_addresses"_s, true},
                       {u"allowed"_s, QJsonArray::fromStringList(allowed)},
                       {u"dns"_s, QString(dnsServer() + u":53"_s)},
                       {u"ipv6"_s, false}};
}

} // namespace EgressFilter

} // namespace AgentDeck
