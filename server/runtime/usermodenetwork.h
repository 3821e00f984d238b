#pragma once

#include "egressfilter.h"

#include <QString>
#include <QStringList>

#include <memory>

class QProcess;

namespace AgentDeck {

// The `egress` network of a command in its sandbox's network namespace: slirp4netns, a user-mode
// network stack outside the sandbox, with the host's loopback refused (the server, PostgreSQL
// and every other local service stay out of reach), and the EgressFilter in the namespace for
// the host's other addresses and the non-public ranges. The sandbox's starter (bubblewrap, or
// `container-exec` for a container, which speaks the same) reports the pid whose namespace it is
// on one pipe and waits on another before it runs the command, so the network is up and
// filtered when it starts:
//     network.prepare(); start the starter with network.childArguments(), calling
//     network.inChild() in the child; then network.attach().
// The network is the command's: it goes when stop() ends slirp4netns (or with the process that
// started it), its tap0 with it; a container's namespace that outlives the command keeps the
// filter's rules, which the next attach() replaces.
// Whatever fails, the command runs without network, never with the host's or an unfiltered one.
class UserModeNetwork
{
public:
    UserModeNetwork();
    ~UserModeNetwork();

    static bool isAvailable();

    bool prepare(QString *error);
    // `--info-fd N --block-fd M`, as bubblewrap takes them.
    QStringList childArguments() const;
    // In the forked child, before exec: puts the pipes where the arguments say.
    void inChild() const;
    // In the parent, once the starter started: attaches the network to the namespace of the pid
    // it reports (never this process's own), filters it (`allowed`: the operator's exceptions)
    // and lets the command go; false (the command going without network) with *error saying
    // why: the starter's own words when it reports {"error": ...} instead of a pid.
    bool attach(bool root, const QList<Ipv4Range> &allowed, QString *error);
    void stop();

private:
    void closeAll();

    static constexpr int InfoFd = 100;
    static constexpr int BlockFd = 101;
    int m_info[2] = {-1, -1};
    int m_block[2] = {-1, -1};
    // slirp4netns ends when this closes (--exit-fd): with stop(), or with this process however
    // it ends. One left attached to a container's namespace would hold its tap0.
    int m_exit = -1;
    std::unique_ptr<QProcess> m_slirp;
};

} // namespace AgentDeck
