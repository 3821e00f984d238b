// Leases with an injected database clock: claim, renew, adopt, release, fencing, contention.
#include "fakes.h"
#include "storage/conversationstore.h"
#include "storage/database.h"
#include "storage/leasestore.h"

#include <QSqlQuery>
#include <QTemporaryDir>
#include <QTest>

#include <atomic>
#include <barrier>
#include <thread>

using namespace Qt::StringLiterals;
using namespace AgentDeck;
using namespace AgentDeck::Testing;

class LeasesTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void init()
    {
        m_dir = std::make_unique<QTemporaryDir>();
        QString error;
        m_db = Database::openSqlite(path(), &error, &m_clock);
        QVERIFY2(m_db, qPrintable(error));
        m_store = std::make_unique<ConversationStore>(*m_db);
        m_leases = std::make_unique<LeaseStore>(*m_db, std::chrono::seconds(30));
        ConversationInfo info{QUuid::createUuid(), u"c"_s};
        info.createdAt = info.updatedAt = QDateTime::currentDateTimeUtc();
        info.agentKind = u"shell"_s;
        info.workingDir = m_dir->path();
        m_store->insert(info);
        m_id = info.id;
    }
    void cleanup()
    {
        m_leases.reset();
        m_store.reset();
        m_db.reset();
        m_dir.reset();
    }

    void claimIsExclusiveUntilTheLeaseLapsesOnTheDatabaseClock()
    {
        const auto a = m_leases->claim(m_id, u"a"_s);
        QVERIFY(a);
        QCOMPARE(a->epoch, 1);
        QVERIFY(!m_leases->claim(m_id, u"b"_s));
        const auto holder = m_leases->holder(m_id);
        QCOMPARE(holder->owner, u"a"_s);
        QVERIFY(holder->msLeft > 29'000 && holder->msLeft <= 30'000);

        m_clock.advance(29'000);
        QVERIFY(!m_leases->claim(m_id, u"b"_s));
        m_clock.advance(2'000); // lapsed: adoption increments the epoch
        const auto b = m_leases->claim(m_id, u"b"_s);
        QVERIFY(b);
        QCOMPARE(b->epoch, 2);
    }

    // SQLite gives a RETURNING row before its autocommit, whose failure went unseen: on a full
    // disk the server took a lease the row never had, and its writes were all fenced off.
    void aClaimThatCannotBeCommittedHandsOutNoLease()
    {
        m_db->beforeCommit = [] { throw StorageError("database or disk is full"); };
        QVERIFY_THROWS_EXCEPTION(StorageError, m_leases->claim(m_id, u"a"_s));
        m_db->beforeCommit = {};
        QVERIFY(!m_leases->holder(m_id));
        const auto a = m_leases->claim(m_id, u"a"_s);
        QVERIFY(a);
        QCOMPARE(a->epoch, 1);
    }

    void renewalKeepsAFrozenHolderThatWasNotTakenOver()
    {
        const auto a = m_leases->claim(m_id, u"a"_s);
        m_clock.advance(120'000); // frozen far past the TTL, but nobody claimed
        QCOMPARE(m_leases->renew(u"a"_s, {{m_id, a->epoch}}).value(m_id), LeaseState::Held);
        QVERIFY(m_leases->holder(m_id)->msLeft > 29'000);
    }

    void renewalReportsWhatHappened()
    {
        const auto a = m_leases->claim(m_id, u"a"_s);
        m_leases->requestCancel(m_id);
        QCOMPARE(m_leases->renew(u"a"_s, {{m_id, a->epoch}}).value(m_id),
                 LeaseState::CancelRequested);

        m_clock.advance(31'000);
        QVERIFY(m_leases->claim(m_id, u"b"_s));
        QCOMPARE(m_leases->renew(u"a"_s, {{m_id, a->epoch}}).value(m_id),
                 LeaseState::LostToAnotherOwner);

        const QUuid gone = QUuid::createUuid();
        QCOMPARE(m_leases->renew(u"a"_s, {{gone, 1}}).value(gone), LeaseState::Deleted);
        QVERIFY(m_leases->renew(u"a"_s, {}).isEmpty());
    }

    void releaseHandsOverAtOnce()
    {
        const auto a = m_leases->claim(m_id, u"a"_s);
        m_leases->release(m_id, *a);
        const auto b = m_leases->claim(m_id, u"b"_s);
        QVERIFY(b);
        // A release with a stale token does not free the new holder's lease.
        m_leases->release(m_id, *a);
        QVERIFY(!m_leases->claim(m_id, u"c"_s));
        QCOMPARE(m_leases->releaseAll(u"b"_s), 1);
        QVERIFY(m_leases->claim(m_id, u"c"_s));
    }

    void adoptAllTakesOverWhateverTheExpirySays()
    {
        QSqlQuery query(m_db->connection());
        QVERIFY(query.exec(u"UPDATE conversations SET lease_owner = 'old-host/4242', "
                           "lease_epoch = 7, lease_expires_at = 9000000000000"_s));
        QCOMPARE(m_leases->adoptAll(u"me"_s), 1);
        const auto holder = m_leases->holder(m_id);
        QCOMPARE(holder->owner, u"me"_s);
        QCOMPARE(holder->epoch, 8);
        QCOMPARE(m_leases->adoptAll(u"me"_s), 0);
    }

    // A replica adopts the leases of its earlier instances (the same id), not another's. The
    // prefix was compared by UTF-16 units against SQL's characters: an id with an emoji adopted
    // nothing, and its own runs were held against it for a lease's time.
    void earlierInstancesOfTheSameReplicaAreAdopted_data()
    {
        QTest::addColumn<QString>("replica");
        QTest::addRow("ascii") << u"alpha"_s;
        QTest::addRow("an emoji") << u"r\U0001F600"_s;
        QTest::addRow("accents") << u"r\u00e9plique"_s;
    }
    void earlierInstancesOfTheSameReplicaAreAdopted()
    {
        QFETCH(QString, replica);
        QSqlQuery query(m_db->connection());
        query.prepare(u"UPDATE conversations SET lease_owner = ?, lease_epoch = 3, "
                      "lease_expires_at = 9000000000000"_s);
        query.addBindValue(QString(replica + u"/old"_s));
        QVERIFY(query.exec());
        QCOMPARE(m_leases->adoptEarlierInstances(replica + u"x/new"_s, replica + u"x"_s), 0);
        QCOMPARE(m_leases->adoptEarlierInstances(replica + u"/new"_s, replica), 1);
        QCOMPARE(m_leases->holder(m_id)->owner, replica + u"/new"_s);
        QCOMPARE(m_leases->holder(m_id)->epoch, 4);
    }

    // Runs left by a dead replica are found a page at a time; conversations being deleted are
    // nobody's to resolve, and a page of them hid the run behind them for good.
    void lapsedRunsLeaveOutConversationsBeingDeleted()
    {
        for (int i = 0; i < 20; ++i) {
            ConversationInfo info{QUuid::createUuid(), u"deleting"_s};
            info.createdAt = info.updatedAt = QDateTime::currentDateTimeUtc();
            info.agentKind = u"shell"_s;
            info.workingDir = m_dir->path();
            m_store->insert(info);
            QVERIFY(m_store->beginRemoval(info.id, u"gone/1"_s));
        }
        QSqlQuery query(m_db->connection());
        QVERIFY(query.exec(u"UPDATE conversations SET execution_status = 'running'"_s));
        QCOMPARE(m_leases->lapsedRuns(20), QList<QUuid>{m_id});
    }

    void aStaleEpochWriteChangesNothing()
    {
        const auto a = m_leases->claim(m_id, u"a"_s);
        m_store->append(m_id, {Event::pause()}, ExecutionStatus::Running, 1, &*a);
        m_clock.advance(31'000);
        const auto b = m_leases->claim(m_id, u"b"_s);
        QVERIFY(b);
        QVERIFY_THROWS_EXCEPTION(
            LeaseLostError,
            m_store->append(m_id, {Event::pause()}, ExecutionStatus::Finished, 2, &*a));
        const auto info = m_store->find(m_id);
        QCOMPARE(info->eventCount, 1);
        QVERIFY(info->executionStatus == ExecutionStatus::Running);
        // The new holder writes, and events remember the epoch they were written under.
        m_store->append(m_id, {Event::pause()}, ExecutionStatus::Paused, 3, &*b);
        QSqlQuery query(m_db->connection());
        QVERIFY(query.exec(u"SELECT seq, epoch FROM events ORDER BY seq"_s));
        QVERIFY(query.next());
        QCOMPARE(query.value(1).toLongLong(), a->epoch);
        QVERIFY(query.next());
        QCOMPARE(query.value(1).toLongLong(), b->epoch);
    }

    void concurrentClaimsHaveExactlyOneWinner()
    {
        constexpr int Contenders = 8;
        for (int round = 0; round < 20; ++round) {
            if (auto holder = m_leases->holder(m_id))
                m_leases->release(m_id, {holder->owner, holder->epoch});
            std::atomic<int> winners = 0;
            std::atomic<int> failures = 0;
            std::barrier start(Contenders);
            std::vector<std::thread> threads;
            for (int i = 0; i < Contenders; ++i) {
                threads.emplace_back([&, i] {
                    // Each contender has its own connection, as separate processes would.
                    QString error;
                    auto db = Database::openSqlite(path(), &error, &m_clock);
                    if (!db) {
                        ++failures;
                        return;
                    }
                    LeaseStore leases(*db, std::chrono::seconds(30));
                    start.arrive_and_wait();
                    try {
                        if (leases.claim(m_id, u"owner-%1"_s.arg(i)))
                            ++winners;
                    } catch (const std::exception &) {
                        ++failures;
                    }
                });
            }
            for (auto &thread : threads)
                thread.join();
            QCOMPARE(failures.load(), 0);
            QCOMPARE(winners.load(), 1);
        }
    }

private:
    QString path() const { return m_dir->filePath(u"leases.db"_s); }

    FakeClock m_clock;
    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<Database> m_db;
    std::unique_ptr<ConversationStore> m_store;
    std::unique_ptr<LeaseStore> m_leases;
    QUuid m_id;
};

QTEST_GUILESS_MAIN(LeasesTest)
#include "tst_leases.moc"
