#pragma once

#include "trash.h"

#include <QObject>
#include <QTimer>

#include <chrono>
#include <functional>

namespace AgentDeck {

class Clock;
class ConversationStore;
class RuntimeProvider;

// Runtime retention: expires runtimes inactive for longer than the retention. Each expiry is
// marked in the row first, then the runtime is stopped and the server-owned workspace and the
// sandbox home are deleted; a pass interrupted in between is finished by the next one. History
// is kept, and a workspace the caller supplied is never deleted.
class RetentionReaper : public QObject
{
    Q_OBJECT
public:
    RetentionReaper(ConversationStore &store, RuntimeProvider &runtimes, const Clock &clock,
                    std::chrono::milliseconds retention, RemoveTree removeTree = removeTreeNow,
                    QObject *parent = nullptr);

    // Asked of each conversation found inactive: true leaves it for a later pass (its runtime is
    // coming up, or it runs). Empty: none is left.
    void setKeeper(std::function<bool(const QUuid &)> keeper) { m_keeper = std::move(keeper); }
    // Told of each runtime it expires, in the transaction that marks it expired (the audit log
    // records it, the history says so).
    void setOnExpired(std::function<void(const QUuid &)> onExpired)
    {
        m_onExpired = std::move(onExpired);
    }
    // One pass; returns how many runtimes it freed completely.
    int runPass();
    void startPeriodic(std::chrono::milliseconds interval);

private:
    ConversationStore &m_store;
    RuntimeProvider &m_runtimes;
    const Clock &m_clock;
    std::chrono::milliseconds m_retention;
    RemoveTree m_removeTree;
    std::function<bool(const QUuid &)> m_keeper;
    std::function<void(const QUuid &)> m_onExpired;
    QTimer m_timer;
};

} // namespace AgentDeck
