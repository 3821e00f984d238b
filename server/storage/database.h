#pragma once

#include <QHash>
#include <QSqlDatabase>
#include <QSqlQuery>
#include <QString>
#include <QUrl>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

struct sqlite3_stmt;

namespace AgentDeck {

class Clock;
class WalCheckpointer;

// An unexpected storage failure (disk full, database gone). Never caused by bad input; the HTTP
// layer answers it with 503.
class StorageError : public std::runtime_error
{
public:
    using std::runtime_error::runtime_error;

    // Whether the database could not write for want of space (SQLite's SQLITE_FULL, a
    // PostgreSQL server out of disk): the fix is the operator's, not a retry's.
    bool diskFull() const
    {
        const std::string_view text(what());
        return text.find("database or disk is full") != std::string_view::npos ||
               text.find("No space left on device") != std::string_view::npos;
    }
    // Whether a statement gave up waiting for a row lock (PostgreSQL's lock_timeout): another
    // replica holds the row in a transaction that does not end.
    bool lockTimeout() const
    {
        return std::string_view(what()).find("lock timeout") != std::string_view::npos;
    }
    // Whether the database's files are damaged (SQLite's SQLITE_CORRUPT and SQLITE_NOTADB,
    // PostgreSQL's "invalid page"): no retry mends it; a backup does.
    bool corrupt() const { return saysCorrupt(what()); }
    static bool saysCorrupt(std::string_view text)
    {
        return text.find("database disk image is malformed") != std::string_view::npos ||
               text.find("file is not a database") != std::string_view::npos ||
               text.find("invalid page in block") != std::string_view::npos;
    }
};

// One Qt Sql connection with its migrations, a cache of prepared statements for the hot paths
// and a counter of executed statements (tests assert query budgets with it).
// How long a PostgreSQL session waits for a row lock, and how long the server lets a session sit
// in a transaction without a statement before it ends that session. A replica frozen inside a
// transaction (SIGSTOP, a paused VM) held its row locks, and every other replica that touched
// the row waited without end, its whole event loop with it, `/alive` included.
struct PostgresTimeouts
{
    std::chrono::milliseconds lockWait{500};
    std::chrono::milliseconds idleInTransaction{10'000};
};

class Database
{
public:
    ~Database();
    Database(const Database &) = delete;
    Database &operator=(const Database &) = delete;

    // Opens (creating when needed) an SQLite catalog in WAL mode and runs pending migrations.
    // A file whose header is damaged, or that SQLite finds damaged while opening it, is refused
    // with an error that names it as damaged. `clock` backs the SQL function agentdeck_now_ms(),
    // the database's clock that lease expiry is computed with; it must outlive the database. Null:
    // the system clock.
    static std::unique_ptr<Database> openSqlite(const QString &path, QString *error,
                                                const Clock *clock = nullptr);
    // Connects to PostgreSQL at `url` (postgresql://USER[:PASSWORD]@HOST[:PORT]/DB; the password
    // may come from PGPASSWORD instead) and runs pending migrations under an advisory lock, so
    // replicas starting at once do not race. agentdeck_now_ms() is the server's clock_timestamp().
    enum class Migrations
    {
        Run,
        Skip // a second connection of a process that migrated already
    };
    static std::unique_ptr<Database> openPostgres(const QUrl &url, QString *error,
                                                  Migrations migrations = Migrations::Run,
                                                  PostgresTimeouts timeouts = {});
    // Checks a --database value without connecting; empty when it is usable.
    static QString checkPostgresUrl(const QUrl &url);
    // SQLite: checkpoints the log every `interval` from a thread of its own instead of in the
    // commit that fills it, and keeps it under `maxLogFrames` (see WalCheckpointer). Until
    // close().
    void checkpointInBackground(std::chrono::milliseconds interval,
                                int maxLogFrames = DefaultMaxLogFrames);
    // 64 MiB of log with 4 KiB pages: under 3 s of appending 1,000 events a second (an append
    // writes six or seven pages).
    static constexpr int DefaultMaxLogFrames = 16384;
    // See WalCheckpointer::holdRestarts; from any thread while the database is open.
    void holdLogRestarts(bool hold);
    static constexpr int PageSize = 4096; // SQLite's default, which the catalog keeps
    // A second connection to the same database, for the thread that calls this (a Qt Sql
    // connection belongs to the thread that opened it). No migrations: this one ran them.
    std::unique_ptr<Database> openAnother(QString *error) const;

    enum class Dialect
    {
        Sqlite,
        Postgres
    };
    Dialect dialect() const { return m_dialect; }
    bool isPostgres() const { return m_dialect == Dialect::Postgres; }

    class Statement;
    // The hottest statements (an append): `sql` prepared once, bound by position with no
    // QVariant on SQLite. See Statement.
    Statement &statement(const QString &sql);
    // A prepared statement for `sql`, reused across calls. Bind, then call exec().
    QSqlQuery &prepared(const QString &sql);
    // Prepares a one-off statement (dynamic SQL such as search filters).
    QSqlQuery prepare(const QString &sql);
    // Executes and counts; throws StorageError on failure.
    void exec(QSqlQuery &query);
    // The next row of an executed query: false at the end, StorageError when fetching it failed
    // (a damaged page, a lost connection), which QSqlQuery::next() reports as the end.
    bool next(QSqlQuery &query);

