// The SQL catalog: keyset paging, filters, seq assignment, and one statement per page.
#include "apierror.h"
#include "postgrescluster.h"
#include "storage/basheventstore.h"
#include "storage/conversationstore.h"
#include "storage/database.h"
#include "storage/replicastore.h"

#include <QFile>
#include <QJsonObject>
#include <QRandomGenerator>
#include <QSqlError>
#include <QSqlQuery>
#include <QTemporaryDir>
#include <QTest>

using namespace Qt::StringLiterals;
using namespace AgentDeck;

namespace {
ConversationInfo conversation(const QString &title, qint64 createdMs)
{
    ConversationInfo info;
    info.id = QUuid::createUuid();
    info.title = title;
    info.createdAt = info.updatedAt = QDateTime::fromMSecsSinceEpoch(createdMs, Qt::UTC);
    info.agentKind = u"shell"_s;
    info.workingDir = u"/tmp/w"_s;
    return info;
}
} // namespace

class ConversationStoreTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void init()
    {
        m_dir = std::make_unique<QTemporaryDir>();
        QString error;
        m_db = Database::openSqlite(m_dir->filePath(u"test.db"_s), &error);
        QVERIFY2(m_db, qPrintable(error));
        m_store = std::make_unique<ConversationStore>(*m_db);
    }
    void cleanup()
    {
        m_store.reset();
        m_db.reset();
        m_dir.reset();
    }

    // The bash events kept are the newest MaxStored (give or take a trim's interval), and the
    // search pages them with OpenHands' filters in the order they came.
    void bashEventsAreBoundedAndSearched()
    {
        BashEventStore events(*m_db);
        const QString command = QUuid::createUuid().toString(QUuid::WithoutBraces);
        const qint64 total = BashEventStore::MaxStored + 250;
        {
            Transaction transaction(*m_db);
            for (qint64 i = 0; i < total; ++i) {
                events.insert({{u"kind"_s, i % 2 ? u"BashOutput"_s : u"BashCommand"_s},
                               {u"id"_s, QUuid::createUuid().toString(QUuid::WithoutBraces)},
                               {u"command_id"_s, command},
                               {u"order"_s, int(i % 3)},
                               {u"timestamp"_s, toWireTime(1'000'000 + i)},
                               {u"n"_s, i}});
            }
            transaction.commit();
        }
        QSqlQuery count(u"SELECT COUNT(*) FROM bash_events"_s, m_db->connection());
        QVERIFY(count.next());
        QVERIFY2(count.value(0).toLongLong() >= BashEventStore::MaxStored &&
                     count.value(0).toLongLong() < BashEventStore::MaxStored + 100,
                 qPrintable(count.value(0).toString()));
        const QList<QJsonObject> newest = events.newest(3);
        QCOMPARE(newest.size(), 3);
        QCOMPARE(newest.last().value(u"n"_s).toInteger(), total - 1);

        BashEventStore::Query outputs;
        outputs.kind = u"BashOutput"_s;
        outputs.orderAfter = 1;
        outputs.descending = true;
        outputs.limit = 2;
        const auto [page, more] = events.search(outputs);
        QVERIFY(more);
        QCOMPARE(page.size(), 2);
        for (const QJsonObject &event : page) {
            QCOMPARE(event.value(u"kind"_s).toString(), u"BashOutput"_s);
            QCOMPARE(event.value(u"order"_s).toInt(), 2);
        }
        QVERIFY(page[0].value(u"n"_s).toInteger() > page[1].value(u"n"_s).toInteger());
        BashEventStore::Query window;
        window.fromMs = 1'000'000 + total - 10;
        window.beforeMs = 1'000'000 + total - 5;
        QCOMPARE(events.search(window).first.size(), 5);
        QVERIFY(!events.search(window).second);
        QCOMPARE(events.find(page[0].value(u"id"_s).toString()), page[0]);
        QVERIFY(events.clear() >= BashEventStore::MaxStored);
        QVERIFY(events.newest(10).isEmpty());
    }

    void pagingVisitsEveryRowOnceEvenWithEqualTimestamps_data()
    {
        QTest::addColumn<ConversationSort>("sort");
        QTest::addRow("created asc") << ConversationSort::CreatedAt;
        QTest::addRow("created desc") << ConversationSort::CreatedAtDesc;
        QTest::addRow("updated asc") << ConversationSort::UpdatedAt;
        QTest::addRow("updated desc") << ConversationSort::UpdatedAtDesc;
    }
    void pagingVisitsEveryRowOnceEvenWithEqualTimestamps()
    {
        QFETCH(ConversationSort, sort);
        QSet<QUuid> inserted;
        for (int i = 0; i < 250; ++i) {
            // Three timestamps only: most rows tie, and the id must break the tie.
            const ConversationInfo info = conversation(u"c"_s, 1000 + i % 3);
            m_store->insert(info);
            inserted.insert(info.id);
        }
        QSet<QUuid> seen;
        QString pageId;
        int pages = 0;
        do {
            const ConversationPageResult page = m_store->search({}, sort, pageId, 100);
            for (const ConversationInfo &info : page.items)
                QVERIFY2(!seen.contains(info.id), "row seen twice");
            for (const ConversationInfo &info : page.items)
                seen.insert(info.id);
            pageId = page.nextPageId;
            ++pages;
        } while (!pageId.isEmpty());
        QCOMPARE(pages, 3);
        QCOMPARE(seen, inserted);
    }

    void aSearchPageIsOneStatementWhateverTheCatalogSize()
    {
        const auto statementsPerPage = [this] {
            const qint64 before = m_db->statementCount();
            const ConversationPageResult page =
                m_store->search({}, ConversationSort::CreatedAtDesc, {}, 100);
            Q_UNUSED(page);
            return m_db->statementCount() - before;
        };
        for (int i = 0; i < 10; ++i)
            m_store->insert(conversation(u"small"_s, 1000 + i));
        const qint64 small = statementsPerPage();
        m_db->begin();
        for (int i = 0; i < 1000; ++i)
            m_store->insert(conversation(u"large"_s, 5000 + i));
        m_db->commit();
        QCOMPARE(statementsPerPage(), small);
        QCOMPARE(small, 1);
    }

    // A page after the first is a range on the partition index, for every sort: a scan from the
    // start of the index to the cursor made deep pages grow with the catalog.
    void laterPagesAreAnIndexRange_data()
    {
        pagingVisitsEveryRowOnceEvenWithEqualTimestamps_data();
    }
    void laterPagesAreAnIndexRange()
    {
        QFETCH(ConversationSort, sort);
        for (int i = 0; i < 150; ++i)
            m_store->insert(conversation(u"c"_s, 1000 + i));
        const QString next = m_store->search({}, sort, {}, 100).nextPageId;
        QVERIFY(!next.isEmpty());
        QCOMPARE(m_store->search({}, sort, next, 100).items.size(), 50);
        QSqlQuery plan(m_db->connection());
        QVERIFY(plan.prepare(u"EXPLAIN QUERY PLAN "_s + m_db->lastStatement()));
        for (qsizetype i = m_db->lastStatement().count(u'?'); i > 0; --i)
            plan.addBindValue(QVariant()); // a plan does not depend on the values
        QVERIFY2(plan.exec(), qPrintable(plan.lastError().text()));
        QStringList details;
        while (plan.next())
            details.append(plan.value(3).toString());
        const QString range =
            sort == ConversationSort::CreatedAt || sort == ConversationSort::UpdatedAt ? u"id)>"_s
                                                                                       : u"id)<"_s;
        QVERIFY2(details.join(u' ').contains(range), qPrintable(details.join(u" | "_s)));
        QVERIFY2(!details.join(u' ').contains(u"TEMP B-TREE"_s),
                 qPrintable(details.join(u" | "_s)));
    }

    void foreignPageIdIsInvalidParameter()
    {
        try {
            m_store->search({}, ConversationSort::CreatedAt, u"bm90LWEtY3Vyc29y"_s, 10);
            QFAIL("expected an ApiError");
        } catch (const ApiError &error) {
            QCOMPARE(error.status, 422);
        }
    }

    void titleSearchTakesWildcardsLiterally()
    {
        m_store->insert(conversation(u"100%_done"_s, 1));
        m_store->insert(conversation(u"100 percent done"_s, 2));
        ConversationFilter filter;
        filter.text = u"%_"_s;
        QCOMPARE(m_store->count(filter), 1);
        filter.text = u"100"_s;
        QCOMPARE(m_store->count(filter), 2);
    }

    void tagFilterHandlesQuotesInKeys()
    {
        ConversationInfo info = conversation(u"t"_s, 1);
        info.tags = {{u"we\"ird"_s, u"v"_s}};
        m_store->insert(info);
        m_store->insert(conversation(u"u"_s, 2));
        ConversationFilter filter;
        filter.tags = {TagFilter{u"we\"ird"_s, u"v"_s}};
        QCOMPARE(m_store->count(filter), 1);
        filter.tags = {TagFilter{u"we\"ird"_s, u"w"_s}};
        QCOMPARE(m_store->count(filter), 0);
    }

    void batchFindKeepsOrder()
    {
        const ConversationInfo a = conversation(u"a"_s, 1);
        const ConversationInfo b = conversation(u"b"_s, 2);
        m_store->insert(a);
        m_store->insert(b);
        const auto found = m_store->findMany({b.id, QUuid::createUuid(), a.id, b.id});
        QCOMPARE(found.size(), 4);
        QCOMPARE(found[0]->title, u"b"_s);
        QVERIFY(!found[1]);
        QCOMPARE(found[2]->title, u"a"_s);
        QCOMPARE(found[3]->title, u"b"_s);
    }

    void appendAssignsGaplessSeqsAndSetsStatusAtomically()
    {
        const ConversationInfo info = conversation(u"a"_s, 1);
        m_store->insert(info);
        const auto first = m_store->append(info.id,
                                           {Event::message(u"user"_s, u"user"_s, u"1"_s),
                                            Event::message(u"user"_s, u"user"_s, u"2"_s)},
                                           std::nullopt, 10);
        const auto second = m_store->append(info.id, {Event::pause()}, ExecutionStatus::Paused, 20);
        QCOMPARE(first.size(), 2);
        QCOMPARE(first[0].seq, 1);
        QCOMPARE(first[1].seq, 2);
        QCOMPARE(second[0].seq, 3);
        const auto stored = m_store->find(info.id);
        QCOMPARE(stored->eventCount, 3);
        QVERIFY(stored->executionStatus == ExecutionStatus::Paused);
        QCOMPARE(stored->lastEventAt->toMSecsSinceEpoch(), 20);
        QCOMPARE(m_store->history(info.id, 1).size(), 2);
    }

    // A stream's replay holds a page while its client drains it: pages stop at a byte bound.
    void eventsAfterStopsAtTheEventThatReachesTheByteBound()
    {
        const ConversationInfo info = conversation(u"a"_s, 1);
        m_store->insert(info);
        QList<Event> events;
        for (int i = 0; i < 10; ++i)
            events.append(Event::message(u"user"_s, u"user"_s, QString(1000, u'x')));
        const auto stored = m_store->append(info.id, events, std::nullopt, 10);
        const qsizetype size = stored.first().json.size();
        QCOMPARE(m_store->eventsAfter(info.id, 0, 100).size(), 10);
        const auto page = m_store->eventsAfter(info.id, 0, 100, 3 * size - 1);
        QCOMPARE(page.size(), 3);
        QCOMPARE(page.last().seq, 3);
        QCOMPARE(m_store->eventsAfter(info.id, 3, 100, 1).size(), 1); // always one
        QCOMPARE(m_store->eventsAfter(info.id, 8, 100, 100 * size).size(), 2);
    }

    // The JSON kept with a cached row is the same document toJsonBytes() writes, and it follows
    // every write of the row and every change of its runtime info.
    void cachedJsonIsFreshAfterWritesAndRuntimeChanges()
    {
        const ConversationInfo info = conversation(u"a"_s, 1);
        m_store->insert(info);
        RuntimeInfo runtime{RuntimeStatus::Missing, true, std::nullopt};
        int calls = 0;
        const auto runtimeOf = [&](const ConversationInfo &) {
            ++calls;
            return runtime;
        };
        ConversationStore uncached(*m_db, 0); // reads the row itself every time
        const auto expected = [&] {
            ConversationInfo described = *uncached.find(info.id);
            described.runtime = runtime;
            return described.toJsonBytes();
        };

        QCOMPARE(*m_store->findJson(info.id, runtimeOf), expected());
        QCOMPARE(*m_store->findJson(info.id, runtimeOf), expected());
        QCOMPARE(calls, 2); // asked on every read, never cached with the bytes

        runtime = {RuntimeStatus::Available, true, std::nullopt};
        QVERIFY(
            m_store->findJson(info.id, runtimeOf)->contains("\"runtime_status\":\"available\""));
        QCOMPARE(*m_store->findJson(info.id, runtimeOf), expected());

        m_store->append(info.id, {Event::message(u"user"_s, u"user"_s, u"1"_s)},
                        ExecutionStatus::Finished, 50);
        QVERIFY(m_store->findJson(info.id, runtimeOf)->contains("\"event_count\":1"));
        QCOMPARE(*m_store->findJson(info.id, runtimeOf), expected());
        m_store->append(info.id, {Event::pause()}, std::nullopt, 55);
        QVERIFY(m_store->findJson(info.id, runtimeOf)->contains("\"event_count\":2"));
        QCOMPARE(*m_store->findJson(info.id, runtimeOf), expected());

        m_store->update(info.id, {u"renamed"_s, std::nullopt}, 60);
        QVERIFY(m_store->findJson(info.id, runtimeOf)->contains("\"title\":\"renamed\""));
        m_store->setArchived(info.id, 70);
        QCOMPARE(*m_store->findJson(info.id, runtimeOf), expected());
        QVERIFY(!m_store->findJson(info.id, runtimeOf)->contains("\"archived_at\":null"));

        m_store->remove(info.id);
        QVERIFY(!m_store->findJson(info.id, runtimeOf));
    }

    // The cache of rows read by id was bounded by a count, 10,000 rows, whatever they held:
    // with the largest titles and tags the server reached 660 MB. It is bounded by bytes.
    void theRowCacheIsBoundedByWhatItsRowsHold()
    {
        m_store = std::make_unique<ConversationStore>(*m_db, 1024 * 1024);
        QList<QUuid> ids;
        for (int i = 0; i < 50; ++i) {
            ConversationInfo info = conversation(u"large"_s, 1000 + i);
            for (int tag = 0; tag < 50; ++tag)
                info.tags.insert(u"tag-%1"_s.arg(tag), QString(256, u'v'));
            m_store->insert(info);
            ids.append(info.id);
        }
        const auto statementsToFind = [this](const QUuid &id) {
            const qint64 before = m_db->statementCount();
            [[maybe_unused]] const auto info = m_store->find(id);
            return m_db->statementCount() - before;
        };
        for (const QUuid &id : std::as_const(ids))
            QCOMPARE(statementsToFind(id), 1);
        QCOMPARE(statementsToFind(ids.last()), 0);  // cached
        QCOMPARE(statementsToFind(ids.first()), 1); // no room left for it
    }

    void appendToMissingConversationIsNotFoundAndWritesNothing()
    {
        try {
            m_store->append(QUuid::createUuid(), {Event::pause()}, std::nullopt, 1);
            QFAIL("expected an ApiError");
        } catch (const ApiError &error) {
            QCOMPARE(error.status, 404);
        }
        QSqlQuery query(m_db->connection());
        QVERIFY(query.exec(u"SELECT COUNT(*) FROM events"_s) && query.next());
        QCOMPARE(query.value(0).toInt(), 0);
    }

    void removeDeletesHistory()
    {
        const ConversationInfo info = conversation(u"a"_s, 1);
        m_store->insert(info);
        m_store->append(info.id, {Event::pause()}, std::nullopt, 1);
        QVERIFY(m_store->remove(info.id));
        QVERIFY(!m_store->find(info.id));
        QVERIFY(m_store->eventsAfter(info.id, 0, 10).isEmpty());
        QVERIFY(!m_store->remove(info.id));
    }

    // A delete a server left half done is taken over once that server no longer beats: on a
    // shared catalog only a restart of the same data dir finished it, and the id stayed refused.
    void deletesOfServersThatStoppedBeatingAreTakenOver_data() { backends(); }
    void deletesOfServersThatStoppedBeatingAreTakenOver()
    {
        Testing::PostgresCluster cluster;
        std::unique_ptr<Database> postgresDb;
        Database *catalog = catalogOf(cluster, postgresDb);
        QVERIFY(catalog);
        Database &db = *catalog;
        ConversationStore store(db);
        ReplicaStore replicas(db, std::chrono::seconds(10));
        replicas.registerReplica(u"alive"_s, u"alive/1"_s, {});
        replicas.registerReplica(u"stopped"_s, u"stopped/1"_s, {});
        replicas.markStopped(u"stopped"_s, u"stopped/1"_s);
        replicas.registerReplica(u"me"_s, u"me/2"_s, {});
        QHash<QString, QUuid> deletedBy;
        for (const QString &deleter :
             {u"alive/1"_s, u"stopped/1"_s, u"gone/1"_s, u"me/1"_s, u"me/2"_s}) {
            const ConversationInfo info = conversation(deleter, 1);
            store.insert(info);
            QVERIFY(store.beginRemoval(info.id, deleter));
            deletedBy.insert(deleter, info.id);
        }
        const auto idsOf = [](const QList<ConversationInfo> &infos) {
            QSet<QUuid> ids;
            for (const ConversationInfo &info : infos)
                ids.insert(info.id);
            return ids;
        };
        const QSet<QUuid> abandoned{deletedBy[u"stopped/1"_s], deletedBy[u"gone/1"_s],
                                    deletedBy[u"me/1"_s]};
        QCOMPARE(idsOf(store.takeOverRemovals(u"me/2"_s, false, std::chrono::seconds(10))),
                 abandoned);
        // Taken once: now this server's own, which it is at.
        QVERIFY(store.takeOverRemovals(u"other/1"_s, false, std::chrono::seconds(10)).isEmpty());
        // Alone on its catalog, a server takes every one.
        QCOMPARE(store.takeOverRemovals(u"me/3"_s, true, std::chrono::seconds(10)).size(), 5);
    }

    // Where a run of the shell or echo agent starts reading: kept by every append, and filled in
    // by migration 007 for histories stored before it, as a walk over the same messages here
    // finds it.
    void answeredThroughFollowsTheMessages_data() { backends(); }
    void answeredThroughFollowsTheMessages()
    {
        Testing::PostgresCluster cluster;
        std::unique_ptr<Database> postgresDb;
        Database *catalog = catalogOf(cluster, postgresDb);
        QVERIFY(catalog);
        Database &db = *catalog;
        ConversationStore store(db);

        QRandomGenerator random(7);
        QHash<QUuid, MessageWalk> walks;
        const auto appendRandomEvents = [&](const QUuid &id, MessageWalk &walk) {
            QList<Event> batch;
            for (int i = random.bounded(30); i > 0; --i) {
                ++walk.seq;
                switch (random.bounded(4)) {
                case 0:
                    batch.append(Event::message(u"user"_s, u"user"_s, u"q"_s));
                    ++walk.open;
                    break;
                case 1:
                    batch.append(Event::message(u"agent"_s, u"assistant"_s, u"a"_s));
                    walk.open = std::max<qint64>(walk.open - 1, 0);
                    if (walk.open == 0)
                        walk.answeredThrough = walk.seq;
                    break;
                case 2:
                    batch.append(Event::message(u"environment"_s, u"system"_s, u"note"_s));
                    break;
                default:
                    batch.append(Event::action(u"bash"_s, u"true"_s));
                    break;
                }
                if (random.bounded(3) == 0)
                    store.append(id, std::exchange(batch, {}), std::nullopt, walk.seq);
            }
            store.append(id, batch, std::nullopt, walk.seq);
        };
        const auto compareAll = [&] {
            for (auto it = walks.cbegin(); it != walks.cend(); ++it)
                QCOMPARE(store.answeredThrough(it.key()), it->answeredThrough);
        };
        for (int i = 0; i < 200; ++i) {
            const ConversationInfo info = conversation(u"c%1"_s.arg(i), i);
            store.insert(info);
            appendRandomEvents(info.id, walks[info.id]);
        }
        compareAll();

        // As the migration finds histories stored before it, and appends after it.
        QFile migration(u":/agentdeck/migrations/%1/007_open_messages.sql"_s.arg(
            db.isPostgres() ? u"postgresql"_s : u"sqlite"_s));
        QVERIFY(migration.open(QIODevice::ReadOnly));
        const QString fill = QString::fromUtf8(migration.readAll()).section(u"UPDATE "_s, 1);
        QVERIFY(!fill.isEmpty());
        QSqlQuery query(db.connection());
        QVERIFY2(query.exec(u"UPDATE conversations SET open_messages = 0, answered_through = 0"_s),
                 qPrintable(query.lastError().text()));
        QVERIFY2(query.exec(u"UPDATE "_s + fill), qPrintable(query.lastError().text()));
        compareAll();
        for (auto it = walks.begin(); it != walks.end(); ++it)
            appendRandomEvents(it.key(), *it);
        compareAll();
    }

    // The startup sweep keeps what is older than the catalog.
    void theCatalogKnowsWhenItWasMade_data() { backends(); }
    void theCatalogKnowsWhenItWasMade()
    {
        QFETCH(bool, postgres);
        Testing::PostgresCluster cluster;
        std::unique_ptr<Database> postgresDb;
        const qint64 before = QDateTime::currentMSecsSinceEpoch();
        if (postgres) {
            QVERIFY(openPostgres(cluster, postgresDb));
        } else {
            cleanup();
            init();
        }
        const qint64 after = QDateTime::currentMSecsSinceEpoch();
        const qint64 made = (postgres ? *postgresDb : *m_db).createdAtMs();
        QVERIFY2(made >= before && made <= after,
                 qPrintable(u"%1 not in %2..%3"_s.arg(made).arg(before).arg(after)));
    }

    // A replica frozen inside a transaction (SIGSTOP, a paused VM) held its row locks, and
    // every other replica that touched the row waited without end, its event loop with it. A
    // session now gives up on a row lock after its lock wait, and the server ends a session
    // that sits in a transaction past its limit, which frees the lock.
    void aRowLockOfAFrozenSessionIsNotWaitedForWithoutEnd()
    {
        Testing::PostgresCluster cluster;
        QString error;
        QVERIFY2(cluster.start(&error), qPrintable(error));
        const QUrl url = cluster.createDatabase(u"locks"_s, &error);
        QVERIFY2(url.isValid(), qPrintable(error));
        const PostgresTimeouts timeouts{std::chrono::milliseconds(200),
                                        std::chrono::milliseconds(1'000)};
        auto frozen = Database::openPostgres(url, &error, Database::Migrations::Run, timeouts);
        QVERIFY2(frozen, qPrintable(error));
        auto other = Database::openPostgres(url, &error, Database::Migrations::Skip, timeouts);
        QVERIFY2(other, qPrintable(error));

        frozen->begin();
        QSqlQuery lock = frozen->prepare(
            u"SELECT version FROM schema_migrations WHERE version = 1 FOR UPDATE"_s);
        frozen->exec(lock);
        lock.finish();
        // ... and the frozen session sends nothing more.
        const auto touch = [&] {
            QSqlQuery update =
                other->prepare(u"UPDATE schema_migrations SET name = name WHERE version = 1"_s);
            other->exec(update);
        };
        bool gaveUp = false;
        try {
            touch();
        } catch (const StorageError &failure) {
            gaveUp = failure.lockTimeout();
            QVERIFY2(gaveUp, failure.what());
        }
        QVERIFY(gaveUp);
        // The server ends the frozen session once it has been idle in its transaction past the
        // limit; then the row is free.
        QVERIFY(QTest::qWaitFor(
            [&] {
                try {
                    touch();
                    return true;
                } catch (const StorageError &) {
                    return false;
                }
            },
            10'000));
        QVERIFY_THROWS_EXCEPTION(StorageError, frozen->commit());
    }

private:
    static void backends()
    {
        QTest::addColumn<bool>("postgres");
        QTest::addRow("sqlite") << false;
        QTest::addRow("postgresql") << true;
    }
    // The catalog of a backends() row: this test's SQLite one, or a fresh one in a throwaway
    // PostgreSQL cluster; null (the test failed) when that cannot be made.
    Database *catalogOf(Testing::PostgresCluster &cluster, std::unique_ptr<Database> &postgresDb)
    {
        QFETCH(bool, postgres);
        if (!postgres)
            return m_db.get();
        return openPostgres(cluster, postgresDb) ? postgresDb.get() : nullptr;
    }
    // A fresh catalog in a throwaway cluster; false (the test failed) when it cannot be made.
    static bool openPostgres(Testing::PostgresCluster &cluster, std::unique_ptr<Database> &db)
    {
        QString error;
        QUrl url;
        if (cluster.start(&error))
            url = cluster.createDatabase(u"catalog"_s, &error);
        if (url.isValid())
            db = Database::openPostgres(url, &error);
        if (!db)
            QTest::qFail(qPrintable(u"no PostgreSQL catalog: "_s + error), __FILE__, __LINE__);
        return bool(db);
    }

    struct MessageWalk
    {
        qint64 seq = 0;
        qint64 open = 0; // user messages without an answer
        qint64 answeredThrough = 0;
    };

    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<Database> m_db;
    std::unique_ptr<ConversationStore> m_store;
};

QTEST_GUILESS_MAIN(ConversationStoreTest)
#include "tst_conversationstore.moc"
