// Each change to a conversation or its runtime is in its history as a
// ConversationStateUpdateEvent naming who made it and why: a named key's client (its actor,
// client, actor_display and the reason the request gave, as the audit record says), or the
// server and its policy. On SQLite, and on PostgreSQL (tst_api_history_postgres).
#include "storage/database.h"
#include "testserver.h"
#include "wiretypes.h"

#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

using namespace Qt::StringLiterals;
using namespace AgentDeck;
using namespace AgentDeck::Testing;

namespace {
constexpr int WaitMs = 10'000;
const QString AliceKey = u"alice-secret"_s;
const QString Reason = u"ticket 42: cleanup"_s;
} // namespace

class TestApiHistory : public QObject
{
    Q_OBJECT

    QTemporaryDir m_dir;
    std::unique_ptr<TestServer> m_server;

    // A server whose only key is ops-alice's, its client speaking with it.
    bool start(TestServerOptions options = {})
    {
        m_server.reset();
        options.namedKeys = {{u"ops-alice"_s, AliceKey}};
        m_server = std::make_unique<TestServer>(std::move(options));
        if (!m_server->start()) {
            qWarning().noquote() << "the server did not start:" << m_server->errorString();
            return false;
        }
        m_server->client().setApiKey(AliceKey);
        return true;
    }

    // A call with the reason the change is made for.
    ApiReply callWithReason(const QByteArray &method, const QUuid &id, const QString &suffix)
    {
        return m_server->call(method, ServerConnection::conversationPath(id, suffix), {},
                              QUrlQuery{{u"reason"_s, Reason}});
    }

    // The conversation's state events of `key`, oldest first.
    QList<QJsonObject> stateEvents(const QUuid &id, const QString &key)
    {
        QList<QJsonObject> found;
        for (const QJsonObject &event : m_server->events(id)) {
            if (event.value(u"kind"_s).toString() == EventKind::StateUpdate &&
                event.value(u"key"_s).toString() == key)
                found.append(event);
        }
        return found;
    }

    // The last state event of `key` with `value`; empty when there is none.
    QJsonObject lastEvent(const QUuid &id, const QString &key, const QString &value)
    {
        const QList<QJsonObject> events = stateEvents(id, key);
        for (auto it = events.crbegin(); it != events.crend(); ++it) {
            if (it->value(u"value"_s).toString() == value)
                return *it;
        }
        return {};
    }

