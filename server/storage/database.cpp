#include "database.h"

#include "clock.h"
#include "logging.h"
#include "sqlitebusywait.h"
#include "walcheckpointer.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QSqlDriver>
#include <QSqlError>
#include <QUuid>

#include <sqlite3.h>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {
// pg_advisory_lock key of the migration step (any constant shared by all replicas).
constexpr qint64 MigrationLockKey = 0x41444543; // "ADEC"

[[noreturn]] void throwOnError(const QSqlQuery &query, const char *what)
{
    throw StorageError(std::string(what) + ": " + query.lastError().text().toStdString());
}

// Statements of a migration file, split at semicolons that end a line.
QStringList statementsOf(const QString &script)
{
    QStringList statements;
    QString current;
    for (const QString &line : script.split(u'\n')) {
        if (line.trimmed().startsWith(u"--"_s))
            continue;
        current += line + u'\n';
        if (line.trimmed().endsWith(u';')) {
            statements.append(current.trimmed());
            current.clear();
        }
    }
    if (!current.trimmed().isEmpty())
        statements.append(current.trimmed());
    return statements;
}
void nowMsFunction(sqlite3_context *context, int, sqlite3_value **)
{
    const auto *clock = static_cast<const Clock *>(sqlite3_user_data(context));
    sqlite3_result_int64(context, clock ? clock->nowMs() : QDateTime::currentMSecsSinceEpoch());
}

QString damagedFile(const QString &path, const QString &what)
{
    return u"database file %1 is damaged: %2; restore it from a backup"_s.arg(path, what);
}

// What is wrong with the header of the SQLite file at `path` (its first 100 bytes, see
// https://www.sqlite.org/fileformat.html), empty when nothing is or there is no file. The
// fields checked are those SQLite goes by: a write version (byte 18) it does not know makes it
// open the file read-only without a word, and every write failed with "attempt to write a
// readonly database" in a writable data dir; the others make it answer "file is not a
// database", which does not say that the catalog was damaged.
QString damagedHeader(const QString &path)
{
    constexpr qsizetype HeaderSize = 100;
    QFile file(path);
    if (!file.exists() || !file.open(QIODevice::ReadOnly))
        return {}; // a new catalog, or one SQLite says why it cannot open
    const QByteArray header = file.read(HeaderSize);
    // Empty, or short with a log: the pages are in the log until they are first checkpointed.
    if (header.isEmpty() || (header.size() < HeaderSize && QFileInfo(path + u"-wal"_s).size() > 0))
        return {};
    if (header.size() < HeaderSize)
        return u"it is %1 bytes long, shorter than a database header"_s.arg(header.size());
    const auto byte = [&header](int at) { return int(quint8(header[at])); };
    if (!header.startsWith(QByteArrayView("SQLite format 3\0", 16)))
        return u"it does not begin with \"SQLite format 3\" (bytes 0 to 15)"_s;
    const int pageSizeField = byte(16) << 8 | byte(17);
    const int pageSize = pageSizeField == 1 ? 65536 : pageSizeField;
    if (pageSize < 512 || (pageSize & (pageSize - 1)) != 0)
        return u"its page size (bytes 16 and 17) reads %1, not a power of two from 512 to 65536"_s
            .arg(pageSizeField);
    for (const int at : {18, 19}) {
        if (byte(at) < 1 || byte(at) > 2)
            return u"byte %1 of its header (the file format's %2 version) is %3, where SQLite "
                   "writes 1 or 2"_s.arg(at)
                       .arg(at == 18 ? u"write"_s : u"read"_s)
                       .arg(byte(at));
    }
    // Space that extensions (checksums, encryption) reserve in each page: none runs on a
    // catalog, and SQLite reads every page wrong with it.
    if (byte(20) != 0)
        return u"byte 20 of its header (space reserved at the end of each page) is %1, where "
               "the catalog has 0"_s.arg(byte(20));
    if (byte(21) != 64 || byte(22) != 32 || byte(23) != 32)
        return u"bytes 21 to 23 of its header (the payload fractions) are %1 %2 %3, where SQLite "
               "writes 64 32 32"_s.arg(byte(21))
                   .arg(byte(22))
                   .arg(byte(23));
    return {};
}

sqlite3 *sqliteHandle(const QSqlDatabase &db)
{
    const QVariant handle = db.driver()->handle();
    if (!handle.isValid() || qstrcmp(handle.typeName(), "sqlite3*") != 0)
        return nullptr;
    return *static_cast<sqlite3 *const *>(handle.data());
}

