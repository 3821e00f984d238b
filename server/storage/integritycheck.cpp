#include "integritycheck.h"

#include <QElapsedTimer>
#include <QStringList>

#include <sqlite3.h>
#include <sys/resource.h>
#include <unistd.h>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {
// The check stops at this many problems (it lists up to a hundred by default, one per missing
// index entry): a few name the damage.
constexpr int ReportedLines = 5;
} // namespace

IntegrityCheck::IntegrityCheck(QString path, std::function<void(bool)> holdLogRestarts,
                               QObject *parent)
    : QObject(parent)
    , m_path(std::move(path))
    , m_holdLogRestarts(std::move(holdLogRestarts))
{}

IntegrityCheck::~IntegrityCheck()
{
    {
        const std::lock_guard lock(m_mutex);
        m_stopping = true;
        if (m_db)
            sqlite3_interrupt(m_db);
    }
    if (m_thread.joinable())
        m_thread.join();
}

void IntegrityCheck::start()
{
    if (!m_thread.joinable())
        m_thread = std::thread([this] { run(); });
}

void IntegrityCheck::run()
{
    // Requests come first: the check may read the whole file, and it can wait.
    ::setpriority(PRIO_PROCESS, ::gettid(), 19);
    QElapsedTimer clock;
    clock.start();
    bool checked = false;
    QStringList findings;
    sqlite3 *db = nullptr;
    if (sqlite3_open_v2(m_path.toUtf8().constData(), &db, SQLITE_OPEN_READONLY, nullptr) ==
        SQLITE_OK) {
        {
            const std::lock_guard lock(m_mutex);
            m_db = m_stopping ? nullptr : db;
        }
        if (m_holdLogRestarts)
            m_holdLogRestarts(true);
        sqlite3_stmt *statement = nullptr;
        const QByteArray pragma =
            QByteArray(Pragma) + '(' + QByteArray::number(ReportedLines) + ')';
        if (m_db &&
            sqlite3_prepare_v2(db, pragma.constData(), -1, &statement, nullptr) == SQLITE_OK) {
            int rc;
            while ((rc = sqlite3_step(statement)) == SQLITE_ROW) {
                const auto *line =
                    reinterpret_cast<const char *>(sqlite3_column_text(statement, 0));
                findings.append(QString::fromUtf8(line ? line : ""));
            }
            // A page it cannot even read (SQLITE_CORRUPT) ends the check: that is damage too.
            if (rc == SQLITE_DONE) {
                checked = true;
            } else if (rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB) {
                checked = true;
                findings.append(QString::fromUtf8(sqlite3_errmsg(db)));
            }
        }
        sqlite3_finalize(statement);
        if (m_holdLogRestarts)
            m_holdLogRestarts(false);
        {
            const std::lock_guard lock(m_mutex);
            m_db = nullptr;
        }
    }
    sqlite3_close(db);
    const QString problem = findings == QStringList{u"ok"_s} ? QString() : findings.join(u"; "_s);
    const qint64 elapsedMs = clock.elapsed();
    QMetaObject::invokeMethod(
        this, [this, checked, problem, elapsedMs] { Q_EMIT finished(checked, problem, elapsedMs); },
        Qt::QueuedConnection);
}

} // namespace AgentDeck
