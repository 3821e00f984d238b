// The outcome of a run's last action (ConversationInfo::outcome) over real HTTP: what a
// command's end, an interrupt and a restart write, and what the operator does with it.
#include "lifecycle.h"
#include "storage/conversationstore.h"
#include "storage/database.h"
#include "testevents.h"
#include "testserver.h"

#include <QDir>
#include <QJsonArray>
#include <QTemporaryDir>
#include <QTest>

using namespace Qt::StringLiterals;
using namespace AgentDeck;
using namespace AgentDeck::Testing;

namespace {
QJsonObject shell(const QString &command, bool run = true)
{
    return TestServer::shellConversation(command, run);
}
} // namespace

class ApiOutcomeTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void init()
    {
        m_dir = std::make_unique<QTemporaryDir>();
        TestServerOptions options;
        options.dataDir = m_dir->path();
        m_server = std::make_unique<TestServer>(std::move(options));
        QVERIFY2(m_server->start(), qPrintable(m_server->errorString()));
    }
    void cleanup()
    {
        m_server.reset();
        m_dir.reset();
    }

    void aCommandsEndIsTheOutcome_data()
    {
        QTest::addColumn<QString>("command");
        QTest::addColumn<QString>("kind");
        QTest::addColumn<int>("exitCode");
        QTest::addRow("success") << u"true"_s << u"succeeded"_s << 0;
        QTest::addRow("failure") << u"exit 2"_s << u"failed"_s << 2;
    }
    void aCommandsEndIsTheOutcome()
    {
        QFETCH(QString, command);
        QFETCH(QString, kind);
        QFETCH(int, exitCode);
        const QUuid id = m_server->create(shell(command));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        const QJsonObject outcome = outcomeOf(id);
        QCOMPARE(outcome.value(u"kind"_s).toString(), kind);
        QCOMPARE(outcome.value(u"exit_code"_s).toInt(-1), exitCode);
        QVERIFY(outcome.value(u"interrupted_by"_s).isNull());
        QVERIFY(outcome.value(u"retry_command"_s).isNull());
        QCOMPARE(outcome.value(u"dismissed"_s).toBool(true), false);
        const auto at = parseWireTime(outcome.value(u"at"_s).toString());
        QVERIFY(at.has_value());
        // When its command began: how long it ran is `at` less that.
        const auto startedAt = parseWireTime(outcome.value(u"started_at"_s).toString());
        QVERIFY(startedAt.has_value() && *startedAt <= *at);
        // Not running: no time it runs since.
        const QJsonObject info =
            m_server->get(ServerConnection::conversationPath(id)).json.toObject();
        QVERIFY(info.contains(u"running_since"_s) && info.value(u"running_since"_s).isNull());
        // The same in a search page, in a batch read, and once the server restarted.
        const QJsonObject listed = m_server->get(u"/api/conversations/search"_s)
                                       .json.toObject()
                                       .value(u"items"_s)
                                       .toArray()
                                       .first()
                                       .toObject();
        QCOMPARE(listed.value(u"outcome"_s).toObject(), outcome);
        QUrlQuery ids;
        ids.addQueryItem(u"ids"_s, toWireId(id));
        QCOMPARE(m_server->get(u"/api/conversations"_s, ids)
                     .json.toArray()
                     .first()
                     .toObject()
                     .value(u"outcome"_s)
                     .toObject(),
                 outcome);
        restart();
        QCOMPARE(outcomeOf(id), outcome);
    }

    void aNewConversationHasNoOutcome()
    {
        const QUuid id = m_server->create(shell(u"true"_s, false));
        const QJsonObject info =
            m_server->get(ServerConnection::conversationPath(id)).json.toObject();
        QVERIFY(info.contains(u"outcome"_s));
        QVERIFY(info.value(u"outcome"_s).isNull());
    }

    void anInterruptIsTheOperators()
    {
        const QDateTime asked = QDateTime::currentDateTimeUtc().addMSecs(-1);
        const QUuid id = m_server->create(shell(u"sleep 600"_s));
        QVERIFY(QTest::qWaitFor(
            [&] { return ofKind(m_server->events(id), u"ActionEvent"_s).size() == 1; }, 10000));
        // Running since it began, in the row, a search page and a restart of nothing else.
        const auto runningSince = [this, &id] {
            return parseWireTime(m_server->get(ServerConnection::conversationPath(id))
                                     .json.toObject()
                                     .value(u"running_since"_s)
                                     .toString());
        };
        const auto since = runningSince();
        QVERIFY(since.has_value() && *since >= asked.addSecs(-1) &&
                *since <= QDateTime::currentDateTimeUtc());
        QVERIFY(m_server->post(ServerConnection::conversationPath(id, u"interrupt")).ok());
        QVERIFY(m_server->waitForStatus(id, u"paused"_s));
        const QJsonObject outcome = outcomeOf(id);
        QCOMPARE(outcome.value(u"kind"_s).toString(), u"interrupted"_s);
        QCOMPARE(outcome.value(u"interrupted_by"_s).toString(), u"operator"_s);
        QCOMPARE(outcome.value(u"retry_command"_s).toString(), u"sleep 600"_s);
        QVERIFY(!runningSince().has_value());
    }

    // A run cut short by a crash was continued by Recover: the shell agent said "[command
    // interrupted]" and the conversation read `finished`, as a success does.
    void recoverAfterACrashOffersTheCommandAgain()
    {
        const QUuid id = seedCrashedRun(u"echo again"_s);
        restart();
        QCOMPARE(m_server->status(id), u"paused"_s);
        const QJsonObject outcome = outcomeOf(id);
        QCOMPARE(outcome.value(u"kind"_s).toString(), u"interrupted"_s);
        QCOMPARE(outcome.value(u"interrupted_by"_s).toString(), u"restart"_s);
        QCOMPARE(outcome.value(u"retry_command"_s).toString(), u"echo again"_s);

        const ApiReply recovered =
            m_server->post(ServerConnection::conversationPath(id, u"recover"));
        QVERIFY2(recovered.ok(), qPrintable(recovered.detail));
        const QJsonObject info = recovered.json.toObject();
        QCOMPARE(info.value(u"execution_status"_s).toString(), u"paused"_s);
        QCOMPARE(info.value(u"runtime_info"_s).toObject().value(u"runtime_status"_s).toString(),
                 u"available"_s);
        QCOMPARE(info.value(u"outcome"_s).toObject(), outcome);
        QCOMPARE(ofKind(m_server->events(id), u"ActionEvent"_s).size(), 1);

        const QString retry = ServerConnection::conversationPath(id, u"outcome/retry");
        const ApiReply retried = m_server->post(retry);
        QVERIFY2(retried.ok(), qPrintable(retried.detail));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QCOMPARE(outcomeOf(id).value(u"kind"_s).toString(), u"succeeded"_s);
        const QList<QJsonObject> observations = ofKind(m_server->events(id), u"ObservationEvent"_s);
        QCOMPARE(observations.size(), 2);
        QCOMPARE(observations.last().value(u"observation"_s).toObject().value(u"output"_s),
                 u"again\n"_s);
        // Once run, nothing is offered any more.
        const ApiReply again = m_server->post(retry);
        QCOMPARE(again.status, 409);
        QCOMPARE(again.errorCode, u"nothing_to_retry"_s);
    }

    // Recover says what it did (`actions`) and leaves an event for each action; the clients
    // offer it (Lifecycle::canRecover) exactly when it does something, and once it did, there
    // is nothing left to recover.
    void recoverSaysWhatItDid_data()
    {
        QTest::addColumn<QString>("setup");
        QTest::addColumn<QStringList>("actions");
        const QString stale = RecoveryAction::ResolvedStaleRun;
        const QString runtime = RecoveryAction::StartedRuntime;
        const QString run = RecoveryAction::ContinuedRun;
        QTest::addRow("crashed command, no sandbox") << u"crashed"_s << QStringList{runtime};
        QTest::addRow("stale run in a live server")
            << u"stale"_s << QStringList{stale, runtime, run};
        QTest::addRow("finished, sandbox up") << u"finished"_s << QStringList{};
        QTest::addRow("interrupted by the operator, sandbox up")
            << u"interrupted"_s << QStringList{};
        QTest::addRow("finished, runtime stopped") << u"stopped"_s << QStringList{runtime};
    }
    void recoverSaysWhatItDid()
    {
        QFETCH(QString, setup);
        QFETCH(QStringList, actions);
        // The in-server runtime is always available: nothing for a recovery to start.
        QVERIFY(m_server->usesSandboxes());
        QUuid id;
        if (setup == u"crashed"_s) {
            id = seedCrashedRun(u"echo again"_s);
            restart();
        } else if (setup == u"stale"_s) {
            id = m_server->create(shell(u"echo continued"_s, false));
            // The run loop died without an executor: only the row says `running`.
            m_server->server().store().append(id, {}, ExecutionStatus::Running,
                                              QDateTime::currentMSecsSinceEpoch());
        } else if (setup == u"interrupted"_s) {
            id = m_server->create(shell(u"sleep 600"_s));
            QVERIFY(QTest::qWaitFor(
                [&] { return ofKind(m_server->events(id), u"ActionEvent"_s).size() == 1; }, 10000));
            QVERIFY(m_server->post(ServerConnection::conversationPath(id, u"interrupt")).ok());
            QVERIFY(m_server->waitForStatus(id, u"paused"_s));
        } else {
            id = m_server->create(shell(u"true"_s));
            QVERIFY(m_server->waitForStatus(id, u"finished"_s));
            if (setup == u"stopped"_s)
                QVERIFY(
                    m_server->call("DELETE"_ba, ServerConnection::conversationPath(id, u"runtime"))
                        .ok());
        }
        QVERIFY(!id.isNull());
        const auto before = conversation(id);
        QVERIFY(before);
        const Lifecycle::Availability offered = Lifecycle::canRecover(*before);
        QVERIFY2(offered.enabled == !actions.isEmpty(), qPrintable(offered.reason));

        const QString recover = ServerConnection::conversationPath(id, u"recover");
        const ApiReply recovered = m_server->post(recover);
        QVERIFY2(recovered.ok(), qPrintable(recovered.detail));
        QCOMPARE(recoveryActionsOf(recovered.json.toObject()).value_or(QStringList{u"none"_s}),
                 actions);
        // The answer is the conversation too.
        QCOMPARE(ConversationInfo::fromJson(recovered.json.toObject())->id, id);
        QCOMPARE(recoveryActionsIn(m_server->events(id)), actions);

        QVERIFY(QTest::qWaitFor([&] { return m_server->status(id) != u"running"_s; }, 10000));
        const auto after = conversation(id);
        QVERIFY(after);
        QVERIFY2(!Lifecycle::canRecover(*after).enabled,
                 qPrintable(Lifecycle::canRecover(*after).reason));
        const ApiReply again = m_server->post(recover);
        QVERIFY2(again.ok(), qPrintable(again.detail));
        QCOMPARE(recoveryActionsOf(again.json.toObject()).value_or(QStringList{u"none"_s}),
                 QStringList{});
        QCOMPARE(recoveryActionsIn(m_server->events(id)), actions);
    }

    void dismissAcknowledgesAndTheNextRunReplaces()
    {
        const QUuid id = m_server->create(shell(u"exit 2"_s));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        const ApiReply dismissed =
            m_server->post(ServerConnection::conversationPath(id, u"outcome/dismiss"));
        QVERIFY2(dismissed.ok(), qPrintable(dismissed.detail));
        const QJsonObject outcome = dismissed.json.toObject().value(u"outcome"_s).toObject();
        QCOMPARE(outcome.value(u"kind"_s).toString(), u"failed"_s);
        QCOMPARE(outcome.value(u"dismissed"_s).toBool(), true);
        QCOMPARE(outcomeOf(id), outcome);
        // Again: nothing changes.
        QVERIFY(m_server->post(ServerConnection::conversationPath(id, u"outcome/dismiss")).ok());
        QCOMPARE(outcomeOf(id), outcome);

        QVERIFY(m_server->send(id, u"exit 3"_s, true).ok());
        QVERIFY(QTest::qWaitFor([&] { return outcomeOf(id).value(u"exit_code"_s).toInt() == 3; },
                                10000));
        QCOMPARE(outcomeOf(id).value(u"dismissed"_s).toBool(true), false);

        QCOMPARE(
            m_server
                ->post(ServerConnection::conversationPath(QUuid::createUuid(), u"outcome/dismiss"))
                .status,
            404);
    }

    void archivingDismisses()
    {
        const QUuid id = m_server->create(shell(u"exit 2"_s));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QVERIFY(m_server->post(ServerConnection::conversationPath(id, u"archive")).ok());
        QVERIFY(m_server->post(ServerConnection::conversationPath(id, u"unarchive")).ok());
        QCOMPARE(outcomeOf(id).value(u"dismissed"_s).toBool(), true);
    }