// agentdeck_now_ms(): the one SQL function every lease expiry is computed with. PostgreSQL
// defines it over clock_timestamp() in its migrations; SQLite gets it from here.
bool registerClockFunction(sqlite3 *connection, const Clock *clock)
{
    return sqlite3_create_function(connection, "agentdeck_now_ms", 0, SQLITE_UTF8,
                                   const_cast<Clock *>(clock), nowMsFunction, nullptr,
                                   nullptr) == SQLITE_OK;
}
} // namespace

Database::Database(QSqlDatabase db, Dialect dialect)
    : m_db(std::move(db))
    , m_dialect(dialect)
    , m_connectionName(m_db.connectionName())
{}

Database::~Database()
{
    close();
}

void Database::close()
{
    m_checkpointer.reset();
    if (m_connectionName.isEmpty())
        return;
    m_prepared.clear();
    m_retired.clear();
    m_statementsBySql.clear(); // finalised while their connection is open
    m_db.close();
    m_db = QSqlDatabase();
    QSqlDatabase::removeDatabase(m_connectionName);
    m_connectionName.clear();
}

std::unique_ptr<Database> Database::openSqlite(const QString &path, QString *error,
                                               const Clock *clock)
{
    if (const QString damage = damagedHeader(path); !damage.isEmpty()) {
        *error = damagedFile(path, damage);
        return nullptr;
    }
    auto database = connectSqlite(path, error, clock);
    if (database && !database->migrate(error))
        database.reset();
    if (!database && StorageError::saysCorrupt(error->toStdString()))
        *error = u"database file %1 is damaged; restore it from a backup (%2)"_s.arg(path, *error);
    return database;
}

void Database::checkpointInBackground(std::chrono::milliseconds interval, int maxLogFrames)
{
    if (isPostgres() || m_checkpointer)
        return;
    QSqlQuery query(m_db);
    // The log file keeps the size it grew to unless it is limited; it starts over often, and
    // is cut back to this when it does.
    if (!query.exec(u"PRAGMA wal_autocheckpoint=0"_s) ||
        !query.exec(u"PRAGMA journal_size_limit=%1"_s.arg(qint64(maxLogFrames) * PageSize))) {
        qCWarning(lcStorage) << "cannot turn automatic checkpoints off:"
                             << query.lastError().text();
        return;
    }
    m_checkpointer = std::make_unique<WalCheckpointer>(m_sqlitePath, interval, maxLogFrames);
}

void Database::holdLogRestarts(bool hold)
{
    if (m_checkpointer)
        m_checkpointer->holdRestarts(hold);
}

std::unique_ptr<Database> Database::openAnother(QString *error) const
{
    if (isPostgres())
        return openPostgres(m_postgresUrl, error, Migrations::Skip);
    return connectSqlite(m_sqlitePath, error, m_clock);
}

std::unique_ptr<Database> Database::connectSqlite(const QString &path, QString *error,
                                                  const Clock *clock)
{
    const QString name = u"agentdeck-"_s + QUuid::createUuid().toString(QUuid::WithoutBraces);
    std::unique_ptr<Database> database(
        new Database(QSqlDatabase::addDatabase(u"QSQLITE"_s, name), Dialect::Sqlite));
    database->m_db.setDatabaseName(path);
    database->m_sqlitePath = path;
    database->m_clock = clock;
    if (!database->m_db.open()) {
        *error = u"cannot open database %1: %2"_s.arg(path, database->m_db.lastError().text());
        return nullptr;
    }
    // WAL with synchronous=NORMAL: a committed transaction is in the OS before the commit returns,
    // so it survives the process being killed (not a power cut; see docs/ARCHITECTURE.md).
    for (const QString &pragma : {u"PRAGMA journal_mode=WAL"_s, u"PRAGMA synchronous=NORMAL"_s,
                                  u"PRAGMA foreign_keys=ON"_s}) {
        QSqlQuery query(database->m_db);
        if (!query.exec(pragma)) {
            *error = u"cannot configure database %1: %2"_s.arg(path, query.lastError().text());
            return nullptr;
        }
    }
    sqlite3 *connection = sqliteHandle(database->m_db);
    if (!connection || !registerClockFunction(connection, clock)) {
        *error = u"cannot register the database clock function"_s;
        return nullptr;
    }
    SqliteBusyWait::install(connection);
    // SQLite falls back to read-only when it cannot write the file, and says so only when a
    // write fails; it knows once it has read the first page.
    if (QSqlQuery probe(database->m_db);
        !probe.exec(u"SELECT count(*) FROM sqlite_schema"_s) || !probe.next()) {
        *error = u"cannot read database %1: %2"_s.arg(path, probe.lastError().text());
        return nullptr;
    }
    if (sqlite3_db_readonly(connection, "main") == 1) {
        *error = QFileInfo(path).isWritable()
                     ? damagedFile(path, u"SQLite opens it read-only"_s)
                     : u"cannot write database file %1: it is read-only for this user"_s.arg(path);
        return nullptr;
    }
    return database;
}

