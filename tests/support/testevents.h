#pragma once

// Helpers for events as the API returns them (JSON objects), shared by API and system tests.
#include <QJsonObject>
#include <QList>

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

} // namespace AgentDeck::Testing
