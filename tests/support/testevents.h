#pragma once

// Helpers for events as the API returns them (JSON objects), shared by API and system tests.
#include <QJsonArray>
#include <QJsonObject>
#include <QList>
#include <QStringList>

namespace AgentDeck::Testing {

// The events of one kind ("ActionEvent", ...), in the order given.
inline QList<QJsonObject> ofKind(const QList<QJsonObject> &events, const QString &kind)
{
    QList<QJsonObject> found;
    for (const QJsonObject &event : events) {
        if (event.value(QLatin1String("kind")).toString() == kind)
            found.append(event);
    }
    return found;
}

// The text of a MessageEvent, its content parts joined.
inline QString messageText(const QJsonObject &event)
{
    QString text;
    const QJsonArray content = event.value(QLatin1String("llm_message"))
                                   .toObject()
                                   .value(QLatin1String("content"))
                                   .toArray();
    for (const QJsonValue &part : content)
        text += part.toObject().value(QLatin1String("text")).toString();
    return text;
}

// What the recoveries wrote in the history: the values of the {"key": "recovery"} state
// updates (RecoveryAction), in order.
inline QStringList recoveryActionsIn(const QList<QJsonObject> &events)
{
    QStringList actions;
    for (const QJsonObject &event :
         ofKind(events, QStringLiteral("ConversationStateUpdateEvent"))) {
        if (event.value(QLatin1String("key")).toString() == QLatin1String("recovery"))
            actions.append(event.value(QLatin1String("value")).toString());
    }
    return actions;
}

} // namespace AgentDeck::Testing
