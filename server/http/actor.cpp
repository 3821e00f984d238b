#include "actor.h"

using namespace Qt::StringLiterals;

namespace AgentDeck {

QString Actor::display() const
{
    if (isServer())
        return client.isEmpty() ? key : u"%1 (%2)"_s.arg(key, client);
    const QString who = key.isEmpty() ? u"anonymous"_s : key;
    return client.isEmpty() ? who : u"%1 via %2"_s.arg(who, client);
}

QString Actor::clientFrom(QByteArrayView userAgent)
{
    // Long enough for any product name; a client's value is not the record's to keep whole.
    constexpr qsizetype MaxLength = 40;
    QString client;
    for (const char c : userAgent.trimmed()) {
        if (c == '/' || c == ' ' || c == '\t' || client.size() == MaxLength)
            break;
        // Printable only: the value reaches logs and the console.
        if (c > 0x20 && c < 0x7f)
            client.append(QLatin1Char(c));
    }
    if (client.startsWith(u"agentdeck-"_s) && client.size() > 10)
        client.remove(0, 10);
    return client;
}

QJsonObject ChangeCause::toJson() const
{
    return {{u"actor"_s, actor.key},
            {u"client"_s, actor.client},
            {u"actor_display"_s, actor.display()},
            {u"reason"_s, reason}};
}

QString ChangeCause::cleanReason(const QString &reason)
{
    // A client's text, shown in logs, the console and the history.
    QString clean;
    for (const QChar c : reason) {
        if (clean.size() == MaxReasonLength)
            break;
        clean.append(c.isPrint() ? c : u' ');
    }
    return clean.trimmed();
}

} // namespace AgentDeck
