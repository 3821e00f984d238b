// What the published OpenHands client (@openhands/typescript-client 1.39) sends and expects, over
// real HTTP: its agent spec runs on the llm agent, and the details it relies on (the agent
// required, "OK" from /health, GET /, 409 for a start of an archived id) are OpenHands'.
#include "fakellmserver.h"
#include "testevents.h"
#include "testserver.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QTest>

using namespace Qt::StringLiterals;
using namespace AgentDeck;
using namespace AgentDeck::Testing;

namespace {

const QString Key = u"sk-openhands-client-key"_s;

QStringList toolNames(const QJsonObject &request)
{
    return FakeLlmServer::toolNames(request);
}

} // namespace

class ApiOpenHandsTest : public QObject
{
    Q_OBJECT

private:
    std::unique_ptr<TestServer> m_server;
    std::unique_ptr<FakeLlmServer> m_fake;

    // The body RemoteConversation.start() posts: the agent as `new Agent({llm, tools})` has it.
    QJsonObject startBody(const QJsonArray &tools, bool withBaseUrl = true) const
    {
        QJsonObject llm{{u"model"_s, u"openai/fake-model"_s},
                        {u"api_key"_s, Key},
                        {u"usage_id"_s, u"agent"_s},
                        {u"timeout"_s, 20}};
        if (withBaseUrl)
            llm.insert(u"base_url"_s, m_fake->baseUrl());
        return {{u"agent"_s,
                 QJsonObject{{u"kind"_s, u"Agent"_s}, {u"llm"_s, llm}, {u"tools"_s, tools}}},
                {u"max_iterations"_s, 500},
                {u"stuck_detection"_s, true},
                {u"workspace"_s,
                 QJsonObject{{u"type"_s, u"local"_s}, {u"working_dir"_s, m_workspace.path()}}},
                {u"hook_config"_s, QJsonValue::Null}};
    }

    static QJsonArray tools(const QStringList &names)
    {
        QJsonArray list;
        for (const QString &name : names)
            list.append(QJsonObject{{u"name"_s, name}, {u"params"_s, QJsonObject()}});
        return list;
    }

    QJsonObject info(const QUuid &id)
    {
        return m_server->get(ServerConnection::conversationPath(id)).json.toObject();
    }

    QTemporaryDir m_workspace;

private Q_SLOTS:
    void init()
    {
        QVERIFY(m_workspace.isValid());
        QVERIFY(TestServer::ownAsUser(m_workspace.path()));
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

    void healthIsOkAndTheRootAnswers()
    {
        const ApiReply health = m_server->get(u"/health"_s);
        QCOMPARE(health.status, 200);
        QCOMPARE(health.body.trimmed(), "\"OK\""_ba);
        const ApiReply root = m_server->get(u"/"_s);
        QCOMPARE(root.status, 200);
        QCOMPARE(root.json.toObject().value(u"version"_s).toString(),
                 QStringLiteral(AGENTDECK_VERSION));
        // Where to read next: the page a person reads, and the document a program does.
        for (const auto &[field, path] :
             {std::pair{u"docs"_s, u"/docs"_s}, std::pair{u"openapi"_s, u"/openapi.json"_s}}) {
            QCOMPARE(root.json.toObject().value(field).toString(), path);
            QCOMPARE(m_server->get(path).status, 200);
        }
        QCOMPARE(m_server->get(u"/alive"_s).json.toObject().value(u"status"_s).toString(), u"ok"_s);
    }

    // The spec runs on the llm agent: terminal is bash, file_editor the file tools; the model
    // is offered those and finish, and the conversation is an llm one to every client.
    void theAgentSpecRunsOnTheLlmAgent()
    {
        const ApiReply created = m_server->post(
            u"/api/conversations"_s, startBody(tools({u"terminal"_s, u"file_editor"_s})));
        QCOMPARE(created.status, 201);
        const QJsonObject agent = created.json.toObject().value(u"agent"_s).toObject();
        QCOMPARE(agent.value(u"kind"_s).toString(), u"llm"_s);
        QCOMPARE(agent.value(u"llm"_s).toObject().value(u"model"_s).toString(), u"fake-model"_s);
        QCOMPARE(agent.value(u"llm"_s).toObject().value(u"api_key"_s).toString(), u"********"_s);
        QCOMPARE(agent.value(u"max_iterations"_s).toInt(), 500);
        QVERIFY(!created.body.contains(Key.toUtf8()));
        const QUuid id = *parseWireId(created.json.toObject().value(u"id"_s).toString());
        QCOMPARE(created.json.toObject()
                     .value(u"workspace"_s)
                     .toObject()
                     .value(u"working_dir"_s)
                     .toString(),
                 m_workspace.path());

        m_fake->enqueue(FakeLlmServer::toolCall(
            u"write_file"_s, {{u"path"_s, u"note.txt"_s}, {u"content"_s, u"from openhands"_s}}));
        m_fake->enqueue(FakeLlmServer::toolCall(u"bash"_s, {{u"command"_s, u"cat note.txt"_s}}));
        m_fake->enqueue(FakeLlmServer::toolCall(u"finish"_s, {{u"message"_s, u"done"_s}}));
        QVERIFY(m_server->send(id, u"write a note"_s, true).ok());
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));

