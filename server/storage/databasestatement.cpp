// Database::Statement: one prepared statement, on SQLite's own API (a cursor kept between
// next() calls) or, on PostgreSQL, a prepared QSqlQuery.
#include "database.h"

#include <QSqlError>

#include <sqlite3.h>

using namespace Qt::StringLiterals;

namespace AgentDeck {

Database::Statement::Statement(Database &db, QString sql, sqlite3_stmt *prepared)
    : m_db(db)
    , m_sql(std::move(sql))
    , m_sqlite(prepared)
{}

Database::Statement::~Statement()
{
    sqlite3_finalize(m_sqlite);
}

void Database::Statement::bind(int index, qint64 value)
{
    if (!m_sqlite)
        bindLater(index, value);
    else if (sqlite3_bind_int64(m_sqlite, index + 1, value) != SQLITE_OK)
        throwSqliteError("bind");
}

void Database::Statement::bind(int index, bool value)
{
    if (!m_sqlite)
        bindLater(index, value);
    else
        bind(index, qint64(value));
}

void Database::Statement::bind(int index, const QString &text)
{
    if (!m_sqlite)
        bindLater(index, text);
    else // SQLite would convert UTF-16 itself, a byte at a time
        bindUtf8(index, text.toUtf8());
}

void Database::Statement::bindUtf8(int index, QByteArray text)
{
    if (!m_sqlite) {
        bindLater(index, QString::fromUtf8(text));
        return;
    }
    if (m_texts.size() <= index)
        m_texts.resize(index + 1);
    m_texts[index] = std::move(text);
    const QByteArray &kept = m_texts[index];
    // A null QByteArray would bind NULL; an empty text stays text.
    if (sqlite3_bind_text(m_sqlite, index + 1, kept.isNull() ? "" : kept.constData(),
                          int(kept.size()), SQLITE_STATIC) != SQLITE_OK)
        throwSqliteError("bind");
}

void Database::Statement::bindLater(int index, QVariant value)
{
    if (m_values.size() <= index)
        m_values.resize(index + 1);
    m_values[index] = std::move(value);
}

void Database::Statement::exec()
{
    if (!m_sqlite) {
        QSqlQuery &query = m_db.prepared(m_sql);
        for (qsizetype i = 0; i < m_values.size(); ++i)
            query.bindValue(int(i), m_values[i]);
        m_db.exec(query); // counts it
        return;
    }
    ++m_db.m_statements;
    m_db.m_lastStatement = m_sql;
    if (const auto failure = step())
        throw StorageError("query: " + failure->toStdString());
}

std::optional<QString> Database::Statement::step()
{
    if (m_cursor != Cursor::Idle)
        sqlite3_reset(m_sqlite); // a read its caller left unfinished
    m_cursor = Cursor::Idle;
    switch (sqlite3_step(m_sqlite)) {
    case SQLITE_ROW:
        m_cursor = Cursor::RowPending;
        return std::nullopt;
    case SQLITE_DONE:
        sqlite3_reset(m_sqlite);
        return std::nullopt;
    default: {
        QString failure = QString::fromUtf8(sqlite3_errmsg(sqlite3_db_handle(m_sqlite)));
        sqlite3_reset(m_sqlite);
        return failure;
    }
    }
}

bool Database::Statement::next()
{
    if (!m_sqlite)
        return m_db.next(postgresQuery());
    switch (m_cursor) {
    case Cursor::Idle:
        return false;
    case Cursor::RowPending:
        m_cursor = Cursor::OnRow;
        return true;
    case Cursor::OnRow:
        break;
    }
    switch (sqlite3_step(m_sqlite)) {
    case SQLITE_ROW:
        return true;
    case SQLITE_DONE:
        finish();
        return false;
    default:
        throwSqliteError("fetch");
    }
}

qint64 Database::Statement::int64(int column) const
{
    if (!m_sqlite)
        return postgresQuery().value(column).toLongLong();
    return sqlite3_column_int64(m_sqlite, column);
}

QString Database::Statement::text(int column) const
{
    if (!m_sqlite)
        return postgresQuery().value(column).toString();
    // The text first, then its size (the order SQLite's documentation asks for).
    const auto *utf8 = reinterpret_cast<const char *>(sqlite3_column_text(m_sqlite, column));
    return QString::fromUtf8(utf8, sqlite3_column_bytes(m_sqlite, column));
}

bool Database::Statement::isNull(int column) const
{
    if (!m_sqlite)
        return postgresQuery().value(column).isNull();
    return sqlite3_column_type(m_sqlite, column) == SQLITE_NULL;
}

void Database::Statement::finish()
{
    if (!m_sqlite) {
        postgresQuery().finish();
        return;
    }
    if (std::exchange(m_cursor, Cursor::Idle) != Cursor::Idle)
        sqlite3_reset(m_sqlite);
}

QSqlQuery &Database::Statement::postgresQuery() const
{
    // Looked up each time: the cache moves its queries as it grows, and a reconnect renews them.
    return m_db.prepared(m_sql);
}

void Database::Statement::throwSqliteError(const char *what)
{
    const std::string failure = sqlite3_errmsg(sqlite3_db_handle(m_sqlite));
    sqlite3_reset(m_sqlite);
    m_cursor = Cursor::Idle;
    throw StorageError(what + (": " + failure));
}

} // namespace AgentDeck
