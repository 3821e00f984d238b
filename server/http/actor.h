#pragma once

#include <QByteArrayView>
#include <QString>

namespace AgentDeck {

// Who made a change: the name of the key a request carried and the client that sent it (its
// User-Agent, shortened), or the server itself, with the policy that acted as its client.
struct Actor
{
    QString key;    // a key's name; empty on a server without keys
    QString client; // "console", "ctl", "curl", ...; a policy for the server; may be empty

    // The name the server's own changes are made by; its client names the policy (idle,
    // retention, limit, lease, recovery, shutdown).
    static constexpr QStringView Server = u"server";
    static Actor server(const QString &policy) { return {Server.toString(), policy}; }
    bool isServer() const { return key == Server; }

    // "ops-alice via console", "server (idle)", "anonymous via curl".
    QString display() const;

    // The client a User-Agent value names: its first product without the version, printable
    // ASCII only and short, "agentdeck-" dropped ("agentdeck-console/1.4" is "console").
    static QString clientFrom(QByteArrayView userAgent);
};

} // namespace AgentDeck