QString Database::checkPostgresUrl(const QUrl &url)
{
    if (!url.isValid() || (url.scheme() != u"postgresql"_s && url.scheme() != u"postgres"_s))
        return u"expected postgresql://USER@HOST:PORT/DB"_s;
    if (url.host().isEmpty())
        return u"the URL names no host"_s;
    if (url.path().size() < 2)
        return u"the URL names no database (postgresql://USER@HOST:PORT/DB)"_s;
    return {};
}

std::unique_ptr<Database> Database::openPostgres(const QUrl &url, QString *error,
                                                 Migrations migrations, PostgresTimeouts timeouts)
{
    if (const QString problem = checkPostgresUrl(url); !problem.isEmpty()) {
        *error = u"invalid database URL: "_s + problem;
        return nullptr;
    }
    const QString name = u"agentdeck-"_s + QUuid::createUuid().toString(QUuid::WithoutBraces);
    // The only handle of the connection is the Database's, so that closing it can remove it.
    std::unique_ptr<Database> database(
        new Database(QSqlDatabase::addDatabase(u"QPSQL"_s, name), Dialect::Postgres));
    database->m_postgresUrl = url;
    QSqlDatabase &db = database->m_db;
    db.setHostName(url.host());
    db.setPort(url.port(5432));
    db.setDatabaseName(url.path().mid(1));
    db.setUserName(url.userName());
    db.setPassword(url.password().isEmpty() ? qEnvironmentVariable("PGPASSWORD") : url.password());
    // Notices ("relation already exists, skipping") would go to stderr unasked. The timeouts
    // hold for every session of this connection, the ones after a reconnect too.
    db.setConnectOptions(
        u"connect_timeout=10;application_name=agentdeck;"
        "options='-c client_min_messages=warning -c lock_timeout=%1 "
        "-c idle_in_transaction_session_timeout=%2'"_s.arg(timeouts.lockWait.count())
            .arg(timeouts.idleInTransaction.count()));
    // Never echo the password back: the URL is printed without it.
    const QString shown = url.toString(QUrl::RemovePassword);
    if (!database->m_db.open()) {
        *error = u"cannot connect to %1: %2"_s.arg(
            shown, database->m_db.lastError().databaseText().simplified());
        return nullptr;
    }
    if (migrations == Migrations::Run && !database->migrate(error))
        return nullptr;
    return database;
}

bool Database::migrate(QString *error)
{
    if (!isPostgres())
        return applyMigrations(error);
    // Replicas starting together against an empty database: one migrates, the others wait for
    // the lock and then find nothing left to do.
    QSqlQuery lock(m_db);
    if (!lock.exec(u"SELECT pg_advisory_lock(%1)"_s.arg(MigrationLockKey))) {
        *error = u"cannot lock the schema for migrations: "_s + lock.lastError().text();
        return false;
    }
    const bool migrated = applyMigrations(error);
    lock.exec(u"SELECT pg_advisory_unlock(%1)"_s.arg(MigrationLockKey));
    return migrated;
}

qint64 Database::createdAtMs()
{
    QSqlQuery &q = prepared(
        isPostgres() ? u"SELECT CAST(EXTRACT(EPOCH FROM CAST(applied_at AS timestamptz)) * 1000 "
                       "AS BIGINT) FROM schema_migrations WHERE version = 1"_s
                     : u"SELECT CAST(ROUND((julianday(applied_at) - 2440587.5) * 86400000) AS "
                       "INTEGER) FROM schema_migrations WHERE version = 1"_s);
    exec(q);
    const qint64 created = next(q) ? q.value(0).toLongLong() : 0;
    q.finish();
    return created;
}

QString Database::identity()
{
    QSqlQuery &q = prepared(u"SELECT id FROM catalog_identity"_s);
    exec(q);
    const QString id = next(q) ? q.value(0).toString() : QString();
    q.finish();
    return id;
}

