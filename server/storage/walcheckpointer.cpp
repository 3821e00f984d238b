#include "walcheckpointer.h"

#include "logging.h"
#include "sqlitebusywait.h"

#include <sqlite3.h>

namespace AgentDeck {

WalCheckpointer::WalCheckpointer(QString path, std::chrono::milliseconds interval, int maxLogFrames)
    : m_path(std::move(path))
    , m_interval(interval)
    , m_maxLogFrames(maxLogFrames)
    , m_thread([this] { run(); })
{}

WalCheckpointer::~WalCheckpointer()
{
    {
        const std::lock_guard lock(m_mutex);
        m_stopping = true;
    }
    m_wake.notify_all();
    m_thread.join();
}

void WalCheckpointer::run()
{
    sqlite3 *db = nullptr;
    if (sqlite3_open_v2(m_path.toUtf8().constData(), &db, SQLITE_OPEN_READWRITE, nullptr) !=
        SQLITE_OK) {
        qCWarning(lcStorage) << "the checkpointer cannot open" << m_path << ":"
                             << sqlite3_errmsg(db);
        sqlite3_close(db);
        return;
    }
    // A RESTART waits for the writer, and then for the readers, through the busy handler.
    SqliteBusyWait::install(db);
    // A connection opens the log only once it reads: until then a checkpoint finds no log and
    // does nothing (successfully).
    if (sqlite3_exec(db, "SELECT count(*) FROM sqlite_schema", nullptr, nullptr, nullptr) !=
        SQLITE_OK) {
        qCWarning(lcStorage) << "the checkpointer cannot read" << m_path << ":"
                             << sqlite3_errmsg(db);
        sqlite3_close(db);
        return;
    }
    const auto checkpoint = [db](int mode, int *logFrames) {
        const int rc = sqlite3_wal_checkpoint_v2(db, nullptr, mode, logFrames, nullptr);
        if (rc != SQLITE_OK && rc != SQLITE_BUSY)
            qCWarning(lcStorage) << "checkpoint failed:" << sqlite3_errmsg(db);
        return rc;
    };
    std::unique_lock lock(m_mutex);
    while (!m_wake.wait_for(lock, m_interval, [this] { return m_stopping; })) {
        lock.unlock();
        int logFrames = 0;
        // Under constant writes a PASSIVE checkpoint may never find the log copied at a quiet
        // moment, and only then does the next commit start the log over. Past the bound a
        // RESTART waits for the writer, so the log cannot grow without end.
        if (checkpoint(SQLITE_CHECKPOINT_PASSIVE, &logFrames) == SQLITE_OK &&
            logFrames > m_maxLogFrames)
            checkpoint(SQLITE_CHECKPOINT_RESTART, nullptr);
        lock.lock();
    }
    lock.unlock();
    checkpoint(SQLITE_CHECKPOINT_PASSIVE, nullptr);
    sqlite3_close(db);
}

} // namespace AgentDeck
