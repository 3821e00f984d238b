// The llm agent over real HTTP, against a scripted OpenAI-compatible server (FakeLlmServer).
#include "fakellmserver.h"
#include "testevents.h"
#include "testserver.h"

#include <QDir>
#include <QDirIterator>
#include <QElapsedTimer>
#include <QJsonArray>
#include <QJsonDocument>
#include <QLoggingCategory>
#include <QSignalSpy>
#include <QTest>

using namespace Qt::StringLiterals;
using namespace AgentDeck;
using namespace AgentDeck::Testing;

Q_DECLARE_METATYPE(AgentDeck::Testing::FakeLlmServer::Response)

namespace {

const QString Key = u"sk-test-7f3c9e1d-never-show-me"_s;

QStringList g_log;
QtMessageHandler g_previousHandler = nullptr;

void captureMessages(QtMsgType type, const QMessageLogContext &context, const QString &message)
{
    g_log.append(QString::fromLatin1(context.category ? context.category : "") + u": "_s + message);
    if (type != QtDebugMsg && type != QtInfoMsg && g_previousHandler)
        g_previousHandler(type, context, message);
}

QString outputOf(const QJsonObject &observation)
{
    return observation.value(u"observation"_s).toObject().value(u"output"_s).toString();
}

QStringList toolNames(const QJsonObject &request)
{
    return FakeLlmServer::toolNames(request);
}

} // namespace

class ApiLlmTest : public QObject
{
    Q_OBJECT

private:
    std::unique_ptr<TestServer> m_server;
    std::unique_ptr<FakeLlmServer> m_fake;

    QJsonObject agent(const QJsonObject &llmExtra = {}, const QJsonObject &agentExtra = {}) const
    {
        QJsonObject llm{{u"model"_s, u"fake-model"_s},
                        {u"base_url"_s, m_fake->baseUrl()},
                        {u"api_key"_s, Key},
                        {u"timeout"_s, 20},
                        {u"retry_delay"_s, 0.01}};
        for (auto it = llmExtra.begin(); it != llmExtra.end(); ++it)
            llm.insert(it.key(), it.value());
        QJsonObject object{{u"kind"_s, u"llm"_s}, {u"llm"_s, llm}};
        for (auto it = agentExtra.begin(); it != agentExtra.end(); ++it)
            object.insert(it.key(), it.value());
        return object;
    }

    QJsonObject body(const QJsonObject &agentObject, const QString &task, bool confirm = false)
    {
        QJsonObject result{{u"agent"_s, agentObject},
                           {u"initial_message"_s, TestServer::message(task, true)}};
        if (confirm)
            result.insert(u"confirmation_policy"_s, QJsonObject{{u"kind"_s, u"AlwaysConfirm"_s}});
        return result;
    }

    QJsonObject info(const QUuid &id)
    {
        return m_server->get(ServerConnection::conversationPath(id)).json.toObject();
    }

    QString workspaceOf(const QUuid &id)
    {
        return info(id).value(u"workspace"_s).toObject().value(u"working_dir"_s).toString();
    }

    QString finalResponse(const QUuid &id)
    {
        return m_server->get(ServerConnection::conversationPath(id, u"agent_final_response"))
            .json.toObject()
            .value(u"response"_s)
            .toString();
    }

private Q_SLOTS:
    void initTestCase()
    {
        QLoggingCategory::setFilterRules(u"agentdeck.*.debug=true"_s);
        g_previousHandler = qInstallMessageHandler(captureMessages);
    }
    void cleanupTestCase() { qInstallMessageHandler(g_previousHandler); }

    void init()
    {
        m_fake = std::make_unique<FakeLlmServer>();
        QVERIFY(m_fake->listen());
        m_server = std::make_unique<TestServer>();
        QVERIFY2(m_server->start(), qPrintable(m_server->errorString()));
    }
    void cleanup()
    {
        m_server.reset();
        m_fake.reset();
    }

