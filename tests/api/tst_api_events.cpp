// Event history over real HTTP: seqs, search filters, paging, count, get, batch.
#include "testserver.h"

#include <QJsonArray>
#include <QTest>

using namespace Qt::StringLiterals;
using namespace AgentDeck;
using namespace AgentDeck::Testing;

class ApiEventsTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        m_server = std::make_unique<TestServer>();
        QVERIFY2(m_server->start(), qPrintable(m_server->errorString()));
        m_id = m_server->create(QJsonObject{{u"agent"_s, QJsonObject{{u"kind"_s, u"echo"_s}}}});
        QVERIFY(!m_id.isNull());
        // The eighth says more than "note 8": text its JSON holds escaped, or beyond ASCII.
        for (int i = 1; i <= 12; ++i) {
            const QString text = i == 8 ? u"note 8: a \"quoted\" line\nand C:\\dir, café, c++"_s
                                        : u"note %1"_s.arg(i);
            const ApiReply reply = m_server->send(m_id, text);
            QVERIFY(reply.ok());
            QCOMPARE(reply.json.toObject().value(u"seq"_s).toInt(), i);
            QCOMPARE(reply.json.toObject().value(u"source"_s).toString(), u"user"_s);
            if (i == 6)
                m_midpoint = reply.json.toObject().value(u"timestamp"_s).toString();
        }
        // The echo agent answers all twelve: agent messages and state updates follow.
        QVERIFY(m_server->post(ServerConnection::conversationPath(m_id, u"run")).ok());
        QVERIFY(m_server->waitForStatus(m_id, u"finished"_s));
    }
    void cleanupTestCase() { m_server.reset(); }

    void seqsAreGaplessFromOne()
    {
        const QList<QJsonObject> events = m_server->events(m_id);
        QVERIFY(events.size() > 24);
        for (qsizetype i = 0; i < events.size(); ++i)
            QCOMPARE(events[i].value(u"seq"_s).toInt(), i + 1);
        const QJsonObject info =
            m_server->get(ServerConnection::conversationPath(m_id)).json.toObject();
        QCOMPARE(info.value(u"stats"_s).toObject().value(u"event_count"_s).toInt(), events.size());
    }

    void filtersSelectAndCountAgrees_data()
    {
        QTest::addColumn<QString>("query");
        QTest::addColumn<int>("expected");
        QTest::addRow("kind") << u"kind=MessageEvent"_s << 24;
        QTest::addRow("source user") << u"source=user"_s << 12;
        QTest::addRow("kind and source") << u"kind=MessageEvent&source=agent"_s << 12;
        QTest::addRow("body") << u"body=note%201"_s << 8; // note 1, 10, 11, 12, and their echoes
        // The text of fields, not their names, nor the envelope (kind, source, id, timestamp).
        QTest::addRow("body, a field's name") << u"body=llm_message"_s << 0;
        QTest::addRow("body, the kind") << u"body=MessageEvent"_s << 0;
        QTest::addRow("body, the source") << u"body=environment"_s << 0;
        QTest::addRow("body, written escaped") << u"body=%22quoted%22"_s << 2; // and the echo
        QTest::addRow("body, across a line") << u"body=line%0Aand"_s << 2;
        QTest::addRow("body, past a backslash") << u"body=C:%5Cdir"_s << 2;
        QTest::addRow("body, not ASCII") << u"body=caf%C3%A9"_s << 2;
        // Form-encoded, as curl --data-urlencode, Python and browsers write queries: '+' is a
        // space, a plus %2B.
        QTest::addRow("body, a space written as +") << u"body=note+1"_s << 8;
        QTest::addRow("body, a plus percent-encoded") << u"body=c%2B%2B"_s << 2;
        QTest::addRow("body, pluses that are spaces") << u"body=c++"_s << 0;
        QTest::addRow("after_seq") << u"after_seq=10&source=user"_s << 2;
        QTest::addRow("state updates") << u"kind=ConversationStateUpdateEvent"_s << 2;
    }
    void filtersSelectAndCountAgrees()
    {
        QFETCH(QString, query);
        QFETCH(int, expected);
        const QUrlQuery urlQuery(query);
        QCOMPARE(m_server->events(m_id, urlQuery).size(), expected);
        QCOMPARE(m_server->get(ServerConnection::conversationPath(m_id, u"events/count"), urlQuery)
                     .json.toInteger(),
                 expected);
    }

    // PostgreSQL's jsonb takes neither a NUL nor a surrogate without its pair: one message with
    // either made every body search of its conversation a 503 there.
    void bodySearchPassesTextJsonbCannotHold()
    {
        const QUuid id = m_server->create(QJsonObject{});
        QVERIFY(!id.isNull());
        const QStringList texts{u"odd "_s + QChar(0) + u" byte"_s,
                                u"half "_s + QChar(0xd800) + u" pair"_s, u"plain note"_s};
        for (const QString &text : texts) {
            QVERIFY(m_server->send(id, text).ok());
        }
        for (const QString &word : {u"odd"_s, u"half"_s, u"plain"_s}) {
            QUrlQuery query;
            query.addQueryItem(u"body"_s, word);
            const ApiReply reply =
                m_server->get(ServerConnection::conversationPath(id, u"events/count"), query);
            QVERIFY2(reply.status == 200,
                     qPrintable(word + u": "_s + QString::fromUtf8(reply.body)));
            QCOMPARE(reply.json.toInteger(), 1);
        }
    }

    // Text that spells an escape (`\u0000`, as Python's json.dumps writes an emoji's halves)
    // holds neither: it was searched as its stored JSON on PostgreSQL, where `body=MessageEvent`
    // and the names of the fields found it, as they do not on SQLite.
    void bodySearchOfTextSpellingAnEscapeLooksAtTheTextAlone()
    {
        const QUuid id = m_server->create(QJsonObject{});
        QVERIFY(!id.isNull());
        for (const QString &text : {u"nul \\u0000 spelled"_s, u"emoji \\ud83d\\ude00 spelled"_s}) {
            QVERIFY(m_server->send(id, text).ok());
        }
        const auto count = [&](const QString &body) {
            QUrlQuery query;
            query.addQueryItem(u"body"_s, body);
            const ApiReply reply =
                m_server->get(ServerConnection::conversationPath(id, u"events/count"), query);
            return reply.status == 200 ? reply.json.toInteger() : -reply.status;
        };
        QCOMPARE(count(u"MessageEvent"_s), 0);
        QCOMPARE(count(u"role"_s), 0);
        QCOMPARE(count(u"\\u0000"_s), 1);
        QCOMPARE(count(u"ude00 spelled"_s), 1);
    }

    void timestampFilters()
    {
        QUrlQuery before;
        before.addQueryItem(u"timestamp__lt"_s, m_midpoint);
        QUrlQuery since;
        since.addQueryItem(u"timestamp__gte"_s, m_midpoint);
        const qsizetype all = m_server->events(m_id).size();
        const qsizetype early = m_server->events(m_id, before).size();
        const qsizetype late = m_server->events(m_id, since).size();
        QVERIFY(early >= 1);
        QVERIFY(late >= 1);
        QCOMPARE(early + late, all);
        // The same bound with a zone offset whose '+' was sent as it is, which a form-encoded
        // query reads as a space.
        QUrlQuery offset;
        offset.addQueryItem(u"timestamp__gte"_s, QString(m_midpoint).replace(u"Z"_s, u"+00:00"_s));
        QVERIFY(offset.toString(QUrl::FullyEncoded).contains(u"+00:00"_s));
        QCOMPARE(m_server->events(m_id, offset).size(), late);
    }

    // Times are stored in whole milliseconds. A bound a fraction of one after an event (Python's
    // isoformat() writes microseconds) was rounded to the nearest: .4781 to .478, which put an
    // event at .478 before `timestamp__gte` and not before `timestamp__lt`.
    void subMillisecondBoundsFallBetweenMilliseconds_data()
    {
        QTest::addColumn<QString>("fraction"); // digits after the event's milliseconds
        QTest::addColumn<bool>("afterTheEvent");
        QTest::addRow("0.1 ms after") << u"1"_s << true;
        QTest::addRow("0.4 ms after") << u"4"_s << true;
        QTest::addRow("0.9 ms after") << u"9"_s << true;
        QTest::addRow("1 us after") << u"001"_s << true;
        QTest::addRow("at it, with zeros") << u"000"_s << false;
    }
    void subMillisecondBoundsFallBetweenMilliseconds()
    {
        QFETCH(QString, fraction);
        QFETCH(bool, afterTheEvent);
        const qint64 event = parseWireTime(m_midpoint)->toMSecsSinceEpoch();
        QString bound = m_midpoint;
        bound.insert(bound.indexOf(u'Z'), fraction);
        const QString same = toWireTime(afterTheEvent ? event + 1 : event);
        const auto count = [this](const QString &filter, const QString &time) {
            QUrlQuery query;
            query.addQueryItem(filter, time);
            return m_server->get(ServerConnection::conversationPath(m_id, u"events/count"), query)
                .json.toInteger();
        };
        for (const QString &filter : {u"timestamp__lt"_s, u"timestamp__gte"_s})
            QCOMPARE(count(filter, bound), count(filter, same));
    }

    void descendingPagesCoverEverything()
    {
        QUrlQuery query;
        query.addQueryItem(u"sort_order"_s, u"TIMESTAMP_DESC"_s);
        query.addQueryItem(u"limit"_s, u"5"_s);
        const QList<QJsonObject> events = m_server->events(m_id, query);
        QCOMPARE(events.size(), m_server->events(m_id).size());
        for (qsizetype i = 1; i < events.size(); ++i)
            QVERIFY(events[i - 1].value(u"seq"_s).toInt() > events[i].value(u"seq"_s).toInt());
    }

    void aPageOfLargeEventsStopsAtItsByteBudget()
    {
        const QUuid id = m_server->create();
        QVERIFY(!id.isNull());
        // Three events of 3 MiB: two fit in a page's 8 MiB, the third goes to the next page.
        const QString text(3 * 1024 * 1024, u'x');
        for (int i = 0; i < 3; ++i) {
            QVERIFY(m_server->send(id, text).ok());
        }
        const QString search = ServerConnection::conversationPath(id, u"events/search");
        const QJsonObject first = m_server->get(search).json.toObject();
        QCOMPARE(first.value(u"items"_s).toArray().size(), 2);
        QUrlQuery next;
        next.addQueryItem(u"page_id"_s, first.value(u"next_page_id"_s).toString());
        const QJsonObject second = m_server->get(search, next).json.toObject();
        QCOMPARE(second.value(u"items"_s).toArray().size(), 1);
        QCOMPARE(second.value(u"items"_s).toArray().at(0).toObject().value(u"seq"_s).toInt(), 3);
        QVERIFY(second.value(u"next_page_id"_s).isNull());
        const QList<QJsonObject> all = m_server->events(id);
        QCOMPARE(all.size(), 3);

        // A batch cannot be paged: two of them are fine, three are refused.
        const QString batch = ServerConnection::conversationPath(id, u"events");
        QStringList ids;
        for (const QJsonObject &event : all)
            ids.append(event.value(u"id"_s).toString());
        QUrlQuery two;
        two.addQueryItem(u"event_ids"_s, ids.mid(0, 2).join(u','));
        QCOMPARE(m_server->get(batch, two).json.toArray().size(), 2);
        QUrlQuery three;
        three.addQueryItem(u"event_ids"_s, ids.join(u','));
        const ApiReply refused = m_server->get(batch, three);
        QCOMPARE(refused.status, 422);
        QVERIFY2(refused.detail.contains(u"ask for fewer"_s), qPrintable(refused.detail));
    }

    void getOneAndBatch()
    {
        const QList<QJsonObject> events = m_server->events(m_id);
        const QString first = events.first().value(u"id"_s).toString();
        const QString last = events.last().value(u"id"_s).toString();
        const ApiReply one =
            m_server->get(ServerConnection::conversationPath(m_id, u"events/") + first);
        QVERIFY(one.ok());
        QCOMPARE(one.json.toObject().value(u"seq"_s).toInt(), 1);

        const QString unknown = toWireId(QUuid::createUuid());
        QCOMPARE(
            m_server->get(ServerConnection::conversationPath(m_id, u"events/") + unknown).status,
            404);
        QUrlQuery batch;
        batch.addQueryItem(u"event_ids"_s, last);
        batch.addQueryItem(u"event_ids"_s, unknown);
        batch.addQueryItem(u"event_ids"_s, first);
        const QJsonArray items =
            m_server->get(ServerConnection::conversationPath(m_id, u"events"), batch)
                .json.toArray();
        QCOMPARE(items.size(), 3);
        QCOMPARE(items[0].toObject().value(u"id"_s).toString(), last);
        QVERIFY(items[1].isNull());
        QCOMPARE(items[2].toObject().value(u"id"_s).toString(), first);
    }

    void eventsOfUnknownConversationAre404()
    {
        const QString path =
            ServerConnection::conversationPath(QUuid::createUuid(), u"events/search");
        QCOMPARE(m_server->get(path).status, 404);
    }

private:
    std::unique_ptr<TestServer> m_server;
    QUuid m_id;
    QString m_midpoint;
};

QTEST_GUILESS_MAIN(ApiEventsTest)
#include "tst_api_events.moc"