bool Database::applyMigrations(QString *error)
{
    QSqlQuery query(m_db);
    // applied_at to the millisecond (SQLite's CURRENT_TIMESTAMP has seconds; catalogs made
    // before keep those): it is the catalog's age, which the startup sweep goes by.
    if (!query.exec(isPostgres()
                        ? u"CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY "
                          "KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL DEFAULT "
                          "CURRENT_TIMESTAMP)"_s
                        : u"CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY "
                          "KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL DEFAULT "
                          "(strftime('%Y-%m-%d %H:%M:%f', 'now')))"_s)) {
        *error = u"cannot create schema_migrations: "_s + query.lastError().text();
        return false;
    }
    int current = 0;
    if (query.exec(u"SELECT COALESCE(MAX(version), 0) FROM schema_migrations"_s) && query.next())
        current = query.value(0).toInt();

    const QDir dir(isPostgres() ? u":/agentdeck/migrations/postgresql"_s
                                : u":/agentdeck/migrations/sqlite"_s);
    for (const QString &file : dir.entryList({u"*.sql"_s}, QDir::Files, QDir::Name)) {
        const int version = file.section(u'_', 0, 0).toInt();
        if (version <= current)
            continue;
        QFile script(dir.filePath(file));
        if (!script.open(QIODevice::ReadOnly)) {
            *error = u"cannot read migration "_s + file;
            return false;
        }
        m_db.transaction();
        for (const QString &statement : statementsOf(QString::fromUtf8(script.readAll()))) {
            if (!query.exec(statement)) {
                *error = u"migration %1 failed: %2"_s.arg(file, query.lastError().text());
                m_db.rollback();
                return false;
            }
        }
        query.prepare(u"INSERT INTO schema_migrations (version, name) VALUES (?, ?)"_s);
        query.addBindValue(version);
        query.addBindValue(file);
        if (!query.exec() || !m_db.commit()) {
            *error = u"cannot record migration %1: %2"_s.arg(file, query.lastError().text());
            m_db.rollback();
            return false;
        }
        qCInfo(lcStorage) << "applied migration" << file;
    }
    return true;
}

bool Database::reopenSession()
{
    const int depth = std::exchange(m_depth, 0);
    if (depth > 0)
        m_db.rollback();
    bool reopened = false;
    try {
        reopened = reconnectIfLost();
    } catch (const StorageError &) {
        m_depth = depth;
        throw;
    }
    if (reopened && depth > 0 && control(u"BEGIN IMMEDIATE"_s, &QSqlDatabase::transaction))
        reopened = false;
    m_depth = depth;
    return reopened;
}

bool Database::reconnectIfLost()
{
    // Only between transactions: a transaction cut by a lost connection has failed already.
    if (!m_suspect || m_depth > 0)
        return false;
    m_suspect = false;
    {
        QSqlQuery probe(m_db);
        if (probe.exec(u"SELECT 1"_s))
            return false; // the statement failed, not the connection
    }
    qCWarning(lcStorage) << "lost the database connection; reconnecting";
    // Statements prepared on the old session do not exist on the new one.
    m_retired = std::exchange(m_prepared, {});
    m_db.close();
    if (!m_db.open()) {
        m_suspect = true;
        throw StorageError("database unreachable: " + m_db.lastError().text().toStdString());
    }
    qCInfo(lcStorage) << "reconnected to the database";
    return true;
}

void Database::noteFailure()
{
    // SQLite is a file: a failed statement never means a lost connection.
    if (isPostgres())
        m_suspect = true;
}

Database::Statement &Database::statement(const QString &sql)
{
    if (const auto it = m_statementsBySql.find(sql); it != m_statementsBySql.end())
        return *it->second;
    sqlite3_stmt *prepared = nullptr;
    if (!isPostgres()) {
        sqlite3 *connection = sqliteHandle(m_db);
        const QByteArray utf8 = sql.toUtf8();
        if (sqlite3_prepare_v3(connection, utf8.constData(), int(utf8.size()),
                               SQLITE_PREPARE_PERSISTENT, &prepared, nullptr) != SQLITE_OK)
            throw StorageError(std::string("prepare: ") + sqlite3_errmsg(connection));
    }
    std::unique_ptr<Statement> made(new Statement(*this, sql, prepared));
    return *m_statementsBySql.emplace(sql, std::move(made)).first->second;
}

QSqlQuery &Database::prepared(const QString &sql)
{
    reconnectIfLost();
    auto it = m_prepared.find(sql);
    if (it == m_prepared.end())
        it = m_prepared.insert(sql, prepareNew(sql, false));
    return *it;
}

QSqlQuery Database::prepare(const QString &sql)
{
    reconnectIfLost();
    return prepareNew(sql, true);
}

