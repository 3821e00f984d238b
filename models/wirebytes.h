#pragma once

#include <QByteArray>
#include <QDateTime>
#include <QJsonValue>
#include <QStringView>

#include <optional>

// The wire's JSON written straight into bytes, for the answers and events that go out most: as
// QJsonDocument would write them (compact, members in key order), without building a document.
namespace AgentDeck {

void appendJsonString(QByteArray &out, QStringView text);
void appendJsonValue(QByteArray &out, const QJsonValue &value);
// The members of `object`, without the braces.
void appendJsonMembers(QByteArray &out, const QJsonObject &object);
// A time as toWireTime() writes it, quoted.
void appendWireTime(QByteArray &out, qint64 msecsSinceEpoch);
void appendWireTime(QByteArray &out, const QDateTime &time);
// The time, or null.
void appendOptionalTime(QByteArray &out, const std::optional<QDateTime> &time);

} // namespace AgentDeck
