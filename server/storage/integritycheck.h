#pragma once

#include <QObject>
#include <QString>

#include <functional>
#include <mutex>
#include <thread>

struct sqlite3;

namespace AgentDeck {

// Reads a whole SQLite catalog once (PRAGMA integrity_check), in a thread of its own on a
// connection of its own, at the lowest priority: a damaged page is found when the server
// starts, not by whichever request first touches it, which could be days later. Not
// quick_check: it does not compare indexes with their tables, and an index that lost an entry
// passed it while the event it lost answered 404 to its id. integrity_check also looks up each
// row's index entries: three to five times quick_check's CPU, about the same time when the file
// has to come from disk (the benchmark's figure 5).
class IntegrityCheck : public QObject
{
    Q_OBJECT
public:
    // `holdLogRestarts(true)` before the check's read and (false) after it, from the check's
    // thread: its snapshot lasts the whole check (see WalCheckpointer::holdRestarts).
    explicit IntegrityCheck(QString path, std::function<void(bool)> holdLogRestarts = {},
                            QObject *parent = nullptr);
    ~IntegrityCheck() override; // interrupts a check still running

    IntegrityCheck(const IntegrityCheck &) = delete;
    IntegrityCheck &operator=(const IntegrityCheck &) = delete;

    void start();

    // The statement the check runs, for what it reports.
    static constexpr const char *Pragma = "PRAGMA integrity_check";

Q_SIGNALS:
    // Once, in the thread that owns this object. `problem` is empty when the catalog is
    // sound, else what SQLite found (its first lines); `checked` is false when the check could
    // not run at all (the file could not be opened, or it was interrupted).
    void finished(bool checked, const QString &problem, qint64 elapsedMs);

private:
    void run();

    QString m_path;
    std::function<void(bool)> m_holdLogRestarts;
    std::mutex m_mutex;
    sqlite3 *m_db = nullptr; // while the check runs; guarded by m_mutex
    bool m_stopping = false;
    std::thread m_thread;
};

} // namespace AgentDeck
