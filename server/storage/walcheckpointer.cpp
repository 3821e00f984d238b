#include "walcheckpointer.h"

#include "logging.h"
#include "sqlitebusywait.h"

#include <QElapsedTimer>
#include <QFile>

#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {
// Catch-up passes before a RESTART: until a pass finds at most SmallRemainder new frames.
constexpr int MaxCatchUpPasses = 3;
constexpr int SmallRemainder = 64;

int checkpoint(sqlite3 *db, int mode, RepeatedFailureLog &failures, int *logFrames = nullptr)
{
    const int rc = sqlite3_wal_checkpoint_v2(db, nullptr, mode, logFrames, nullptr);
    if (rc == SQLITE_OK)
        failures.succeeded();
    else if (rc != SQLITE_BUSY)
        failures.failed(QString::fromUtf8(sqlite3_errmsg(db)));
    return rc;
}

double toMs(qint64 ns)
{
    return double(ns) / 1e6;
}
} // namespace

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
    // Syncing any descriptor of a file syncs the file: this one is for syncing only.
    QFile database(m_path);
    if (!database.open(QIODevice::ReadOnly))
        qCWarning(lcStorage) << "the checkpointer cannot open" << m_path
                             << "to sync it:" << database.errorString();
    int restartedAt = 0; // the log's size at the last RESTART
    RepeatedFailureLog failures(lcStorage, u"checkpoint of %1"_s.arg(m_path));
    std::unique_lock lock(m_mutex);
    while (!m_wake.wait_for(lock, m_interval, [this] { return m_stopping; })) {
        lock.unlock();
        int logFrames = 0;
        // Under constant writes a PASSIVE checkpoint may never find the log copied at a quiet
        // moment, and only then does the next commit start the log over. Past the bound a
        // RESTART waits for the writer, so the log cannot grow without end; once is enough
        // until a commit has started the log over.
        if (checkpoint(db, SQLITE_CHECKPOINT_PASSIVE, failures, &logFrames) == SQLITE_OK &&
            logFrames > m_maxLogFrames && logFrames != restartedAt && m_restartsHeld.load() == 0) {
            startLogOver(db, database, failures, logFrames);
            restartedAt = logFrames;
        }
        lock.lock();
    }
    lock.unlock();
    checkpoint(db, SQLITE_CHECKPOINT_PASSIVE, failures);
    sqlite3_close(db);
}

void WalCheckpointer::startLogOver(sqlite3 *db, QFile &database, RepeatedFailureLog &failures,
                                   int &logFrames)
{
    // The RESTART holds the write lock while it copies what came since the last checkpoint
    // and syncs the database file. Only a checkpoint that copies the whole log syncs that
    // file, which no PASSIVE does while commits keep coming: the RESTART would flush all that
    // was copied since the log last started over (10-18 ms under the lock, seeding 100,000
    // conversations). Synced here first, and caught up by PASSIVE passes that each copy what
    // came during the one before, the RESTART is left little to copy and to sync.
    QElapsedTimer clock;
    clock.start();
    if (database.isOpen() && ::fdatasync(database.handle()) != 0)
        qCWarning(lcStorage) << "cannot sync" << m_path << ":" << qt_error_string(errno);
    const qint64 syncedNs = clock.nsecsElapsed();
    int passes = 0;
    while (passes < MaxCatchUpPasses) {
        ++passes;
        // A pass that fails (busy while a commit starts the log over) reports -1 frames: the
        // count before it stands.
        int frames = 0;
        if (checkpoint(db, SQLITE_CHECKPOINT_PASSIVE, failures, &frames) != SQLITE_OK)
            break;
        const bool caughtUp = frames - logFrames <= SmallRemainder;
        logFrames = frames;
        if (caughtUp)
            break;
    }
    const qint64 caughtUpNs = clock.nsecsElapsed();
    const int rc = checkpoint(db, SQLITE_CHECKPOINT_RESTART, failures);
    qCDebug(lcStorage).nospace() << "log restart at " << logFrames << " frames: file synced in "
                                 << toMs(syncedNs) << " ms; catch-up passes: " << passes << ", "
                                 << toMs(caughtUpNs - syncedNs) << " ms; RESTART "
                                 << (rc == SQLITE_OK ? "in " : "gave up after ")
                                 << toMs(clock.nsecsElapsed() - caughtUpNs) << " ms";
}

} // namespace AgentDeck
