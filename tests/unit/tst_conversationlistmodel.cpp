// The console's models: partitions and text filter through the shared predicate, fine-grained
// live updates, lifecycle normalization, and the cost of one update against a load.
#include "conversationlistmodel.h"
#include "eventlistmodel.h"
#include "lifecycle.h"

#include <QAbstractItemModelTester>
#include <QJsonArray>
#include <QSignalSpy>
#include <QTest>

using namespace Qt::StringLiterals;
using namespace AgentDeck;

namespace {
ConversationInfo conversation(const QString &title, ExecutionStatus status = ExecutionStatus::Idle,
                              bool archived = false)
{
    ConversationInfo info{QUuid::createUuid(), title};
    info.createdAt = info.updatedAt = QDateTime::fromMSecsSinceEpoch(1000, Qt::UTC);
    info.executionStatus = status;
    if (archived)
        info.archivedAt = QDateTime::fromMSecsSinceEpoch(2000, Qt::UTC);
    return info;
}

QList<ConversationInfo> many(int count)
{
    QList<ConversationInfo> items;
    items.reserve(count);
    for (int i = 0; i < count; ++i)
        items.append(conversation(u"conversation %1"_s.arg(i)));
    return items;
}

Event stateEvent(qint64 seq, const QString &status)
{
    Event event = Event::stateUpdate(u"execution_status"_s, status);
    event.seq = seq;
    event.timestamp = QDateTime::fromMSecsSinceEpoch(5000 + seq, Qt::UTC);
    return event;
}
} // namespace

class ConversationListModelTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void proxiesPartitionAndFilter()
    {
        ConversationListModel model;
        QAbstractItemModelTester tester(&model);
        ConversationFilterProxy active(ArchiveFilter::Active);
        ConversationFilterProxy archived(ArchiveFilter::Archived);
        active.setSourceModel(&model);
        archived.setSourceModel(&model);
        model.upsert({conversation(u"Deploy web"_s), conversation(u"deploy db"_s),
                      conversation(u"old deploy"_s, ExecutionStatus::Finished, true)});
        QCOMPARE(active.rowCount(), 2);
        QCOMPARE(archived.rowCount(), 1);
        active.setText(u"WEB"_s);
        QCOMPARE(active.rowCount(), 1);
        QCOMPARE(active.index(0, 0).data().toString(), u"Deploy web"_s);
        // Archiving moves a row between partitions through a plain update.
        ConversationInfo moved = *model.conversation(model.at(1).id);
        moved.archivedAt = QDateTime::currentDateTimeUtc();
        active.setText({});
        model.upsert({moved});
        QCOMPARE(active.rowCount(), 1);
        QCOMPARE(archived.rowCount(), 2);
    }

    // The update time is shown in UTC with its zone, as ctl prints it, whatever the local zone:
    // it was local time without one.
    void theUpdateTimeSaysItsZone()
    {
        ConversationListModel model;
        ConversationInfo info = conversation(u"zoned"_s);
        info.updatedAt = QDateTime::fromString(u"2026-12-03T07:18:32Z"_s, Qt::ISODate);
        model.upsert({info});
        const QByteArray zone = qgetenv("TZ");
        qputenv("TZ", "Pacific/Auckland");
        const QString shown =
            model.index(0, ConversationListModel::UpdatedColumn).data().toString();
        zone.isNull() ? qunsetenv("TZ") : qputenv("TZ", zone);
        QCOMPARE(shown, u"2026-12-03 07:18:32 UTC"_s);
    }

    // Rows that leave together go in one removal per run of adjacent rows, and every row left
    // is found by its id.
    void manyRowsLeaveInRuns()
    {
        ConversationListModel model;
        QAbstractItemModelTester tester(&model);
        const QList<ConversationInfo> rows = many(6);
        model.upsert(rows);
        QSignalSpy removals(&model, &QAbstractItemModel::rowsRemoved);
        model.remove(QSet<QUuid>{rows[0].id, rows[1].id, rows[3].id, rows[5].id, QUuid()});
        QCOMPARE(removals.size(), 3);
        QCOMPARE(model.rowCount(), 2);
        for (const ConversationInfo &info : rows) {
            const int row = model.rowOf(info.id);
            QCOMPARE(row >= 0, info.id == rows[2].id || info.id == rows[4].id);
            if (row >= 0)
                QCOMPARE(model.at(row).id, info.id);
        }
    }

    // The list refreshes every 3 s, and rows sorted by their update time moved under the
    // pointer: a click meant for one conversation selected another. While the order is held,
    // rows stay where they are, new ones go last, and filtering stays live.
    void aHeldOrderKeepsRowsWhereTheyAre_data()
    {
        QTest::addColumn<Qt::SortOrder>("order");
        QTest::addRow("newest first") << Qt::DescendingOrder;
        QTest::addRow("oldest first") << Qt::AscendingOrder;
    }
    void aHeldOrderKeepsRowsWhereTheyAre()
    {
        QFETCH(Qt::SortOrder, order);
        ConversationListModel model;
        ConversationFilterProxy proxy(ArchiveFilter::Active);
        proxy.setSourceModel(&model);
        proxy.sort(ConversationListModel::UpdatedColumn, order);
        const auto at = [](ConversationInfo info, qint64 ms) {
            info.updatedAt = QDateTime::fromMSecsSinceEpoch(ms, Qt::UTC);
            return info;
        };
        const auto titles = [&] {
            QStringList shown;
            for (int row = 0; row < proxy.rowCount(); ++row)
                shown.append(
                    proxy.index(row, ConversationListModel::TitleColumn).data().toString());
            return order == Qt::DescendingOrder ? shown
                                                : QStringList(shown.crbegin(), shown.crend());
        };
        ConversationInfo a = at(conversation(u"a"_s), 1000);
        ConversationInfo b = at(conversation(u"b"_s), 2000);
        ConversationInfo c = at(conversation(u"c"_s), 3000);
        model.upsert({a, b, c});
        QCOMPARE(titles(), (QStringList{u"c"_s, u"b"_s, u"a"_s}));

        proxy.holdOrder(true);
        model.upsert({at(a, 10'000)});
        QCOMPARE(titles(), (QStringList{u"c"_s, u"b"_s, u"a"_s}));
        c.archivedAt = QDateTime::fromMSecsSinceEpoch(4000, Qt::UTC);
        model.upsert({c, at(conversation(u"new"_s), 20'000)});
        const QStringList held = order == Qt::DescendingOrder
                                     ? QStringList{u"b"_s, u"a"_s, u"new"_s}
                                     : QStringList{u"new"_s, u"b"_s, u"a"_s};
        QCOMPARE(titles(), held);

        proxy.holdOrder(false);
        QCOMPARE(titles(), (QStringList{u"new"_s, u"a"_s, u"b"_s}));
    }

    void liveEventsChangeOneRowAndNeverReset()
    {
        ConversationListModel model;
        QAbstractItemModelTester tester(&model);
        model.upsert(many(50));
        const QUuid id = model.at(17).id;
        QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
        QSignalSpy reset(&model, &QAbstractItemModel::modelReset);
        QSignalSpy inserted(&model, &QAbstractItemModel::rowsInserted);
        QVERIFY(model.applyEvent(id, stateEvent(1, u"running"_s)));
        QCOMPARE(changed.count(), 1);
        QCOMPARE(changed.first().at(0).toModelIndex().row(), 17);
        QCOMPARE(changed.first().at(1).toModelIndex().row(), 17);
        QCOMPARE(reset.count(), 0);
        QCOMPARE(inserted.count(), 0);
        QCOMPARE(model.index(17, 0).data(ConversationListModel::ExecutionStatusRole).toString(),
                 u"running"_s);
        QCOMPARE(model.index(17, 0).data(ConversationListModel::EventCountRole).toLongLong(), 1);
        // A replayed event changes nothing.
        QVERIFY(model.applyEvent(id, stateEvent(1, u"running"_s)));
        QCOMPARE(changed.count(), 1);
        // An unchanged upsert changes nothing either.
        model.upsert({*model.conversation(id)});
        QCOMPARE(changed.count(), 1);
        QVERIFY(!model.applyEvent(QUuid::createUuid(), stateEvent(1, u"running"_s)));
    }

    // A copy read before the events the row has counted is older than the row: a refresh that
    // read a run as `running` showed it so again after its end had come through the stream.
    void anOlderCopyDoesNotReplaceTheRow()
    {
        ConversationListModel model;
        const ConversationInfo read = conversation(u"busy"_s, ExecutionStatus::Running);
        model.upsert({read});
        QVERIFY(model.applyEvent(read.id, stateEvent(1, u"running"_s)));
        QVERIFY(model.applyEvent(read.id, stateEvent(2, u"finished"_s)));
        model.upsert({read});
        QVERIFY(model.conversation(read.id)->executionStatus == ExecutionStatus::Finished);
        // As new as the row, it is taken (the runtime, the title may have changed).
        ConversationInfo current = read;
        current.eventCount = 2;
        current.title = u"renamed"_s;
        model.upsert({current});
        QCOMPARE(model.conversation(read.id)->title, u"renamed"_s);
        // Created again with the same id, it starts over from no events.
        ConversationInfo again = conversation(u"again"_s);
        again.id = read.id;
        again.createdAt = read.createdAt.addSecs(60);
        model.upsert({again});
        QCOMPARE(model.conversation(read.id)->title, u"again"_s);
    }

    // A title or a tag is one line, shown as written: a line break took two lines of a row,
    // and an override in a tag read "env=PROD" for "env=<RLO>DORP<PDF>".
    void titlesAndTagsShowTheirControls()
    {
        ConversationListModel model;
        ConversationInfo info = conversation(u"nightly cleanup\nPROD DATABASE DROP\u0007"_s);
        info.tags.insert(u"env"_s, u"\u202eDORP\u202c"_s);
        model.upsert({info});
        QCOMPARE(model.index(0, ConversationListModel::TitleColumn).data().toString(),
                 u"nightly cleanup\\u000aPROD DATABASE DROP\\u0007"_s);
        QCOMPARE(model.index(0, ConversationListModel::TagsColumn).data().toString(),
                 u"env=\\u202eDORP\\u202c"_s);
        // Whole in their tooltips, where the columns cut them.
        for (const int column :
             {int(ConversationListModel::TitleColumn), int(ConversationListModel::TagsColumn)})
            QCOMPARE(model.index(0, column).data(Qt::ToolTipRole),
                     model.index(0, column).data(Qt::DisplayRole));
    }

    // The filter box's words, as the proxies read them (the server is asked the same
    // alternatives): a title's words, a tag with its value, a tag's name, an id's start.
    // The status filter's "Needs attention" and "Failed": a failed run is failed until it runs
    // again, acknowledged or not; it needs attention until it is acknowledged. An interrupted
    // one needs attention without having failed; a run going on shows no outcome.
    void theStatusFilterFindsWhatNeedsAttentionAndWhatFailed()
    {
        const auto withOutcome = [](const QString &title, ExecutionStatus status,
                                    RunOutcome::Kind kind, bool dismissed) {
            ConversationInfo info = conversation(title, status);
            info.outcome = RunOutcome{};
            info.outcome->kind = kind;
            info.outcome->dismissed = dismissed;
            return info;
        };
        const QList<ConversationInfo> rows{
            withOutcome(u"exit 2"_s, ExecutionStatus::Finished, RunOutcome::Kind::Failed, false),
            withOutcome(u"exit 2, seen"_s, ExecutionStatus::Finished, RunOutcome::Kind::Failed,
                        true),
            withOutcome(u"exit 0"_s, ExecutionStatus::Finished, RunOutcome::Kind::Succeeded, false),
            withOutcome(u"timed out"_s, ExecutionStatus::Finished, RunOutcome::Kind::TimedOut,
                        false),
            withOutcome(u"interrupted"_s, ExecutionStatus::Paused, RunOutcome::Kind::Interrupted,
                        false),
            withOutcome(u"running again"_s, ExecutionStatus::Running, RunOutcome::Kind::Failed,
                        false),
            conversation(u"in error"_s, ExecutionStatus::Error),
        };
        const auto found = [&rows](ConversationSearch::Concern concern) {
            ConversationSearch search;
            search.concern = concern;
            QStringList titles;
            for (const ConversationInfo &info : rows) {
                if (search.matches(info, ArchiveFilter::Active))
                    titles.append(info.title);
            }
            return titles;
        };
        QCOMPARE(found(ConversationSearch::Concern::Failed),
                 (QStringList{u"exit 2"_s, u"exit 2, seen"_s, u"timed out"_s, u"in error"_s}));
        QCOMPARE(found(ConversationSearch::Concern::NeedsAttention),
                 (QStringList{u"exit 2"_s, u"timed out"_s, u"interrupted"_s, u"in error"_s}));
        QCOMPARE(found(ConversationSearch::Concern::Any).size(), rows.size());
    }

    // The Duration column: how long a run has been going, counting up; how long the last
    // command ran; nothing before either; standing still while the server does not answer.
    void theDurationColumnSaysHowLong()
    {
        QCOMPARE(ConversationListModel::durationText(12'400), u"12 s"_s);
        QCOMPARE(ConversationListModel::durationText(125'000), u"2 min 5 s"_s);
        QCOMPARE(ConversationListModel::durationText(3'780'000), u"1 h 3 min"_s);
        QCOMPARE(ConversationListModel::durationText(187'200'000), u"2 d 4 h"_s);

        const QDateTime now = QDateTime::currentDateTimeUtc();
        ConversationInfo running = conversation(u"running"_s, ExecutionStatus::Running);
        running.runningSince = now.addSecs(-65);
        ConversationInfo ran = conversation(u"ran"_s, ExecutionStatus::Finished);
        ran.outcome = RunOutcome{};
        ran.outcome->startedAt = now.addSecs(-100);
        ran.outcome->at = now.addSecs(-97);
        ConversationListModel model;
        model.upsert({running, ran, conversation(u"new"_s)});
        const auto duration = [&model](const QString &title) {
            for (int row = 0; row < model.rowCount(); ++row) {
                if (model.at(row).title == title)
                    return model.index(row, ConversationListModel::DurationColumn)
                        .data()
                        .toString();
            }
            return QString();
        };
        QCOMPARE(duration(u"running"_s), u"running for 1 min 5 s"_s);
        QCOMPARE(duration(u"ran"_s), u"ran for 3 s"_s);
        QCOMPARE(duration(u"new"_s), QString());
        // Counting up: the running row changes once a second, the others do not.
        QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
        QTRY_VERIFY(!changed.isEmpty());
        QTRY_COMPARE(duration(u"running"_s), u"running for 1 min 6 s"_s);
        for (const QList<QVariant> &change : std::as_const(changed))
            QCOMPARE(change.at(0).toModelIndex().row(), model.rowOf(running.id));
        // Out of reach: as the server last said, however long one waits.
        model.setStale(true, now);
        QCOMPARE(duration(u"running"_s), u"running for 1 min 5 s"_s);
    }

    void theFilterBoxFindsEachKind_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<QStringList>("found"); // titles, in the rows' order
        QTest::addRow("nothing") << u""_s
                                 << QStringList{u"deploy web"_s, u"fix: login"_s, u"ops notes"_s};
        QTest::addRow("title words") << u"DEPLOY web"_s << QStringList{u"deploy web"_s};
        QTest::addRow("tag=value") << u"team=ops"_s << QStringList{u"deploy web"_s};
        QTest::addRow("tag:value") << u"team:ops"_s << QStringList{u"deploy web"_s};
        QTest::addRow("another value") << u"team=data"_s << QStringList{};
        // A bare word is a tag's name, not its value: "ops" is team=ops's value.
        QTest::addRow("a title word, not a tag's value") << u"ops"_s << QStringList{u"ops notes"_s};
        QTest::addRow("a tag's name or a title word") << u"team"_s << QStringList{u"deploy web"_s};
        QTest::addRow("a tag's name alone") << u"urgent"_s << QStringList{u"fix: login"_s};
        QTest::addRow("a tag and a word") << u"team=ops web"_s << QStringList{u"deploy web"_s};
        QTest::addRow("a tag and a word of another") << u"team=ops login"_s << QStringList{};
        QTest::addRow("a colon in a title") << u"fix: login"_s << QStringList{u"fix: login"_s};
        QTest::addRow("the start of an id") << u"ID"_s << QStringList{u"ops notes"_s};
        QTest::addRow("too short for an id") << u"IDSHORT"_s << QStringList{};
    }
    void theFilterBoxFindsEachKind()
    {
        QFETCH(QString, text);
        QFETCH(QStringList, found);
        ConversationListModel model;
        ConversationInfo web = conversation(u"deploy web"_s);
        web.tags = {{u"team"_s, u"ops"_s}};
        ConversationInfo login = conversation(u"fix: login"_s);
        login.tags = {{u"urgent"_s, QString()}};
        ConversationInfo notes = conversation(u"ops notes"_s);
        notes.id = QUuid(u"{abcdef12-0000-4000-8000-000000000001}"_s);
        model.upsert({web, login, notes});
        ConversationFilterProxy proxy(ArchiveFilter::Active);
        proxy.setSourceModel(&model);
        proxy.sort(ConversationListModel::TitleColumn);
        const QString typed = text == u"ID"_s        ? u"ABCDEF1"_s
                              : text == u"IDSHORT"_s ? u"abc"_s
                                                     : text;
        proxy.setText(typed);
        QStringList shown;
        for (int row = 0; row < proxy.rowCount(); ++row)
            shown.append(proxy.index(row, ConversationListModel::TitleColumn).data().toString());
        QCOMPARE(shown, found);
        // A status holds for every kind.
        proxy.setSearch(ConversationSearch::parse(typed, ExecutionStatus::Finished));
        QCOMPARE(proxy.rowCount(), 0);
    }

    // Titles sort as people read them: numbers by their value (build-2 before build-10), case
    // aside; one order for a server's window and All servers (conversationSortKeyLess).
    void titlesSortNaturally()
    {
        ConversationListModel model;
        QList<ConversationInfo> rows;
        for (const QString &title :
             {u"build-10"_s, u"build-2"_s, u"Build-1"_s, u"alpha"_s, u"build-2a"_s})
            rows.append(conversation(title));
        model.upsert(rows);
        ConversationFilterProxy proxy(ArchiveFilter::Active);
        proxy.setSourceModel(&model);
        proxy.sort(ConversationListModel::TitleColumn);
        QStringList shown;
        for (int row = 0; row < proxy.rowCount(); ++row)
            shown.append(proxy.index(row, ConversationListModel::TitleColumn).data().toString());
        QCOMPARE(shown, (QStringList{u"alpha"_s, u"Build-1"_s, u"build-2"_s, u"build-2a"_s,
                                     u"build-10"_s}));
    }

    // Words said in a conversation are in its events, which a row does not hold: a row shows
    // for them once the server found it there, and only in its partition, with the status and
    // tags typed. Two letters are not looked for in events.
    void whatTheServerFoundInEventsIsShown()
    {
        ConversationListModel model;
        ConversationInfo login = conversation(u"fix: login"_s);
        login.tags = {{u"urgent"_s, QString()}};
        const ConversationInfo notes = conversation(u"ops notes"_s);
        model.upsert({login, notes});
        ConversationFilterProxy proxy(ArchiveFilter::Active);
        proxy.setSourceModel(&model);
        ConversationSearch search = ConversationSearch::parse(u"segfault"_s);
        QVERIFY(std::any_of(
            search.alternatives.cbegin(), search.alternatives.cend(),
            [](const ConversationFilter &filter) { return filter.bodyContains == u"segfault"_s; }));
        proxy.setSearch(search);
        QCOMPARE(proxy.rowCount(), 0);
        search.foundInEvents = {login.id};
        proxy.setSearch(search);
        QCOMPARE(proxy.rowCount(), 1);
        QCOMPARE(proxy.index(0, ConversationListModel::TitleColumn).data().toString(),
                 u"fix: login"_s);
        ConversationFilterProxy archived(ArchiveFilter::Archived);
        archived.setSourceModel(&model);
        archived.setSearch(search);
        QCOMPARE(archived.rowCount(), 0);
        // The tag typed with the words holds too.
        ConversationSearch tagged = ConversationSearch::parse(u"segfault ops=1"_s);
        tagged.foundInEvents = {login.id};
        proxy.setSearch(tagged);
        QCOMPARE(proxy.rowCount(), 0);
        const ConversationSearch short_ = ConversationSearch::parse(u"ab"_s);
        QVERIFY(std::none_of(
            short_.alternatives.cbegin(), short_.alternatives.cend(),
            [](const ConversationFilter &filter) { return !filter.bodyContains.isEmpty(); }));
    }

    // What the Tags column's editor takes: "name=value" and bare names, with commas between.
    void tagsAreReadAsTheColumnWritesThem_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<QVariantMap>("tags"); // empty with `error`
        QTest::addColumn<QString>("error");
        QTest::addRow("none") << u""_s << QVariantMap{} << QString();
        QTest::addRow("pairs and a bare name")
            << u"team=ops, urgent,env = prod"_s
            << QVariantMap{{u"team"_s, u"ops"_s}, {u"urgent"_s, u""_s}, {u"env"_s, u"prod"_s}}
            << QString();
        QTest::addRow("an = in the value")
            << u"query=a=b"_s << QVariantMap{{u"query"_s, u"a=b"_s}} << QString();
        QTest::addRow("empty items")
            << u" , team=ops,, "_s << QVariantMap{{u"team"_s, u"ops"_s}} << QString();
        QTest::addRow("no name") << u"=ops"_s << QVariantMap{} << u"needs a name"_s;
        QTest::addRow("a name twice")
            << u"team=ops, team=dev"_s << QVariantMap{} << u"given twice"_s;
    }
    void tagsAreReadAsTheColumnWritesThem()
    {
        QFETCH(QString, text);
        QFETCH(QVariantMap, tags);
        QFETCH(QString, error);
        QString problem;
        const auto read = ConversationListModel::tagsFromText(text, &problem);
        if (!error.isEmpty()) {
            QVERIFY(!read);
            QVERIFY2(problem.contains(error), qPrintable(problem));
            return;
        }
        QVERIFY2(read, qPrintable(problem));
        QMap<QString, QString> expected;
        for (auto it = tags.cbegin(); it != tags.cend(); ++it)
            expected.insert(it.key(), it.value().toString());
        QCOMPARE(*read, expected);
        // Written back, they read the same.
        QCOMPARE(
            ConversationListModel::tagsFromText(ConversationListModel::tagsText(*read), &problem),
            read);
    }

    // An edit is asked of the server, not made in the row: the row follows the answer.
    void anEditAsksAndLeavesTheRowAsItIs()
    {
        ConversationListModel model;
        ConversationInfo info = conversation(u"before"_s);
        info.tags.insert(u"team"_s, u"ops"_s);
        model.upsert({info});
        QSignalSpy edited(&model, &ConversationListModel::labelsEdited);
        const QModelIndex title = model.index(0, ConversationListModel::TitleColumn);
        QVERIFY(model.flags(title) & Qt::ItemIsEditable);
        QVERIFY(!(model.flags(model.index(0, ConversationListModel::ExecutionColumn)) &
                  Qt::ItemIsEditable));
        QVERIFY(!model.setData(title, u"after"_s, Qt::EditRole));
        QCOMPARE(edited.size(), 1);
        const auto labels = edited.first().at(1).value<ConversationLabels>();
        QCOMPARE(labels.title, std::optional<QString>(u"after"_s));
        QVERIFY(!labels.tags);
        QCOMPARE(title.data().toString(), u"before"_s);
        // Unchanged, nothing is asked.
        QVERIFY(!model.setData(model.index(0, ConversationListModel::TagsColumn), u"team=ops"_s,
                               Qt::EditRole));
        QCOMPARE(edited.size(), 1);
    }

    // An echo run brings no sandbox up: its row said "available" while followed, "missing"
    // after the next refresh.
    void anEchoRunLeavesItsRuntimeAsItWas()
    {
        ConversationListModel model;
        ConversationInfo echo = conversation(u"echo"_s);
        echo.agentKind = u"echo"_s;
        echo.runtime.status = RuntimeStatus::Missing;
        ConversationInfo shell = conversation(u"shell"_s);
        shell.agentKind = u"shell"_s;
        shell.runtime.status = RuntimeStatus::Missing;
        model.upsert({echo, shell});
        QVERIFY(model.applyEvent(echo.id, stateEvent(1, u"running"_s)));
        QVERIFY(model.applyEvent(shell.id, stateEvent(1, u"running"_s)));
        QCOMPARE(toString(model.conversation(echo.id)->runtime.status), u"missing"_s);
        QCOMPARE(toString(model.conversation(shell.id)->runtime.status), u"available"_s);
    }

    void attentionIsAnnouncedOnTheTransition()
    {
        ConversationListModel model;
        const ConversationInfo info = conversation(u"c"_s, ExecutionStatus::Running);
        model.upsert({info});
        QSignalSpy attention(&model, &ConversationListModel::attentionNeeded);
        model.applyEvent(info.id, stateEvent(1, u"waiting_for_confirmation"_s));
        QCOMPARE(attention.count(), 1);
        model.applyEvent(info.id, stateEvent(2, u"error"_s));
        QCOMPARE(attention.count(), 1); // still needing attention: no second announcement
        // One first seen needing it is announced, but not those of the first load: opening
        // the console gave one notification per row.
        model.upsert({conversation(u"failed elsewhere"_s, ExecutionStatus::Error)});
        QCOMPARE(attention.count(), 2);
        ConversationListModel opened;
        QSignalSpy atOpening(&opened, &ConversationListModel::attentionNeeded);
        opened.upsert({conversation(u"a"_s, ExecutionStatus::Error),
                       conversation(u"b"_s, ExecutionStatus::WaitingForConfirmation)});
        QCOMPARE(atOpening.count(), 0);
    }

    // A failed run needs attention; the next run's start acknowledges it, live, so that its
    // end does not ask again (the tray said so) before the refresh brings its own outcome.
    void aRunsOutcomeNeedsAttentionUntilTheNextRun()
    {
        ConversationListModel model;
        ConversationInfo info = conversation(u"c"_s, ExecutionStatus::Finished);
        RunOutcome failed;
        failed.kind = RunOutcome::Kind::Failed;
        failed.exitCode = 2;
        info.outcome = failed;
        model.upsert({info});
        const QModelIndex cell = model.index(0, ConversationListModel::ExecutionColumn);
        QCOMPARE(cell.data().toString(), u"finished · exit 2"_s);
        QCOMPARE(cell.data(ConversationListModel::OutcomeKindRole).toString(), u"failed"_s);
        QVERIFY(cell.data(ConversationListModel::NeedsAttentionRole).toBool());
        QSignalSpy attention(&model, &ConversationListModel::attentionNeeded);
        model.applyEvent(info.id, stateEvent(1, u"running"_s));
        QCOMPARE(model.index(0, ConversationListModel::ExecutionColumn).data().toString(),
                 u"running"_s);
        model.applyEvent(info.id, stateEvent(2, u"finished"_s));
        QVERIFY(!model.index(0, 0).data(ConversationListModel::NeedsAttentionRole).toBool());
        QCOMPARE(attention.count(), 0);
    }

    void rolesAreNamedForQml()
    {
        ConversationListModel model;
        const auto names = model.roleNames();
        for (const QByteArray &name :
             {"conversationId"_ba, "executionStatus"_ba, "runtimeStatus"_ba, "archived"_ba,
              "stale"_ba, "needsAttention"_ba})
            QVERIFY2(names.values().contains(name), name.constData());
        EventListModel events;
        QVERIFY(events.roleNames().values().contains("kind"_ba));
    }

    // The command running now shows what it printed so far under it, until its output is
    // stored; a stop of the run (a wait for confirmation) ends "running" too.
    void theRunningCommandShowsItsLiveOutput()
    {
        EventListModel events;
        qint64 seq = 0;
        const auto add = [&](Event event) {
            event.seq = ++seq;
            events.append(event);
            return event;
        };
        const auto role = [&](int row, int role) { return events.index(row).data(role); };
        const Event action = add(Event::action(u"bash"_s, u"make"_s));
        QVERIFY(role(0, EventListModel::RunningRole).toBool());
        QSignalSpy changed(&events, &QAbstractItemModel::dataChanged);
        events.addLiveOutput(action.id, u"cc a.c\n"_s);
        events.addLiveOutput(action.id, u"cc b.c\n"_s);
        events.addLiveOutput(QUuid::createUuid(), u"not this one\n"_s);
        QCOMPARE(changed.size(), 2);
        QCOMPARE(role(0, EventListModel::LiveOutputRole).toString(), u"cc a.c\ncc b.c\n"_s);
        add(Event::observation(action, u"cc a.c\ncc b.c\n"_s, 2, false));
        QVERIFY(!role(0, EventListModel::RunningRole).toBool());
        QCOMPARE(role(0, EventListModel::LiveOutputRole).toString(), QString());

        const Event waiting = add(Event::action(u"bash"_s, u"rm -rf build"_s));
        QVERIFY(role(2, EventListModel::RunningRole).toBool());
        add(Event::stateUpdate(u"execution_status"_s, u"waiting_for_confirmation"_s));
        QVERIFY(!role(2, EventListModel::RunningRole).toBool());
        events.addLiveOutput(waiting.id, u"late\n"_s);
        QCOMPARE(role(2, EventListModel::LiveOutputRole).toString(), QString());
        QVERIFY(events.roleNames().values().contains("liveOutput"_ba));
    }

    void lifecycleNormalization_data()
    {
        QTest::addColumn<QString>("status");
        QTest::addColumn<QString>("runtime");
        QTest::addColumn<bool>("archived");
        QTest::addColumn<bool>("stale");
        QTest::addColumn<bool>("attention");
        QTest::addColumn<bool>("recover");
        QTest::addColumn<QString>("agent");
        QTest::addRow("running, available")
            << u"running"_s << u"available"_s << false << false << false << false << u"shell"_s;
        QTest::addRow("running, missing")
            << u"running"_s << u"missing"_s << false << true << true << true << u"shell"_s;
        QTest::addRow("paused (interrupted)")
            << u"paused"_s << u"missing"_s << false << false << false << true << u"shell"_s;
        QTest::addRow("idle, missing")
            << u"idle"_s << u"missing"_s << false << false << false << true << u"shell"_s;
        QTest::addRow("finished, available")
            << u"finished"_s << u"available"_s << false << false << false << false << u"shell"_s;
        QTest::addRow("error") << u"error"_s << u"available"_s << false << false << true << true
                               << u"shell"_s;
        QTest::addRow("waiting") << u"waiting_for_confirmation"_s << u"available"_s << false
                                 << false << true << false << u"shell"_s;
        QTest::addRow("archived paused")
            << u"paused"_s << u"missing"_s << true << false << false << false << u"shell"_s;
        // The echo agent runs no commands and has no sandbox: running without one is its way.
        QTest::addRow("echo running, missing")
            << u"running"_s << u"missing"_s << false << false << false << false << u"echo"_s;
        QTest::addRow("stuck") << u"stuck"_s << u"available"_s << false << true << true << true
                               << u"shell"_s;
    }
    void lifecycleNormalization()
    {
        QFETCH(QString, status);
        QFETCH(QString, runtime);
        QFETCH(bool, archived);
        QFETCH(bool, stale);
        QFETCH(bool, attention);
        QFETCH(bool, recover);
        QFETCH(QString, agent);
        QJsonObject json = conversation(u"c"_s).toJson();
        json.insert(u"agent"_s, QJsonObject{{u"kind"_s, agent}});
        json.insert(u"execution_status"_s, status);
        json.insert(u"runtime_info"_s, QJsonObject{{u"runtime_status"_s, runtime},
                                                   {u"can_resume"_s, true},
                                                   {u"runtime_error"_s, QJsonValue::Null}});
        if (archived)
            json.insert(u"archived_at"_s, u"2026-01-01T00:00:00.000Z"_s);
        const auto info = ConversationInfo::fromJson(json);
        QVERIFY(info);
        QCOMPARE(Lifecycle::isStale(*info), stale);
        QCOMPARE(Lifecycle::needsAttention(*info), attention);
        QCOMPARE(Lifecycle::canRecover(*info).enabled, recover);
        QCOMPARE(Lifecycle::canRecover(*info).reason.isEmpty(), recover);
        QCOMPARE(Lifecycle::canUnarchive(*info).enabled, archived);
    }

    // Recover is offered exactly when the server would do something (Lifecycle::recoveryPlan,
    // which the server decides with too): an interrupted command offered again with its sandbox
    // up has nothing to recover, and Run again is what there is to do.
    void recoverIsOfferedWhenThereIsSomethingToRecover_data()
    {
        QTest::addColumn<QString>("agent");
        QTest::addColumn<ExecutionStatus>("status");
        QTest::addColumn<RuntimeStatus>("runtime");
        QTest::addColumn<QString>("offered"); // "", "yes" or "dismissed"
        QTest::addColumn<QString>("plan");    // the steps: stale, runtime, run
        QTest::addRow("command offered, sandbox up")
            << u"shell"_s << ExecutionStatus::Paused << RuntimeStatus::Available << u"yes"_s
            << QString();
        QTest::addRow("command offered, no sandbox")
            << u"shell"_s << ExecutionStatus::Paused << RuntimeStatus::Missing << u"yes"_s
            << u"runtime"_s;
        QTest::addRow("command offered, dismissed")
            << u"shell"_s << ExecutionStatus::Paused << RuntimeStatus::Available << u"dismissed"_s
            << u"run"_s;
        QTest::addRow("paused, no sandbox")
            << u"shell"_s << ExecutionStatus::Paused << RuntimeStatus::Missing << QString()
            << u"runtime run"_s;
        QTest::addRow("error, command offered")
            << u"shell"_s << ExecutionStatus::Error << RuntimeStatus::Available << u"yes"_s
            << QString();
        QTest::addRow("failed start") << u"shell"_s << ExecutionStatus::Finished
                                      << RuntimeStatus::Error << QString() << u"runtime"_s;
        QTest::addRow("finished, no sandbox")
            << u"shell"_s << ExecutionStatus::Finished << RuntimeStatus::Missing << QString()
            << u"runtime"_s;
        QTest::addRow("finished, sandbox up") << u"shell"_s << ExecutionStatus::Finished
                                              << RuntimeStatus::Available << QString() << QString();
        QTest::addRow("waiting, no sandbox")
            << u"shell"_s << ExecutionStatus::WaitingForConfirmation << RuntimeStatus::Missing
            << QString() << u"runtime"_s;
        QTest::addRow("stale") << u"shell"_s << ExecutionStatus::Running << RuntimeStatus::Missing
                               << QString() << u"stale runtime"_s;
        QTest::addRow("running here") << u"shell"_s << ExecutionStatus::Running
                                      << RuntimeStatus::Available << QString() << QString();
        QTest::addRow("sandbox starting") << u"shell"_s << ExecutionStatus::Idle
                                          << RuntimeStatus::Starting << QString() << QString();
        // The echo agent has no sandbox to start.
        QTest::addRow("echo paused") << u"echo"_s << ExecutionStatus::Paused
                                     << RuntimeStatus::Missing << QString() << u"run"_s;
        QTest::addRow("echo finished") << u"echo"_s << ExecutionStatus::Finished
                                       << RuntimeStatus::Missing << QString() << QString();
    }
    void recoverIsOfferedWhenThereIsSomethingToRecover()
    {
        QFETCH(QString, agent);
        QFETCH(ExecutionStatus, status);
        QFETCH(RuntimeStatus, runtime);
        QFETCH(QString, offered);
        QFETCH(QString, plan);
        ConversationInfo info = conversation(u"c"_s, status);
        info.agentKind = agent;
        info.runtime.status = runtime;
        if (runtime == RuntimeStatus::Error)
            info.runtime.error = RuntimeError{u"provision_failed"_s, u"no"_s};
        if (!offered.isEmpty()) {
            RunOutcome outcome;
            outcome.kind = RunOutcome::Kind::Interrupted;
            outcome.interruptedBy = InterruptCause::Restart;
            outcome.retryCommand = u"make"_s;
            outcome.dismissed = offered == u"dismissed"_s;
            info.outcome = outcome;
        }
        const Lifecycle::RecoveryPlan steps = Lifecycle::recoveryPlan(info);
        QStringList planned;
        if (steps.resolveStaleRun)
            planned.append(u"stale"_s);
        if (steps.startRuntime)
            planned.append(u"runtime"_s);
        if (steps.continueRun)
            planned.append(u"run"_s);
        QCOMPARE(planned.join(u' '), plan);
        const Lifecycle::Availability recover = Lifecycle::canRecover(info);
        QCOMPARE(recover.enabled, !plan.isEmpty());
        if (!recover.enabled)
            QVERIFY2(recover.reason.startsWith(u"Nothing to recover"_s),
                     qPrintable(recover.reason));
        // What there is to do instead is named.
        if (!recover.enabled && offered == u"yes"_s)
            QVERIFY2(recover.reason.contains(u"Run again"_s), qPrintable(recover.reason));
    }

    void recoveryIsSaidInWords()
    {
        QCOMPARE(Lifecycle::recoveryText({}), QString());
        QCOMPARE(
            Lifecycle::recoveryText({RecoveryAction::ResolvedStaleRun,
                                     RecoveryAction::StartedRuntime, RecoveryAction::ContinuedRun}),
            u"resolved the run left running, started the runtime, continued the run"_s);
        // A newer server's action, as it says it.
        QCOMPARE(Lifecycle::recoveryText({u"adopted_runtime"_s}), u"adopted runtime"_s);
        QVERIFY(recoveryActionsOf(QJsonObject{{u"actions"_s, QJsonArray{u"continued_run"_s}}}) ==
                QStringList{u"continued_run"_s});
        QVERIFY(recoveryActionsOf(QJsonObject{{u"actions"_s, QJsonArray{}}}) == QStringList{});
        // A server that does not say is not one that did nothing.
        QVERIFY(!recoveryActionsOf(QJsonObject{{u"id"_s, u"x"_s}}));
    }

    void expiredRuntimesCannotBeRecovered()
    {
        ConversationInfo info = conversation(u"c"_s, ExecutionStatus::Paused);
        info.runtime = {RuntimeStatus::Missing, false,
                        RuntimeError{u"runtime_expired"_s, u"gone"_s}};
        QVERIFY(Lifecycle::isExpired(info));
        QVERIFY(!Lifecycle::canRecover(info).enabled);
        QVERIFY(!Lifecycle::canRun(info).enabled);
        // The server answers a message with 410; the console's box was left open for it.
        QVERIFY(!Lifecycle::canSendMessage(info).enabled);
        QVERIFY(Lifecycle::canSendMessage(info).reason.contains(u"expired"_s));
        QCOMPARE(Lifecycle::runtimeLabel(info), u"expired"_s);
    }

    // The timeline shows a command as it ran and another tool by name and target.
    void actionsReadAsWhatTheyDo()
    {
        QCOMPARE(EventListModel::textOf(Event::action(u"bash"_s, u"ls -l"_s)), u"ls -l"_s);
        QCOMPARE(EventListModel::textOf(Event::toolCall(
                     u"write_file"_s, u"call_1"_s,
                     QJsonObject{{u"path"_s, u"fib.py"_s}, {u"content"_s, u"print(1)"_s}})),
                 u"write_file fib.py"_s);
        QCOMPARE(EventListModel::textOf(Event::toolCall(u"finish"_s, u"call_2"_s,
                                                        QJsonObject{{u"message"_s, u"done"_s}})),
                 u"finish: done"_s);
    }

    // A state event reads as what changed, who changed it and why; one that names nobody as
    // what changed.
    void stateEventsNameTheirActorAndReason_data()
    {
        QTest::addColumn<QString>("key");
        QTest::addColumn<QString>("value");
        QTest::addColumn<QJsonObject>("cause");
        QTest::addColumn<QString>("text");
        const QJsonObject alice{{u"actor"_s, u"ops-alice"_s},
                                {u"client"_s, u"console"_s},
                                {u"actor_display"_s, u"ops-alice via console"_s},
                                {u"reason"_s, QString()}};
        QJsonObject idle{{u"actor"_s, u"server"_s},
                         {u"client"_s, u"idle"_s},
                         {u"actor_display"_s, u"server (idle)"_s},
                         {u"reason"_s, u"idle for 30m (--sandbox-idle-timeout)"_s}};
        QJsonObject lease{{u"actor"_s, u"server"_s},
                          {u"client"_s, u"lease"_s},
                          {u"actor_display"_s, u"server (lease)"_s},
                          {u"reason"_s, u"its replica stopped"_s}};
        QTest::addRow("archived") << u"archive"_s << u"archived"_s << alice
                                  << u"archived by ops-alice via console"_s;
        QTest::addRow("sandbox stopped")
            << u"runtime"_s << u"stopped"_s << idle
            << u"sandbox stopped by server (idle): idle for 30m (--sandbox-idle-timeout)"_s;
        QTest::addRow("paused") << u"execution_status"_s << u"paused"_s << lease
                                << u"execution status: paused by server (lease): its replica "
                                   "stopped"_s;
        QTest::addRow("recovery") << u"recovery"_s << u"started_runtime"_s << alice
                                  << u"recovery: started runtime by ops-alice via console"_s;
        QTest::addRow("named by nobody") << u"execution_status"_s << u"finished"_s << QJsonObject()
                                         << u"execution status: finished"_s;
        QTest::addRow("another key")
            << u"agent_state"_s << u"x_y"_s << QJsonObject() << u"agent_state: x_y"_s;
    }
    void stateEventsNameTheirActorAndReason()
    {
        QFETCH(QString, key);
        QFETCH(QString, value);
        QFETCH(QJsonObject, cause);
        QFETCH(QString, text);
        QCOMPARE(EventListModel::textOf(Event::stateUpdate(key, value, cause)), text);
    }

    // Qt lays out a paragraph in time that grows with the square of its length: "Show all" of a
    // 1 MB line of output held the console for 26 s. Long lines are shown in pieces.
    void aLongLineIsShownInPieces()
    {
        const QString emoji = u"\U0001F600"_s;
        const QString line = QString(4999, u'a') + emoji + QString(7000, u'b');
        const QString shown = EventListModel::textOf(Event::message(u"user"_s, u"user"_s, line));
        const QStringList pieces = shown.split(u'\n');
        QCOMPARE(pieces.size(), 3);
        QCOMPARE(pieces[0], QString(4999, u'a') + emoji); // a pair is not cut
        QCOMPARE(pieces[1].size(), 5000);
        QCOMPARE(pieces.join(QString()), line);
        const QString lines = QString(4000, u'x') + u'\n' + QString(4000, u'y');
        QCOMPARE(EventListModel::textOf(Event::message(u"user"_s, u"user"_s, lines)), lines);
    }

    // Seen through one replica, a run on another is live, not stale, and not this one's to fix.
    // The timeline holds a window of a conversation's history: the newest events while it
    // shows the end, and the earlier ones it was given, in seq order without gaps.
    void aTimelineKeepsAWindowOfTheHistory()
    {
        const auto eventAt = [](qint64 seq) {
            Event event = Event::message(u"user"_s, u"user"_s, u"event %1"_s.arg(seq));
            event.seq = seq;
            return event;
        };
        const auto seqs = [](const EventListModel &model) {
            QList<qint64> seqs;
            for (int row = 0; row < model.rowCount(); ++row)
                seqs.append(model.data(model.index(row), EventListModel::SeqRole).toLongLong());
            return seqs;
        };
        EventListModel model;
        QAbstractItemModelTester tester(&model,
                                        QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.clear(10);
        QCOMPARE(model.earlierCount(), 10);
        model.append(eventAt(10)); // before the window
        QCOMPARE(model.count(), 0);
        model.append(eventAt(11));
        model.append(eventAt(12));
        QCOMPARE(model.earlierCount(), 10);

        QSignalSpy wanted(&model, &EventListModel::earlierWanted);
        model.loadEarlier();
        QCOMPARE(wanted.count(), 1);
        // Only the run that ends right before the first row goes in.
        model.prepend({eventAt(5), eventAt(7), eventAt(8), eventAt(9), eventAt(10)});
        QCOMPARE(seqs(model), (QList<qint64>{7, 8, 9, 10, 11, 12}));
        model.prepend({eventAt(2), eventAt(3)});
        QCOMPARE(model.count(), 6);
        model.prepend({eventAt(1), eventAt(2), eventAt(3), eventAt(4), eventAt(5), eventAt(6)});
        QCOMPARE(model.earlierCount(), 0);
        QCOMPARE(model.count(), 12);
        model.loadEarlier();
        QCOMPARE(wanted.count(), 1);

        // Scrolled up, nothing is let go; shown at the end, the oldest are.
        model.setShowingEnd(false);
        for (qint64 seq = 13; seq <= EventListModel::KeptEvents + 20; ++seq)
            model.append(eventAt(seq));
        QCOMPARE(model.count(), EventListModel::KeptEvents + 20);
        model.setShowingEnd(true);
        QCOMPARE(model.count(), EventListModel::KeptEvents);
        QCOMPARE(model.earlierCount(), 20);
        model.append(eventAt(EventListModel::KeptEvents + 21));
        QCOMPARE(model.count(), EventListModel::KeptEvents);
        QCOMPARE(model.earlierCount(), 21);
        QCOMPARE(model.lastSeq(), EventListModel::KeptEvents + 21);
    }

    void runsOnOtherReplicasAreNotStale()
    {
        ConversationInfo info = conversation(u"c"_s, ExecutionStatus::Running);
        info.runtime = {
            RuntimeStatus::OwnershipLost, false,
            RuntimeError{u"held_by_other_replica"_s, u"The conversation runs on replica alpha"_s}};
        QVERIFY(Lifecycle::isHeldElsewhere(info));
        QVERIFY(!Lifecycle::isStale(info));
        QVERIFY(!Lifecycle::needsAttention(info));
        QVERIFY(!Lifecycle::canRecover(info).enabled);
        QVERIFY(Lifecycle::canRecover(info).reason.contains(u"alpha"_s));
        QVERIFY(!Lifecycle::canRun(info).enabled);
        QVERIFY(Lifecycle::canPause(info).enabled);
        QCOMPARE(Lifecycle::runtimeLabel(info), u"on another replica"_s);
        // Losing ownership of one's own run still needs an operator.
        info.runtime.error = RuntimeError{u"sandbox_lost"_s, u"gone"_s};
        QVERIFY(Lifecycle::needsAttention(info));
    }

    // One live update must not scale with the model's size; loading does.
    void benchmarkOneUpdate_data()
    {
        QTest::addColumn<int>("size");
        QTest::addRow("1000") << 1000;
        QTest::addRow("10000") << 10000;
    }
    void benchmarkOneUpdate()
    {
        QFETCH(int, size);
        ConversationListModel model;
        model.upsert(many(size));
        const QUuid id = model.at(size / 2).id;
        qint64 seq = 0;
        QBENCHMARK
        {
            ++seq;
            model.applyEvent(id, stateEvent(seq, seq % 2 ? u"running"_s : u"paused"_s));
        }
    }

    void benchmarkLoad_data() { benchmarkOneUpdate_data(); }
    void benchmarkLoad()
    {
        QFETCH(int, size);
        const QList<ConversationInfo> items = many(size);
        QBENCHMARK
        {
            ConversationListModel model;
            model.upsert(items);
        }
    }
};

QTEST_GUILESS_MAIN(ConversationListModelTest)
#include "tst_conversationlistmodel.moc"
