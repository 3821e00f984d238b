// Bad input never crashes the server and never gets a 500; keys protect /api, not health.
#include "storage/conversationstore.h"
#include "storage/database.h"
#include "testevents.h"
#include "testserver.h"

#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QNetworkReply>
#include <QSqlQuery>
#include <QTest>

using namespace Qt::StringLiterals;
using namespace AgentDeck;
using namespace AgentDeck::Testing;

class ApiErrorsTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        m_server = std::make_unique<TestServer>();
        QVERIFY2(m_server->start(), qPrintable(m_server->errorString()));
        m_id = toWireId(m_server->create());
    }
    void cleanupTestCase() { m_server.reset(); }

    void badInputGetsTheRightError_data()
    {
        QTest::addColumn<QByteArray>("method");
        QTest::addColumn<QString>("path");
        QTest::addColumn<QByteArray>("body");
        QTest::addColumn<int>("status");
        QTest::addColumn<QString>("code");
        const QString item = u"/api/conversations/"_s + m_id;
        QTest::addRow("malformed json") << "POST"_ba << u"/api/conversations"_s << "{\"title\": "_ba
                                        << 400 << u"malformed_json"_s;
        QTest::addRow("json not an object")
            << "POST"_ba << u"/api/conversations"_s << "[1,2]"_ba << 400 << u"malformed_json"_s;
        QTest::addRow("workspace not an object")
            << "POST"_ba << u"/api/conversations"_s
            << "{\"agent\": {\"kind\": \"shell\"}, \"workspace\": \"/tmp\"}"_ba << 422
            << u"invalid_parameter"_s;
        QTest::addRow("bad uuid") << "GET"_ba << u"/api/conversations/not-a-uuid"_s << ""_ba << 422
                                  << u"invalid_parameter"_s;
        QTest::addRow("bad conversation_id")
            << "POST"_ba << u"/api/conversations"_s << "{\"conversation_id\": \"xyz\"}"_ba << 422
            << u"invalid_parameter"_s;
        // OpenHands requires the agent; without one it was a shell conversation.
        QTest::addRow("empty body")
            << "POST"_ba << u"/api/conversations"_s << "{}"_ba << 422 << u"invalid_parameter"_s;
        QTest::addRow("no agent") << "POST"_ba << u"/api/conversations"_s << "{\"title\": \"t\"}"_ba
                                  << 422 << u"invalid_parameter"_s;
        QTest::addRow("null agent") << "POST"_ba << u"/api/conversations"_s
                                    << "{\"agent\": null}"_ba << 422 << u"invalid_parameter"_s;
        QTest::addRow("agent not an object")
            << "POST"_ba << u"/api/conversations"_s << "{\"agent\": \"shell\"}"_ba << 422
            << u"invalid_parameter"_s;
        QTest::addRow("unknown agent")
            << "POST"_ba << u"/api/conversations"_s << "{\"agent\": {\"kind\": \"nope\"}}"_ba << 422
            << u"invalid_parameter"_s;
        QTest::addRow("relative workspace")
            << "POST"_ba << u"/api/conversations"_s
            << "{\"agent\": {\"kind\": \"shell\"}, \"workspace\": {\"working_dir\": \"rel\"}}"_ba
            << 422 << u"invalid_parameter"_s;
        // A caller's working dir is mounted writable into the sandbox.
        const auto workingDir = [](const QString &dir) -> QByteArray {
            return "{\"agent\": {\"kind\": \"shell\"}, \"workspace\": {\"working_dir\": \"" +
                   dir.toUtf8() + "\"}}";
        };
        const QString dataDir = m_server->dataDir();
        // No file name can hold them; a lone surrogate made one dir and stored another path.
        QTest::addRow("working dir with a NUL")
            << "POST"_ba << u"/api/conversations"_s << workingDir(u"/tmp/a\\u0000b"_s) << 422
            << u"invalid_parameter"_s;
        QTest::addRow("working dir with a lone surrogate")
            << "POST"_ba << u"/api/conversations"_s << workingDir(u"/tmp/c\\ud800d"_s) << 422
            << u"invalid_parameter"_s;
        QTest::addRow("root as working dir") << "POST"_ba << u"/api/conversations"_s
                                             << workingDir(u"/"_s) << 422 << u"invalid_parameter"_s;
        QTest::addRow("data dir as working dir")
            << "POST"_ba << u"/api/conversations"_s << workingDir(dataDir) << 422
            << u"invalid_parameter"_s;
        QTest::addRow("working dir in the data dir")
            << "POST"_ba << u"/api/conversations"_s << workingDir(dataDir + u"/workspaces/x"_s)
            << 422 << u"invalid_parameter"_s;
        QTest::addRow("working dir holding the data dir")
            << "POST"_ba << u"/api/conversations"_s << workingDir(QFileInfo(dataDir).path()) << 422
            << u"invalid_parameter"_s;
        // What of OpenHands is not offered is named, not only unrouted.
        QTest::addRow("profiles") << "GET"_ba << u"/api/profiles"_s << ""_ba << 404
                                  << u"not_offered"_s;
        QTest::addRow("an acp conversation")
            << "POST"_ba << u"/api/acp/conversations"_s << "{}"_ba << 404 << u"not_offered"_s;
        QTest::addRow("switch_llm")
            << "POST"_ba << item + u"/switch_llm"_s << "{}"_ba << 404 << u"not_offered"_s;
        QTest::addRow("an unknown route")
            << "GET"_ba << u"/api/nothing-here"_s << ""_ba << 404 << u"not_found"_s;
        QTest::addRow("limit too big") << "GET"_ba << u"/api/conversations/search?limit=101"_s
                                       << ""_ba << 422 << u"invalid_parameter"_s;
        QTest::addRow("limit with a space") << "GET"_ba << u"/api/conversations/search?limit=%205"_s
                                            << ""_ba << 422 << u"invalid_parameter"_s;
        QTest::addRow("after_seq with a space")
            << "GET"_ba << item + u"/events/search?after_seq=1%20"_s << ""_ba << 422
            << u"invalid_parameter"_s;
        QTest::addRow("more tag filters than tags")
            << "GET"_ba << u"/api/conversations/count?"_s + u"tag=t&"_s.repeated(51) << ""_ba << 422
            << u"invalid_parameter"_s;
        QTest::addRow("bad sort") << "GET"_ba << u"/api/conversations/search?sort_order=NAME"_s
                                  << ""_ba << 422 << u"invalid_parameter"_s;
        QTest::addRow("bad page id") << "GET"_ba << u"/api/conversations/search?page_id=%%%"_s
                                     << ""_ba << 422 << u"invalid_parameter"_s;
        QTest::addRow("bad archive filter")
            << "GET"_ba << u"/api/conversations/count?archive_filter=SOME"_s << ""_ba << 422
            << u"invalid_parameter"_s;
        QTest::addRow("bad batch id") << "GET"_ba << u"/api/conversations?ids=zzz"_s << ""_ba << 422
                                      << u"invalid_parameter"_s;
        QTest::addRow("bad event kind") << "GET"_ba << item + u"/events/search?kind=Nope"_s << ""_ba
                                        << 422 << u"invalid_parameter"_s;
        QTest::addRow("bad timestamp") << "GET"_ba << item + u"/events/search?timestamp__gte=soon"_s
                                       << ""_ba << 422 << u"invalid_parameter"_s;
        QTest::addRow("bad message") << "POST"_ba << item + u"/events"_s << "{\"content\": 5}"_ba
                                     << 422 << u"invalid_parameter"_s;
        QTest::addRow("bad confirmation")
            << "POST"_ba << item + u"/events/respond_to_confirmation"_s
            << "{\"accept\": \"yes\"}"_ba << 422 << u"invalid_parameter"_s;
        QTest::addRow("confirmation reason not a string")
            << "POST"_ba << item + u"/events/respond_to_confirmation"_s
            << "{\"accept\": false, \"reason\": 5}"_ba << 422 << u"invalid_parameter"_s;
        QTest::addRow("bad patch")
            << "PATCH"_ba << item << "{\"tags\": [1]}"_ba << 422 << u"invalid_parameter"_s;
        QTest::addRow("title too long")
            << "POST"_ba << u"/api/conversations"_s
            << "{\"title\": \"" + QByteArray(ConversationLabels::MaxTitleLength + 1, 'x') + "\"}"
            << 422 << u"invalid_parameter"_s;
        QTest::addRow("patched title too long")
            << "PATCH"_ba << item
            << "{\"title\": \"" + QByteArray(ConversationLabels::MaxTitleLength + 1, 'x') + "\"}"
            << 422 << u"invalid_parameter"_s;
        QTest::addRow("patched tag name empty")
            << "PATCH"_ba << item << "{\"tags\": {\"\": \"v\"}}"_ba << 422
            << u"invalid_parameter"_s;
        QTest::addRow("tag name with the filter's colon")
            << "POST"_ba << u"/api/conversations"_s << "{\"tags\": {\"a:b\": \"v\"}}"_ba << 422
            << u"invalid_parameter"_s;
        // SQLite's LIKE takes patterns of up to 50,000 bytes: a longer one was a 503 to retry.
        const QString tooLong(MaxSearchTextLength + 1, u'a');
        QTest::addRow("search text too long")
            << "GET"_ba << u"/api/conversations/search?q="_s + tooLong << ""_ba << 422
            << u"invalid_parameter"_s;
        QTest::addRow("event body text too long")
            << "GET"_ba << item + u"/events/count?body="_s + tooLong << ""_ba << 422
            << u"invalid_parameter"_s;
        // LIKE stops at a NUL: "a\0b" matched every title with an "a".
        QTest::addRow("search text with NUL") << "GET"_ba << u"/api/conversations/count?q=a%00b"_s
                                              << ""_ba << 422 << u"invalid_parameter"_s;
        // PostgreSQL takes no NUL in a parameter: these were a 503 to retry there.
        QTest::addRow("tag filter with NUL") << "GET"_ba << u"/api/conversations/count?tag=a%00b"_s
                                             << ""_ba << 422 << u"invalid_parameter"_s;
        QTest::addRow("tag filter value with NUL")
            << "GET"_ba << u"/api/conversations/search?tag=k:v%00x"_s << ""_ba << 422
            << u"invalid_parameter"_s;
        QTest::addRow("title with NUL")
            << "POST"_ba << u"/api/conversations"_s << "{\"title\": \"a\\u0000b\"}"_ba << 422
            << u"invalid_parameter"_s;
        QTest::addRow("patched title with NUL")
            << "PATCH"_ba << item << "{\"title\": \"a\\u0000b\"}"_ba << 422
            << u"invalid_parameter"_s;
        QTest::addRow("unknown id")
            << "GET"_ba << u"/api/conversations/00000000-0000-4000-8000-000000000000"_s << ""_ba
            << 404 << u"not_found"_s;
        QTest::addRow("unknown id run")
            << "POST"_ba << u"/api/conversations/00000000-0000-4000-8000-000000000000/run"_s
            << ""_ba << 404 << u"not_found"_s;
        QTest::addRow("unknown route")
            << "GET"_ba << u"/api/nothing/here"_s << ""_ba << 404 << u"not_found"_s;
        QTest::addRow("unknown top route")
            << "GET"_ba << u"/favicon.ico"_s << ""_ba << 404 << u"not_found"_s;
        QTest::addRow("wrong method")
            << "PUT"_ba << item << ""_ba << 405 << u"method_not_allowed"_s;
        QTest::addRow("wrong method health")
            << "POST"_ba << u"/alive"_s << ""_ba << 405 << u"method_not_allowed"_s;
        QTest::addRow("body over 4 MiB")
            << "POST"_ba << u"/api/conversations"_s << QByteArray(4 * 1024 * 1024 + 1, 'x') << 413
            << u"payload_too_large"_s;
    }
    void badInputGetsTheRightError()
    {
        QFETCH(QByteArray, method);
        QFETCH(QString, path);
        QFETCH(QByteArray, body);
        QFETCH(int, status);
        QFETCH(QString, code);
        const ApiReply reply = send(method, path, body);
        QCOMPARE(reply.status, status);
        QCOMPARE(reply.errorCode, code);
        QVERIFY2(!reply.detail.isEmpty(), "errors carry a sentence");
        // The server is still there and well.
        QVERIFY(m_server->get(u"/alive"_s).ok());
    }

    // The nil UUID is well formed, and was refused as "not a valid id (a UUID, ...)": it is no
    // conversation's id. Looked up, it is unknown, as OpenHands answers it (404, a null item of
    // a batch); a conversation cannot be created with it.
    void theNilUuidIsNoOnesId()
    {
        for (const QString &nil :
             {u"00000000-0000-0000-0000-000000000000"_s, u"00000000000000000000000000000000"_s}) {
            const ApiReply read = m_server->get(u"/api/conversations/"_s + nil);
            QCOMPARE(read.status, 404);
            QCOMPARE(read.errorCode, u"not_found"_s);
            QCOMPARE(m_server->get(u"/api/conversations/"_s + m_id + u"/events/"_s + nil).status,
                     404);
            const ApiReply batch =
                m_server->get(u"/api/conversations"_s, QUrlQuery{{u"ids"_s, nil + u',' + m_id}});
            QVERIFY2(batch.ok(), batch.body.constData());
            QCOMPARE(batch.json.toArray().size(), 2);
            QVERIFY(batch.json.toArray().at(0).isNull());
            QCOMPARE(batch.json.toArray().at(1).toObject().value(u"id"_s).toString(), m_id);
        }
        const ApiReply created =
            send("POST"_ba, u"/api/conversations"_s,
                 QJsonDocument(
                     QJsonObject{{u"conversation_id"_s, u"00000000-0000-0000-0000-000000000000"_s},
                                 {u"agent"_s, QJsonObject{{u"kind"_s, u"shell"_s}}}})
                     .toJson());
        QCOMPARE(created.status, 422);
        QVERIFY2(created.detail.contains(u"other than the nil one"_s), qPrintable(created.detail));
    }

    // The longest search text, made of characters that escaping doubles or that take more than
    // a byte, is still a pattern SQLite takes. Its length is in characters, as a title's is:
    // 5,001 emoji (10,002 UTF-16 units) were refused as longer than 10,000 characters. (10,000
    // of them do not fit in a request head, percent-encoded.)
    void theLongestSearchTextIsSearched()
    {
        const QString item = u"/api/conversations/"_s + m_id;
        const QString emoji = u"\U0001F600"_s;
        for (const QString &text :
             {QString(MaxSearchTextLength, u'%'), QString(MaxSearchTextLength, u'_'),
              QString(MaxSearchTextLength, u'\u00E9'),
              emoji.repeated(MaxSearchTextLength / 2 + 1)}) {
            const ApiReply titles =
                m_server->get(u"/api/conversations/count"_s, QUrlQuery{{u"q"_s, text}});
            QVERIFY2(titles.ok(), titles.body.left(300).constData());
            QCOMPARE(titles.json.toInt(-1), 0);
            const ApiReply events =
                m_server->get(item + u"/events/count"_s, QUrlQuery{{u"body"_s, text}});
            QVERIFY2(events.ok(), events.body.left(300).constData());
            QCOMPARE(events.json.toInt(-1), 0);
        }
    }

    // `null`, `"x"` and `5` are JSON: Qt's parser, which takes only objects and arrays, had
    // them answered as "not valid JSON: illegal value".
    void aJsonScalarBodyIsNotAnObject()
    {
        for (const QByteArray &body : {"null"_ba, "\"x\""_ba, "5"_ba}) {
            const ApiReply reply = QCoro::waitFor(
                m_server->client().request("POST"_ba, u"/api/conversations"_s, {}, body));
            QCOMPARE(reply.status, 400);
            QCOMPARE(reply.detail, u"The request body must be a JSON object"_s);
        }
    }

    // A full disk is the operator's to fix: the answer says so, rather than "retry shortly".
    void aFullDiskIsNamed()
    {
        if (TestServer::usesPostgres())
            QSKIP("SQLite's page limit stands in for a full disk");
        Database &db = m_server->server().database();
        const auto pragma = [&](const QString &sql) {
            QSqlQuery query = db.prepare(sql);
            db.exec(query);
            return query.next() ? query.value(0).toLongLong() : -1;
        };
        const qint64 pages = pragma(u"PRAGMA page_count"_s);
        pragma(u"PRAGMA max_page_count = %1"_s.arg(pages));
        ApiReply refused;
        for (int i = 0; i < 500 && refused.status != 503; ++i)
            refused = m_server->call(
                "POST"_ba, u"/api/conversations"_s,
                TestServer::withAgent(QJsonObject{{u"title"_s, QString(200, u'x')}}));
        pragma(u"PRAGMA max_page_count = 1073741823"_s);
        QCOMPARE(refused.status, 503);
        QCOMPARE(refused.errorCode, u"storage_full"_s);
        QVERIFY(refused.detail.contains(u"disk is full"_s));
        QVERIFY(m_server->call("POST"_ba, u"/api/conversations"_s, TestServer::withAgent({})).ok());
    }

    // A run cut off by a full disk says so, rather than with the driver's text.
    void aRunStoppedByAFullDiskSaysSo()
    {
        if (TestServer::usesPostgres())
            QSKIP("SQLite's page limit stands in for a full disk");
        const QUuid id =
            m_server->create(QJsonObject{{u"agent"_s, QJsonObject{{u"kind"_s, u"echo"_s}}}});
        QVERIFY(!id.isNull());
        // The echo of this message needs ~100 pages more than the database may take.
        const QString path = u"/api/conversations/"_s + toWireId(id);
        QVERIFY(
            m_server->post(path + u"/events"_s, TestServer::message(QString(400'000, u'x'), false))
                .ok());
        Database &db = m_server->server().database();
        const auto pragma = [&](const QString &sql) {
            QSqlQuery query = db.prepare(sql);
            db.exec(query);
            return query.next() ? query.value(0).toLongLong() : -1;
        };
        pragma(u"PRAGMA max_page_count = %1"_s.arg(pragma(u"PRAGMA page_count"_s) + 8));
        const ApiReply run = m_server->post(path + u"/run"_s);
        const bool stopped = m_server->waitForStatus(id, u"error"_s);
        pragma(u"PRAGMA max_page_count = 1073741823"_s);
        QVERIFY2(run.ok(), qPrintable(run.detail));
        QVERIFY(stopped);
        const QList<QJsonObject> errors = ofKind(m_server->events(id), u"AgentErrorEvent"_s);
        QCOMPARE(errors.size(), 1);
        QCOMPARE(errors.first().value(u"code"_s).toString(), u"storage_full"_s);
        QVERIFY(errors.first().value(u"error"_s).toString().contains(u"disk is full"_s));
    }

    // A damaged database is the operator's to restore: no "retry shortly", and the server
    // stops saying it is ready. Clients were told to retry for good.
    void aDamagedDatabaseIsNamedAndTheServerIsNotReady()
    {
        TestServer server;
        QVERIFY2(server.start(), qPrintable(server.errorString()));
        QCOMPARE(server.get(u"/ready"_s).status, 200);
        const QUuid id = server.create();
        QVERIFY(!id.isNull());
        Database &db = server.server().database();
        db.beforeCommit = [] { throw StorageError("commit: database disk image is malformed"); };
        const ApiReply refused = server.send(id, u"hello"_s);
        db.beforeCommit = {};
        QCOMPARE(refused.status, 503);
        QCOMPARE(refused.errorCode, u"storage_corrupt"_s);
        QVERIFY(refused.retryAfter.isEmpty());
        QVERIFY(refused.detail.contains(u"backup"_s));
        const ApiReply ready = server.get(u"/ready"_s);
        QCOMPARE(ready.status, 503);
        QCOMPARE(ready.json.toObject().value(u"status"_s).toString(), u"storage_corrupt"_s);
        QCOMPARE(server.get(u"/alive"_s).status, 200); // the process itself is well
    }

    // Another owner took the conversation between this server's claim and its first write
    // under it (here: the resolution of a stale run as a new one starts). Nothing is written,
    // and the client is told to retry; it was a 500.
    void aLeaseLostWhileARequestRunsIs409()
    {
        TestServer server;
        QVERIFY2(server.start(), qPrintable(server.errorString()));
        const QUuid id =
            server.create(QJsonObject{{u"agent"_s, QJsonObject{{u"kind"_s, u"echo"_s}}}});
        QVERIFY(!id.isNull());
        ConversationStore &store = server.server().store();
        store.append(id, {}, ExecutionStatus::Running, 0); // a run no server is executing
        const qsizetype eventsBefore = server.events(id).size();
        Database &db = store.database();
        bool stolen = false;
        db.afterCommit = [&] {
            if (std::exchange(stolen, true))
                return;
            QSqlQuery steal = db.prepare(u"UPDATE conversations SET lease_owner = 'elsewhere', "
                                         "lease_epoch = lease_epoch + 1 WHERE id = ?"_s);
            steal.addBindValue(toWireId(id));
            db.exec(steal);
        };
        const ApiReply refused = server.post(ServerConnection::conversationPath(id, u"run"_s));
        db.afterCommit = {};
        QVERIFY(stolen);
        QCOMPARE(refused.status, 409);
        QCOMPARE(refused.errorCode, u"lease_lost"_s);
        QCOMPARE(refused.retryAfter, "1"_ba);
        QCOMPARE(server.events(id).size(), eventsBefore);
        QCOMPARE(server.status(id), u"running"_s);
    }

    void wrongMethodNamesTheAllowedOnes()
    {
        // /api/conversations/search is the search, not the conversation "search": though
        // DELETE /api/conversations/{id} exists, only GET (and HEAD) is allowed there.
        const ApiReply reply = m_server->call("DELETE"_ba, u"/api/conversations/search"_s);
        QCOMPARE(reply.status, 405);
        QCOMPARE(reply.detail, u"DELETE is not allowed here; use GET, HEAD"_s);
        const ApiReply health = m_server->call("DELETE"_ba, u"/health"_s);
        QCOMPARE(health.status, 405);
        QVERIFY(health.detail.contains(u"GET"_s));
    }

    void metricsCountRequestsByRouteAndStatus()
    {
        m_server->get(u"/api/conversations/"_s + m_id);
        const ApiReply metrics = m_server->get(u"/metrics"_s);
        QVERIFY(metrics.ok());
        const QString text = QString::fromUtf8(metrics.body);
        QVERIFY(text.contains(
            u"agentdeck_http_requests_total{route=\"/api/conversations/{id}\",method=\"GET\",status=\"200\"}"_s));
        QVERIFY(text.contains(u"agentdeck_http_request_duration_seconds_bucket{route="_s));
        QVERIFY(text.contains(u"agentdeck_conversations{execution_status=\"idle\"}"_s));
        QVERIFY(text.contains(u"agentdeck_websocket_connections 0"_s));
        QVERIFY(text.contains(u"agentdeck_websocket_slow_consumer_drops_total 0"_s));
    }

    void keysProtectApiButNotHealth()
    {
        TestServerOptions options;
        options.apiKeys = {u"k1"_s, u"k2"_s};
        TestServer secured(std::move(options));
        QVERIFY(secured.start());
        QVERIFY(secured.get(u"/api/conversations/count"_s).ok()); // the client sends k1

        ServerConnection anonymous(secured.url());
        const ApiReply denied = QCoro::waitFor(anonymous.get(u"/api/conversations/count"_s));
        QCOMPARE(denied.status, 401);
        QCOMPARE(denied.errorCode, u"unauthorized"_s);
        anonymous.setApiKey(u"k3"_s);
        QCOMPARE(QCoro::waitFor(anonymous.get(u"/api/conversations/count"_s)).status, 401);
        anonymous.setApiKey(u"k2"_s);
        QVERIFY(QCoro::waitFor(anonymous.get(u"/api/conversations/count"_s)).ok());
        anonymous.setApiKey({});
        for (const QString &path : {u"/alive"_s, u"/health"_s, u"/ready"_s, u"/server_info"_s})
            QVERIFY(QCoro::waitFor(anonymous.get(path)).ok());
    }

private:
    // `target` is a path with its query, if any.
    ApiReply send(const QByteArray &method, const QString &target, const QByteArray &body)
    {
        const qsizetype question = target.indexOf(u'?');
        const QUrlQuery query(question < 0 ? QString() : target.mid(question + 1));
        return QCoro::waitFor(m_server->client().request(
            method, question < 0 ? target : target.left(question), query, body));
    }

    std::unique_ptr<TestServer> m_server;
    QString m_id;
};

QTEST_GUILESS_MAIN(ApiErrorsTest)
#include "tst_api_errors.moc"