QSqlQuery Database::prepareNew(const QString &sql, bool forwardOnly)
{
    QSqlQuery query(m_db);
    query.setForwardOnly(forwardOnly);
    if (query.prepare(sql))
        return query;
    noteFailure();
    // PostgreSQL prepares on the server: a session it ended (a restart) fails the prepare, and
    // between transactions the session is opened again and the prepare made again, as exec()
    // does for a statement. The first search or batch get after every restart was a 503.
    if (m_depth == 0 && reconnectIfLost()) {
        query = QSqlQuery(m_db);
        query.setForwardOnly(forwardOnly);
        if (query.prepare(sql))
            return query;
        noteFailure();
    }
    throwOnError(query, "prepare");
}

void Database::exec(QSqlQuery &query)
{
    ++m_statements;
    m_lastStatement = query.lastQuery();
    const bool firstOfTransaction = m_depth > 0 && m_transactionStatements++ == 0;
    query.setForwardOnly(true);
    if (query.exec())
        return;
    noteFailure();
    // When the server ended the session (a restart), a statement is asked again on a new one if
    // nothing can have been done: a read between transactions, the first statement of a
    // transaction (which is begun again), or one the server refused because it was ending the
    // session (an autocommit statement is then not committed). Otherwise the first request
    // after every restart failed. Any other write is not: it may have been done before the
    // connection went.
    const QString state = query.lastError().nativeErrorCode();
    const bool refusedAsTheSessionEnded = state == u"57P01"_s || state == u"57P02"_s;
    const bool safe = m_depth == 0
                          ? m_lastStatement.startsWith(u"SELECT"_s) || refusedAsTheSessionEnded
                          : firstOfTransaction;
    if (isPostgres() && safe && reopenSession()) {
        const QVariantList values = query.boundValues();
        query = QSqlQuery(m_db);
        query.setForwardOnly(true);
        if (query.prepare(m_lastStatement)) {
            for (qsizetype i = 0; i < values.size(); ++i)
                query.bindValue(int(i), values[i]);
            if (query.exec())
                return;
        }
        noteFailure();
    }
    throwOnError(query, "query");
}

bool Database::next(QSqlQuery &query)
{
    if (query.next())
        return true;
    if (query.lastError().isValid()) {
        noteFailure();
        throwOnError(query, "fetch");
    }
    return false;
}

void Database::begin()
{
    // Nested transactions join the outermost one: a batch (startup recovery) commits once.
    if (m_depth > 0) {
        ++m_depth;
        return;
    }
    reconnectIfLost();
    ++m_depth;
    m_transactionStatements = 0;
    // SQLite: IMMEDIATE takes the write lock now, waiting for it through the busy timeout. A
    // deferred transaction that read first and finds the lock taken when it writes (the
    // checkpointer's RESTART holds it) fails at once instead.
    auto failure = control(u"BEGIN IMMEDIATE"_s, &QSqlDatabase::transaction);
    if (failure && isPostgres()) {
        // Nothing is done yet, so a session the database ended (a restart) is opened again
        // and the BEGIN retried: otherwise the first transaction after every restart failed.
        m_depth = 0;
        noteFailure();
        reconnectIfLost();
        ++m_depth;
        failure = control(u"BEGIN IMMEDIATE"_s, &QSqlDatabase::transaction);
    }
    if (failure) {
        m_depth = 0;
        noteFailure();
        throw StorageError("begin: " + failure->toStdString());
    }
}

std::optional<QString> Database::control(const QString &sqliteStatement,
                                         bool (QSqlDatabase::*postgres)())
{
    if (isPostgres()) {
        if ((m_db.*postgres)())
            return std::nullopt;
        return m_db.lastError().text();
    }
    // Prepared once like every statement: QSqlDatabase::transaction() and commit() would parse
    // theirs for every transaction.
    Statement &control = statement(sqliteStatement);
    std::optional<QString> failure = control.step();
    control.finish();
    return failure;
}

void Database::commit()
{
    if (m_depth == 0 || --m_depth > 0)
        return;
    if (std::exchange(m_rollbackOnly, false)) {
        m_db.rollback();
        throw StorageError("commit: an inner part of the transaction failed");
    }
    if (beforeCommit) {
        try {
            beforeCommit();
        } catch (const StorageError &) {
            noteFailure();
            m_db.rollback();
            throw;
        }
    }
    if (const auto failure = control(u"COMMIT"_s, &QSqlDatabase::commit)) {
        noteFailure();
        m_db.rollback();
        throw StorageError("commit: " + failure->toStdString());
    }
    if (afterCommit)
        afterCommit();
}

void Database::rollback()
{
    // An inner failure dooms the whole batch; the outermost level rolls back.
    if (m_depth == 0)
        return;
    if (--m_depth == 0) {
        m_rollbackOnly = false;
        m_db.rollback();
    } else {
        m_rollbackOnly = true;
    }
}

} // namespace AgentDeck
