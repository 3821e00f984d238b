// The audit log: one record for each change a client makes (done or refused, with its key's
// name, its client and its reason) and for each the server makes on its own (retention, a run
// resolved at startup, the shutdown); refused attempts rate-limited; GET /api/audit's filters and
// paging; --audit-retention. On SQLite, and on PostgreSQL (tst_api_audit_postgres).
#include "agentdeckserver.h"
#include "fakes.h"
#include "storage/auditlog.h"
#include "storage/database.h"
#include "testserver.h"
#include "wiretypes.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>

#include <qcorotask.h>

using namespace Qt::StringLiterals;
using namespace AgentDeck;
using namespace AgentDeck::Testing;

namespace {
constexpr int WaitMs = 10'000;
const QString AliceKey = u"alice-secret"_s;
} // namespace

class TestApiAudit : public QObject
{
    Q_OBJECT

    QTemporaryDir m_dir;
    std::unique_ptr<FakeRuntimeControl> m_control;
    FakeClock *m_clock = nullptr;
    std::unique_ptr<TestServer> m_server;

    std::unique_ptr<TestServer> makeServer(TestServerOptions options = {})
    {
        options.namedKeys = {{u"ops-alice"_s, AliceKey}};
        m_control = std::make_unique<FakeRuntimeControl>();
        options.parts.runtimes = std::make_unique<FakeRuntimeProvider>(*m_control);
        auto clock = std::make_unique<FakeClock>(QDateTime::currentMSecsSinceEpoch());
        m_clock = clock.get();
        options.parts.clock = std::move(clock);
        return std::make_unique<TestServer>(std::move(options));
    }

    bool start(TestServerOptions options = {})
    {
        m_server.reset(); // before the fakes it was given go
        m_server = makeServer(std::move(options));
        if (!m_server || !m_server->start()) {
            qWarning().noquote() << "the server did not start:"
                                 << (m_server ? m_server->errorString() : QString());
            return false;
        }
        return true;
    }

    // A call as ops-alice, with `key` instead when given.
    ApiReply call(const QByteArray &method, const QString &path, const QJsonValue &body = {},
                  const QUrlQuery &query = {}, const QString &key = AliceKey)
    {
        ServerConnection client(m_server->url());
        client.setApiKey(key);
        return QCoro::waitFor(
            client.request(method, path, query,
                           body.isUndefined() || body.isNull()
                               ? QByteArray()
                               : QJsonDocument(body.toObject()).toJson(QJsonDocument::Compact)));
    }

    QUuid create()
    {
        const ApiReply reply =
            call("POST", u"/api/conversations"_s, TestServer::withAgent(QJsonObject{}));
        return parseWireId(reply.json.toObject().value(u"id"_s).toString()).value_or(QUuid());
    }

    QList<QJsonObject> records(QUrlQuery query)
    {
        const ApiReply reply = call("GET", u"/api/audit"_s, {}, query);
        QList<QJsonObject> items;
        for (const QJsonValue &item : reply.json.toObject().value(u"items"_s).toArray())
            items.append(item.toObject());
        return items;
    }

