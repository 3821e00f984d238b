// The console's Activity list without a GUI: audit records of one or several servers merged
// newest first, paging held back to what every server has read, live records at the top, and
// the text and result filters.
#include "activityloader.h"
#include "activitymodel.h"
#include "testserver.h"
#include "wiretypes.h"

#include <QAbstractItemModelTester>
#include <QSignalSpy>
#include <QTest>

using namespace Qt::StringLiterals;
using namespace AgentDeck;

namespace {
const QUuid Deployed = QUuid::fromString(u"3f2a9c1e-0000-4000-8000-000000000001"_s);

// A record as /api/audit answers it, written `second` seconds into the day.
QJsonObject record(qint64 number, int second, const QString &actor = u"ops-alice"_s,
                   const QString &action = u"archive"_s, int status = 200,
                   const QString &reason = {})
{
    return {{u"id"_s, QString::number(number)},
            {u"timestamp"_s,
             toWireTime(QDateTime(QDate(2026, 12, 6), QTime(0, 0).addSecs(second), Qt::UTC))},
            {u"actor"_s, actor},
            {u"client"_s, u"console"_s},
            {u"actor_display"_s, QString(actor + u" via console"_s)},
            {u"action"_s, action},
            {u"conversation_id"_s, toWireId(Deployed)},
            {u"replica"_s, u"host-a"_s},
            {u"reason"_s, reason},
            {u"result"_s, status < 300 ? u"done"_s : u"refused"_s},
            {u"status"_s, status}};
}

AuditPage page(const QList<QJsonObject> &records, const QString &next = {})
{
    AuditPage page;
    for (const QJsonObject &object : records)
        page.items.append(*AuditEntry::fromJson(object));
    page.nextPageId = next;
    return page;
}

QStringList column(const QAbstractItemModel &model, int column)
{
    QStringList texts;
    for (int row = 0; row < model.rowCount(); ++row)
        texts.append(model.index(row, column).data().toString());
    return texts;
}

// Each row as "server:number".
QStringList rows(const ActivityModel &model)
{
    QStringList texts;
    for (int row = 0; row < model.rowCount(); ++row)
        texts.append(u"%1:%2"_s.arg(model.index(row, ActivityModel::ServerColumn).data().toString())
                         .arg(model.entry(row).number));
    return texts;
}
} // namespace

class ActivityModelTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void recordsReadAsTheyArePut()
    {
        ActivityModel model;
        QAbstractItemModelTester tester(&model);
        const int alpha = model.addSource(u"alpha"_s, [](const QUuid &id) {
            return id == Deployed ? u"deploy web"_s : QString();
        });
        model.addPage(alpha,
                      page({record(2, 20, u"ops-bob"_s, u"delete"_s, 200, u"ticket 42"_s),
                            record(1, 10, u"ops-alice"_s, u"archive"_s, 409)}),
                      true);
        QCOMPARE(model.rowCount(), 2);
        QCOMPARE(column(model, ActivityModel::ActorColumn),
                 (QStringList{u"ops-bob via console"_s, u"ops-alice via console"_s}));
        QCOMPARE(column(model, ActivityModel::ActionColumn),
                 (QStringList{u"delete"_s, u"archive"_s}));
        QCOMPARE(column(model, ActivityModel::ConversationColumn),
                 (QStringList{u"deploy web"_s, u"deploy web"_s}));
        QCOMPARE(column(model, ActivityModel::ReasonColumn), (QStringList{u"ticket 42"_s, {}}));
        QCOMPARE(column(model, ActivityModel::ResultColumn),
                 (QStringList{u"done"_s, u"refused (409)"_s}));
        QCOMPARE(model.index(0, 0).data(ActivityModel::ConversationIdRole).toString(),
                 toWireId(Deployed));
        QVERIFY(!model.hasMore());

        // A conversation whose title is not known (deleted) by the start of its id.
        const int beta = model.addSource(u"beta"_s);
        model.addPage(beta, page({record(7, 30)}), true);
        QCOMPARE(model.index(0, ActivityModel::ConversationColumn).data().toString(),
                 u"3f2a9c1e"_s);
        QCOMPARE(model.roleNames().value(ActivityModel::ActorDisplayRole), "actorDisplay"_ba);
    }

    void aRefreshAddsOnlyWhatIsNew()
    {
        ActivityModel model;
        QAbstractItemModelTester tester(&model);
        const int source = model.addSource(u"alpha"_s);
        model.addPage(source, page({record(3, 30), record(2, 20)}, u"2"_s), true);
        QCOMPARE(model.nextPageId(source), u"2"_s);
        QSignalSpy reset(&model, &QAbstractItemModel::modelReset);
        QSignalSpy inserted(&model, &QAbstractItemModel::rowsInserted);
        model.addPage(source, page({record(5, 50), record(4, 40), record(3, 30)}, u"3"_s), true);
        QCOMPARE(rows(model),
                 (QStringList{u"alpha:5"_s, u"alpha:4"_s, u"alpha:3"_s, u"alpha:2"_s}));
        // Where older pages are read from stays.
        QCOMPARE(model.nextPageId(source), u"2"_s);
        QCOMPARE(reset.count(), 0);
        QCOMPARE(inserted.count(), 2);
        model.addPage(source, page({record(1, 10)}), false);
        QCOMPARE(model.rowCount(), 5);
        QVERIFY(!model.hasMore());

        // More came since than a page holds: what was between is unknown, so it starts over.
        model.addPage(source, page({record(100, 1000), record(99, 990)}, u"99"_s), true);
        QCOMPARE(rows(model), (QStringList{u"alpha:100"_s, u"alpha:99"_s}));
        QCOMPARE(model.nextPageId(source), u"99"_s);
    }

    // Two servers: a row older than what one of them has read is held back until it has.
    void serversMergeByTimeUpToTheHorizon()
    {
        ActivityModel model;
        QAbstractItemModelTester tester(&model);
        const int alpha = model.addSource(u"alpha"_s);
        const int beta = model.addSource(u"beta"_s);
        model.addPage(alpha, page({record(4, 400), record(3, 300)}, u"3"_s), true);
        model.addPage(beta, page({record(9, 350), record(8, 100)}, u"8"_s), true);
        // Alpha has read down to 300 only: beta's 100 waits.
        QCOMPARE(rows(model), (QStringList{u"alpha:4"_s, u"beta:9"_s, u"alpha:3"_s}));
        QCOMPARE(model.heldCount(), 4);
        QVERIFY(model.hasMore());
        QCOMPARE(model.sourcesToReadMore(), QList<int>{alpha});
        model.addPage(alpha, page({record(2, 200), record(1, 50)}), false);
        // Alpha is read whole; beta's next page could still hold rows before 100.
        QCOMPARE(rows(model),
                 (QStringList{u"alpha:4"_s, u"beta:9"_s, u"alpha:3"_s, u"alpha:2"_s, u"beta:8"_s}));
        QCOMPARE(model.sourcesToReadMore(), QList<int>{beta});
        model.addPage(beta, page({record(7, 60)}), false);
        QCOMPARE(rows(model).mid(5), (QStringList{u"beta:7"_s, u"alpha:1"_s}));
        QVERIFY(!model.hasMore());
        QVERIFY(model.sourcesToReadMore().isEmpty());

        // A server removed takes its rows with it.
        model.removeSource(alpha);
        QCOMPARE(rows(model), (QStringList{u"beta:9"_s, u"beta:8"_s, u"beta:7"_s}));
        model.setSourceLabel(beta, u"db"_s);
        QCOMPARE(model.index(0, ActivityModel::ServerColumn).data().toString(), u"db"_s);
    }

    void aLiveRecordGoesOnTop()
    {
        ActivityModel model;
        QAbstractItemModelTester tester(&model);
        const int source = model.addSource(u"alpha"_s);
        model.addPage(source, page({record(2, 20), record(1, 10)}, u"1"_s), true);
        QSignalSpy inserted(&model, &QAbstractItemModel::rowsInserted);
        QVERIFY(model.prependRecord(record(3, 30, u"ops-bob"_s, u"delete"_s), source));
        QCOMPARE(inserted.count(), 1);
        QCOMPARE(inserted.first().at(1).toInt(), 0);
        QCOMPARE(model.index(0, ActivityModel::ActorColumn).data().toString(),
                 u"ops-bob via console"_s);
        // Once only, and only a record.
        QVERIFY(!model.prependRecord(record(3, 30), source));
        QVERIFY(!model.prependRecord({{u"id"_s, u"x"_s}}, source));
        QCOMPARE(model.rowCount(), 3);

        // The query is the server's filter, and a live record's too; a new one empties the list.
        AuditQuery query;
        query.actor = u"ops-alice"_s;
        model.setQuery(query);
        QCOMPARE(model.rowCount(), 0);
        QVERIFY(!model.isLoaded(source));
        QVERIFY(!model.prependRecord(record(4, 40, u"ops-bob"_s), source));
        QVERIFY(model.prependRecord(record(5, 50, u"ops-alice"_s), source));
        QCOMPARE(model.rowCount(), 1);
    }

    void theFilterFindsTextAndResult_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<ActivityFilter::Result>("result");
        QTest::addColumn<QList<qint64>>("shown");
        QTest::addRow("all") << QString() << ActivityFilter::Result::Any << QList<qint64>{3, 2, 1};
        QTest::addRow("actor") << u"ops-bob"_s << ActivityFilter::Result::Any << QList<qint64>{2};
        QTest::addRow("reason, any case")
            << u"TICKET"_s << ActivityFilter::Result::Any << QList<qint64>{2};
        QTest::addRow("title") << u"deploy web"_s << ActivityFilter::Result::Any
                               << QList<qint64>{3, 2, 1};
        QTest::addRow("id") << u"3f2a9c1e-0000"_s << ActivityFilter::Result::Any
                            << QList<qint64>{3, 2, 1};
        QTest::addRow("words in any field")
            << u"alice archive"_s << ActivityFilter::Result::Any << QList<qint64>{3, 1};
        QTest::addRow("refused") << QString() << ActivityFilter::Result::Refused
                                 << QList<qint64>{1};
        QTest::addRow("done") << u"alice"_s << ActivityFilter::Result::Done << QList<qint64>{3};
        QTest::addRow("nothing") << u"nobody"_s << ActivityFilter::Result::Any << QList<qint64>{};
    }
    void theFilterFindsTextAndResult()
    {
        QFETCH(QString, text);
        QFETCH(ActivityFilter::Result, result);
        QFETCH(QList<qint64>, shown);
        ActivityModel model;
        const int source =
            model.addSource(u"alpha"_s, [](const QUuid &) { return u"deploy web"_s; });
        model.addPage(
            source,
            page({record(3, 30), record(2, 20, u"ops-bob"_s, u"delete"_s, 200, u"ticket 42"_s),
                  record(1, 10, u"ops-alice"_s, u"archive"_s, 409)}),
            true);
        ActivityFilter filter;
        QAbstractItemModelTester tester(&filter);
        filter.setSourceModel(&model);
        filter.setText(text);
        filter.setResult(result);
        QList<qint64> numbers;
        for (int row = 0; row < filter.rowCount(); ++row)
            numbers.append(model.entry(filter.mapToSource(filter.index(row, 0)).row()).number);
        QCOMPARE(numbers, shown);
    }

    // Two real servers read a page of two at a time: the list grows to every record of both,
    // newest first, each once, reading only the servers that hold it back.
    void theLoaderPagesThroughRealServers()
    {
        Testing::TestServer alpha, beta;
        QVERIFY2(alpha.start(), qPrintable(alpha.errorString()));
        QVERIFY2(beta.start(), qPrintable(beta.errorString()));
        for (int i = 0; i < 3; ++i) {
            QVERIFY(!alpha.create().isNull());
            QVERIFY(!beta.create().isNull());
        }
        ActivityModel model;
        QAbstractItemModelTester tester(&model);
        ActivityLoader loader(&model);
        ServerConnection toAlpha(alpha.url()), toBeta(beta.url());
        loader.setConnection(model.addSource(u"alpha"_s), &toAlpha);
        loader.setConnection(model.addSource(u"beta"_s), &toBeta);
        AuditQuery query;
        query.action = u"create"_s;
        query.limit = 2;
        loader.setQuery(query);
        QCoro::waitFor(loader.refresh());
        QVERIFY(model.hasMore());
        QVERIFY(model.rowCount() >= 2 && model.rowCount() <= 4);
        for (int reads = 0; model.hasMore() && reads < 6; ++reads)
            QCoro::waitFor(loader.readMore());
        QVERIFY(!model.hasMore());
        QCOMPARE(model.rowCount(), 6);
        QSet<std::pair<int, qint64>> seen;
        for (int row = 0; row < model.rowCount(); ++row) {
            seen.insert({model.sourceOf(row), model.entry(row).number});
            if (row > 0)
                QVERIFY(model.entry(row - 1).at >= model.entry(row).at);
        }
        QCOMPARE(seen.size(), 6);
        // A refresh finds nothing new; a new record joins at the top.
        QCoro::waitFor(loader.refresh());
        QCOMPARE(model.rowCount(), 6);
        const QUuid latest = beta.create();
        QCoro::waitFor(loader.refresh());
        QCOMPARE(model.rowCount(), 7);
        QCOMPARE(model.entry(0).conversationId, latest);
        QVERIFY(loader.problem(0).isEmpty() && loader.problem(1).isEmpty());
        // A server that stops answering says so, and its rows stay.
        alpha.stop();
        QCoro::waitFor(loader.refresh());
        QVERIFY(!loader.problem(0).isEmpty());
        QCOMPARE(model.rowCount(), 7);
    }
};

QTEST_GUILESS_MAIN(ActivityModelTest)

#include "tst_activitymodel.moc"