    static void verifyAlice(const QJsonObject &event)
    {
        QVERIFY2(!event.isEmpty(), "no such event");
        QCOMPARE(event.value(u"actor"_s).toString(), u"ops-alice"_s);
        QCOMPARE(event.value(u"client"_s).toString(), u"console"_s);
        QCOMPARE(event.value(u"actor_display"_s).toString(), u"ops-alice via console"_s);
        QCOMPARE(event.value(u"reason"_s).toString(), Reason);
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

    // A client's change names its key, its client and the reason it gave. `before`: a change
    // made first, so that there is something to change back or to recover.
    void clientChanges_data()
    {
        QTest::addColumn<QString>("before");
        QTest::addColumn<QByteArray>("method");
        QTest::addColumn<QString>("suffix");
        QTest::addColumn<QString>("key");
        QTest::addColumn<QString>("value");
        QTest::addRow("archive") << QString() << "POST"_ba << u"archive"_s << u"archive"_s
                                 << u"archived"_s;
        QTest::addRow("unarchive")
            << u"archive"_s << "POST"_ba << u"unarchive"_s << u"archive"_s << u"unarchived"_s;
        QTest::addRow("runtime stop")
            << QString() << "DELETE"_ba << u"runtime"_s << u"runtime"_s << u"stopped"_s;
        QTest::addRow("runtime resume")
            << u"runtime"_s << "POST"_ba << u"runtime/resume"_s << u"runtime"_s << u"resumed"_s;
        QTest::addRow("reprovision") << QString() << "POST"_ba << u"runtime/reprovision"_s
                                     << u"runtime"_s << u"reprovisioned"_s;
        QTest::addRow("recover") << u"runtime"_s << "POST"_ba << u"recover"_s
                                 << QString(RecoveryEventKey)
                                 << QString(RecoveryAction::StartedRuntime);
    }
    void clientChanges()
    {
        QFETCH(QString, before);
        QFETCH(QByteArray, method);
        QFETCH(QString, suffix);
        QFETCH(QString, key);
        QFETCH(QString, value);
        QVERIFY(start());
        const QUuid id = m_server->create(TestServer::shellConversation(u"true"_s));
        QVERIFY(!id.isNull());
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        if (before == u"archive"_s)
            QVERIFY(m_server->post(ServerConnection::conversationPath(id, u"archive")).ok());
        else if (before == u"runtime"_s)
            QVERIFY(
                m_server->call("DELETE", ServerConnection::conversationPath(id, u"runtime")).ok());

        const ApiReply reply = callWithReason(method, id, suffix);
        QVERIFY2(reply.ok(), qPrintable(reply.detail));
        verifyAlice(lastEvent(id, key, value));
    }

    // A run started and paused by a client: its statuses `running` and `paused` name who asked.
    void runAndPause()
    {
        QVERIFY(start());
        const QUuid id = m_server->create(TestServer::shellConversation(u"sleep 1"_s, false));
        QVERIFY(!id.isNull());
        const ApiReply run = callWithReason("POST", id, u"run"_s);
        QVERIFY2(run.ok(), qPrintable(run.detail));
        QVERIFY(m_server->waitForStatus(id, u"running"_s));
        verifyAlice(lastEvent(id, u"execution_status"_s, u"running"_s));
        const ApiReply pause = callWithReason("POST", id, u"pause"_s);
        QVERIFY2(pause.ok(), qPrintable(pause.detail));
        QVERIFY(m_server->waitForStatus(id, u"paused"_s));
        verifyAlice(lastEvent(id, u"execution_status"_s, u"paused"_s));
    }

    // The run a create's initial message starts names the creator; a status the run reached
    // itself names nobody.
    void createdRunNamesItsCreator()
    {
        QVERIFY(start());
        const QUuid id = m_server->create(TestServer::shellConversation(u"true"_s));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        const QJsonObject running = lastEvent(id, u"execution_status"_s, u"running"_s);
        QCOMPARE(running.value(u"actor_display"_s).toString(), u"ops-alice via console"_s);
        QCOMPARE(running.value(u"reason"_s).toString(), QString());
        const QJsonObject finished = lastEvent(id, u"execution_status"_s, u"finished"_s);
        QVERIFY(!finished.isEmpty());
        QVERIFY(!finished.contains(u"actor"_s));
        QVERIFY(!finished.contains(u"reason"_s));
    }

    // An archive of an archived conversation, or an unarchive of one that is not, changes
    // nothing and writes no event (a client that repeats its call fills no history).
    void aChangeThatChangesNothingIsNoEvent()
    {
        QVERIFY(start());
        const QUuid id = m_server->create(TestServer::shellConversation(u"true"_s, false));
        QVERIFY(!id.isNull());
        const QString unarchive = ServerConnection::conversationPath(id, u"unarchive");
        const QString archive = ServerConnection::conversationPath(id, u"archive");
        QVERIFY(m_server->post(unarchive).ok());
        QVERIFY(stateEvents(id, u"archive"_s).isEmpty());
        QVERIFY(m_server->post(archive).ok());
        QVERIFY(m_server->post(archive).ok());
        QCOMPARE(stateEvents(id, u"archive"_s).size(), 1);
        QVERIFY(m_server->post(unarchive).ok());
        QVERIFY(m_server->post(unarchive).ok());
        QCOMPARE(stateEvents(id, u"archive"_s).size(), 2);
    }

    // A run a message sent over the event socket starts names the key the socket authenticated
    // with and its client, as one asked for over HTTP does.
    void aMessageOverTheEventSocketNamesItsSender()
    {
        QVERIFY(start());
        const QUuid id = m_server->create(TestServer::shellConversation(u"true"_s, false));
        QVERIFY(!id.isNull());
        std::unique_ptr<EventStream> stream(m_server->client().openEventStream(id, 0));
        QTRY_VERIFY_WITH_TIMEOUT(stream->isConnected(), WaitMs);
        stream->sendMessage(MessageRequest{u"user"_s, u"true"_s, true});
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        const QJsonObject running = lastEvent(id, u"execution_status"_s, u"running"_s);
        QCOMPARE(running.value(u"actor_display"_s).toString(), u"ops-alice via console"_s);
    }

    // The idle policy's stop of a sandbox is in the history, by the server, with its reason.
    void idlePolicy()
    {
        TestServerOptions options;
        options.sandboxIdleTimeout = std::chrono::milliseconds(200);
        QVERIFY(start(std::move(options)));
        const QUuid id = m_server->create(TestServer::shellConversation(u"true"_s));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QJsonObject stopped;
        QTRY_VERIFY_WITH_TIMEOUT(!(stopped = lastEvent(id, u"runtime"_s, u"stopped"_s)).isEmpty(),
                                 WaitMs);
        QCOMPARE(stopped.value(u"actor"_s).toString(), u"server"_s);
        QCOMPARE(stopped.value(u"client"_s).toString(), u"idle"_s);
        QCOMPARE(stopped.value(u"actor_display"_s).toString(), u"server (idle)"_s);
        QCOMPARE(stopped.value(u"reason"_s).toString(),
                 u"idle for 200ms (--sandbox-idle-timeout)"_s);
    }

    // A run left `running` by a server that stopped is paused at the next start, by the server
    // as its recovery policy.
    void recoveryPolicy()
    {
        const QString dataDir = m_dir.filePath(u"recovery"_s);
        QVERIFY(QDir().mkpath(dataDir));
        const auto onDataDir = [&dataDir] {
            TestServerOptions options;
            options.dataDir = dataDir;
            return options;
        };
        QVERIFY(start(onDataDir()));
        const QUuid id = m_server->create(TestServer::shellConversation(u"true"_s));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        // As a server killed while it ran leaves it.
        QSqlQuery mark = m_server->server().database().prepare(
            u"UPDATE conversations SET execution_status = 'running' WHERE id = ?"_s);
        mark.addBindValue(toWireId(id));
        m_server->server().database().exec(mark);
        m_server->stopKeepingSandboxes();
        QVERIFY(start(onDataDir()));
        const QJsonObject paused = lastEvent(id, u"execution_status"_s, u"paused"_s);
        QVERIFY(!paused.isEmpty());
        QCOMPARE(paused.value(u"actor_display"_s).toString(), u"server (recovery)"_s);
        QCOMPARE(paused.value(u"reason"_s).toString(), u"it was running when the server stopped"_s);
    }
};

QTEST_GUILESS_MAIN(TestApiHistory)
#include "tst_api_history.moc"
