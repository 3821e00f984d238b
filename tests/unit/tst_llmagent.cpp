// The llm agent's pure parts: history to chat messages, iteration counting, settings, paths.
#include "execution/conversationrunner.h"
#include "execution/llm/llmagent.h"
#include "execution/tools.h"
#include "serverconfig.h"

#include <QCoroTask>
#include <QJsonArray>
#include <QTest>

using namespace Qt::StringLiterals;
using namespace AgentDeck;

namespace {

// Events as the store returns them: with increasing seqs.
struct History
{
    QList<Event> events;
    Event &add(Event event)
    {
        event.seq = events.size() + 1;
        events.append(event);
        return events.last();
    }
    Event user(const QString &text)
    {
        return add(Event::message(EventSource::User, u"user"_s, text));
    }
    Event call(const QString &id, const QString &command, const QString &thought = {})
    {
        return add(Event::toolCall(u"bash"_s, id, {{u"command"_s, command}}, thought));
    }
    void result(const Event &action, const QString &output, int exitCode = 0)
    {
        add(Event::observation(action, output, exitCode, false));
    }
};

// Takes the requests of commands and runs none of them.
class RecordingRuntime final : public Runtime
{
public:
    QList<CommandRequest> requests;
    QCoro::Task<CommandResult> execute(CommandRequest request) override
    {
        requests.append(request);
        co_return CommandResult{};
    }
    void interrupt() override {}
};

QStringList roles(const QJsonArray &messages)
{
    QStringList list;
    for (const QJsonValue &message : messages)
        list.append(message.toObject().value(u"role"_s).toString());
    return list;
}

} // namespace

class LlmAgentTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void historyBecomesChatMessages()
    {
        History h;
        h.user(u"do it"_s);
        h.add(Event::stateUpdate(u"execution_status"_s, u"running"_s));
        const Event a = h.call(u"a"_s, u"ls"_s, u"Looking first."_s);
        const Event b = h.call(u"b"_s, u"false"_s);
        h.result(a, u"file\n"_s);
        h.result(b, QString(), 1);
        const Event c = h.call(u"c"_s, u"rm -rf x"_s);
        h.add(Event::userReject(c, u"too risky"_s));
        h.add(Event::agentError(u"llm_unavailable"_s, u"down"_s));
        h.add(Event::message(EventSource::User, u"system"_s, u"be careful"_s));

        const QJsonArray messages = LlmAgent::messagesFor(h.events, u"prompt"_s, 100'000);
        QCOMPARE(roles(messages), (QStringList{u"system"_s, u"user"_s, u"assistant"_s, u"tool"_s,
                                               u"tool"_s, u"assistant"_s, u"tool"_s, u"system"_s}));
        QCOMPARE(messages[0].toObject().value(u"content"_s).toString(), u"prompt"_s);
        const QJsonObject grouped = messages[2].toObject();
        QCOMPARE(grouped.value(u"content"_s).toString(), u"Looking first."_s);
        QCOMPARE(grouped.value(u"tool_calls"_s).toArray().size(), 2);
        QCOMPARE(messages[4].toObject().value(u"content"_s).toString(), u"\n[exit code 1]"_s);
        QVERIFY(messages[5].toObject().value(u"content"_s).isNull());
        const QString rejection = messages[6].toObject().value(u"content"_s).toString();
        QVERIFY(rejection.contains(u"rejected"_s));
        QVERIFY(rejection.contains(u"too risky"_s));
    }

    void aCallWithoutResultIsAnsweredForTheProtocol()
    {
        History h;
        h.user(u"go"_s);
        h.call(u"lost"_s, u"sleep 100"_s);
        h.user(u"continue"_s);
        const QJsonArray messages = LlmAgent::messagesFor(h.events, u"p"_s, 100'000);
        QCOMPARE(roles(messages),
                 (QStringList{u"system"_s, u"user"_s, u"assistant"_s, u"tool"_s, u"user"_s}));
        QCOMPARE(messages[3].toObject().value(u"tool_call_id"_s).toString(), u"lost"_s);
    }

    void olderResultsAreTruncatedFirst()
    {
        History h;
        h.user(u"go"_s);
        const Event a = h.call(u"a"_s, u"x"_s);
        h.result(a, QString(8000, u'a'));
        const Event b = h.call(u"b"_s, u"y"_s);
        h.result(b, QString(8000, u'b'));
        const Event c = h.call(u"c"_s, u"z"_s);
        h.result(c, QString(2000, u'c'));
        // 18000 characters of results are ~4500 tokens; with a budget of 2000 cutting `a` is not
        // enough, `b` goes too, and `c` (the newest) stays whole.
        const QJsonArray messages = LlmAgent::messagesFor(h.events, u"p"_s, 2000);
        const QString first = messages[3].toObject().value(u"content"_s).toString();
        const QString second = messages[5].toObject().value(u"content"_s).toString();
        QVERIFY(first.contains(u"7800 characters of this older output were removed"_s));
        QVERIFY(second.contains(u"removed to fit the context budget"_s));
        QCOMPARE(messages[7].toObject().value(u"content"_s).toString(), QString(2000, u'c'));
        // Under the budget nothing changes.
        const QJsonArray roomy = LlmAgent::messagesFor(h.events, u"p"_s, 100'000);
        QCOMPARE(roomy[3].toObject().value(u"content"_s).toString(), QString(8000, u'a'));
    }

    void iterationsCountModelTurnsSinceInput()
    {
        History h;
        h.user(u"one"_s);
        h.result(h.call(u"1"_s, u"a"_s), u""_s);
        const Event two = h.call(u"2"_s, u"b"_s);
        const Event three = h.call(u"3"_s, u"c"_s); // same answer as 2
        h.result(two, u""_s);
        h.result(three, u""_s);
        QCOMPARE(LlmAgent::iterationsSinceInput(h.events), 2);
        h.add(Event::agentError(u"max_iterations_reached"_s, u"stop"_s));
        QCOMPARE(LlmAgent::iterationsSinceInput(h.events), 0);
        h.result(h.call(u"4"_s, u"d"_s), u""_s);
        QCOMPARE(LlmAgent::iterationsSinceInput(h.events), 1);
        h.user(u"again"_s);
        QCOMPARE(LlmAgent::iterationsSinceInput(h.events), 0);
    }

    void pendingActionsRunEarliestFirst()
    {
        History h;
        h.user(u"go"_s);
        const Event a = h.call(u"a"_s, u"x"_s);
        const Event b = h.call(u"b"_s, u"y"_s);
        const QList<const Event *> both = pendingActions(h.events);
        QCOMPARE(both.size(), 2);
        QCOMPARE(both[0]->id, a.id);
        QCOMPARE(both[1]->id, b.id);
        QCOMPARE(pendingAction(h.events)->id, a.id);
        h.result(a, u""_s);
        QCOMPARE(pendingAction(h.events)->id, b.id);
        h.add(Event::userReject(b, {}));
        QVERIFY(!pendingAction(h.events));
    }

    void pathsStayInTheWorkspace_data()
    {
        QTest::addColumn<QString>("path");
        QTest::addColumn<QString>("resolved");
        QTest::addRow("relative") << u"a/b.txt"_s << u"/ws/a/b.txt"_s;
        QTest::addRow("absolute inside") << u"/ws/c"_s << u"/ws/c"_s;
        QTest::addRow("the workspace") << u"."_s << u"/ws"_s;
        QTest::addRow("dot dot inside") << u"a/../b"_s << u"/ws/b"_s;
        QTest::addRow("dot dot out") << u"../etc/passwd"_s << QString();
        QTest::addRow("absolute outside") << u"/etc/passwd"_s << QString();
        QTest::addRow("sibling prefix") << u"/wsx/file"_s << QString();
    }
    void pathsStayInTheWorkspace()
    {
        QFETCH(QString, path);
        QFETCH(QString, resolved);
        const auto result = Tools::resolveInWorkspace(path, u"/ws"_s);
        QCOMPARE(result.value_or(QString()), resolved);
    }

    // A model's own timeout is bounded by the server's, and is a limit however it is spelled:
    // 0.0001 s came out as 0 ms and 1e300 s as a negative, both "no limit".
    void aCommandsOwnTimeoutIsALimit_data()
    {
        QTest::addColumn<double>("seconds"); // the model's; 0: none given
        QTest::addColumn<qint64>("serverMs");
        QTest::addColumn<qint64>("limitMs");
        const qint64 longest = std::chrono::milliseconds(MaxTimerDuration).count();
        QTest::addRow("none") << 0.0 << qint64(2000) << qint64(2000);
        QTest::addRow("shorter") << 1.5 << qint64(2000) << qint64(1500);
        QTest::addRow("longer") << 9.0 << qint64(2000) << qint64(2000);
        QTest::addRow("under a millisecond") << 0.0001 << qint64(2000) << qint64(1);
        QTest::addRow("huge") << 1e300 << qint64(2000) << qint64(2000);
        QTest::addRow("huge, no server limit") << 1e300 << qint64(0) << longest;
        QTest::addRow("no server limit") << 3.0 << qint64(0) << qint64(3000);
    }
    void aCommandsOwnTimeoutIsALimit()
    {
        QFETCH(double, seconds);
        QFETCH(qint64, serverMs);
        QFETCH(qint64, limitMs);
        RecordingRuntime runtime;
        QJsonObject arguments{{u"command"_s, u"sleep 8"_s}};
        if (seconds > 0)
            arguments.insert(u"timeout"_s, seconds);
        QCoro::waitFor(Tools::run(runtime, u"bash"_s, arguments, u"/ws"_s,
                                  std::chrono::milliseconds(serverMs), {}));
        QCOMPARE(runtime.requests.size(), 1);
        QCOMPARE(qint64(runtime.requests.first().timeout.count()), limitMs);
    }

    void settingsKeepTheKeyOut()
    {
        QJsonObject config{{u"llm"_s, QJsonObject{{u"base_url"_s, u"http://h/v1"_s},
                                                  {u"model"_s, u"m"_s},
                                                  {u"api_key"_s, u"secret"_s}}},
                           {u"max_iterations"_s, 3}};
        QString key;
        QCOMPARE(LlmSettings::validate(config, {}, &key), QString());
        QCOMPARE(key, u"secret"_s);
        QCOMPARE(config.value(u"llm"_s).toObject().value(u"api_key"_s).toString(), u"********"_s);
        const LlmSettings withKey = LlmSettings::resolve(config, {}, key);
        QCOMPARE(withKey.apiKey, u"secret"_s);
        QVERIFY(!withKey.apiKeyLost);
        QCOMPARE(withKey.maxIterations, 3);
        // After a restart: lost, unless the server has a key of its own for that provider.
        QVERIFY(LlmSettings::resolve(config, {}, {}).apiKeyLost);
        LlmDefaults defaults;
        defaults.baseUrl = u"http://h/v1/"_s;
        defaults.apiKey = u"server"_s;
        const LlmSettings fallback = LlmSettings::resolve(config, defaults, {});
        QVERIFY(!fallback.apiKeyLost);
        QCOMPARE(fallback.apiKey, u"server"_s);
    }

    // The server-wide key went to whatever base URL a conversation named: anyone who could
    // create one collected the operator's key at a URL of their own.
    void theServersKeyGoesToTheServersProviderOnly()
    {
        LlmDefaults defaults;
        defaults.baseUrl = u"https://provider.example/v1"_s;
        defaults.apiKey = u"server"_s;
        const auto keyFor = [&](const QJsonObject &llm) {
            return LlmSettings::resolve(QJsonObject{{u"llm"_s, llm}}, defaults, {}).apiKey;
        };
        QCOMPARE(keyFor({}), u"server"_s);
        QCOMPARE(keyFor({{u"base_url"_s, u"https://provider.example/v1/"_s}}), u"server"_s);
        QCOMPARE(keyFor({{u"base_url"_s, u"http://collector.example/v1"_s}}), QString());
        QCOMPARE(keyFor({{u"base_url"_s, u"https://provider.example/v1/../attacker/v1"_s}}),
                 QString());
        // A conversation's own key lost in a restart is asked for again, not replaced by it.
        const QJsonObject lost{{u"llm"_s, QJsonObject{{u"base_url"_s, u"http://own.example/v1"_s},
                                                      {u"api_key"_s, LlmSettings::RedactedKey}}}};
        QVERIFY(LlmSettings::resolve(lost, defaults, {}).apiKeyLost);
    }

    // Texts cut to a length kept half of an emoji at the cut, a lone surrogate that strict
    // providers refuse: every later request of the conversation failed.
    void cutsKeepCharactersWhole()
    {
        const QString emoji = u"\U0001F680"_s;
        RecordingRuntime runtime;
        const CommandResult refused = QCoro::waitFor(
            Tools::run(runtime, u"bash"_s,
                       {{u"raw_arguments"_s, QString(QString(199, u'x') + emoji + u"}{"_s)}},
                       u"/ws"_s, {}, {}));
        QVERIFY(refused.output.contains(u"not a JSON object"_s));
        QVERIFY(refused.output.isValidUtf16());

        History h;
        h.user(u"go"_s);
        h.result(h.call(u"a"_s, u"cat big"_s), QString(199, u'o') + emoji + QString(5000, u'o'));
        h.result(h.call(u"b"_s, u"cat small"_s), u"small"_s);
        const QJsonArray messages = LlmAgent::messagesFor(h.events, u"prompt"_s, 100);
        const QString older = messages[3].toObject().value(u"content"_s).toString();
        QVERIFY(older.contains(u"were removed"_s));
        QVERIFY(older.isValidUtf16());
    }

    // A message sent while a step's commands ran is stored before their results; it closed the
    // calls, and the model was told "(no result was recorded)" of output that was stored.
    void aMessageSentDuringAStepComesAfterItsResults()
    {
        History h;
        h.user(u"do it"_s);
        const Event a = h.call(u"a"_s, u"sleep 2; echo real"_s);
        const Event b = h.call(u"b"_s, u"echo second"_s);
        h.user(u"follow-up"_s);
        h.result(a, u"real\n"_s);
        h.result(b, u"second\n"_s);
        const QJsonArray messages = LlmAgent::messagesFor(h.events, u"prompt"_s, 100'000);
        QCOMPARE(roles(messages), (QStringList{u"system"_s, u"user"_s, u"assistant"_s, u"tool"_s,
                                               u"tool"_s, u"user"_s}));
        QCOMPARE(messages[3].toObject().value(u"content"_s).toString(), u"real\n"_s);
        QCOMPARE(messages[4].toObject().value(u"content"_s).toString(), u"second\n"_s);
        QCOMPARE(messages[5].toObject().value(u"content"_s).toString(), u"follow-up"_s);
    }
};

QTEST_GUILESS_MAIN(LlmAgentTest)
#include "tst_llmagent.moc"
