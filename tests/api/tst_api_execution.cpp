// Execution over real HTTP with the built-in agents and the in-server process runtime.
#include "storage/conversationstore.h"
#include "storage/database.h"
#include "testevents.h"
#include "testserver.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QProcess>
#include <QRandomGenerator>
#include <QTest>

using namespace Qt::StringLiterals;
using namespace AgentDeck;
using namespace AgentDeck::Testing;

namespace {
QJsonObject shell(const QString &command, bool run = true, bool confirm = false)
{
    QJsonObject body{{u"agent"_s, QJsonObject{{u"kind"_s, u"shell"_s}}},
                     {u"initial_message"_s, TestServer::message(command, run)}};
    if (confirm)
        body.insert(u"confirmation_policy"_s, QJsonObject{{u"kind"_s, u"AlwaysConfirm"_s}});
    return body;
}

QJsonObject observationOf(const QJsonObject &event)
{
    return event.value(u"observation"_s).toObject();
}
} // namespace

class ApiExecutionTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void init()
    {
        m_server = std::make_unique<TestServer>();
        QVERIFY2(m_server->start(), qPrintable(m_server->errorString()));
    }
    void cleanup() { m_server.reset(); }

    // What a command leaves running in the background ends with it, in the in-server runtime
    // as in a sandbox: `sleep &` outlived its command, and the server.
    void backgroundChildrenEndWithTheirCommand()
    {
        TestServerOptions options;
        options.inProcessRuntime = true;
        TestServer server(std::move(options));
        QVERIFY2(server.start(), qPrintable(server.errorString()));
        const QByteArray seconds =
            QByteArray::number(300'000 + QRandomGenerator::global()->bounded(99'999));
        const auto sleeping = [&] {
            int found = 0;
            for (const QString &pid : QDir(u"/proc"_s).entryList(QDir::Dirs)) {
                QFile cmdline(u"/proc/%1/cmdline"_s.arg(pid));
                if (cmdline.open(QIODevice::ReadOnly) &&
                    cmdline.readAll().split('\0').mid(0, 2) == QList<QByteArray>{"sleep", seconds})
                    ++found;
            }
            return found;
        };
        const QUuid id =
            server.create(shell(u"sleep "_s + QString::fromLatin1(seconds) + u" & echo started"_s));
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        const bool ended = QTest::qWaitFor([&] { return sleeping() == 0; }, 5000);
        if (!ended)
            QProcess::execute(u"pkill"_s, {u"-f"_s, u"sleep "_s + QString::fromLatin1(seconds)});
        QVERIFY(ended);
    }

    void shellRunsCommandInItsWorkspaceAndFinishes()
    {
        const QUuid id = m_server->create(shell(u"echo hello; pwd; exit 3"_s));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        const QJsonObject info =
            m_server->get(ServerConnection::conversationPath(id)).json.toObject();
        const QString workspace =
            info.value(u"workspace"_s).toObject().value(u"working_dir"_s).toString();
        QVERIFY(workspace.startsWith(m_server->dataDir()));

        const QList<QJsonObject> events = m_server->events(id);
        const QList<QJsonObject> actions = ofKind(events, u"ActionEvent"_s);
        const QList<QJsonObject> observations = ofKind(events, u"ObservationEvent"_s);
        QCOMPARE(actions.size(), 1);
        QCOMPARE(observations.size(), 1);
        QCOMPARE(actions[0].value(u"action"_s).toObject().value(u"command"_s).toString(),
                 u"echo hello; pwd; exit 3"_s);
        QCOMPARE(observations[0].value(u"action_id"_s), actions[0].value(u"id"_s));
        QCOMPARE(observations[0].value(u"tool_call_id"_s), actions[0].value(u"tool_call_id"_s));
        QCOMPARE(observationOf(observations[0]).value(u"exit_code"_s).toInt(), 3);
        QCOMPARE(observationOf(observations[0]).value(u"output"_s).toString(),
                 u"hello\n"_s + workspace + u'\n');
        QCOMPARE(observationOf(observations[0]).value(u"interrupted"_s).toBool(), false);

        // Every status change is persisted and visible in the history.
        QStringList statuses;
        for (const QJsonObject &update : ofKind(events, u"ConversationStateUpdateEvent"_s))
            statuses.append(update.value(u"value"_s).toString());
        QCOMPARE(statuses, (QStringList{u"running"_s, u"finished"_s}));

        const QString response =
            m_server->get(ServerConnection::conversationPath(id, u"agent_final_response"))
                .json.toObject()
                .value(u"response"_s)
                .toString();
        QVERIFY(response.contains(u"hello"_s));
        QVERIFY(response.contains(u"[exit code 3]"_s));
    }

    // A command that starts with a dash is a command: bash took it for its own options
    // ("bash: -c: option requires an argument").
    void aLeadingDashIsPartOfTheCommand()
    {
        const QUuid id = m_server->create(shell(u"-n"_s));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        const QList<QJsonObject> observations = ofKind(m_server->events(id), u"ObservationEvent"_s);
        QCOMPARE(observations.size(), 1);
        QCOMPARE(observationOf(observations[0]).value(u"exit_code"_s).toInt(), 127);
        const QString output = observationOf(observations[0]).value(u"output"_s).toString();
        QVERIFY2(output.contains(u"-n: command not found"_s), qPrintable(output));
    }

    void commandsDoNotSeeTheServersSecrets()
    {
        qputenv("AGENTDECK_SESSION_API_KEYS", "secret-key");
        const QUuid id = m_server->create(shell(u"env | grep -c AGENTDECK_ || true"_s));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        qunsetenv("AGENTDECK_SESSION_API_KEYS");
        const QString response =
            m_server->get(ServerConnection::conversationPath(id, u"agent_final_response"))
                .json.toObject()
                .value(u"response"_s)
                .toString();
        if (m_server->usesSandboxes())
            QCOMPARE(response.trimmed(), u"0"_s);
    }

    // A conversation's secrets reach the environment of its commands, and no answer: not the
    // conversation's, not the output of a command that prints them, not the record of that
    // output a sandbox keeps in the runtime dir.
    void secretsReachCommandsAndNoAnswer()
    {
        const QUuid id = m_server->create(TestServer::withAgent({}));
        const QString path = ServerConnection::conversationPath(id, u"secrets");
        const ApiReply set = m_server->post(
            path, QJsonObject{{u"secrets"_s,
                               QJsonObject{{u"DEPLOY_TOKEN"_s, u"tok-5150-first"_s},
                                           {u"OTHER_TOKEN"_s,
                                            QJsonObject{{u"kind"_s, u"StaticSecret"_s},
                                                        {u"value"_s, u"tok-2718-other"_s}}}}}});
        QCOMPARE(set.status, 200);
        QCOMPARE(set.json.toObject().value(u"success"_s).toBool(), true);
        // A name given again takes the new value; the others stay.
        QCOMPARE(m_server
                     ->post(path, QJsonObject{{u"secrets"_s, QJsonObject{{u"DEPLOY_TOKEN"_s,
                                                                          u"tok-5150-secret"_s}}}})
                     .status,
                 200);
        QVERIFY(!m_server->get(ServerConnection::conversationPath(id)).body.contains("tok-"));

        QVERIFY(
            m_server
                ->send(id,
                       u"test \"$DEPLOY_TOKEN\" = \"tok-$((5000 + 150))-secret\" && echo matched; "
                       "echo \"$DEPLOY_TOKEN and $OTHER_TOKEN\""_s,
                       true)
                .ok());
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        const QList<QJsonObject> observations = ofKind(m_server->events(id), u"ObservationEvent"_s);
        QCOMPARE(observations.size(), 1);
        QCOMPARE(observationOf(observations[0]).value(u"output"_s).toString(),
                 u"matched\n<secret-hidden> and <secret-hidden>\n"_s);
        // The command names no value (what a message or an action says is stored as it is).
        const QByteArray history =
            m_server->get(ServerConnection::conversationPath(id, u"events/search")).body;
        QVERIFY(!history.contains("tok-5150") && !history.contains("tok-2718"));
        if (m_server->usesSandboxes()) {
            QFile record(
                QDir(m_server->dataDir()).filePath(u"runtimes/%1/command.out"_s.arg(toWireId(id))));
            QVERIFY2(record.open(QIODevice::ReadOnly), qPrintable(record.fileName()));
            const QByteArray recorded = record.readAll();
            QVERIFY2(recorded.contains("matched") && !recorded.contains("tok-5150"),
                     recorded.constData());
        }
    }

    // The names are stored, the values not: after a restart the conversation says which ones
    // to send again, until they are.
    void aRestartAsksForTheSecretsAgain()
    {
        const QUuid id = m_server->create(TestServer::withAgent({}));
        const QString path = ServerConnection::conversationPath(id, u"secrets");
        QVERIFY(m_server
                    ->post(path, QJsonObject{{u"secrets"_s, QJsonObject{{u"B_TOKEN"_s, u"bbb"_s},
                                                                        {u"A_TOKEN"_s, u"aaa"_s}}}})
                    .ok());
        const auto info = [&] {
            return m_server->get(ServerConnection::conversationPath(id)).json.toObject();
        };
        const auto missing = [&] {
            return info()[u"runtime_info"_s].toObject()[u"missing_secrets"_s].toArray();
        };
        QCOMPARE(info()[u"secret_names"_s].toArray(), (QJsonArray{u"A_TOKEN"_s, u"B_TOKEN"_s}));
        QVERIFY(missing().isEmpty());

        m_server->stop();
        QVERIFY2(m_server->start(), qPrintable(m_server->errorString()));
        QCOMPARE(missing(), (QJsonArray{u"A_TOKEN"_s, u"B_TOKEN"_s}));
        // The same in a page of the list.
        const QJsonArray page =
            m_server->get(u"/api/conversations/search"_s).json.toObject()[u"items"_s].toArray();
        QCOMPARE(page.first().toObject()[u"runtime_info"_s].toObject()[u"missing_secrets"_s],
                 QJsonValue(QJsonArray{u"A_TOKEN"_s, u"B_TOKEN"_s}));
        QVERIFY(m_server
                    ->post(path, QJsonObject{{u"secrets"_s,
                                              QJsonObject{{u"A_TOKEN"_s, u"second-value"_s}}}})
                    .ok());
        QCOMPARE(missing(), (QJsonArray{u"B_TOKEN"_s}));
        // A value no id or time holds by chance: two hex digits are in one conversation id of
        // eight.
        QVERIFY(
            !m_server->get(ServerConnection::conversationPath(id)).body.contains("second-value"));
    }

    void badSecretsAreRefused_data()
    {
        QTest::addColumn<QByteArray>("body");
        QTest::addColumn<QString>("named");
        QTest::newRow("not an object") << R"({"secrets": ["A"]})"_ba << u"secrets must be"_s;
        QTest::newRow("no secrets") << R"({})"_ba << u"secrets must be"_s;
        QTest::newRow("a name starting with a digit")
            << R"({"secrets": {"1A": "x"}})"_ba << u"1A"_s;
        QTest::newRow("a name with a dash") << R"({"secrets": {"A-B": "x"}})"_ba << u"A-B"_s;
        QTest::newRow("PATH") << R"({"secrets": {"PATH": "/tmp"}})"_ba << u"PATH is set"_s;
        QTest::newRow("a number") << R"({"secrets": {"A": 5}})"_ba << u"secrets.A must be"_s;
        QTest::newRow("a NUL") << R"({"secrets": {"A": "x\u0000y"}})"_ba << u"NUL"_s;
        QTest::newRow("a LookupSecret")
            << R"({"secrets": {"A": {"kind": "LookupSecret", "url": "http://x"}}})"_ba
            << u"LookupSecret is not offered"_s;
        QTest::newRow("too much") << QByteArray(R"({"secrets": {"A": ")" + QByteArray(70'000, 'x') +
                                                R"("}})")
                                  << u"more than 65536 bytes"_s;
    }

    void badSecretsAreRefused()
    {
        QFETCH(QByteArray, body);
        QFETCH(QString, named);
        const QUuid id = m_server->create(TestServer::withAgent({}));
        const ApiReply reply = m_server->post(ServerConnection::conversationPath(id, u"secrets"),
                                              QJsonDocument::fromJson(body).object());
        QCOMPARE(reply.status, 422);
        QVERIFY2(reply.detail.contains(named), qPrintable(reply.detail));
    }

    void secretsOfAConversationThatDoesNotExistAre404()
    {
        const ApiReply reply =
            m_server->post(ServerConnection::conversationPath(QUuid::createUuid(), u"secrets"),
                           QJsonObject{{u"secrets"_s, QJsonObject{{u"A"_s, u"x"_s}}}});
        QCOMPARE(reply.status, 404);
    }

    // A fork has the history of its source, a copy of its workspace, and runs on its own.
    void aForkHasTheHistoryAndACopyOfTheWorkspace()
    {
        const QUuid source = m_server->create(shell(u"echo from-the-source > made.txt"_s));
        QVERIFY(m_server->waitForStatus(source, u"finished"_s));
        const QList<QJsonObject> sourceEvents = m_server->events(source);

        const ApiReply forked = m_server->post(ServerConnection::conversationPath(source, u"fork"),
                                               QJsonObject{{u"title"_s, u"the fork"_s}});
        QCOMPARE(forked.status, 201);
        const QJsonObject fork = forked.json.toObject();
        const auto id = parseWireId(fork.value(u"id"_s).toString());
        QVERIFY(id && *id != source);
        QCOMPARE(fork.value(u"title"_s).toString(), u"the fork"_s);
        QCOMPARE(fork.value(u"execution_status"_s).toString(), u"idle"_s);
        // The same history under new ids, which name each other as the source's did.
        const QList<QJsonObject> forkEvents = m_server->events(*id);
        QCOMPARE(forkEvents.size(), sourceEvents.size());
        for (qsizetype i = 0; i < forkEvents.size(); ++i) {
            QCOMPARE(forkEvents[i][u"seq"_s], sourceEvents[i][u"seq"_s]);
            QCOMPARE(forkEvents[i][u"kind"_s], sourceEvents[i][u"kind"_s]);
            QVERIFY(forkEvents[i][u"id"_s] != sourceEvents[i][u"id"_s]);
        }
        const QList<QJsonObject> forkActions = ofKind(forkEvents, u"ActionEvent"_s);
        const QList<QJsonObject> forkObservations = ofKind(forkEvents, u"ObservationEvent"_s);
        QCOMPARE(forkObservations.size(), 1);
        QCOMPARE(forkObservations[0][u"action_id"_s], forkActions[0][u"id"_s]);
        QCOMPARE(observationOf(forkObservations[0]),
                 observationOf(ofKind(sourceEvents, u"ObservationEvent"_s)[0]));

        const QString sourceDir =
            QDir(m_server->dataDir()).filePath(u"workspaces/"_s + toWireId(source));
        const QString forkDir =
            fork.value(u"workspace"_s).toObject().value(u"working_dir"_s).toString();
        QVERIFY(forkDir != sourceDir);
        QVERIFY(m_server->send(*id, u"cat made.txt; echo from-the-fork > made.txt"_s, true).ok());
        QVERIFY(m_server->waitForStatus(*id, u"finished"_s));
        const QList<QJsonObject> observations =
            ofKind(m_server->events(*id), u"ObservationEvent"_s);
        QCOMPARE(observationOf(observations.last()).value(u"output"_s).toString(),
                 u"from-the-source\n"_s);
        // The source's workspace and history are as they were.
        QFile made(QDir(sourceDir).filePath(u"made.txt"_s));
        QVERIFY(made.open(QIODevice::ReadOnly));
        QCOMPARE(made.readAll(), "from-the-source\n"_ba);
        QCOMPARE(m_server->events(source).size(), sourceEvents.size());
    }

    void forksThatCannotBeAreRefused()
    {
        const QUuid running = m_server->create(shell(u"sleep 30"_s));
        QVERIFY(m_server->waitForStatus(running, u"running"_s));
        ApiReply reply = m_server->post(ServerConnection::conversationPath(running, u"fork"));
        QCOMPARE(reply.status, 409);
        QCOMPARE(reply.errorCode, u"conversation_running"_s);
        m_server->post(ServerConnection::conversationPath(running, u"interrupt"));
        QVERIFY(m_server->waitForStatus(running, u"paused"_s));

        const QUuid other = m_server->create(TestServer::withAgent({}));
        reply = m_server->post(ServerConnection::conversationPath(running, u"fork"),
                               QJsonObject{{u"id"_s, toWireId(other)}});
        QCOMPARE(reply.status, 409);
        QCOMPARE(reply.errorCode, u"conversation_exists"_s);
        reply = m_server->post(ServerConnection::conversationPath(running, u"fork"),
                               QJsonObject{{u"reset_metrics"_s, u"no"_s}});
        QCOMPARE(reply.status, 422);
        reply = m_server->post(ServerConnection::conversationPath(QUuid::createUuid(), u"fork"));
        QCOMPARE(reply.status, 404);
        // The paused one forks, with the id asked for.
        const QUuid chosen = QUuid::createUuid();
        reply = m_server->post(ServerConnection::conversationPath(running, u"fork"),
                               QJsonObject{{u"id"_s, toWireId(chosen)}});
        QCOMPARE(reply.status, 201);
        QCOMPARE(reply.json.toObject().value(u"id"_s).toString(), toWireId(chosen));
    }

    void callerSuppliedWorkspaceIsUsed()
    {
        QTemporaryDir own;
        QVERIFY(TestServer::ownAsUser(own.path()));
        QJsonObject body = shell(u"touch made-here"_s);
        body.insert(u"workspace"_s, QJsonObject{{u"working_dir"_s, own.path()}});
        const QUuid id = m_server->create(body);
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QVERIFY(QFile::exists(own.filePath(u"made-here"_s)));
    }

    // A supplied workspace is mounted writable into the sandbox. One that became a link into
    // the data dir after the create (a command of another conversation can make one) had the
    // catalog mounted with it; one under such a link, not made yet, passed the create's check.
    void aSuppliedWorkspaceLeadingIntoTheDataDirIsRefused()
    {
        QTemporaryDir own;
        const QString workspace = own.filePath(u"ws"_s);
        QVERIFY(QDir().mkpath(workspace));
        QJsonObject body = shell(u"touch made-here"_s, false);
        body.insert(u"workspace"_s, QJsonObject{{u"working_dir"_s, workspace}});
        const QUuid id = m_server->create(body);
        QVERIFY(!id.isNull());
        QVERIFY(QDir(workspace).removeRecursively());
        QVERIFY(QFile::link(m_server->dataDir(), workspace));
        const ApiReply run = m_server->post(ServerConnection::conversationPath(id, u"run"));
        QCOMPARE(run.status, 422);
        QCOMPARE(run.errorCode, u"invalid_parameter"_s);
        QVERIFY(!QFile::exists(QDir(m_server->dataDir()).filePath(u"made-here"_s)));

        body.insert(u"workspace"_s,
                    QJsonObject{{u"working_dir"_s, QString(workspace + u"/not/made/yet"_s)}});
        const ApiReply created = m_server->post(u"/api/conversations"_s, body);
        QCOMPARE(created.status, 422);
    }

    void echoAgentRepliesWithTheMessage()
    {
        const QUuid id = m_server->create(
            QJsonObject{{u"agent"_s, QJsonObject{{u"kind"_s, u"echo"_s}}},
                        {u"initial_message"_s, TestServer::message(u"ping"_s, true)}});
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QCOMPARE(m_server->get(ServerConnection::conversationPath(id, u"agent_final_response"))
                     .json.toObject()
                     .value(u"response"_s)
                     .toString(),
                 u"ping"_s);
    }

    void runWhileRunningIsConflictAndMessagesArePickedUp()
    {
        const QUuid id = m_server->create(shell(u"sleep 1; echo first"_s));
        QVERIFY(m_server->waitForStatus(id, u"running"_s));
        const ApiReply again = m_server->post(ServerConnection::conversationPath(id, u"run"));
        QCOMPARE(again.status, 409);
        QCOMPARE(again.errorCode, u"conversation_already_running"_s);
        // A message with run: true during a live run answers 200 and the run picks it up.
        const ApiReply sent = m_server->send(id, u"echo second"_s, true);
        QCOMPARE(sent.status, 200);
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QCOMPARE(ofKind(m_server->events(id), u"ObservationEvent"_s).size(), 2);
        QCOMPARE(m_server->get(ServerConnection::conversationPath(id, u"agent_final_response"))
                     .json.toObject()
                     .value(u"response"_s)
                     .toString(),
                 u"second\n"_s);
    }

    void pauseStopsAfterTheCurrentStep()
    {
        const QUuid id = m_server->create(shell(u"sleep 0.5; echo done"_s));
        QVERIFY(m_server->waitForStatus(id, u"running"_s));
        QVERIFY(m_server->post(ServerConnection::conversationPath(id, u"pause")).ok());
        QVERIFY(m_server->waitForStatus(id, u"paused"_s));
        const QList<QJsonObject> events = m_server->events(id);
        QCOMPARE(ofKind(events, u"PauseEvent"_s).size(), 1);
        // The step in flight completed and was recorded; the reply did not happen yet.
        const QList<QJsonObject> observations = ofKind(events, u"ObservationEvent"_s);
        QCOMPARE(observations.size(), 1);
        QCOMPARE(observationOf(observations[0]).value(u"interrupted"_s).toBool(), false);
        // Run continues where it stopped.
        QVERIFY(m_server->post(ServerConnection::conversationPath(id, u"run")).ok());
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QCOMPARE(ofKind(m_server->events(id), u"ObservationEvent"_s).size(), 1);
    }

    void interruptKillsTheCommandInFlight()
    {
        const QUuid id = m_server->create(shell(u"echo started; sleep 30"_s));
        QVERIFY(m_server->waitForStatus(id, u"running"_s));
        QVERIFY(QTest::qWaitFor(
            [&] { return !ofKind(m_server->events(id), u"ActionEvent"_s).isEmpty(); }));
        QElapsedTimer timer;
        timer.start();
        QVERIFY(m_server->post(ServerConnection::conversationPath(id, u"interrupt")).ok());
        QVERIFY(m_server->waitForStatus(id, u"paused"_s, 5000));
        QVERIFY(timer.elapsed() < 5000);
        const QList<QJsonObject> observations = ofKind(m_server->events(id), u"ObservationEvent"_s);
        QCOMPARE(observations.size(), 1);
        QCOMPARE(observationOf(observations[0]).value(u"interrupted"_s).toBool(), true);
    }

    void alwaysConfirmWaitsThenAccepts()
    {
        const QUuid id = m_server->create(shell(u"echo approved"_s, true, true));
        QVERIFY(m_server->waitForStatus(id, u"waiting_for_confirmation"_s));
        QCOMPARE(ofKind(m_server->events(id), u"ActionEvent"_s).size(), 1);
        QCOMPARE(ofKind(m_server->events(id), u"ObservationEvent"_s).size(), 0);
        const ApiReply accepted = m_server->post(
            ServerConnection::conversationPath(id, u"events/respond_to_confirmation"),
            QJsonObject{{u"accept"_s, true}});
        QVERIFY2(accepted.ok(), qPrintable(accepted.detail));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        const QList<QJsonObject> observations = ofKind(m_server->events(id), u"ObservationEvent"_s);
        QCOMPARE(observations.size(), 1);
        QCOMPARE(observationOf(observations[0]).value(u"output"_s).toString(), u"approved\n"_s);
    }

    // OpenHands' clients change the policy after the create (`setConfirmationPolicy`).
    void theConfirmationPolicyIsChangedAfterTheCreate()
    {
        const QUuid id = m_server->create(shell(u"echo later"_s, false));
        const QString route = ServerConnection::conversationPath(id, u"confirmation_policy");
        const auto policy = [&](const QString &kind) {
            return m_server->post(route,
                                  QJsonObject{{u"policy"_s, QJsonObject{{u"kind"_s, kind}}}});
        };
        const ApiReply set = policy(u"AlwaysConfirm"_s);
        QVERIFY2(set.ok(), qPrintable(set.detail));
        QCOMPARE(set.json.toObject()[u"success"_s].toBool(), true);
        QCOMPARE(m_server->get(ServerConnection::conversationPath(id))
                     .json.toObject()[u"confirmation_policy"_s]
                     .toObject()[u"kind"_s]
                     .toString(),
                 u"AlwaysConfirm"_s);
        QVERIFY(m_server->post(ServerConnection::conversationPath(id, u"run"), {}).ok());
        QVERIFY(m_server->waitForStatus(id, u"waiting_for_confirmation"_s));
        QCOMPARE(ofKind(m_server->events(id), u"ObservationEvent"_s).size(), 0);

        const ApiReply risky = policy(u"ConfirmRisky"_s);
        QCOMPARE(risky.status, 422);
        QVERIFY2(risky.detail.contains(u"security analyzer"_s), qPrintable(risky.detail));
        QCOMPARE(m_server->post(route, QJsonObject{}).status, 422);
        QCOMPARE(m_server
                     ->post(ServerConnection::conversationPath(QUuid::createUuid(),
                                                               u"confirmation_policy"),
                            QJsonObject{{u"policy"_s, QJsonObject{{u"kind"_s, u"NeverConfirm"_s}}}})
                     .status,
                 404);
        QVERIFY(policy(u"NeverConfirm"_s).ok());
        QCOMPARE(m_server->get(ServerConnection::conversationPath(id))
                     .json.toObject()[u"confirmation_policy"_s]
                     .toObject()[u"kind"_s]
                     .toString(),
                 u"NeverConfirm"_s);
    }

    // With replicas, a rejection was written before its run was claimed: when the claim went
    // to an answer sent through another replica (409 here), the rejection stayed, and that
    // replica's accept found its action rejected. Here the claim fails: nothing may stay.
    void anAnswerWhoseRunIsNotClaimedWritesNothing()
    {
        const QUuid id = m_server->create(shell(u"rm -rf important"_s, true, true));
        QVERIFY(m_server->waitForStatus(id, u"waiting_for_confirmation"_s));
        const qsizetype before = m_server->events(id).size();
        Database &db = m_server->server().database();
        db.beforeCommit = [&db] {
            if (db.lastStatement().contains(u"lease_epoch = lease_epoch + 1"_s))
                throw StorageError("commit: the claim failed");
        };
        const ApiReply rejected = m_server->post(
            ServerConnection::conversationPath(id, u"events/respond_to_confirmation"),
            QJsonObject{{u"accept"_s, false}, {u"reason"_s, u"no"_s}});
        db.beforeCommit = {};
        QCOMPARE(rejected.status, 503);
        QCOMPARE(m_server->events(id).size(), before);
        QCOMPARE(m_server->status(id), u"waiting_for_confirmation"_s);
    }

    // A pause through another replica read the conversation `running`, then claimed it once
    // the owner's run had ended and let go of it: it wrote "the server stopped" into a run that
    // had finished, and paused it. The resolution goes by the row under its lease; here the run
    // ends right after the claim, the widest the window can be.
    void aStaleRunIsJudgedUnderItsLease()
    {
        const QUuid id = m_server->create(shell(u"true"_s, false));
        ConversationStore &store = m_server->server().store();
        store.append(id, {}, ExecutionStatus::Running, QDateTime::currentMSecsSinceEpoch());
        Database &db = store.database();
        bool ended = false;
        db.afterCommit = [&] {
            if (ended || !db.lastStatement().contains(u"lease_epoch = lease_epoch + 1"_s))
                return;
            ended = true;
            store.append(id, {}, ExecutionStatus::Finished, QDateTime::currentMSecsSinceEpoch());
        };
        const ApiReply paused = m_server->post(ServerConnection::conversationPath(id, u"pause"));
        db.afterCommit = {};
        QVERIFY(ended);
        QVERIFY2(paused.ok(), qPrintable(paused.detail));
        QCOMPARE(m_server->status(id), u"finished"_s);
        QCOMPARE(ofKind(m_server->events(id), u"AgentErrorEvent"_s).size(), 0);
    }

    // A rejection is recorded with its reason, and the agent's reply gives it. The console's
    // Reject gives none: the reply read "Command rejected: " and stopped.
    void alwaysConfirmRejectRecordsTheRejection_data()
    {
        QTest::addColumn<QString>("reason"); // empty: none given
        QTest::addColumn<QString>("reply");
        QTest::addRow("with a reason") << u"too risky"_s << u"Command rejected: too risky"_s;
        QTest::addRow("without one") << QString() << u"Command rejected: no reason given"_s;
    }
    void alwaysConfirmRejectRecordsTheRejection()
    {
        QFETCH(QString, reason);
        QFETCH(QString, reply);
        const QUuid id = m_server->create(shell(u"rm -rf important"_s, true, true));
        QVERIFY(m_server->waitForStatus(id, u"waiting_for_confirmation"_s));
        QJsonObject answer{{u"accept"_s, false}};
        if (!reason.isEmpty())
            answer.insert(u"reason"_s, reason);
        QVERIFY(
            m_server
                ->post(ServerConnection::conversationPath(id, u"events/respond_to_confirmation"),
                       answer)
                .ok());
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        const QList<QJsonObject> events = m_server->events(id);
        QCOMPARE(ofKind(events, u"ObservationEvent"_s).size(), 0);
        const QList<QJsonObject> rejections = ofKind(events, u"UserRejectObservation"_s);
        QCOMPARE(rejections.size(), 1);
        QCOMPARE(rejections[0].value(u"rejection_reason"_s).toString(), reason);
        QCOMPARE(m_server->get(ServerConnection::conversationPath(id, u"agent_final_response"))
                     .json.toObject()
                     .value(u"response"_s)
                     .toString(),
                 reply);
    }

    void confirmationResponseWhenNotWaitingIsConflict()
    {
        const QUuid id = m_server->create();
        const ApiReply reply = m_server->post(
            ServerConnection::conversationPath(id, u"events/respond_to_confirmation"),
            QJsonObject{{u"accept"_s, true}});
        QCOMPARE(reply.status, 409);
        QCOMPARE(reply.errorCode, u"not_waiting_for_confirmation"_s);
    }

    void runWithNothingToDoFinishes()
    {
        const QUuid id = m_server->create();
        QVERIFY(m_server->post(ServerConnection::conversationPath(id, u"run")).ok());
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
    }

private:
    std::unique_ptr<TestServer> m_server;
};

QTEST_GUILESS_MAIN(ApiExecutionTest)
#include "tst_api_execution.moc"
