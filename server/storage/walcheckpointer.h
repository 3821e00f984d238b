#pragma once

#include <QString>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

class QFile;
struct sqlite3;

namespace AgentDeck {
class RepeatedFailureLog;

// Checkpoints an SQLite write-ahead log from a thread of its own, on a connection of its own.
// With SQLite's automatic checkpoints, the commit that takes the log past ~1,000 pages copies
// them all back into the database file and syncs it before it returns: every ~250 events one
// request waited for that, and every request queued behind it. PASSIVE checkpoints never wait
// for readers or writers; what one could not copy, a later one does.
class WalCheckpointer
{
public:
    // Past `maxLogFrames` frames in the log a checkpoint takes the write lock so that the log
    // starts over (see startLogOver()), and a commit may wait for it.
    WalCheckpointer(QString path, std::chrono::milliseconds interval, int maxLogFrames);
    ~WalCheckpointer(); // a last checkpoint, then the thread ends

    WalCheckpointer(const WalCheckpointer &) = delete;
    WalCheckpointer &operator=(const WalCheckpointer &) = delete;

    // While held (by any thread; holds count), the log is not started over. A RESTART waits
    // for every reader to leave the log and blocks new writers meanwhile: behind a read
    // lasting seconds (the integrity check of a large catalog), commits waited up to the busy
    // limit. PASSIVE checkpoints go on; the log may outgrow its bound until the hold ends.
    void holdRestarts(bool hold) { m_restartsHeld.fetch_add(hold ? 1 : -1); }

private:
    void run();
    // Past the bound: syncs the database file, catches the checkpoint up with the writer,
    // then RESTARTs so that the next commit starts the log over.
    void startLogOver(sqlite3 *db, QFile &database, RepeatedFailureLog &failures, int &logFrames);

    QString m_path;
    std::chrono::milliseconds m_interval;
    int m_maxLogFrames;
    std::mutex m_mutex;
    std::condition_variable m_wake;
    bool m_stopping = false;
    std::atomic<int> m_restartsHeld{0};
    std::thread m_thread;
};

} // namespace AgentDeck