    // The proof of the loop: write a file, run it with bash, finish; every step is an event.
    void multiStepTaskWritesRunsAndFinishes()
    {
        m_fake->enqueue(FakeLlmServer::toolCall(
            u"write_file"_s,
            {{u"path"_s, u"hello.sh"_s}, {u"content"_s, u"echo \"hi from $(basename $PWD)\"\n"_s}},
            u"call_write"_s, u"First I write the script."_s));
        m_fake->enqueue(FakeLlmServer::toolCall(u"bash"_s, {{u"command"_s, u"bash hello.sh"_s}},
                                                u"call_run"_s));
        m_fake->enqueue(FakeLlmServer::toolCall(
            u"finish"_s, {{u"message"_s, u"The script says hi."_s}}, u"call_finish"_s));

        const QUuid id = m_server->create(body(agent(), u"Write hello.sh and run it"_s));
        QVERIFY(!id.isNull());
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));

        const QString workspace = workspaceOf(id);
        QFile script(QDir(workspace).filePath(u"hello.sh"_s));
        QVERIFY(script.open(QIODevice::ReadOnly));
        QCOMPARE(script.readAll(), "echo \"hi from $(basename $PWD)\"\n"_ba);

        const QList<QJsonObject> events = m_server->events(id);
        const QList<QJsonObject> actions = ofKind(events, u"ActionEvent"_s);
        const QList<QJsonObject> observations = ofKind(events, u"ObservationEvent"_s);
        QCOMPARE(actions.size(), 2);
        QCOMPARE(observations.size(), 2);
        QCOMPARE(actions[0].value(u"tool_name"_s).toString(), u"write_file"_s);
        QCOMPARE(actions[0].value(u"tool_call_id"_s).toString(), u"call_write"_s);
        QCOMPARE(actions[0].value(u"thought"_s).toString(), u"First I write the script."_s);
        QCOMPARE(actions[0].value(u"action"_s).toObject().value(u"path"_s).toString(),
                 u"hello.sh"_s);
        QCOMPARE(actions[1].value(u"tool_name"_s).toString(), u"bash"_s);
        QCOMPARE(observations[1].value(u"tool_call_id"_s).toString(), u"call_run"_s);
        QCOMPARE(outputOf(observations[1]).trimmed(), u"hi from "_s + QDir(workspace).dirName());
        QCOMPARE(finalResponse(id), u"The script says hi."_s);

        // What the model was sent: the tools with their schemas, then the history as messages.
        QCOMPARE(m_fake->requests.size(), 3);
        QCOMPARE(m_fake->requests[0].authorization, "Bearer "_ba + Key.toUtf8());
        QCOMPARE(m_fake->requests[0].body.value(u"model"_s).toString(), u"fake-model"_s);
        QCOMPARE(toolNames(m_fake->requests[0].body),
                 (QStringList{u"bash"_s, u"read_file"_s, u"write_file"_s, u"str_replace"_s,
                              u"finish"_s}));
        for (const QJsonValue &tool : m_fake->requests[0].body.value(u"tools"_s).toArray())
            QCOMPARE(tool.toObject()
                         .value(u"function"_s)
                         .toObject()
                         .value(u"parameters"_s)
                         .toObject()
                         .value(u"type"_s)
                         .toString(),
                     u"object"_s);
        const QJsonArray messages = m_fake->messagesOf(2);
        QStringList roles;
        for (const QJsonValue &message : messages)
            roles.append(message.toObject().value(u"role"_s).toString());
        QCOMPARE(roles, (QStringList{u"system"_s, u"user"_s, u"assistant"_s, u"tool"_s,
                                     u"assistant"_s, u"tool"_s}));
        const QJsonObject firstCall = messages[2].toObject();
        QCOMPARE(firstCall.value(u"content"_s).toString(), u"First I write the script."_s);
        const QJsonObject call = firstCall.value(u"tool_calls"_s).toArray()[0].toObject();
        QCOMPARE(call.value(u"id"_s).toString(), u"call_write"_s);
        QCOMPARE(call.value(u"function"_s).toObject().value(u"name"_s).toString(), u"write_file"_s);
        QCOMPARE(QJsonDocument::fromJson(
                     call.value(u"function"_s).toObject().value(u"arguments"_s).toString().toUtf8())
                     .object()
                     .value(u"path"_s)
                     .toString(),
                 u"hello.sh"_s);
        QCOMPARE(messages[3].toObject().value(u"tool_call_id"_s).toString(), u"call_write"_s);
        QVERIFY(messages[5].toObject().value(u"content"_s).toString().contains(u"hi from"_s));

        // Usage accumulates into the stats: 3 requests of 10 prompt and 5 completion tokens.
        const QJsonObject stats = info(id).value(u"stats"_s).toObject();
        QCOMPARE(stats.value(u"requests"_s).toInt(), 3);
        QCOMPARE(stats.value(u"retries"_s).toInt(), 0);
        QCOMPARE(stats.value(u"prompt_tokens"_s).toInt(), 30);
        QCOMPARE(stats.value(u"completion_tokens"_s).toInt(), 15);
    }

    void keyIsNeverReturnedStoredOrLogged()
    {
        g_log.clear();
        m_fake->enqueue(FakeLlmServer::status(401));
        const ApiReply created =
            m_server->post(u"/api/conversations"_s, body(agent(), u"say something"_s));
        QVERIFY(created.ok());
        const QUuid id = *parseWireId(created.json.toObject().value(u"id"_s).toString());
        QVERIFY(m_server->waitForStatus(id, u"error"_s));

        QCOMPARE(created.json.toObject()
                     .value(u"agent"_s)
                     .toObject()
                     .value(u"llm"_s)
                     .toObject()
                     .value(u"api_key"_s)
                     .toString(),
                 u"********"_s);
        QList<QByteArray> bodies{created.body};
        bodies.append(m_server->get(ServerConnection::conversationPath(id)).body);
        bodies.append(m_server->get(u"/api/conversations/search"_s).body);
        bodies.append(
            m_server->get(u"/api/conversations"_s, QUrlQuery{{u"ids"_s, toWireId(id)}}).body);
        bodies.append(m_server->get(ServerConnection::conversationPath(id, u"events/search")).body);
        bodies.append(m_server->get(u"/metrics"_s).body);
        for (const QByteArray &answer : std::as_const(bodies))
            QVERIFY2(!answer.contains(Key.toUtf8()), answer.constData());
        // The provider saw it; the error it caused names the status, not the key.
        QCOMPARE(m_fake->requests.first().authorization, "Bearer "_ba + Key.toUtf8());
        const QList<QJsonObject> errors = ofKind(m_server->events(id), u"AgentErrorEvent"_s);
        QCOMPARE(errors.size(), 1);
        QCOMPARE(errors[0].value(u"code"_s).toString(), u"llm_request_rejected"_s);
        QVERIFY(errors[0].value(u"error"_s).toString().contains(u"401"_s));

        QVERIFY(!g_log.isEmpty());
        for (const QString &line : std::as_const(g_log))
            QVERIFY2(!line.contains(Key), qPrintable(line));
        // Nor is it on disk: the catalog and its write-ahead log.
        QDirIterator files(m_server->dataDir(), QDir::Files, QDirIterator::Subdirectories);
        while (files.hasNext()) {
            QFile file(files.next());
            if (file.open(QIODevice::ReadOnly))
                QVERIFY2(!file.readAll().contains(Key.toUtf8()), qPrintable(file.fileName()));
        }
    }

    void pathsOutsideTheWorkspaceAreRefused()
    {
        m_fake->enqueue(FakeLlmServer::toolCall(u"read_file"_s, {{u"path"_s, u"../../x"_s}}));
        m_fake->enqueue(FakeLlmServer::toolCall(
            u"write_file"_s, {{u"path"_s, u"/tmp/escaped-by-agent"_s}, {u"content"_s, u"x"_s}}));
        m_fake->enqueue(FakeLlmServer::toolCall(u"bash"_s, {{u"command"_s, u"ln -s / root"_s}}));
        m_fake->enqueue(
            FakeLlmServer::toolCall(u"read_file"_s, {{u"path"_s, u"root/etc/hostname"_s}}));
        m_fake->enqueue(FakeLlmServer::text(u"I could not."_s));
        const QUuid id = m_server->create(body(agent(), u"escape"_s));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        const QList<QJsonObject> observations = ofKind(m_server->events(id), u"ObservationEvent"_s);
        QCOMPARE(observations.size(), 4);
        for (int i : {0, 1, 3}) {
            QVERIFY2(outputOf(observations[i]).startsWith(u"Refused:"_s),
                     qPrintable(outputOf(observations[i])));
            QVERIFY(outputOf(observations[i]).contains(u"outside the workspace"_s));
            QVERIFY(
                observations[i].value(u"observation"_s).toObject().value(u"exit_code"_s).toInt() !=
                0);
        }
        QVERIFY(!QFile::exists(u"/tmp/escaped-by-agent"_s));
    }

    void strReplaceNeedsOneExactMatch()
    {
        m_fake->enqueue(FakeLlmServer::toolCall(
            u"write_file"_s, {{u"path"_s, u"dir/a.txt"_s}, {u"content"_s, u"x x y\n"_s}}));
        m_fake->enqueue(FakeLlmServer::toolCall(
            u"str_replace"_s,
            {{u"path"_s, u"dir/a.txt"_s}, {u"old_str"_s, u"x"_s}, {u"new_str"_s, u"z"_s}}));
        m_fake->enqueue(FakeLlmServer::toolCall(
            u"str_replace"_s,
            {{u"path"_s, u"dir/a.txt"_s}, {u"old_str"_s, u"q"_s}, {u"new_str"_s, u"z"_s}}));
        m_fake->enqueue(FakeLlmServer::toolCall(
            u"str_replace"_s,
            {{u"path"_s, u"dir/a.txt"_s}, {u"old_str"_s, u"x y"_s}, {u"new_str"_s, u"x 'ü'"_s}}));
        m_fake->enqueue(FakeLlmServer::toolCall(u"read_file"_s, {{u"path"_s, u"dir/a.txt"_s}}));
        m_fake->enqueue(FakeLlmServer::toolCall(u"finish"_s, {{u"message"_s, u"ok"_s}}));
        const QUuid id = m_server->create(body(agent(), u"edit"_s));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        const QList<QJsonObject> observations = ofKind(m_server->events(id), u"ObservationEvent"_s);
        QCOMPARE(observations.size(), 5);
        QVERIFY2(outputOf(observations[1]).contains(u"occurs 2 times"_s),
                 qPrintable(outputOf(observations[1])));
        QVERIFY(outputOf(observations[2]).contains(u"does not occur"_s));
        QCOMPARE(outputOf(observations[3]),
                 u"Replaced 1 occurrence in "_s + QDir(workspaceOf(id)).filePath(u"dir/a.txt"_s));
        QCOMPARE(outputOf(observations[4]), u"x x 'ü'\n"_s);
    }

    void interruptAndPauseCancelTheRequestInFlight_data()
    {
        QTest::addColumn<QString>("action");
        QTest::addRow("interrupt") << u"interrupt"_s;
        QTest::addRow("pause") << u"pause"_s;
    }
    void interruptAndPauseCancelTheRequestInFlight()
    {
        QFETCH(QString, action);
        m_fake->enqueue(FakeLlmServer::hanging());
        QSignalSpy received(m_fake.get(), &FakeLlmServer::requestReceived);
        const QUuid id = m_server->create(body(agent({{u"timeout"_s, 600}}), u"think hard"_s));
        // The request may arrive while create() waits for its answer.
        QTRY_VERIFY_WITH_TIMEOUT(!received.isEmpty(), 10'000);
        QCOMPARE(m_server->status(id), u"running"_s);
        QElapsedTimer elapsed;
        elapsed.start();
        QVERIFY(m_server->post(ServerConnection::conversationPath(id, action)).ok());
        QVERIFY(m_server->waitForStatus(id, u"paused"_s, 5000));
        QVERIFY(elapsed.elapsed() < 5000);
        // The connection to the provider was closed, not left to time out.
        QTRY_COMPARE_WITH_TIMEOUT(m_fake->openConnections(), 0, 5000);

        // Resumable: the next run asks again and finishes.
        m_fake->enqueue(FakeLlmServer::text(u"Thought it through."_s));
        QVERIFY(m_server->post(ServerConnection::conversationPath(id, u"run")).ok());
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QCOMPARE(m_fake->requests.size(), 2);
    }

    // A message sent while the model answers is not in what it answered: the run finished with
    // the message unanswered (and never sent to the model). The model is asked again with it.
    void aMessageSentWhileTheModelAnswersIsAnswered()
    {
        FakeLlmServer::Response first = FakeLlmServer::text(u"About the first."_s);
        first.held = true;
        m_fake->enqueue(first);
        m_fake->enqueue(FakeLlmServer::text(u"About both."_s));
        QSignalSpy received(m_fake.get(), &FakeLlmServer::requestReceived);
        const QUuid id = m_server->create(body(agent(), u"first"_s));
        QTRY_VERIFY_WITH_TIMEOUT(!received.isEmpty(), 10'000);
        QVERIFY(m_server->send(id, u"second"_s, true).ok());
        m_fake->answerHeld();
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QCOMPARE(m_fake->requests.size(), 2);
        const QJsonObject last = m_fake->messagesOf(1).last().toObject();
        QCOMPARE(last.value(u"role"_s).toString(), u"user"_s);
        QCOMPARE(last.value(u"content"_s).toString(), u"second"_s);
        QCOMPARE(finalResponse(id), u"About both."_s);
    }

    // A graceful stop does not wait for the model: the request is cancelled, the run paused at
    // once (not left running to be found stale), and the next server continues it.
    void gracefulStopCancelsTheRequestInFlight()
    {
        m_fake->enqueue(FakeLlmServer::hanging());
        const QUuid id = m_server->create(body(agent({{u"timeout"_s, 600}}), u"think"_s));
        QTRY_COMPARE_WITH_TIMEOUT(m_fake->requests.size(), 1, 10'000);
        const QString dataDir = m_server->dataDir();
        QElapsedTimer elapsed;
        elapsed.start();
        m_server->stop();
        QVERIFY(elapsed.elapsed() < 1500); // well inside the 2 s shutdown grace
        TestServerOptions options;
        options.dataDir = dataDir;
        TestServer restarted(std::move(options));
        QVERIFY2(restarted.start(), qPrintable(restarted.errorString()));
        QCOMPARE(restarted.status(id), u"paused"_s);
        QVERIFY(ofKind(restarted.events(id), u"AgentErrorEvent"_s).isEmpty());
        // The key stayed with the stopped server; the error says so and /run is the way on.
        QVERIFY(restarted.post(ServerConnection::conversationPath(id, u"run")).ok());
        QVERIFY(restarted.waitForStatus(id, u"error"_s));
        QCOMPARE(ofKind(restarted.events(id), u"AgentErrorEvent"_s).last().value(u"code"_s),
                 u"llm_api_key_missing"_s);
    }

    void confirmationAcceptAndReject()
    {
        m_fake->enqueue(
            FakeLlmServer::toolCall(u"bash"_s, {{u"command"_s, u"touch accepted"_s}}, u"c1"_s));
        m_fake->enqueue(
            FakeLlmServer::toolCall(u"bash"_s, {{u"command"_s, u"touch rejected"_s}}, u"c2"_s));
        m_fake->enqueue(FakeLlmServer::text(u"Understood, I did not do it."_s));
        const QUuid id = m_server->create(body(agent(), u"touch things"_s, true));
        QVERIFY(m_server->waitForStatus(id, u"waiting_for_confirmation"_s));
        const QString workspace = workspaceOf(id);
        QVERIFY(!QFile::exists(QDir(workspace).filePath(u"accepted"_s)));
        const QString respond =
            ServerConnection::conversationPath(id, u"events/respond_to_confirmation");
        QVERIFY(m_server->post(respond, QJsonObject{{u"accept"_s, true}}).ok());
        QTRY_VERIFY_WITH_TIMEOUT(m_fake->requests.size() == 2 &&
                                     m_server->status(id) == u"waiting_for_confirmation"_s,
                                 10'000);
        QVERIFY(QFile::exists(QDir(workspace).filePath(u"accepted"_s)));
        QVERIFY(
            m_server
                ->post(respond, QJsonObject{{u"accept"_s, false}, {u"reason"_s, u"not that one"_s}})
                .ok());
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QVERIFY(!QFile::exists(QDir(workspace).filePath(u"rejected"_s)));

        const QList<QJsonObject> events = m_server->events(id);
        QCOMPARE(ofKind(events, u"UserRejectObservation"_s).size(), 1);
        // The model saw the rejection as the result of its call.
        const QJsonArray messages = m_fake->messagesOf(2);
        const QJsonObject last = messages.last().toObject();
        QCOMPARE(last.value(u"role"_s).toString(), u"tool"_s);
        QCOMPARE(last.value(u"tool_call_id"_s).toString(), u"c2"_s);
        QVERIFY(last.value(u"content"_s).toString().contains(u"rejected"_s));
        QVERIFY(last.value(u"content"_s).toString().contains(u"not that one"_s));
    }

    void severalToolCallsInOneAnswerRunInOrder()
    {
        m_fake->enqueue(FakeLlmServer::toolCalls(QJsonArray{
            QJsonObject{{u"id"_s, u"a"_s},
                        {u"type"_s, u"function"_s},
                        {u"function"_s,
                         QJsonObject{{u"name"_s, u"bash"_s},
                                     {u"arguments"_s, u"{\"command\":\"echo 1 >> log\"}"_s}}}},
            QJsonObject{{u"id"_s, u"b"_s},
                        {u"type"_s, u"function"_s},
                        {u"function"_s,
                         QJsonObject{{u"name"_s, u"bash"_s},
                                     {u"arguments"_s, u"{\"command\":\"echo 2 >> log\"}"_s}}}}}));
        m_fake->enqueue(FakeLlmServer::text(u"both done"_s));
        const QUuid id = m_server->create(body(agent(), u"two"_s));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QFile log(QDir(workspaceOf(id)).filePath(u"log"_s));
        QVERIFY(log.open(QIODevice::ReadOnly));
        QCOMPARE(log.readAll(), "1\n2\n"_ba);
        // One assistant message with both calls, then both results.
        const QJsonArray messages = m_fake->messagesOf(1);
        QCOMPARE(messages.size(), 5);
        QCOMPARE(messages[2].toObject().value(u"tool_calls"_s).toArray().size(), 2);
        QCOMPARE(messages[3].toObject().value(u"tool_call_id"_s).toString(), u"a"_s);
        QCOMPARE(messages[4].toObject().value(u"tool_call_id"_s).toString(), u"b"_s);
    }

    // Interrupting a step calls off its other tool calls: none of them runs on resume.
    void interruptCallsOffTheRestOfTheStep()
    {
        const auto call = [](const QString &id, const QString &command) {
            return QJsonObject{
                {u"id"_s, id},
                {u"type"_s, u"function"_s},
                {u"function"_s,
                 QJsonObject{{u"name"_s, u"bash"_s},
                             {u"arguments"_s,
                              QString::fromUtf8(QJsonDocument(QJsonObject{{u"command"_s, command}})
                                                    .toJson(QJsonDocument::Compact))}}}};
        };
        m_fake->enqueue(FakeLlmServer::toolCalls(QJsonArray{
            call(u"a"_s, u"touch started; sleep 30"_s), call(u"b"_s, u"touch second"_s)}));
        m_fake->enqueue(FakeLlmServer::text(u"stopped"_s));
        const QUuid id = m_server->create(body(agent(), u"two, then stop"_s));
        const QDir workspace(workspaceOf(id));
        QVERIFY(QTest::qWaitFor([&] { return workspace.exists(u"started"_s); }, 20'000));
        QVERIFY(m_server->post(ServerConnection::conversationPath(id, u"interrupt")).ok());
        QVERIFY(m_server->waitForStatus(id, u"paused"_s));

        QList<QJsonObject> observations;
        for (const QJsonObject &event : m_server->events(id)) {
            if (event.value(u"kind"_s) == u"ObservationEvent"_s)
                observations.append(event);
        }
        QCOMPARE(observations.size(), 2);
        for (const QJsonObject &observation : observations)
            QVERIFY(
                observation.value(u"observation"_s).toObject().value(u"interrupted"_s).toBool());
        QCOMPARE(observations[1].value(u"tool_call_id"_s).toString(), u"b"_s);
        QVERIFY(observations[1]
                    .value(u"observation"_s)
                    .toObject()
                    .value(u"output"_s)
                    .toString()
                    .contains(u"not run"_s));

        // On resume the model is asked again, with both results; `touch second` never runs.
        QVERIFY(m_server->post(ServerConnection::conversationPath(id, u"run")).ok());
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QVERIFY(!workspace.exists(u"second"_s));
    }

    void oddAnswersAreUnderstood()
    {
        // Arguments that are not JSON are explained to the model rather than failing the run.
        m_fake->enqueue(FakeLlmServer::toolCalls(QJsonArray{
            QJsonObject{{u"id"_s, u"bad"_s},
                        {u"type"_s, u"function"_s},
                        {u"function"_s, QJsonObject{{u"name"_s, u"bash"_s},
                                                    {u"arguments"_s, u"{\"command\": ls"_s}}}}}));
        // Content given as a list of text parts.
        FakeLlmServer::Response parts;
        parts.body = R"({"choices": [{"index": 0, "message": {"role": "assistant", "content":
            [{"type": "text", "text": "in "}, {"type": "text", "text": "parts"}]}}]})"_ba;
        m_fake->enqueue(parts);
        const QUuid id = m_server->create(body(agent(), u"odd"_s));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        const QList<QJsonObject> events = m_server->events(id);
        const QList<QJsonObject> actions = ofKind(events, u"ActionEvent"_s);
        QCOMPARE(actions.size(), 1);
        QCOMPARE(actions[0].value(u"action"_s).toObject().value(u"raw_arguments"_s).toString(),
                 u"{\"command\": ls"_s);
        QVERIFY(outputOf(ofKind(events, u"ObservationEvent"_s).first())
                    .contains(u"not a JSON object"_s));
        QCOMPARE(finalResponse(id), u"in parts"_s);
    }

    // Streams as some providers send them: tool calls without an `index` (merged into one call
    // named "bashbash"), one JSON completion for a streamed request (taken for a stream cut
    // short), and a whole answer on a connection left open after [DONE] (thrown away as a
    // timeout and asked for again).
    void unusualStreamsAreUnderstood()
    {
        const auto call = [](const QString &id, const QString &command) {
            return QJsonObject{
                {u"tool_calls"_s,
                 QJsonArray{QJsonObject{
                     {u"id"_s, id},
                     {u"type"_s, u"function"_s},
                     {u"function"_s,
                      QJsonObject{{u"name"_s, u"bash"_s},
                                  {u"arguments"_s, u"{\"command\": \"%1\"}"_s.arg(command)}}}}}}};
        };
        m_fake->enqueue(FakeLlmServer::streamedDeltas(
            {call(u"call_a"_s, u"echo one"_s), call(u"call_b"_s, u"echo two"_s)}, u"tool_calls"_s));
        m_fake->enqueue(FakeLlmServer::toolCall(u"bash"_s, {{u"command"_s, u"echo three"_s}}));
        FakeLlmServer::Response whole = FakeLlmServer::streamedText({u"all "_s, u"there"_s});
        whole.keepOpen = true;
        m_fake->enqueue(whole);
        const QUuid id = m_server->create(
            body(agent({{u"stream"_s, true}, {u"timeout"_s, 0.5}, {u"max_retries"_s, 0}}),
                 u"unusual"_s));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        const QList<QJsonObject> events = m_server->events(id);
        const QList<QJsonObject> actions = ofKind(events, u"ActionEvent"_s);
        QCOMPARE(actions.size(), 3);
        QCOMPARE(actions[0].value(u"tool_name"_s).toString(), u"bash"_s);
        QCOMPARE(actions[1].value(u"tool_call_id"_s).toString(), u"call_b"_s);
        const QList<QJsonObject> observations = ofKind(events, u"ObservationEvent"_s);
        QCOMPARE(observations.size(), 3);
        QCOMPARE(outputOf(observations[0]), u"one\n"_s);
        QCOMPARE(outputOf(observations[1]), u"two\n"_s);
        QCOMPARE(outputOf(observations[2]), u"three\n"_s);
        QCOMPARE(finalResponse(id), u"all there"_s);
        QCOMPARE(m_fake->requests.size(), 3);
    }

    // An answer past MaxAnswerBytes is refused, not read into memory and stored: a 20 MB one
    // made an event no stream could carry, and every subscriber was closed at it for good.
    void anAnswerTooLargeIsRefused()
    {
        m_fake->enqueue(FakeLlmServer::text(QString(5 << 20, u'x')));
        const QUuid id = m_server->create(body(agent({{u"max_retries"_s, 0}}), u"huge"_s));
        QVERIFY(m_server->waitForStatus(id, u"error"_s));
        const QList<QJsonObject> errors = ofKind(m_server->events(id), u"AgentErrorEvent"_s);
        QCOMPARE(errors.size(), 1);
        QCOMPARE(errors[0].value(u"code"_s).toString(), u"llm_bad_response"_s);
        QVERIFY2(errors[0].value(u"error"_s).toString().contains(u"larger than 4 MiB"_s),
                 qPrintable(errors[0].value(u"error"_s).toString()));
    }

    // Streamed in pieces of a few characters, an answer is many times larger on the wire than
    // what it says: a file of 200 kB to write came as over 4 MiB and was refused.
    void aStreamedAnswerIsBoundedByWhatItSays()
    {
        const QString content(200'000, u'c');
        QStringList fragments{u"{\"path\": \"big.txt\", \"content\": \""_s};
        for (qsizetype at = 0; at < content.size(); at += 4)
            fragments.append(content.mid(at, 4));
        fragments.append(u"\"}"_s);
        m_fake->enqueue(FakeLlmServer::streamedToolCall(u"write_file"_s, u"call_big"_s, fragments));
        m_fake->enqueue(FakeLlmServer::text(u"Written."_s));
        const QUuid id = m_server->create(
            body(agent({{u"stream"_s, true}, {u"max_retries"_s, 0}}), u"write it"_s));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s, 30'000));
        QCOMPARE(QFileInfo(QDir(workspaceOf(id)).filePath(u"big.txt"_s)).size(), 200'000);
    }

    void streamedDeltasReachSubscribersAndAreNotStored()
    {
        m_fake->enqueue(FakeLlmServer::streamedToolCall(
            u"bash"_s, u"call_s"_s, {u"{\"comm"_s, u"and\": \"echo str"_s, u"eamed\"}"_s}));
        m_fake->enqueue(FakeLlmServer::streamedText({u"Hel"_s, u"lo "_s, u"world"_s}));
        QJsonObject create{{u"agent"_s, agent({{u"stream"_s, true}})}};
        const QUuid id = m_server->create(create);
        QVERIFY(!id.isNull());

        std::unique_ptr<EventStream> stream(m_server->client().openEventStream(id, 0));
        QSignalSpy connected(stream.get(), &EventStream::connected);
        QVERIFY(connected.wait(5000));
        QStringList deltas;
        QList<QJsonObject> frames;
        QList<Event> live;
        connect(stream.get(), &EventStream::transientReceived, this, [&](const QJsonObject &frame) {
            frames.append(frame);
            if (frame.value(u"kind"_s) == u"MessageDelta"_s) // besides the command's output
                deltas.append(frame.value(u"delta"_s).toString());
        });
        connect(stream.get(), &EventStream::eventReceived, this,
                [&](const Event &event) { live.append(event); });
        QTRY_VERIFY_WITH_TIMEOUT(stream->isConnected(), 5000);
        QVERIFY(m_server->send(id, u"stream please"_s, true).ok());
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QTRY_VERIFY_WITH_TIMEOUT(
            !live.isEmpty() && live.last().fields.value(u"value"_s) == u"finished"_s, 5000);

        QCOMPARE(deltas.join(QString()), u"Hello world"_s);
        for (const QJsonObject &frame : std::as_const(frames)) {
            QCOMPARE(frame.value(u"type"_s).toString(), u"transient"_s);
            QVERIFY(frame.value(u"kind"_s) == u"MessageDelta"_s ||
                    frame.value(u"kind"_s) == u"CommandOutput"_s);
            QVERIFY(!frame.contains(u"seq"_s));
        }
        // The streamed tool call was assembled from its fragments.
        const QList<QJsonObject> events = m_server->events(id);
        const QList<QJsonObject> actions = ofKind(events, u"ActionEvent"_s);
        QCOMPARE(actions.size(), 1);
        QCOMPARE(actions[0].value(u"tool_call_id"_s).toString(), u"call_s"_s);
        QCOMPARE(outputOf(ofKind(events, u"ObservationEvent"_s).first()), u"streamed\n"_s);
        // Stored once, as the final message; no delta is an event.
        QStringList agentTexts;
        for (const QJsonObject &event : ofKind(events, u"MessageEvent"_s)) {
            if (event.value(u"source"_s) == u"agent"_s)
                agentTexts.append(Event::fromJson(event)->messageText());
        }
        QCOMPARE(agentTexts, QStringList{u"Hello world"_s});
        QCOMPARE(qint64(events.size()), live.last().seq);
        for (const QJsonObject &event : events)
            QVERIFY(event.value(u"kind"_s).toString() != u"MessageDelta"_s);
        QCOMPARE(m_fake->requests[0].body.value(u"stream"_s).toBool(), true);
        // Usage of streamed answers counts too (7 + 3 per answer).
        QCOMPARE(info(id).value(u"stats"_s).toObject().value(u"prompt_tokens"_s).toInt(), 14);
    }

    void retriesHonourRetryAfterAndCount()
    {
        m_fake->enqueue(FakeLlmServer::status(429, "1"));
        m_fake->enqueue(FakeLlmServer::status(503));
        m_fake->enqueue(FakeLlmServer::text(u"made it"_s));
        const QUuid id = m_server->create(body(agent({{u"max_retries"_s, 3}}), u"go"_s));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QCOMPARE(m_fake->requests.size(), 3);
        // Retry-After: 1 was honoured; the 503 without it waited only the short backoff.
        QVERIFY(m_fake->requests[1].receivedAtMs - m_fake->requests[0].receivedAtMs >= 950);
        QVERIFY(m_fake->requests[2].receivedAtMs - m_fake->requests[1].receivedAtMs < 900);
        const QJsonObject stats = info(id).value(u"stats"_s).toObject();
        QCOMPARE(stats.value(u"requests"_s).toInt(), 3);
        QCOMPARE(stats.value(u"retries"_s).toInt(), 2);
    }

    // A Retry-After past what a number of milliseconds holds (1e17 s, as a broken proxy may
    // send) overflowed, and the retry went out at once instead of after max_retry_delay.
    void aHugeRetryAfterWaitsTheLongestDelay()
    {
        m_fake->enqueue(FakeLlmServer::status(429, "1e17"));
        m_fake->enqueue(FakeLlmServer::text(u"made it"_s));
        const QUuid id = m_server->create(
            body(agent({{u"max_retries"_s, 1}, {u"max_retry_delay"_s, 0.3}}), u"go"_s));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QCOMPARE(m_fake->requests.size(), 2);
        QVERIFY2(m_fake->requests[1].receivedAtMs - m_fake->requests[0].receivedAtMs >= 250,
                 qPrintable(QString::number(m_fake->requests[1].receivedAtMs -
                                            m_fake->requests[0].receivedAtMs)));
    }

    void failuresEndInAClearResumableError_data()
    {
        QTest::addColumn<QList<FakeLlmServer::Response>>("script");
        QTest::addColumn<QString>("code");
        QTest::addColumn<QString>("words");
        QTest::addRow("provider down")
            << QList{FakeLlmServer::status(500), FakeLlmServer::status(502)} << u"llm_unavailable"_s
            << u"HTTP 502 (gave up after 2 attempts)"_s;
        QTest::addRow("garbage") << QList{FakeLlmServer::garbage()} << u"llm_bad_response"_s
                                 << u"not a chat completion"_s;
        // It finished with nothing said and no error: the message stayed unanswered.
        QTest::addRow("an empty answer")
            << QList{FakeLlmServer::text(QString())} << u"llm_bad_response"_s << u"empty answer"_s;
        QTest::addRow("hang past the timeout")
            << QList{FakeLlmServer::hanging(), FakeLlmServer::hanging()} << u"llm_timeout"_s
            << u"did not answer within 300 ms"_s;
    }
    void failuresEndInAClearResumableError()
    {
        QFETCH(QList<FakeLlmServer::Response>, script);
        QFETCH(QString, code);
        QFETCH(QString, words);
        for (const auto &response : script)
            m_fake->enqueue(response);
        const QUuid id =
            m_server->create(body(agent({{u"max_retries"_s, 1}, {u"timeout"_s, 0.3}}), u"try"_s));
        QVERIFY(m_server->waitForStatus(id, u"error"_s));
        const QList<QJsonObject> errors = ofKind(m_server->events(id), u"AgentErrorEvent"_s);
        QCOMPARE(errors.size(), 1);
        QCOMPARE(errors[0].value(u"code"_s).toString(), code);
        QVERIFY2(errors[0].value(u"error"_s).toString().contains(words),
                 qPrintable(errors[0].value(u"error"_s).toString()));

        m_fake->enqueue(FakeLlmServer::text(u"back"_s));
        QVERIFY(m_server->post(ServerConnection::conversationPath(id, u"run")).ok());
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QCOMPARE(finalResponse(id), u"back"_s);
    }

    void maxIterationsEndsInError()
    {
        for (int i = 0; i < 5; ++i)
            m_fake->enqueue(
                FakeLlmServer::toolCall(u"bash"_s, {{u"command"_s, u"echo %1"_s.arg(i)}}));
        const QUuid id =
            m_server->create(body(agent({}, {{u"max_iterations"_s, 2}}), u"loop forever"_s));
        QVERIFY(m_server->waitForStatus(id, u"error"_s));
        QCOMPARE(m_fake->requests.size(), 2);
        const QList<QJsonObject> events = m_server->events(id);
        QCOMPARE(ofKind(events, u"ObservationEvent"_s).size(), 2);
        const QList<QJsonObject> errors = ofKind(events, u"AgentErrorEvent"_s);
        QCOMPARE(errors.size(), 1);
        QCOMPARE(errors[0].value(u"code"_s).toString(), u"max_iterations_reached"_s);
        QVERIFY(errors[0].value(u"error"_s).toString().contains(u"max_iterations (2"_s));
    }

    void olderObservationsAreTruncatedToTheContextBudget()
    {
        m_fake->enqueue(FakeLlmServer::toolCall(
            u"bash"_s, {{u"command"_s, u"head -c 4000 /dev/zero | tr '\\0' a"_s}}));
        m_fake->enqueue(FakeLlmServer::toolCall(
            u"bash"_s, {{u"command"_s, u"head -c 3000 /dev/zero | tr '\\0' b"_s}}));
        m_fake->enqueue(FakeLlmServer::text(u"done"_s));
        const QUuid id =
            m_server->create(body(agent({}, {{u"max_context_tokens"_s, 1000}}), u"print a lot"_s));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        const QJsonArray messages = m_fake->messagesOf(2);
        QCOMPARE(messages.size(), 6);
        const QString older = messages[3].toObject().value(u"content"_s).toString();
        const QString newest = messages[5].toObject().value(u"content"_s).toString();
        QVERIFY2(older.size() < 400, qPrintable(older));
        QVERIFY(older.startsWith(u"aaaa"_s));
        QVERIFY(older.contains(u"removed to fit the context budget"_s));
        QCOMPARE(newest, QString(3000, u'b'));
        // The history itself is untouched.
        QCOMPARE(outputOf(ofKind(m_server->events(id), u"ObservationEvent"_s).first()).size(),
                 4000);
    }

    void keyKeptInMemoryIsAskedForAgainAfterRestart()
    {
        m_fake->enqueue(FakeLlmServer::text(u"first"_s));
        const QUuid id = m_server->create(body(agent(), u"hello"_s));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        const QString dataDir = m_server->dataDir();
        m_server->stop();
        TestServerOptions options;
        options.dataDir = dataDir;
        auto restarted = std::make_unique<TestServer>(std::move(options));
        QVERIFY2(restarted->start(), qPrintable(restarted->errorString()));

        QVERIFY(restarted->send(id, u"again"_s, true).ok());
        QVERIFY(restarted->waitForStatus(id, u"error"_s));
        const QList<QJsonObject> errors = ofKind(restarted->events(id), u"AgentErrorEvent"_s);
        QCOMPARE(errors.last().value(u"code"_s).toString(), u"llm_api_key_missing"_s);
        QCOMPARE(m_fake->requests.size(), 1);

        // Sent again by creating the conversation again with its id: the run goes on.
        QJsonObject again{{u"conversation_id"_s, toWireId(id)}, {u"agent"_s, agent()}};
        const ApiReply reply = restarted->post(u"/api/conversations"_s, again);
        QCOMPARE(reply.status, 200);
        QVERIFY(!reply.body.contains(Key.toUtf8()));
        m_fake->enqueue(FakeLlmServer::text(u"second"_s));
        QVERIFY(restarted->post(ServerConnection::conversationPath(id, u"run")).ok());
        QVERIFY(restarted->waitForStatus(id, u"finished"_s));
        QCOMPARE(m_fake->requests.size(), 2);
        QCOMPARE(m_fake->requests[1].authorization, "Bearer "_ba + Key.toUtf8());
        restarted.reset();
    }

    void serverWideDefaultsApply()
    {
        m_server.reset();
        TestServerOptions options;
        options.llmBaseUrl = m_fake->baseUrl();
        options.llmModel = u"default-model"_s;
        options.llmApiKey = u"server-wide-key"_s;
        m_server = std::make_unique<TestServer>(std::move(options));
        QVERIFY2(m_server->start(), qPrintable(m_server->errorString()));
        const QUuid id = m_server->create(body(
            QJsonObject{{u"kind"_s, u"llm"_s}, {u"system_prompt"_s, u"Be brief."_s}}, u"hi"_s));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QCOMPARE(m_fake->requests[0].body.value(u"model"_s).toString(), u"default-model"_s);
        QCOMPARE(m_fake->requests[0].authorization, "Bearer server-wide-key"_ba);
        QCOMPARE(m_fake->messagesOf(0)[0].toObject().value(u"content"_s).toString(),
                 u"Be brief."_s);
        QVERIFY(!info(id)
                     .value(u"agent"_s)
                     .toObject()
                     .value(u"llm"_s)
                     .toObject()
                     .contains(u"api_key"_s));
    }

    void badAgentSettingsAreRefused_data()
    {
        QTest::addColumn<QJsonObject>("agentObject");
        QTest::addColumn<QString>("words");
        // A missing base URL is the run's error, not the create's (llm_endpoint_missing).
        QTest::addRow("a tool it does not have")
            << QJsonObject{{u"kind"_s, u"llm"_s},
                           {u"llm"_s,
                            QJsonObject{{u"model"_s, u"m"_s}, {u"base_url"_s, u"http://x/v1"_s}}},
                           {u"tools"_s, QJsonArray{u"bash"_s, u"browser"_s}}}
            << u"agent.tools must be a list of tool names out of bash, read_file"_s;
        QTest::addRow("tools not a list")
            << QJsonObject{{u"kind"_s, u"llm"_s},
                           {u"llm"_s,
                            QJsonObject{{u"model"_s, u"m"_s}, {u"base_url"_s, u"http://x/v1"_s}}},
                           {u"tools"_s, u"bash"_s}}
            << u"agent.tools"_s;
        QTest::addRow("not http") << QJsonObject{{u"kind"_s, u"llm"_s},
                                                 {u"llm"_s,
                                                  QJsonObject{{u"model"_s, u"m"_s},
                                                              {u"base_url"_s, u"ftp://x"_s}}}}
                                  << u"http"_s;
        QTest::addRow("no model") << QJsonObject{{u"kind"_s, u"llm"_s},
                                                 {u"llm"_s,
                                                  QJsonObject{{u"base_url"_s, u"http://x/v1"_s}}}}
                                  << u"model"_s;
        QTest::addRow("bad iterations")
            << QJsonObject{{u"kind"_s, u"llm"_s},
                           {u"llm"_s,
                            QJsonObject{{u"model"_s, u"m"_s}, {u"base_url"_s, u"http://x/v1"_s}}},
                           {u"max_iterations"_s, 0}}
            << u"max_iterations"_s;
        QTest::addRow("key not a string")
            << QJsonObject{{u"kind"_s, u"llm"_s},
                           {u"llm"_s, QJsonObject{{u"model"_s, u"m"_s},
                                                  {u"base_url"_s, u"http://x/v1"_s},
                                                  {u"api_key"_s, 12}}}}
            << u"api_key"_s;
        // Past a day the timer's interval overflowed: 2147484 s was no timeout at all, 4294968 s
        // one of 0.7 s; 1e-9 s was none.
        for (const double timeout : {0.0, 1e-9, 86400.5, 2147484.0, 4294968.0, 1e16}) {
            QTest::addRow("timeout %g", timeout)
                << QJsonObject{{u"kind"_s, u"llm"_s},
                               {u"llm"_s, QJsonObject{{u"model"_s, u"m"_s},
                                                      {u"base_url"_s, u"http://x/v1"_s},
                                                      {u"timeout"_s, timeout}}}}
                << u"agent.llm.timeout must be a number of seconds from 0.001 to 86400"_s;
        }
    }
    void badAgentSettingsAreRefused()
    {
        QFETCH(QJsonObject, agentObject);
        QFETCH(QString, words);
        const ApiReply reply =
            m_server->post(u"/api/conversations"_s, QJsonObject{{u"agent"_s, agentObject}});
        QCOMPARE(reply.status, 422);
        QVERIFY2(reply.detail.contains(words), qPrintable(reply.detail));
    }
};

QTEST_GUILESS_MAIN(ApiLlmTest)
#include "tst_api_llm.moc"