        QCOMPARE(m_fake->requests.size(), 3);
        QCOMPARE(m_fake->requests[0].authorization, "Bearer "_ba + Key.toUtf8());
        QCOMPARE(m_fake->requests[0].body.value(u"model"_s).toString(), u"fake-model"_s);
        QCOMPARE(toolNames(m_fake->requests[0].body),
                 (QStringList{u"bash"_s, u"read_file"_s, u"write_file"_s, u"str_replace"_s,
                              u"finish"_s}));
        const QList<QJsonObject> observations = ofKind(m_server->events(id), u"ObservationEvent"_s);
        QCOMPARE(observations.size(), 2);
        QCOMPARE(observations[1]
                     .value(u"observation"_s)
                     .toObject()
                     .value(u"output"_s)
                     .toString()
                     .trimmed(),
                 u"from openhands"_s);

        // The console and ctl read it as any llm conversation: through the client's codecs.
        const auto parsed = ConversationInfo::fromJson(info(id));
        QVERIFY(parsed);
        QCOMPARE(parsed->agentKind, u"llm"_s);
        QVERIFY(parsed->executionStatus == ExecutionStatus::Finished);
        const auto page = QCoro::waitFor(m_server->client().searchConversations({}));
        QVERIFY(page);
        QCOMPARE(page->items.size(), 1);
        QCOMPARE(page->items.first().id, id);
        QCOMPARE(page->items.first().agentKind, u"llm"_s);
    }

    // The tools the spec leaves out are not offered, and a call to one is refused, not run.
    void onlyTheToolsTheSpecNamesAreOffered()
    {
        const ApiReply created =
            m_server->post(u"/api/conversations"_s, startBody(tools({u"file_editor"_s})));
        QCOMPARE(created.status, 201);
        const QUuid id = *parseWireId(created.json.toObject().value(u"id"_s).toString());
        m_fake->enqueue(FakeLlmServer::toolCall(u"bash"_s, {{u"command"_s, u"touch ran"_s}}));
        m_fake->enqueue(FakeLlmServer::toolCall(u"finish"_s, {{u"message"_s, u"ok"_s}}));
        QVERIFY(m_server->send(id, u"try bash"_s, true).ok());
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));

        QCOMPARE(toolNames(m_fake->requests[0].body),
                 (QStringList{u"read_file"_s, u"write_file"_s, u"str_replace"_s, u"finish"_s}));
        QVERIFY(!QFile::exists(QDir(m_workspace.path()).filePath(u"ran"_s)));
        const QList<QJsonObject> observations = ofKind(m_server->events(id), u"ObservationEvent"_s);
        QCOMPARE(observations.size(), 1);
        const QJsonObject observation = observations[0].value(u"observation"_s).toObject();
        QVERIFY(observation.value(u"exit_code"_s).toInt() != 0);
        QVERIFY2(observation.value(u"output"_s).toString().contains(u"no tool \"bash\""_s),
                 qPrintable(observation.value(u"output"_s).toString()));
    }

    void toolsAgentDeckLacksAreRefusedByName()
    {
        const ApiReply refused = m_server->post(
            u"/api/conversations"_s,
            startBody(tools({u"terminal"_s, u"task_tracker"_s, u"browser_tool_set"_s})));
        QCOMPARE(refused.status, 422);
        QCOMPARE(refused.errorCode, u"invalid_parameter"_s);
        QVERIFY2(refused.detail.contains(u"task_tracker, browser_tool_set"_s),
                 qPrintable(refused.detail));
        QCOMPARE(m_server->get(u"/api/conversations/count"_s).json.toInt(-1), 0);
    }

    // OpenHands accepts an llm without an endpoint and fails when it runs: so does AgentDeck.
    void aMissingEndpointIsTheRunsError()
    {
        const ApiReply created =
            m_server->post(u"/api/conversations"_s, startBody(tools({u"terminal"_s}), false));
        QCOMPARE(created.status, 201);
        const QUuid id = *parseWireId(created.json.toObject().value(u"id"_s).toString());
        QVERIFY(m_server->send(id, u"hello"_s, true).ok());
        QVERIFY(m_server->waitForStatus(id, u"error"_s));
        const QList<QJsonObject> errors = ofKind(m_server->events(id), u"AgentErrorEvent"_s);
        QCOMPARE(errors.size(), 1);
        QCOMPARE(errors[0].value(u"code"_s).toString(), u"llm_endpoint_missing"_s);
        QVERIFY(errors[0].value(u"error"_s).toString().contains(u"base_url"_s));
        QVERIFY(m_fake->requests.isEmpty());
    }

    // AgentDeck's own kinds are unchanged.
    void agentDecksOwnKindsStillWork_data()
    {
        QTest::addColumn<QString>("kind");
        QTest::addRow("shell") << u"shell"_s;
        QTest::addRow("echo") << u"echo"_s;
        QTest::addRow("llm") << u"llm"_s;
    }
    void agentDecksOwnKindsStillWork()
    {
        QFETCH(QString, kind);
        QJsonObject agent{{u"kind"_s, kind}};
        if (kind == u"llm"_s)
            agent.insert(u"llm"_s,
                         QJsonObject{{u"model"_s, u"m"_s}, {u"base_url"_s, m_fake->baseUrl()}});
        const ApiReply created =
            m_server->post(u"/api/conversations"_s, QJsonObject{{u"agent"_s, agent}});
        QCOMPARE(created.status, 201);
        QCOMPARE(created.json.toObject().value(u"agent"_s).toObject().value(u"kind"_s).toString(),
                 kind);
    }

    // OpenHands requires the agent; {} made a shell conversation.
    void aCreateWithoutAnAgentIsRefused()
    {
        const ApiReply refused = m_server->post(u"/api/conversations"_s, QJsonObject());
        QCOMPARE(refused.status, 422);
        QVERIFY2(refused.detail.contains(u"agent is required"_s), qPrintable(refused.detail));
        QCOMPARE(m_server->get(u"/api/conversations/count"_s).json.toInt(-1), 0);
    }

    void theNilIdIsUnknown()
    {
        const ApiReply reply =
            m_server->get(u"/api/conversations/00000000-0000-0000-0000-000000000000"_s);
        QCOMPARE(reply.status, 404);
        QCOMPARE(reply.errorCode, u"not_found"_s);
    }

    // A start of an archived conversation fails (OpenHands' own test says 409): it answered 200
    // with the archived record, as if it had started.
    void aStartOfAnArchivedIdIsAConflict()
    {
        const QUuid id = m_server->create();
        QVERIFY(!id.isNull());
        QVERIFY(m_server->post(ServerConnection::conversationPath(id, u"archive")).ok());
        QJsonObject again = TestServer::withAgent({{u"conversation_id"_s, toWireId(id)}});
        const ApiReply refused = m_server->post(u"/api/conversations"_s, again);
        QCOMPARE(refused.status, 409);
        QCOMPARE(refused.errorCode, u"conversation_archived"_s);
        again.insert(u"initial_message"_s, TestServer::message(u"echo hi"_s, true));
        QCOMPARE(m_server->post(u"/api/conversations"_s, again).status, 409);
        QVERIFY(ofKind(m_server->events(id), u"MessageEvent"_s).isEmpty());

        QVERIFY(m_server->post(ServerConnection::conversationPath(id, u"unarchive")).ok());
        QCOMPARE(m_server->post(u"/api/conversations"_s, again).status, 200);
    }
};

QTEST_GUILESS_MAIN(ApiOpenHandsTest)
#include "tst_api_openhands.moc"