    void begin();
    void commit();
    void rollback();
    // When this catalog was made (its first migration), in ms since the epoch; throws
    // StorageError when it cannot be read.
    qint64 createdAtMs();
    // The catalog's identity, made once with it and the same for every replica on it; throws
    // StorageError when it cannot be read.
    QString identity();
    // Tests: runs after each COMMIT the database took. A StorageError it throws is the commit's,
    // as when the connection goes before the COMMIT's answer arrives.
    std::function<void()> afterCommit;
    // Tests: runs before each COMMIT. A StorageError it throws fails the commit, and the
    // transaction is rolled back, as when the disk is full.
    std::function<void()> beforeCommit;

    qint64 statementCount() const { return m_statements; }
    // The SQL of the statement executed last (tests check query plans with it).
    QString lastStatement() const { return m_lastStatement; }
    QSqlDatabase &connection() { return m_db; }
    // The SQLite file; empty on PostgreSQL.
    QString sqlitePath() const { return m_sqlitePath; }
    void close();

private:
    Database(QSqlDatabase db, Dialect dialect);
    static std::unique_ptr<Database> connectSqlite(const QString &path, QString *error,
                                                   const Clock *clock);
    bool migrate(QString *error);
    bool applyMigrations(QString *error);
    // PostgreSQL: after a failed statement, the next use outside a transaction checks the
    // connection and opens it again when the server went away (restart, failover).
    void noteFailure();
    // BEGIN or COMMIT: the statement on SQLite, QSqlDatabase's call on PostgreSQL. The error
    // text when it failed.
    std::optional<QString> control(const QString &sqliteStatement,
                                   bool (QSqlDatabase::*postgres)());
    // Between transactions, after a failure: probes the connection and opens it again when the
    // server ended it. Whether it did; throws when the server is unreachable.
    bool reconnectIfLost();
    // A new prepared query for `sql`; opens the session again once if the server ended it.
    QSqlQuery prepareNew(const QString &sql, bool forwardOnly);
    // The same from inside a transaction none of whose statements ran yet: the transaction is
    // begun again on the new session.
    bool reopenSession();

    QSqlDatabase m_db;
    Dialect m_dialect;
    QString m_connectionName;
    // Where openAnother() connects: the PostgreSQL URL, or the SQLite file and its clock.
    QUrl m_postgresUrl;
    QString m_sqlitePath;
    const Clock *m_clock = nullptr;
    std::unique_ptr<WalCheckpointer> m_checkpointer;
    QHash<QString, QSqlQuery> m_prepared;
    std::unordered_map<QString, std::unique_ptr<Statement>> m_statementsBySql;
    // The statements of the session before the last reconnect: kept, not destroyed, as a caller
    // may hold one (a read retried on the new session is prepared again in its place).
    QHash<QString, QSqlQuery> m_retired;
    qint64 m_statements = 0;
    QString m_lastStatement;
    int m_depth = 0;
    int m_transactionStatements = 0; // of the outermost transaction, run so far
    bool m_suspect = false;
    bool m_rollbackOnly = false;
};

// A statement prepared once and bound by position (from 0), for the paths where Qt Sql cost
// more than the database: on SQLite it runs through the sqlite3 API on the connection Qt opened,
// since QSqlQuery names every placeholder it binds and converts each value through QVariant (an
// append spent more instructions there than in SQLite). On PostgreSQL it is the connection's
// prepared QSqlQuery, with Database::exec()'s reconnect rules. Counted as exec() counts.
class Database::Statement
{
public:
    ~Statement();
    Statement(const Statement &) = delete;
    Statement &operator=(const Statement &) = delete;

    void bind(int index, qint64 value);
    void bind(int index, bool value);
    void bind(int index, const QString &text);
    // Text already in UTF-8, kept (shared, not copied) until the next bind of `index`.
    void bindUtf8(int index, QByteArray text);
    // Runs the statement with the values bound; throws StorageError on failure.
    void exec();
    // The next row of the result: false at the end; throws StorageError when it failed.
    bool next();
    qint64 int64(int column) const;
    QString text(int column) const;
    bool isNull(int column) const;
    // Ends a read: SQLite keeps a statement's snapshot until it is reset.
    void finish();

private:
    friend class Database;
    Statement(Database &db, QString sql, sqlite3_stmt *prepared);
    // SQLite: runs the statement to its first row, uncounted; the error text when it failed.
    std::optional<QString> step();
    [[noreturn]] void throwSqliteError(const char *what);
    void bindLater(int index, QVariant value);
    QSqlQuery &postgresQuery() const;

    Database &m_db;
    const QString m_sql;
    sqlite3_stmt *m_sqlite = nullptr; // null on PostgreSQL
    // PostgreSQL: the values, bound to the prepared query when it runs.
    QVariantList m_values;
    // SQLite: the text bound to each placeholder, which SQLite reads without copying.
    QList<QByteArray> m_texts;
    // SQLite: where the statement stands. RowPending: exec() stepped to the first row, which
    // next() gives first.
    enum class Cursor
    {
        Idle,
        RowPending,
        OnRow
    };
    Cursor m_cursor = Cursor::Idle;
};

// Commits on commit(); rolls back when left without it (an exception or an early return).
class Transaction
{
public:
    explicit Transaction(Database &db)
        : m_db(db)
    {
        m_db.begin();
    }
    ~Transaction()
    {
        if (!m_done)
            m_db.rollback();
    }
    void commit()
    {
        m_db.commit();
        m_done = true;
    }

private:
    Database &m_db;
    bool m_done = false;
};

} // namespace AgentDeck
