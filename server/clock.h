#pragma once

#include <QDateTime>

namespace AgentDeck {

// The time source of the server. Tests inject a fake; production uses SystemClock.
class Clock
{
public:
    virtual ~Clock() = default;
    virtual qint64 nowMs() const = 0;
    QDateTime now() const { return QDateTime::fromMSecsSinceEpoch(nowMs(), Qt::UTC); }
};

class SystemClock final : public Clock
{
public:
    qint64 nowMs() const override { return QDateTime::currentMSecsSinceEpoch(); }
};

} // namespace AgentDeck
