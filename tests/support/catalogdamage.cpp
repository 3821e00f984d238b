#include "catalogdamage.h"

#include <QFile>
#include <QSqlDatabase>
#include <QSqlError>
#include <QSqlQuery>
#include <QStringList>
#include <QUuid>

using namespace Qt::StringLiterals;

namespace AgentDeck::Testing {

namespace {
QString loseIndexEntriesOn(QSqlDatabase &db, const QString &index, const QString &lostRows)
{
    QSqlQuery query(db);
    const auto run = [&query](const QString &sql) {
        return query.exec(sql) ? QString() : sql + u": "_s + query.lastError().text();
    };
    query.prepare(u"SELECT sql FROM sqlite_schema WHERE type = 'index' AND name = ?"_s);
    query.addBindValue(index);
    if (!query.exec() || !query.next())
        return u"no index "_s + index;
    const QString definition = query.value(0).toString();
    query.finish();
    const QStringList steps{u"DROP INDEX "_s + index,
                            definition + u" WHERE NOT ("_s + lostRows + u')',
                            u"PRAGMA writable_schema=ON"_s};
    for (const QString &sql : steps) {
        if (const QString failure = run(sql); !failure.isEmpty())
            return failure;
    }
    query.prepare(u"UPDATE sqlite_schema SET sql = ? WHERE type = 'index' AND name = ?"_s);
    query.addBindValue(definition);
    query.addBindValue(index);
    if (!query.exec() || query.numRowsAffected() != 1)
        return u"cannot give "_s + index + u" its definition back: "_s + query.lastError().text();
    return run(u"PRAGMA writable_schema=OFF"_s);
}
} // namespace

QString loseIndexEntries(const QString &path, const QString &index, const QString &lostRows)
{
    if (!QFile::exists(path))
        return path + u" does not exist"_s;
    const QString name = u"damage-"_s + QUuid::createUuid().toString(QUuid::WithoutBraces);
    QString failure;
    {
        QSqlDatabase db = QSqlDatabase::addDatabase(u"QSQLITE"_s, name);
        db.setDatabaseName(path);
        failure = db.open() ? loseIndexEntriesOn(db, index, lostRows) : db.lastError().text();
        db.close();
    }
    QSqlDatabase::removeDatabase(name);
    return failure;
}

QString overwriteByte(const QString &path, qint64 offset, char value)
{
    QFile file(path);
    if (!file.open(QIODevice::ReadWrite) || !file.seek(offset) || file.write(&value, 1) != 1)
        return u"cannot write byte %1 of %2: %3"_s.arg(offset).arg(path, file.errorString());
    return {};
}

} // namespace AgentDeck::Testing