private:
    std::optional<ConversationInfo> conversation(const QUuid &id)
    {
        return ConversationInfo::fromJson(
            m_server->get(ServerConnection::conversationPath(id)).json.toObject());
    }

    QJsonObject outcomeOf(const QUuid &id)
    {
        return m_server->get(ServerConnection::conversationPath(id))
            .json.toObject()
            .value(u"outcome"_s)
            .toObject();
    }

    void restart()
    {
        m_server.reset();
        TestServerOptions options;
        options.dataDir = m_dir->path();
        m_server = std::make_unique<TestServer>(std::move(options));
        QVERIFY2(m_server->start(), qPrintable(m_server->errorString()));
    }

    // A shell conversation left `running` with its command in flight, as a server killed
    // meanwhile leaves it.
    QUuid seedCrashedRun(const QString &command)
    {
        m_server.reset();
        QString error;
        auto db = Database::openSqlite(m_dir->filePath(u"agentdeck.db"_s), &error);
        if (!db)
            return {};
        ConversationStore store(*db);
        ConversationInfo info{QUuid::createUuid(), u"crashed"_s};
        info.createdAt = info.updatedAt = QDateTime::currentDateTimeUtc();
        info.agentKind = u"shell"_s;
        info.workingDir = m_dir->filePath(u"workspaces/"_s + toWireId(info.id));
        QDir().mkpath(info.workingDir);
        info.executionStatus = ExecutionStatus::Running;
        store.insert(info);
        store.append(
            info.id,
            {Event::message(u"user"_s, u"user"_s, command), Event::action(u"bash"_s, command)},
            ExecutionStatus::Running, QDateTime::currentMSecsSinceEpoch());
        return info.id;
    }

    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<TestServer> m_server;
};

QTEST_GUILESS_MAIN(ApiOutcomeTest)
#include "tst_api_outcome.moc"