    QList<QJsonObject> recordsOf(const QUuid &id, const QString &action)
    {
        return records(QUrlQuery{{u"conversation_id"_s, toWireId(id)}, {u"action"_s, action}});
    }

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        ServerConnection::setClientName(u"console"_s);
    }
    void cleanup()
    {
        if (m_server)
            m_server->stop();
        m_server.reset();
    }

    // Each change a client makes is one record: its key's name, its client, the action, the
    // conversation, the replica, the reason it gave and how it ended.
    void clientActions_data()
    {
        QTest::addColumn<QString>("action");
        QTest::addColumn<QByteArray>("method");
        QTest::addColumn<QString>("suffix");
        QTest::addColumn<QJsonObject>("body");
        QTest::addRow("update") << u"update"_s << "PATCH"_ba << QString()
                                << QJsonObject{{u"title"_s, u"renamed"_s}};
        QTest::addRow("archive") << u"archive"_s << "POST"_ba << u"archive"_s << QJsonObject{};
        QTest::addRow("unarchive")
            << u"unarchive"_s << "POST"_ba << u"unarchive"_s << QJsonObject{};
        QTest::addRow("runtime stop")
            << u"stop_runtime"_s << "DELETE"_ba << u"runtime"_s << QJsonObject{};
        QTest::addRow("reprovision")
            << u"reprovision"_s << "POST"_ba << u"runtime/reprovision"_s << QJsonObject{};
        QTest::addRow("resume") << u"resume_runtime"_s << "POST"_ba << u"runtime/resume"_s
                                << QJsonObject{};
        QTest::addRow("recover") << u"recover"_s << "POST"_ba << u"recover"_s << QJsonObject{};
        QTest::addRow("dismiss") << u"dismiss"_s << "POST"_ba << u"outcome/dismiss"_s
                                 << QJsonObject{};
        QTest::addRow("fork") << u"fork"_s << "POST"_ba << u"fork"_s << QJsonObject{};
        QTest::addRow("pause") << u"pause"_s << "POST"_ba << u"pause"_s << QJsonObject{};
        QTest::addRow("run") << u"run"_s << "POST"_ba << u"run"_s << QJsonObject{};
        QTest::addRow("delete") << u"delete"_s << "DELETE"_ba << QString() << QJsonObject{};
    }
    void clientActions()
    {
        QFETCH(QString, action);
        QFETCH(QByteArray, method);
        QFETCH(QString, suffix);
        QFETCH(QJsonObject, body);
        QVERIFY(start());
        const QUuid id = create();
        QVERIFY(!id.isNull());
        const QList<QJsonObject> created = recordsOf(id, u"create"_s);
        QCOMPARE(created.size(), 1);
        QCOMPARE(created[0].value(u"actor_display"_s).toString(), u"ops-alice via console"_s);

        const ApiReply reply = call(method, ServerConnection::conversationPath(id, suffix),
                                    body.isEmpty() ? QJsonValue() : QJsonValue(body),
                                    QUrlQuery{{u"reason"_s, u"ticket 42: cleanup"_s}});
        QVERIFY2(reply.status > 0, qPrintable(reply.detail));
        const QList<QJsonObject> found = recordsOf(id, action);
        QCOMPARE(found.size(), 1);
        const QJsonObject record = found.constFirst();
        QCOMPARE(record.value(u"actor"_s).toString(), u"ops-alice"_s);
        QCOMPARE(record.value(u"client"_s).toString(), u"console"_s);
        QCOMPARE(record.value(u"conversation_id"_s).toString(), toWireId(id));
        QCOMPARE(record.value(u"replica"_s).toString(),
                 call("GET", u"/server_info"_s).json.toObject().value(u"replica_id"_s).toString());
        QCOMPARE(record.value(u"reason"_s).toString(), u"ticket 42: cleanup"_s);
        QCOMPARE(record.value(u"status"_s).toInt(), reply.status);
        QCOMPARE(record.value(u"result"_s).toString(), reply.ok() ? u"done"_s : u"refused"_s);
        QVERIFY(parseWireTime(record.value(u"timestamp"_s).toString()).has_value());
        // A read is no change.
        call("GET", ServerConnection::conversationPath(id));
        QCOMPARE(records(QUrlQuery{{u"conversation_id"_s, toWireId(id)}}).size(), 2);
    }

    // A refused attempt is recorded as refused, with its status; one with a wrong key names no
    // key; and past the limit a minute, they go unrecorded.
    void refusedAttempts()
    {
        QVERIFY(start());
        const QUuid id = create();
        QCOMPARE(
            call("POST", ServerConnection::conversationPath(id, u"recover"), {}, {}, u"ops-alice"_s)
                .status,
            401);
        QList<QJsonObject> found = recordsOf(id, u"recover"_s);
        QCOMPARE(found.size(), 1);
        QCOMPARE(found[0].value(u"status"_s).toInt(), 401);
        QCOMPARE(found[0].value(u"result"_s).toString(), u"refused"_s);
        QCOMPARE(found[0].value(u"actor"_s).toString(), QString());
        QCOMPARE(found[0].value(u"actor_display"_s).toString(), u"anonymous via console"_s);

        // Refused by the service: an unarchived conversation's start_fresh (409).
        const ApiReply conflict =
            call("POST", ServerConnection::conversationPath(id, u"runtime/start_fresh"));
        QVERIFY(!conflict.ok());
        found = recordsOf(id, u"start_fresh"_s);
        QCOMPARE(found.size(), 1);
        QCOMPARE(found[0].value(u"status"_s).toInt(), conflict.status);
        QCOMPARE(found[0].value(u"actor"_s).toString(), u"ops-alice"_s);

        // `result` keeps the changes made or the attempts refused.
        const QString conversation = toWireId(id);
        const auto actionsOf = [&](const QString &result) {
            QStringList actions;
            for (const QJsonObject &record :
                 records(QUrlQuery{{u"conversation_id"_s, conversation}, {u"result"_s, result}}))
                actions.append(record.value(u"action"_s).toString());
            return actions;
        };
        QCOMPARE(actionsOf(u"done"_s), QStringList{u"create"_s});
        QCOMPARE(actionsOf(u"refused"_s), (QStringList{u"start_fresh"_s, u"recover"_s}));

        // A flood: at most RefusedPerMinute a minute are kept.
        for (int i = 0; i < AuditLog::RefusedPerMinute + 30; ++i)
            call("POST", ServerConnection::conversationPath(id, u"pause"), {}, {}, u"wrong"_s);
        int refused = 0;
        QString page;
        do {
            QUrlQuery query{{u"action"_s, u"pause"_s}, {u"limit"_s, u"100"_s}};
            if (!page.isEmpty())
                query.addQueryItem(u"page_id"_s, page);
            const ApiReply reply = call("GET", u"/api/audit"_s, {}, query);
            refused += int(reply.json.toObject().value(u"items"_s).toArray().size());
            page = reply.json.toObject().value(u"next_page_id"_s).toString();
        } while (!page.isEmpty());
        QVERIFY2(refused <= AuditLog::RefusedPerMinute && refused > 0,
                 qPrintable(QString::number(refused)));
    }

    // Filters by actor, action, conversation and time; pages that chain without a gap or a
    // record twice, newest first unless asked.
    void searchAndPaging()
    {
        QVERIFY(start());
        QList<QUuid> ids;
        for (int i = 0; i < 5; ++i)
            ids.append(create());
        QList<QString> seen;
        QString page;
        int pages = 0;
        do {
            QUrlQuery query{{u"action"_s, u"create"_s}, {u"limit"_s, u"2"_s}};
            if (!page.isEmpty())
                query.addQueryItem(u"page_id"_s, page);
            const ApiReply reply = call("GET", u"/api/audit"_s, {}, query);
            QCOMPARE(reply.status, 200);
            for (const QJsonValue &item : reply.json.toObject().value(u"items"_s).toArray())
                seen.append(item.toObject().value(u"conversation_id"_s).toString());
            page = reply.json.toObject().value(u"next_page_id"_s).toString();
            ++pages;
        } while (!page.isEmpty());
        QCOMPARE(pages, 3);
        QList<QString> expected;
        for (auto it = ids.crbegin(); it != ids.crend(); ++it)
            expected.append(toWireId(*it));
        QCOMPARE(seen, expected);

        const QList<QJsonObject> oldest = records(QUrlQuery{
            {u"action"_s, u"create"_s}, {u"sort_order"_s, u"TIMESTAMP"_s}, {u"limit"_s, u"1"_s}});
        QCOMPARE(oldest.size(), 1);
        QCOMPARE(oldest[0].value(u"conversation_id"_s).toString(), toWireId(ids.first()));
        QCOMPARE(records(QUrlQuery{{u"actor"_s, u"ops-alice"_s}}).size(), 5);
        QCOMPARE(records(QUrlQuery{{u"actor"_s, u"ops-bob"_s}}).size(), 0);
        QCOMPARE(records(QUrlQuery{{u"client"_s, u"console"_s}}).size(), 5);
        const QString future = toWireTime(QDateTime::currentMSecsSinceEpoch() + 3'600'000);
        QCOMPARE(records(QUrlQuery{{u"timestamp__gte"_s, future}}).size(), 0);
        QCOMPARE(records(QUrlQuery{{u"timestamp__lt"_s, future}}).size(), 5);

        for (const auto &[name, value] : {std::pair{u"conversation_id"_s, u"nope"_s},
                                          {u"page_id"_s, u"x"_s},
                                          {u"sort_order"_s, u"UP"_s},
                                          {u"result"_s, u"failed"_s},
                                          {u"limit"_s, u"0"_s},
                                          {u"timestamp__gte"_s, u"x"_s}}) {
            const ApiReply bad = call("GET", u"/api/audit"_s, {}, QUrlQuery{{name, value}});
            QVERIFY2(bad.status == 422, qPrintable(name + u": "_s + bad.detail));
        }
        QCOMPARE(call("GET", u"/api/audit"_s, {}, {}, u"wrong"_s).status, 401);
    }

    // What the server does on its own names the policy: retention.
    void retentionPolicy()
    {
        TestServerOptions options;
        options.runtimeRetention = std::chrono::hours(1);
        options.retentionInterval = std::chrono::milliseconds(20);
        QVERIFY(start(std::move(options)));
        const QUuid id = create();
        m_clock->advance(2 * 3'600'000);
        QTRY_COMPARE_WITH_TIMEOUT(recordsOf(id, u"expire_runtime"_s).size(), 1, WaitMs);
        const QJsonObject record = recordsOf(id, u"expire_runtime"_s).constFirst();
        QCOMPARE(record.value(u"actor"_s).toString(), u"server"_s);
        QCOMPARE(record.value(u"client"_s).toString(), u"retention"_s);
        QCOMPARE(record.value(u"actor_display"_s).toString(), u"server (retention)"_s);
        QVERIFY(!record.value(u"reason"_s).toString().isEmpty());
    }

    // A run left `running` by a server that stopped is resolved at the next start, as the
    // recovery policy.
    void recoveryPolicy()
    {
        TestServerOptions options;
        options.dataDir = m_dir.filePath(u"recovery"_s);
        QVERIFY(QDir().mkpath(options.dataDir));
        const QString dataDir = options.dataDir;
        QVERIFY(start(std::move(options)));
        const QUuid id = create();
        m_server->stop();
        m_server.reset();
        // As a server killed while it ran leaves it.
        {
            TestServerOptions again;
            again.dataDir = dataDir;
            auto server = makeServer(std::move(again));
            QVERIFY(server->start());
            QSqlQuery mark = server->server().database().prepare(
                u"UPDATE conversations SET execution_status = 'running' WHERE id = ?"_s);
            mark.addBindValue(toWireId(id));
            server->server().database().exec(mark);
            server->stopKeepingSandboxes();
        }
        TestServerOptions last;
        last.dataDir = dataDir;
        QVERIFY(start(std::move(last)));
        const QList<QJsonObject> found = recordsOf(id, u"resolve_stale_run"_s);
        QCOMPARE(found.size(), 1);
        QCOMPARE(found[0].value(u"actor_display"_s).toString(), u"server (recovery)"_s);
    }

    // A stop pauses the runs in flight, as the shutdown policy.
    void shutdownPolicy()
    {
        TestServerOptions options;
        options.dataDir = m_dir.filePath(u"shutdown"_s);
        QVERIFY(QDir().mkpath(options.dataDir));
        const QString dataDir = options.dataDir;
        QVERIFY(start(std::move(options)));
        m_control->blocking = {u"sleep"_s};
        const ApiReply created =
            call("POST", u"/api/conversations"_s,
                 TestServer::withAgent(TestServer::shellConversation(u"sleep"_s)));
        QVERIFY2(created.ok(), qPrintable(created.detail));
        const QUuid id = parseWireId(created.json.toObject().value(u"id"_s).toString()).value();
        QTRY_VERIFY_WITH_TIMEOUT(m_control->commands.contains(u"sleep"_s), WaitMs);
        QTimer::singleShot(50, m_control.get(),
                           [control = m_control.get()] { control->release(); });
        m_server->stopKeepingSandboxes();
        TestServerOptions again;
        again.dataDir = dataDir;
        QVERIFY(start(std::move(again)));
        const QList<QJsonObject> found = recordsOf(id, u"pause"_s);
        QCOMPARE(found.size(), 1);
        QCOMPARE(found[0].value(u"actor_display"_s).toString(), u"server (shutdown)"_s);
    }

    // Records older than --audit-retention go.
    void auditRetention()
    {
        TestServerOptions options;
        options.auditRetention = std::chrono::milliseconds(1000);
        QVERIFY(start(std::move(options)));
        const QUuid id = create();
        QCOMPARE(recordsOf(id, u"create"_s).size(), 1);
        m_clock->advance(5000);
        QTRY_COMPARE_WITH_TIMEOUT(recordsOf(id, u"create"_s).size(), 0, WaitMs);
    }
};

QTEST_GUILESS_MAIN(TestApiAudit)
#include "tst_api_audit.moc"
