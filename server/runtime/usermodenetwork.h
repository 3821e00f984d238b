#pragma once

#include "egressfilter.h"

#include <QString>
#include <QStringList>

#include <memory>

class QProcess;

namespace AgentDeck {

// The `egress` network of a command in bubblewrap's network namespace: slirp4netns, a user-mode
// network stack outside the sandbox, with the host's loopback refused (the server, PostgreSQL
// and every other local service stay out of reach), and the EgressFilter in the namespace for
// the host's other addresses and the non-public ranges. bubblewrap reports its child's pid on
// one pipe and waits on another before it runs the command, so the network is up and filtered
// when it starts:
//     network.prepare(); start bubblewrap with network.bubblewrapArguments(), calling
//     network.inChild() in the child; then network.attach().
// Whatever fails, the command runs without network, never with the host's or an unfiltered one.
class UserModeNetwork
{
public:
    UserModeNetwork();
    ~UserModeNetwork();

    static bool isAvailable();

    bool prepare(QString *error);
    QStringList bubblewrapArguments() const;
    // In the forked child, before exec: puts the pipes where the arguments say.
    void inChild() const;
    // In the parent, once bubblewrap started: attaches the network to its child, filters it
    // (`allowed`: the operator's exceptions) and lets the command go; false (the command going
    // without network) with *error saying why.
    bool attach(bool root, const QList<Ipv4Range> &allowed, QString *error);
    void stop();

private:
    void closeAll();

    static constexpr int InfoFd = 100;
    static constexpr int BlockFd = 101;
    int m_info[2] = {-1, -1};
    int m_block[2] = {-1, -1};
    std::unique_ptr<QProcess> m_slirp;
};

} // namespace AgentDeck
