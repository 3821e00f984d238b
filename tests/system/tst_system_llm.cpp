// The llm agent in the real binary: a run killed (SIGKILL) while the model is thinking is
// recovered after a restart, and a fresh agent continues from the stored history.
#include "fakellmserver.h"
#include "serverprocess.h"
#include "testevents.h"

#include <QSignalSpy>
#include <QTemporaryDir>

using namespace Qt::StringLiterals;
using namespace AgentDeck::Testing;

namespace {

const QByteArray Key = "sk-system-test-5d2e-never-logged";

} // namespace

class SystemLlmTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        QString problem;
        QVERIFY2(m_fleet.findBinary(&problem), qPrintable(problem));
    }

    void cleanup()
    {
        m_fleet.cleanUp();
        qunsetenv("AGENTDECK_LLM_API_KEY");
    }

    void killedRunContinuesFromTheStoredHistory()
    {
        FakeLlmServer fake;
        QVERIFY(fake.listen());
        const QString dataDir = m_fleet.newDataDir();
        // The key comes from the environment, so it is still there after the restart.
        qputenv("AGENTDECK_LLM_API_KEY", Key);
        const QStringList options{u"--llm-base-url"_s, fake.baseUrl(), u"--llm-model"_s,
                                  u"fake-model"_s};

        ServerProcess &first = m_fleet.add(dataDir, options);
        QVERIFY2(first.startReady(), qPrintable(first.stderrText()));
        fake.enqueue(FakeLlmServer::toolCall(
            u"write_file"_s, {{u"path"_s, u"step1.txt"_s}, {u"content"_s, u"one\n"_s}},
            u"call_step1"_s, u"Step one."_s));
        fake.enqueue(FakeLlmServer::hanging());
        QSignalSpy received(&fake, &FakeLlmServer::requestReceived);
        const QUuid id = first.create(
            QJsonObject{{u"agent"_s, QJsonObject{{u"kind"_s, u"llm"_s},
                                                 {u"llm"_s, QJsonObject{{u"timeout"_s, 600}}}}},
                        {u"initial_message"_s, userMessage(u"two steps"_s, true)}});
        QVERIFY(!id.isNull());
        // The second request is in flight (the model "thinks") when the server dies.
        QTRY_COMPARE_WITH_TIMEOUT(fake.requests.size(), 2, 20'000);
        QCOMPARE(first.status(id), u"running"_s);
        first.sendSignal(SIGKILL);
        QVERIFY(first.waitForExit(10'000));

        ServerProcess &second = m_fleet.add(dataDir, options);
        QVERIFY2(second.startReady(), qPrintable(second.stderrText()));
        QCOMPARE(second.status(id), u"paused"_s);
        fake.enqueue(FakeLlmServer::toolCall(u"finish"_s, {{u"message"_s, u"Both done."_s}}));
        const Reply recovered = second.post(conversationPath(id, u"recover"_s));
        QVERIFY2(recovered.ok(), qPrintable(recovered.describe()));
        QVERIFY(second.waitForStatus(id, u"finished"_s));

        // The fresh agent was given the stored history: the first step and its result.
        QCOMPARE(fake.requests.size(), 3);
        const QJsonArray messages = fake.messagesOf(2);
        bool sawCall = false;
        bool sawResult = false;
        for (const QJsonValue &value : messages) {
            const QJsonObject message = value.toObject();
            for (const QJsonValue &call : message.value(u"tool_calls"_s).toArray())
                sawCall = sawCall || call.toObject().value(u"id"_s) == u"call_step1"_s;
            sawResult = sawResult || (message.value(u"role"_s) == u"tool"_s &&
                                      message.value(u"tool_call_id"_s) == u"call_step1"_s);
        }
        QVERIFY(sawCall);
        QVERIFY(sawResult);
        QCOMPARE(fake.requests[2].authorization, "Bearer " + Key);

        const QList<QJsonObject> events = second.events(id);
        QCOMPARE(ofKind(events, u"ActionEvent"_s).size(), 1);
        QCOMPARE(ofKind(events, u"AgentErrorEvent"_s).size(), 1); // run_interrupted
        QCOMPARE(second.get(conversationPath(id, u"agent_final_response"_s))
                     .object()
                     .value(u"response"_s)
                     .toString(),
                 u"Both done."_s);
        const QJsonObject stats = second.conversation(id).value(u"stats"_s).toObject();
        QVERIFY(stats.value(u"requests"_s).toInt() >= 2);

        // The key was never written to the log of either server.
        QVERIFY(!first.stderrText().toUtf8().contains(Key));
        QVERIFY(!second.stderrText().toUtf8().contains(Key));
        QVERIFY(!second.get(conversationPath(id)).body.contains(Key));
    }

private:
    ServerFleet m_fleet;
};

QTEST_GUILESS_MAIN(SystemLlmTest)
#include "tst_system_llm.moc"
