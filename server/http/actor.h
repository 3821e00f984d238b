#pragma once

#include <QByteArrayView>
#include <QJsonObject>
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

// Who made a change and why, as the history's state events and the audit log name them.
struct ChangeCause
{
    Actor actor;
    QString reason; // may be empty

    static ChangeCause server(const QString &policy, const QString &reason)
    {
        return {Actor::server(policy), reason};
    }
    // {"actor", "client", "actor_display", "reason"}: the members an audit record names them by.
    QJsonObject toJson() const;
    // A client's reason as it is kept: printable, on one line, at most MaxReasonLength.
    static QString cleanReason(const QString &reason);
    static constexpr qsizetype MaxReasonLength = 500;
};

} // namespace AgentDeck
