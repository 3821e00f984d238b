// The SQLite catalog's connections: checkpoints from a thread of their own, and a second
// connection for another thread.
#include "catalogdamage.h"
#include "logging.h"
#include "storage/conversationstore.h"
#include "storage/database.h"
#include "storage/integritycheck.h"
#include "storage/sqlitebusywait.h"

#include <QDeadlineTimer>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLoggingCategory>
#include <QMutex>
#include <QRegularExpression>
#include <QScopeGuard>
#include <QSignalSpy>
#include <QSqlQuery>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <limits>

using namespace Qt::StringLiterals;
using namespace AgentDeck;
using namespace AgentDeck::Testing;

namespace {
ConversationInfo conversation()
{
    ConversationInfo info;
    info.id = QUuid::createUuid();
    info.title = u"checkpoints"_s;
    info.createdAt = info.updatedAt = QDateTime::currentDateTimeUtc();
    info.agentKind = u"shell"_s;
    info.workingDir = u"/tmp/w"_s;
    return info;
}

qint64 fileSize(const QString &path)
{
    return QFileInfo(path).size(); // 0 when missing
}

// What the checkpointer says about each restart of the log (a debug message, from its thread).
QMutex g_restartsMutex;
QStringList g_restarts;
QtMessageHandler g_previousHandler = nullptr;

// What it says of failed checkpoints.
QStringList g_checkpointReports;

void captureRestarts(QtMsgType type, const QMessageLogContext &context, const QString &message)
{
    if (message.startsWith(u"log restart at"_s)) {
        const QMutexLocker lock(&g_restartsMutex);
        g_restarts.append(message);
    }
    if (message.startsWith(u"checkpoint of"_s)) {
        const QMutexLocker lock(&g_restartsMutex);
        g_checkpointReports.append(message);
    }
    g_previousHandler(type, context, message);
}

QStringList checkpointReports()
{
    const QMutexLocker lock(&g_restartsMutex);
    return g_checkpointReports;
}
} // namespace

class DatabaseTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void init()
    {
        m_dir = std::make_unique<QTemporaryDir>();
        QVERIFY(m_dir->isValid());
    }
    void cleanup() { m_dir.reset(); }

    void initTestCase()
    {
        QLoggingCategory::setFilterRules(u"agentdeck.storage.debug=true"_s);
        g_previousHandler = qInstallMessageHandler(captureRestarts);
    }
    void cleanupTestCase() { qInstallMessageHandler(g_previousHandler); }

    // The background thread copies the log into the database file while the writer goes on;
    // nothing is copied by the commits themselves (automatic checkpoints are off).
    void backgroundCheckpointsCopyTheLog()
    {
        const QString path = m_dir->filePath(u"catalog.db"_s);
        QString error;
        auto db = Database::openSqlite(path, &error);
        QVERIFY2(db, qPrintable(error));
        db->checkpointInBackground(std::chrono::milliseconds(20));
        ConversationStore store(*db);
        const qint64 before = fileSize(path);
        const ConversationInfo info = conversation();
        store.insert(info);
        const QString text(2000, u'x');
        for (int i = 0; i < 300; ++i)
            store.append(info.id, {Event::message(u"user"_s, u"user"_s, text)}, std::nullopt, i);
        QVERIFY2(QTest::qWaitFor([&] { return fileSize(path) > before + 300 * 2000; }, 10'000),
                 qPrintable(u"database file %1 bytes, log %2 bytes"_s.arg(fileSize(path))
                                .arg(fileSize(path + u"-wal"_s))));
        QCOMPARE(store.eventsAfter(info.id, 0, 1000).size(), 300);
    }

    // A checkpoint that fails (the disk is full: here, the files may not grow) is reported
    // when it begins to fail and when it works again, not at every attempt: every 200 ms on a
    // full disk, 18,000 lines an hour.
    void aFailingCheckpointIsReportedOnce()
    {
        SmallLogCatalog catalog = smallLogCatalog();
        QVERIFY(catalog.db);
        auto &[path, db, stored, info] = catalog;
        ConversationStore &store = *stored;
        const QString text(2000, u'x');
        const auto append = [&](int i) {
            try {
                store.append(info.id, {Event::message(u"user"_s, u"user"_s, text)}, std::nullopt,
                             i);
            } catch (const std::exception &) {
                // the log cannot grow either once the checkpoints fail
            }
        };
        for (int i = 0; i < 20; ++i)
            append(i);
        QVERIFY(checkpointReports().isEmpty());

        // Past the bound a write fails (EFBIG) rather than raising SIGXFSZ.
        std::signal(SIGXFSZ, SIG_IGN);
        rlimit limit{};
        QCOMPARE(getrlimit(RLIMIT_FSIZE, &limit), 0);
        const rlimit unlimited = limit;
        limit.rlim_cur = rlim_t(std::max(fileSize(path), fileSize(path + u"-wal"_s)) + 64 * 1024);
        QCOMPARE(setrlimit(RLIMIT_FSIZE, &limit), 0);
        const auto restore = qScopeGuard([&] { setrlimit(RLIMIT_FSIZE, &unlimited); });
        int i = 20;
        QVERIFY(QTest::qWaitFor(
            [&] {
                append(i++);
                return !checkpointReports().isEmpty();
            },
            10'000));
        QVERIFY2(checkpointReports().first().contains(u"failed:"_s),
                 qPrintable(checkpointReports().first()));
        // A checkpoint a millisecond, each failing: no more lines.
        QVERIFY(!QTest::qWaitFor([] { return checkpointReports().size() > 1; }, 300));

        QCOMPARE(setrlimit(RLIMIT_FSIZE, &unlimited), 0);
        QTRY_COMPARE_WITH_TIMEOUT(checkpointReports().size(), 2, 10'000);
        QVERIFY2(checkpointReports().last().contains(u"works again after"_s),
                 qPrintable(checkpointReports().last()));
    }

    // A failure that goes on is said again once per interval, with how often it happened.
    void aFailureThatGoesOnIsReportedOncePerInterval()
    {
        {
            const QMutexLocker lock(&g_restartsMutex);
            g_checkpointReports.clear();
        }
        RepeatedFailureLog failures(lcStorage, u"checkpoint of a test"_s,
                                    std::chrono::milliseconds(50));
        QElapsedTimer clock;
        clock.start();
        int attempts = 0;
        while (clock.elapsed() <= 120) {
            failures.failed(u"disk full"_s);
            ++attempts;
        }
        const QStringList reports = checkpointReports();
        QVERIFY2(reports.size() == 2 || reports.size() == 3, qPrintable(reports.join(u'\n')));
        QCOMPARE(reports[0], u"checkpoint of a test failed: disk full"_s);
        QVERIFY2(reports[1].contains(u" more times: disk full"_s), qPrintable(reports[1]));
        failures.succeeded();
        QCOMPARE(checkpointReports().last(),
                 u"checkpoint of a test works again after %1 failures"_s.arg(attempts));
        failures.succeeded();
        QCOMPARE(checkpointReports().size(), reports.size() + 1);
    }

    // Past its bound the log is started over: the checkpointer takes the write lock for that.
    // A write transaction that read first would then fail at once instead of waiting (SQLite
    // does not wait for a lock to turn a read into a write); transactions take the write lock
    // when they begin, and every write succeeds while the log keeps starting over. Each
    // restart syncs the database file and catches up before its RESTART takes the lock.
    void writesWaitWhileTheLogStartsOver()
    {
        SmallLogCatalog catalog = smallLogCatalog();
        QVERIFY(catalog.db);
        auto &[path, db, stored, info] = catalog;
        ConversationStore &store = *stored;
        const QString text(3000, u'y');
        qint64 largestLog = 0;
        int restarts = 0;
        int appended = 0;
        QElapsedTimer clock;
        clock.start();
        // Until the log has started over a few times, within a deadline.
        while (restarts < 5 && clock.elapsed() < 20'000) {
            try {
                store.append(info.id, {Event::message(u"user"_s, u"user"_s, text)}, std::nullopt,
                             appended);
            } catch (const std::exception &failure) {
                QFAIL(qPrintable(u"append %1 failed: %2"_s.arg(appended).arg(
                    QString::fromUtf8(failure.what()))));
            }
            ++appended;
            // The log file only shrinks when it starts over (journal_size_limit cuts it then).
            const qint64 log = fileSize(path + u"-wal"_s);
            if (log < largestLog) {
                ++restarts;
                largestLog = 0;
            }
            largestLog = std::max(largestLog, log);
            // A server's writes come between requests; the checkpointer needs such a gap to
            // take the lock.
            QThread::yieldCurrentThread();
        }
        QVERIFY2(restarts >= 5,
                 qPrintable(
                     u"the log started over %1 times in %2 appends"_s.arg(restarts).arg(appended)));
        QCOMPARE(store.eventsAfter(info.id, 0, appended + 1).size(), appended);

        db.reset(); // the checkpointer's thread ends
        const QMutexLocker lock(&g_restartsMutex);
        QVERIFY2(
            g_restarts.size() >= restarts,
            qPrintable(u"%1 restarts reported for %2 seen"_s.arg(g_restarts.size()).arg(restarts)));
        static const QRegularExpression report(
            u"^log restart at \\d+ frames: file synced in [\\d.]+ ms; catch-up passes: [1-3], "
            "[\\d.]+ ms; RESTART in [\\d.]+ ms$"_s);
        for (const QString &restart : std::as_const(g_restarts))
            QVERIFY2(report.match(restart).hasMatch(), qPrintable(restart));
    }

    // A read that lasts (the integrity check after startup) holds the log's restarts: a
    // RESTART waits for every reader to leave the log and blocks writers meanwhile, so commits
    // behind a long read waited up to the busy limit (5 s).
    void writesGoOnBehindALongReadThatHoldsRestarts()
    {
        SmallLogCatalog catalog = smallLogCatalog();
        QVERIFY(catalog.db);
        auto &[path, db, stored, info] = catalog;
        ConversationStore &store = *stored;

        QString error;
        auto reader = db->openAnother(&error);
        QVERIFY2(reader, qPrintable(error));
        QSqlQuery snapshot(reader->connection());
        QVERIFY(snapshot.exec(u"BEGIN"_s));
        QVERIFY(snapshot.exec(u"SELECT count(*) FROM conversations"_s) && snapshot.next());
        db->holdLogRestarts(true);
        const QString text(3000, u'z');
        qint64 slowestMs = 0;
        for (int i = 0; i < 60; ++i) {
            QElapsedTimer append;
            append.start();
            store.append(info.id, {Event::message(u"user"_s, u"user"_s, text)}, std::nullopt, i);
            slowestMs = std::max(slowestMs, append.elapsed());
            QThread::yieldCurrentThread();
        }
        QVERIFY2(slowestMs < 1000, qPrintable(u"an append took %1 ms"_s.arg(slowestMs)));
        QVERIFY(fileSize(path + u"-wal"_s) > SmallLogFrames * Database::PageSize);
        {
            const QMutexLocker lock(&g_restartsMutex);
            QVERIFY2(g_restarts.isEmpty(), qPrintable(g_restarts.join(u'\n')));
        }

        // Released, and the reader gone: the log starts over again.
        snapshot.finish();
        QVERIFY(snapshot.exec(u"COMMIT"_s));
        db->holdLogRestarts(false);
        QElapsedTimer clock;
        clock.start();
        int appended = 60;
        const auto restarted = [] {
            const QMutexLocker lock(&g_restartsMutex);
            return !g_restarts.isEmpty();
        };
        while (!restarted() && clock.elapsed() < 10'000) {
            store.append(info.id, {Event::message(u"user"_s, u"user"_s, text)}, std::nullopt,
                         appended++);
            QThread::yieldCurrentThread();
        }
        QVERIFY(restarted());
    }

    // Waiting for a lock: pauses of at most 1 ms, adding up to the limit before giving up.
    void busyWaitPausesAreShort()
    {
        using namespace std::chrono_literals;
        using namespace SqliteBusyWait;
        QCOMPARE(pausedBefore(0), 0us);
        QVERIFY(pauseBefore(0) <= 100us);
        int attempt = 0;
        for (; pausedBefore(attempt) < Limit; ++attempt) {
            QVERIFY(pauseBefore(attempt) <= 1ms);
            QCOMPARE(pausedBefore(attempt + 1), pausedBefore(attempt) + pauseBefore(attempt));
        }
        // It gives up after the limit, and not long after.
        QVERIFY(pausedBefore(attempt) < Limit + 1ms);
    }

    // A writer that finds the write lock taken gets it soon after it is released: SQLite's own
    // busy timeout sleeps 1, 2, then 5 ms between tries, so a lock held for 4 ms cost 8.
    void aWriterGetsTheLockSoonAfterItIsReleased()
    {
        QString error;
        auto db = Database::openSqlite(m_dir->filePath(u"catalog.db"_s), &error);
        QVERIFY2(db, qPrintable(error));
        constexpr int Rounds = 9;
        constexpr qint64 HoldNs = 4'000'000;
        QElapsedTimer clock;
        clock.start();
        std::atomic<qint64> waitingSince{-1};
        std::atomic<qint64> acquiredAt{-1};
        std::atomic<int> round{-1};
        std::atomic<bool> writerDone{false};
        QString threadError; // read once the thread has ended
        std::unique_ptr<QThread> writer(QThread::create([&] {
            auto other = db->openAnother(&threadError);
            for (int r = 0; other && r < Rounds; ++r) {
                while (round.load() < r)
                    QThread::yieldCurrentThread();
                waitingSince = clock.nsecsElapsed();
                try {
                    Transaction transaction(*other);
                    acquiredAt = clock.nsecsElapsed();
                    transaction.commit();
                } catch (const std::exception &failure) {
                    threadError = QString::fromUtf8(failure.what());
                    break;
                }
            }
            writerDone = true;
        }));
        writer->start();
        std::vector<qint64> lateness;
        QString problem;
        for (int r = 0; r < Rounds && problem.isEmpty(); ++r) {
            waitingSince = -1;
            acquiredAt = -1;
            db->begin();
            round = r;
            // Held until the other thread has waited for the lock for HoldNs: polled every
            // 100 µs, as the hold is what the other thread's lateness is measured against.
            const QDeadlineTimer deadline(10'000);
            while (!writerDone && !deadline.hasExpired() &&
                   (waitingSince.load() < 0 || clock.nsecsElapsed() - waitingSince.load() < HoldNs))
                QThread::usleep(100);
            const qint64 releasedAt = clock.nsecsElapsed();
            db->commit();
            if (!QTest::qWaitFor([&] { return acquiredAt.load() >= 0 || writerDone; }, 10'000) ||
                acquiredAt.load() < 0)
                problem = u"round %1: the other writer did not get the lock"_s.arg(r);
            else if (acquiredAt.load() < releasedAt)
                problem = u"round %1: the other writer did not wait for the lock"_s.arg(r);
            else
                lateness.push_back(acquiredAt.load() - releasedAt);
        }
        round = Rounds; // a writer left waiting for its round goes on, and ends
        QVERIFY(writer->wait(10'000));
        QVERIFY2(threadError.isEmpty(), qPrintable(threadError));
        QVERIFY2(problem.isEmpty(), qPrintable(problem));
        std::sort(lateness.begin(), lateness.end());
        const qint64 median = lateness[lateness.size() / 2];
        QVERIFY2(median < 2'500'000,
                 qPrintable(u"the writer got the lock %1 us after its release (median)"_s.arg(
                     median / 1000)));
    }

    // An index that lost entries passed the check after startup (PRAGMA quick_check does not
    // compare indexes with their tables): /ready said ready while the events it lost answered
    // 404 to their ids.
    void theStartupCheckFindsAnIndexThatLostEntries_data()
    {
        QTest::addColumn<QString>("index");
        QTest::addColumn<QString>("lostRows");
        QTest::addRow("sound") << QString() << QString();
        QTest::addRow("events by id") << u"events_by_id"_s << u"seq = 2"_s;
        QTest::addRow("conversations by created")
            << u"conversations_by_created"_s << u"title = 'second'"_s;
    }
    void theStartupCheckFindsAnIndexThatLostEntries()
    {
        QFETCH(QString, index);
        QFETCH(QString, lostRows);
        const QString path = m_dir->filePath(u"catalog.db"_s);
        ConversationInfo info = conversation();
        QList<StoredEvent> stored;
        {
            QString error;
            auto db = Database::openSqlite(path, &error);
            QVERIFY2(db, qPrintable(error));
            ConversationStore store(*db);
            store.insert(info);
            ConversationInfo second = conversation();
            second.title = u"second"_s;
            store.insert(second);
            for (int i = 0; i < 3; ++i)
                stored += store.append(info.id, {Event::message(u"user"_s, u"user"_s, u"hi"_s)},
                                       std::nullopt, i);
        }
        if (!index.isEmpty()) {
            const QString failure = loseIndexEntries(path, index, lostRows);
            QVERIFY2(failure.isEmpty(), qPrintable(failure));
        }
        {
            // What SQLite's quick check says of it: nothing.
            QString error;
            auto db = Database::openSqlite(path, &error);
            QVERIFY2(db, qPrintable(error));
            QSqlQuery quick(db->connection());
            QVERIFY(quick.exec(u"PRAGMA quick_check"_s) && quick.next());
            QCOMPARE(quick.value(0).toString(), u"ok"_s);
            if (index == u"events_by_id"_s) {
                // The event is in the history but not found by its id.
                ConversationStore store(*db);
                const QUuid lost = *parseWireId(
                    QJsonDocument::fromJson(stored[1].json).object().value(u"id"_s).toString());
                QCOMPARE(store.eventsAfter(info.id, 0, 10).size(), 3);
                QVERIFY(!store.event(info.id, lost));
            }
        }

        IntegrityCheck check(path);
        QSignalSpy finished(&check, &IntegrityCheck::finished);
        check.start();
        QVERIFY(finished.wait(10'000));
        QVERIFY(finished.first().at(0).toBool());
        const QString problem = finished.first().at(1).toString();
        if (index.isEmpty()) {
            QVERIFY2(problem.isEmpty(), qPrintable(problem));
        } else {
            QVERIFY2(problem.contains(u"missing from index "_s + index), qPrintable(problem));
            QVERIFY2(problem.count(u"; "_s) < 5, qPrintable(problem)); // its first lines only
        }
    }

    // A damaged header byte: SQLite opened the file read-only without a word and every write
    // failed with "attempt to write a readonly database" in a writable data dir, or it answered
    // "file is not a database". The file is named as damaged, and nothing is written to it.
    void aDamagedHeaderIsNamedAsDamage_data()
    {
        QTest::addColumn<qint64>("offset");
        QTest::addColumn<char>("value");
        QTest::addColumn<QString>("says");
        QTest::addRow("magic") << qint64(0) << 'Z' << u"SQLite format 3"_s;
        QTest::addRow("page size") << qint64(16) << '\x5a' << u"page size"_s;
        QTest::addRow("write version") << qint64(18) << '\x5a' << u"byte 18"_s;
        QTest::addRow("read version") << qint64(19) << '\x5a' << u"byte 19"_s;
        QTest::addRow("reserved space") << qint64(20) << '\xff' << u"byte 20"_s;
        // A field SQLite does not go by (the user version): the catalog opens as before.
        QTest::addRow("user version") << qint64(60) << '\x5a' << QString();
        QTest::addRow("payload fraction") << qint64(21) << '\x5a' << u"bytes 21 to 23"_s;
        // Checked by SQLite only: more pages than the file has.
        QTest::addRow("page count") << qint64(28) << '\x5a' << u"malformed"_s;
    }
    void aDamagedHeaderIsNamedAsDamage()
    {
        QFETCH(qint64, offset);
        QFETCH(char, value);
        QFETCH(QString, says);
        const QString path = m_dir->filePath(u"catalog.db"_s);
        {
            QString error;
            auto db = Database::openSqlite(path, &error);
            QVERIFY2(db, qPrintable(error));
            ConversationStore(*db).insert(conversation());
            QSqlQuery checkpoint(db->connection());
            QVERIFY(checkpoint.exec(u"PRAGMA wal_checkpoint(TRUNCATE)"_s));
        }
        const QString failure = overwriteByte(path, offset, value);
        QVERIFY2(failure.isEmpty(), qPrintable(failure));
        QFile file(path);
        QVERIFY(file.open(QIODevice::ReadOnly));
        const QByteArray before = file.readAll();
        file.close();

        QString error;
        auto db = Database::openSqlite(path, &error);
        if (says.isEmpty()) {
            QVERIFY2(db, qPrintable(error));
            return;
        }
        QVERIFY(!db);
        QVERIFY2(error.startsWith(u"database file %1 is damaged"_s.arg(path)), qPrintable(error));
        QVERIFY2(error.contains(says), qPrintable(error));
        QVERIFY2(error.contains(u"restore it from a backup"_s), qPrintable(error));
        QVERIFY(file.open(QIODevice::ReadOnly));
        QCOMPARE(file.readAll(), before);
    }

    // QSqlQuery::next() reports a row it could not fetch as the end of the rows: a damaged page
    // made a read return fewer rows, or "does not exist", instead of failing.
    void aRowThatCannotBeFetchedFailsTheRead()
    {
        QString error;
        auto db = Database::openSqlite(m_dir->filePath(u"catalog.db"_s), &error);
        QVERIFY2(db, qPrintable(error));
        // The third row fails when it is computed, as a row on a damaged page does when read.
        QSqlQuery query = db->prepare(u"WITH rows (n) AS (VALUES (1), (2), (3), (4)) SELECT CASE "
                                      "WHEN n = 3 THEN abs(-9223372036854775807 - 1) ELSE n END "
                                      "FROM rows"_s);
        db->exec(query);
        QVERIFY(db->next(query));
        QVERIFY(db->next(query));
        QVERIFY_THROWS_EXCEPTION(StorageError, db->next(query));
    }

    // Database::Statement runs on SQLite through the sqlite3 API: each kind of value comes back
    // as it was bound, text outside ASCII and a missing value included.
    void statementsKeepWhatIsBound()
    {
        auto db = openWithTable(u"CREATE TABLE t (n INTEGER, s TEXT, u TEXT, b INTEGER)"_s);
        QVERIFY(db);
        const QString text = u"gr\u00fc\u00df \U0001F44B \"quoted\"\n"_s;
        Database::Statement &insert = db->statement(u"INSERT INTO t VALUES (?, ?, ?, ?)"_s);
        const qint64 before = db->statementCount();
        insert.bind(0, std::numeric_limits<qint64>::min());
        insert.bind(1, text);
        insert.bindUtf8(2, text.toUtf8());
        insert.bind(3, true);
        insert.exec();
        insert.bind(0, qint64(7));
        insert.bind(1, QString());
        insert.bindUtf8(2, QByteArray());
        insert.bind(3, false);
        insert.exec();
        QCOMPARE(db->statementCount() - before, 2);

        Database::Statement &select = db->statement(u"SELECT n, s, u, b FROM t ORDER BY n"_s);
        select.exec();
        QVERIFY(select.next());
        QCOMPARE(select.int64(0), std::numeric_limits<qint64>::min());
        QCOMPARE(select.text(1), text);
        QCOMPARE(select.text(2), text);
        QCOMPARE(select.int64(3), 1);
        QVERIFY(select.next());
        QCOMPARE(select.int64(0), 7);
        QVERIFY(select.text(1).isEmpty());
        QCOMPARE(select.int64(3), 0);
        QVERIFY(!select.next());
        QCOMPARE(db->lastStatement(), u"SELECT n, s, u, b FROM t ORDER BY n"_s);
    }

    // A read left unfinished is not resumed by the next exec(), and does not keep another
    // connection's commits out of view.
    void anUnfinishedReadStartsOverAtTheNextExec()
    {
        auto db = openWithTable(u"CREATE TABLE t (n INTEGER)"_s);
        QVERIFY(db);
        QSqlQuery fill = db->prepare(u"INSERT INTO t VALUES (1), (2)"_s);
        db->exec(fill);
        Database::Statement &select = db->statement(u"SELECT n FROM t ORDER BY n"_s);
        select.exec();
        QVERIFY(select.next());
        QCOMPARE(select.int64(0), 1);

        QString error;
        auto other = db->openAnother(&error);
        QVERIFY2(other, qPrintable(error));
        QSqlQuery add = other->prepare(u"INSERT INTO t VALUES (0)"_s);
        other->exec(add);

        select.exec();
        QVERIFY(select.next());
        QCOMPARE(select.int64(0), 0);
        select.finish();
    }

    // A statement that fails throws StorageError with SQLite's reason, and the same statement
    // runs again afterwards; a row that fails while fetched fails the read.
    void aFailedStatementThrowsAndRunsAgain()
    {
        auto db = openWithTable(u"CREATE TABLE t (n INTEGER UNIQUE)"_s);
        QVERIFY(db);
        Database::Statement &insert = db->statement(u"INSERT INTO t VALUES (?)"_s);
        insert.bind(0, qint64(1));
        insert.exec();
        try {
            insert.exec();
            QFAIL("a second row with the same value was inserted");
        } catch (const StorageError &failure) {
            QVERIFY2(QByteArray(failure.what()).contains("UNIQUE constraint failed"),
                     failure.what());
        }
        insert.bind(0, qint64(2));
        insert.exec();

        Database::Statement &select =
            db->statement(u"SELECT CASE WHEN n = 2 THEN abs(-9223372036854775807 - 1) ELSE n END "
                          "FROM t ORDER BY n"_s);
        select.exec();
        QVERIFY(select.next());
        QVERIFY_THROWS_EXCEPTION(StorageError, select.next());
        QVERIFY_THROWS_EXCEPTION(StorageError, db->statement(u"SELECT * FROM nowhere"_s));
    }

    // A second connection, for another thread, reads what the first one committed.
    void anotherConnectionSeesCommittedWrites()
    {
        QString error;
        auto db = Database::openSqlite(m_dir->filePath(u"catalog.db"_s), &error);
        QVERIFY2(db, qPrintable(error));
        ConversationStore store(*db);
        const ConversationInfo info = conversation();
        store.insert(info);
        store.append(info.id, {Event::message(u"user"_s, u"user"_s, u"hello"_s)}, std::nullopt, 1);

        std::optional<qint64> seenCount;
        QString threadError;
        std::unique_ptr<QThread> thread(QThread::create([&] {
            auto reader = db->openAnother(&threadError);
            if (!reader)
                return;
            ConversationStore readerStore(*reader, 0);
            const auto seen = readerStore.find(info.id);
            if (seen)
                seenCount = seen->eventCount;
        }));
        thread->start();
        QVERIFY(thread->wait(10'000));
        QVERIFY2(threadError.isEmpty(), qPrintable(threadError));
        QCOMPARE(seenCount, std::optional<qint64>(1));
    }

private:
    static constexpr int SmallLogFrames = 16;

    // A catalog in the test's dir with one more table, made by `createTable`; null when it
    // cannot open.
    std::unique_ptr<Database> openWithTable(const QString &createTable)
    {
        QString error;
        auto db = Database::openSqlite(m_dir->filePath(u"catalog.db"_s), &error);
        if (!db) {
            qWarning() << "cannot open the catalog:" << error;
            return nullptr;
        }
        QSqlQuery create = db->prepare(createTable);
        db->exec(create);
        return db;
    }

    // An SQLite catalog at `path` whose log starts over past SmallLogFrames frames, checkpointed
    // every millisecond; the restarts reported so far are forgotten. Null when it cannot open.
    // A catalog in the test's dir whose log is started over past a small bound, holding one
    // conversation (no database when it cannot be opened).
    struct SmallLogCatalog
    {
        QString path;
        std::unique_ptr<Database> db;
        std::unique_ptr<ConversationStore> store;
        ConversationInfo info = conversation();
    };
    SmallLogCatalog smallLogCatalog()
    {
        SmallLogCatalog catalog;
        catalog.path = m_dir->filePath(u"catalog.db"_s);
        catalog.db = openWithSmallLog(catalog.path);
        if (catalog.db) {
            catalog.store = std::make_unique<ConversationStore>(*catalog.db);
            catalog.store->insert(catalog.info);
        }
        return catalog;
    }
    static std::unique_ptr<Database> openWithSmallLog(const QString &path)
    {
        {
            const QMutexLocker lock(&g_restartsMutex);
            g_restarts.clear();
            g_checkpointReports.clear();
        }
        QString error;
        auto db = Database::openSqlite(path, &error);
        if (!db) {
            qWarning() << "cannot open" << path << ":" << error;
            return nullptr;
        }
        db->checkpointInBackground(std::chrono::milliseconds(1), SmallLogFrames);
        return db;
    }

    std::unique_ptr<QTemporaryDir> m_dir;
};

QTEST_GUILESS_MAIN(DatabaseTest)
#include "tst_database.moc"
