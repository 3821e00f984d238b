// The SQLite catalog's connections: checkpoints from a thread of their own, and a second
// connection for another thread.
#include "storage/conversationstore.h"
#include "storage/database.h"

#include <QFileInfo>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>

using namespace Qt::StringLiterals;
using namespace AgentDeck;

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

    // Past its bound the log is started over: the checkpointer takes the write lock for that.
    // A write transaction that read first would then fail at once instead of waiting (SQLite
    // does not wait for a lock to turn a read into a write); transactions take the write lock
    // when they begin, and every write succeeds while the log keeps starting over.
    void writesWaitWhileTheLogStartsOver()
    {
        const QString path = m_dir->filePath(u"catalog.db"_s);
        QString error;
        auto db = Database::openSqlite(path, &error);
        QVERIFY2(db, qPrintable(error));
        constexpr int MaxLogFrames = 16;
        db->checkpointInBackground(std::chrono::milliseconds(1), MaxLogFrames);
        ConversationStore store(*db);
        const ConversationInfo info = conversation();
        store.insert(info);
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
    std::unique_ptr<QTemporaryDir> m_dir;
};

QTEST_GUILESS_MAIN(DatabaseTest)
#include "tst_database.moc"
