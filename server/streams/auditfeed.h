#pragma once

#include <QObject>
#include <QTimer>

#include <chrono>
#include <memory>

namespace AgentDeck {

class AuditLog;
class Database;

// Tells the lifecycle streams (LifecycleStreamSession) when the audit log may have records past
// theirs: at once when this replica wrote some (AuditLog::written()), when another replica
// announces a write on PostgreSQL (LISTEN on AuditLog::WrittenChannel, on a connection of its
// own that a watchdog opens again), and every PollInterval anyway. A wake-up carries nothing:
// each stream reads the table past its own cursor, so a missed announcement leaves no gap once
// any later wake-up comes. Lives in the streams' thread.
class AuditFeed : public QObject
{
    Q_OBJECT
public:
    // The safety poll, for an announcement lost with no later one to follow it.
    static constexpr std::chrono::seconds PollInterval{10};

    // `writer` lives in the main thread; `catalog` is where the PostgreSQL listening connection
    // is opened from (nothing is listened for on SQLite: one process writes it).
    AuditFeed(const AuditLog &writer, const Database &catalog, QObject *parent = nullptr);
    ~AuditFeed() override;

Q_SIGNALS:
    // At most once an event loop turn, however many wake-ups came in it.
    void woke();

private:
    void wake();
    void listen();

    const Database &m_catalog;
    std::unique_ptr<Database> m_listener;
    QTimer m_coalesce;
    QTimer m_poll;
    QTimer m_watchdog;
};

} // namespace AgentDeck
