#pragma once

#include <QJsonObject>
#include <QList>
#include <QString>
#include <QStringList>
#include <QTemporaryDir>

namespace AgentDeck::Testing {

// Where the `egress` network's tests send their connections: network namespaces the test makes
// itself, and nothing else. setUp() moves the test process into a network namespace of its own
// ("the host", where the servers and whatever they start run, a dockerd too) joined by a veth
// pair to a second one ("the world"):
//   host:  up0 198.51.100.2/24 and 10.203.0.1/24 (its own addresses), default via the world;
//          a listener on every address
//   world: down0 198.51.100.1/24 (public) and 10.203.0.2/24 (a private neighbour); on its
//          loopback 169.254.169.254 (metadata), 172.16.5.1 and 100.64.5.1; a listener on every
//          address, and one on port 53, the resolver slirp4netns's DNS forwarder asks (through a
//          resolv.conf in a mount namespace of the test's own)
// Nothing leaves these namespaces; they end with the test process. Root only.
class EgressWorld
{
public:
    EgressWorld();
    ~EgressWorld();
    EgressWorld(const EgressWorld &) = delete;
    EgressWorld &operator=(const EgressWorld &) = delete;

    // Empty when the namespaces and listeners are up, else what failed. Before any thread
    // that must be in them starts (a mount namespace takes a process of one thread).
    QString setUp();
    bool isReady() const { return m_ready; }

    // What a sandbox's command runs to try every destination as an attacker's would (taking the
    // filter away first), printing "REACHED NAME" or "REFUSED NAME" for each, and sending
    // datagrams tagged `row`: multicast that must not leave, then one to a public address.
    QString probeCommand(const QString &row) const;
    // What is wrong in the output of probeCommand() for a sandbox with the `egress` network
    // (`neighbourAllowed`: 10.203.0.0/24 is allowed); empty when nothing is. A sandbox without
    // python3 is not tried with sockets bound to the interface (a warning says so).
    QString checkEgress(const QString &output, const QString &row, bool neighbourAllowed);
    // The same for a sandbox without network: it reaches nothing at all.
    QString checkNoNetwork(const QString &output) const;
    // What is wrong in runtime_info's (or /server_info's) sandbox.egress, `allowed` the ranges
    // the server was given; empty when nothing is.
    static QString checkDescribed(const QJsonObject &egress, const QStringList &allowed);

private:
    struct Target
    {
        QString name;
        QString address;
        QString port;
        bool reached;
    };
    QList<Target> targets(bool neighbourAllowed) const;
    QList<Target> boundTargets(bool neighbourAllowed) const;
    bool setUpMounts();
    // What has arrived on the world's UDP socket, one datagram a line.
    QStringList received() const;

    QTemporaryDir m_mountDir;
    int m_origin = -1;
    int m_world = -1;
    int m_host = -1;
    int m_worldListener = -1;
    int m_worldDns = -1;
    int m_worldUdp = -1;
    int m_worldUdpPort = 0;
    int m_hostListener = -1;
    int m_worldPort = 0;
    int m_hostPort = 0;
    bool m_ready = false;
};

} // namespace AgentDeck::Testing
