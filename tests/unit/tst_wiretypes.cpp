// Wire types, codecs and the shared conversation filter.
#include "conversationfilter.h"
#include "serverconnection.h"
#include "wiretypes.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QTest>

#include <limits>

using namespace Qt::StringLiterals;
using namespace AgentDeck;

Q_DECLARE_METATYPE(AgentDeck::Event)
Q_DECLARE_METATYPE(std::optional<AgentDeck::RunOutcome>)

class WireTypesTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    // A cut that keeps a character whole: half of a surrogate pair made every later request
    // of an llm conversation fail with a strict provider.
    void aCutKeepsCharactersWhole()
    {
        const QString emoji = u"\U0001F680"_s;
        QCOMPARE(leftWhole(u"abc"_s + emoji, 4), u"abc"_s);
        QCOMPARE(leftWhole(u"abc"_s + emoji, 5), u"abc"_s + emoji);
        QCOMPARE(leftWhole(u"abcdef"_s, 3), u"abc"_s);
        QCOMPARE(leftWhole(u"ab"_s, 10), u"ab"_s);
        QCOMPARE(leftWhole(emoji, 1), QString());
    }
    void timesAreUtcWithMillisecondsAndZ()
    {
        const QDateTime time = QDateTime::fromMSecsSinceEpoch(1'700'000'000'123, Qt::UTC);
        QCOMPARE(toWireTime(time), u"2023-11-14T22:13:20.123Z"_s);
        QCOMPARE(parseWireTime(u"2023-11-14T22:13:20.123Z"_s), std::optional(time));
        QCOMPARE(parseWireTime(u"2023-11-14T23:13:20.123+01:00"_s), std::optional(time));
        QVERIFY(!parseWireTime(u"yesterday"_s));
    }

    // Written by hand: the same text as QDateTime's ISO form, across days, leap years, before
    // 1970 and at the ends of the years QDateTime formats with four digits.
    void timesAreWrittenAsQDateTimeWritesThem_data()
    {
        QTest::addColumn<qint64>("ms");
        QTest::addRow("epoch") << qint64(0);
        QTest::addRow("a millisecond before") << qint64(-1);
        QTest::addRow("1900") << qint64(-2'208'988'800'000);
        QTest::addRow("leap day 2000") << qint64(951'782'400'999);
        QTest::addRow("leap day 2024, late") << qint64(1'709'251'199'999);
        QTest::addRow("year 1") << qint64(-62'135'596'800'000);
        QTest::addRow("last of 9999") << qint64(253'402'300'799'999);
        QTest::addRow("year 10000") << qint64(253'402'300'800'000);
        QTest::addRow("before year 0") << qint64(-62'198'755'200'001);
    }
    void timesAreWrittenAsQDateTimeWritesThem()
    {
        QFETCH(qint64, ms);
        const QDateTime time = QDateTime::fromMSecsSinceEpoch(ms, Qt::UTC);
        const QDate date = time.date();
        const QTime clock = time.time();
        const QString expected = QString::asprintf(
            "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", date.year(), date.month(), date.day(),
            clock.hour(), clock.minute(), clock.second(), clock.msec());
        QCOMPARE(toWireTime(ms), expected);
        if (date.year() >= 1 && date.year() <= 9999)
            QCOMPARE(toWireTime(ms), time.toString(Qt::ISODateWithMs));
    }

    void idsParseDashedAnd32Hex_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<bool>("valid");
        QTest::addRow("dashed") << u"5c0a1f0e-6a4e-4a8a-9c7e-0b5b8f3a2d11"_s << true;
        QTest::addRow("hex") << u"5c0a1f0e6a4e4a8a9c7e0b5b8f3a2d11"_s << true;
        QTest::addRow("upper") << u"5C0A1F0E-6A4E-4A8A-9C7E-0B5B8F3A2D11"_s << true;
        QTest::addRow("short") << u"5c0a1f0e"_s << false;
        QTest::addRow("junk") << u"zzzzzzzz-6a4e-4a8a-9c7e-0b5b8f3a2d11"_s << false;
        QTest::addRow("braces") << u"{5c0a1f0e-6a4e-4a8a-9c7e-0b5b8f3a2d11}"_s << false;
        QTest::addRow("empty") << QString() << false;
    }
    void idsParseDashedAnd32Hex()
    {
        QFETCH(QString, text);
        QFETCH(bool, valid);
        const auto id = parseWireId(text);
        QCOMPARE(id.has_value(), valid);
        if (valid)
            QCOMPARE(toWireId(*id), u"5c0a1f0e-6a4e-4a8a-9c7e-0b5b8f3a2d11"_s);
    }

    void conversationRoundTrips()
    {
        ConversationInfo info;
        info.id = QUuid::createUuid();
        info.title = u"t"_s;
        info.tags = {{u"a"_s, u"b"_s}};
        info.createdAt = QDateTime::fromMSecsSinceEpoch(1000, Qt::UTC);
        info.updatedAt = QDateTime::fromMSecsSinceEpoch(2000, Qt::UTC);
        info.archivedAt = QDateTime::fromMSecsSinceEpoch(3000, Qt::UTC);
        info.executionStatus = ExecutionStatus::WaitingForConfirmation;
        info.agentKind = u"echo"_s;
        info.workingDir = u"/w"_s;
        info.alwaysConfirm = true;
        info.runtime = {RuntimeStatus::Missing, false,
                        RuntimeError{u"runtime_expired"_s, u"gone"_s}};
        info.eventCount = 4;
        const auto back = ConversationInfo::fromJson(info.toJson());
        QVERIFY(back);
        QCOMPARE(back->toJson(), info.toJson());
        QVERIFY(back->runtime == info.runtime);
        QVERIFY(back->isArchived());
    }

    void bytesWriterMatchesTheJsonObject()
    {
        ConversationInfo info;
        info.id = QUuid::createUuid();
        // A surrogate without its pair included: it was written as '?'.
        info.title = u"quotes \" backslash \\ newline \n tab \t bell \u0007 ünïcode ✔ "_s +
                     QChar(char16_t(0xd800));
        info.tags = {{u"k\"ey"_s, u"v\nal"_s}, {u"a"_s, u""_s}};
        info.createdAt = info.updatedAt =
            QDateTime::fromMSecsSinceEpoch(1'700'000'000'001, Qt::UTC);
        info.agentKind = u"echo"_s;
        info.workingDir = u"/w/\"x\""_s;
        info.runtime = {RuntimeStatus::Error, true,
                        RuntimeError{u"provision_failed"_s, u"no \"room\""_s}};
        info.lastEventAt = info.createdAt;
        QJsonParseError error;
        const QJsonDocument parsed = QJsonDocument::fromJson(info.toJsonBytes(), &error);
        QCOMPARE(error.error, QJsonParseError::NoError);
        QCOMPARE(parsed.object(), info.toJson());
        info.archivedAt = info.createdAt;
        info.runtime = {};
        info.tags.clear();
        QCOMPARE(QJsonDocument::fromJson(info.toJsonBytes()).object(), info.toJson());
    }

    // The outcome in both writers, byte for byte, and back.
    void outcomeIsWrittenAndReadBack_data()
    {
        QTest::addColumn<std::optional<RunOutcome>>("outcome");
        QTest::addRow("none") << std::optional<RunOutcome>();
        RunOutcome failed;
        failed.kind = RunOutcome::Kind::Failed;
        failed.exitCode = 2;
        failed.detail = u"The command exited with code 2"_s;
        failed.at = QDateTime::fromMSecsSinceEpoch(1'700'000'000'123, Qt::UTC);
        QTest::addRow("failed") << std::optional(failed);
        RunOutcome interrupted;
        interrupted.kind = RunOutcome::Kind::Interrupted;
        interrupted.interruptedBy = InterruptCause::Restart;
        interrupted.detail = u"cut \"short\""_s;
        interrupted.retryCommand = u"make -j2 \\ all"_s;
        interrupted.at = failed.at;
        interrupted.dismissed = true;
        QTest::addRow("interrupted") << std::optional(interrupted);
        RunOutcome limit;
        limit.kind = RunOutcome::Kind::Limit;
        limit.code = u"max_iterations_reached"_s;
        QTest::addRow("limit, no time") << std::optional(limit);
    }
    void outcomeIsWrittenAndReadBack()
    {
        QFETCH(std::optional<RunOutcome>, outcome);
        ConversationInfo info;
        info.id = QUuid::createUuid();
        info.createdAt = info.updatedAt = QDateTime::fromMSecsSinceEpoch(1000, Qt::UTC);
        info.agentKind = u"shell"_s;
        info.outcome = outcome;
        QCOMPARE(info.toJsonBytes(), QJsonDocument(info.toJson()).toJson(QJsonDocument::Compact));
        QVERIFY(info.toJson().contains(u"outcome"_s));
        const auto back = ConversationInfo::fromJson(info.toJson());
        QVERIFY(back);
        QVERIFY(back->outcome == outcome);
        QCOMPARE(outcome && outcome->needsAttention(),
                 outcome && outcome->kind != RunOutcome::Kind::Succeeded && !outcome->dismissed);
    }

    void eventBytesWriterMatchesTheJsonObject_data()
    {
        QTest::addColumn<Event>("event");
        const QString awkward = u"quotes \" backslash \\ newline \n tab \t bell \u0007 ✔"_s;
        Event message = Event::message(u"user"_s, u"user"_s, awkward);
        message.seq = 7;
        message.timestamp = QDateTime::fromMSecsSinceEpoch(1'700'000'000'001, Qt::UTC);
        QTest::addRow("message") << message;
        Event action = Event::action(u"bash"_s, u"echo \"$HOME\""_s, awkward);
        action.seq = 8;
        action.timestamp = message.timestamp;
        QTest::addRow("action") << action;
        QTest::addRow("observation") << Event::observation(action, awkward.repeated(50), 3, true);
        Event bare = message;
        bare.fields = {};
        QTest::addRow("no fields") << bare;
        // Every kind of JSON value, numbers past 2^53 and fractions included.
        Event kinds = message;
        kinds.fields = QJsonObject{
            {u"integers"_s,
             QJsonArray{0, -1, qint64(9'007'199'254'740'993), std::numeric_limits<qint64>::max(),
                        std::numeric_limits<qint64>::min()}},
            {u"doubles"_s, QJsonArray{0.5, -1e-7, 1e300, 3.0, 9.3e18}},
            {u"others"_s,
             QJsonArray{true, false, QJsonValue(), awkward, QJsonArray{}, QJsonObject{}}},
            {awkward, QJsonObject{{u"nested"_s, QJsonObject{{u"deeper"_s, QJsonArray{1}}}}}}};
        QTest::addRow("every kind of value") << kinds;
        // A surrogate without its pair has no UTF-8 form: QJsonDocument writes it as a \u
        // escape, and so must the writer (not as '?'). Escapes that take more room than the
        // text they stand for, many of them.
        const QChar high(char16_t(0xd800)), low(char16_t(0xdc00)), lastHigh(char16_t(0xd83d));
        const QString unpairedText = u"lone "_s + high + u" high, "_s + low +
                                     u" low, paired \U0001F44B, reversed "_s + low + high +
                                     u", last "_s + lastHigh;
        const QString escapes = QString(5000, QChar(u'\x01')) + QString(3000, u'"') + u"\u00e9"_s;
        Event unpaired = message;
        unpaired.fields = QJsonObject{{u"text"_s, unpairedText}, {u"controls"_s, escapes}};
        QTest::addRow("unpaired surrogates and many escapes") << unpaired;
        // toJson() lets the common members win over fields of the same name.
        Event clashing = message;
        clashing.fields.insert(u"seq"_s, u"not a number"_s);
        QTest::addRow("a field named like a common member") << clashing;
    }
    void eventBytesWriterMatchesTheJsonObject()
    {
        QFETCH(Event, event);
        QJsonParseError error;
        const QJsonDocument parsed = QJsonDocument::fromJson(event.toJsonBytes(), &error);
        QCOMPARE(error.error, QJsonParseError::NoError);
        QCOMPARE(parsed.object(), event.toJson());
    }

    void conversationWithoutArchivedAtIsRejected()
    {
        QJsonObject json = ConversationInfo{QUuid::createUuid()}.toJson();
        json.remove(u"archived_at"_s);
        QVERIFY(!ConversationInfo::fromJson(json));
    }

    void missingRuntimeInfoMeansLocalDefaults()
    {
        QJsonObject json = ConversationInfo{QUuid::createUuid()}.toJson();
        json.remove(u"runtime_info"_s);
        const auto info = ConversationInfo::fromJson(json);
        QVERIFY(info);
        QVERIFY(info->runtime.status == RuntimeStatus::Available);
        QVERIFY(info->runtime.canResume);
    }

    void eventsRoundTripWithTheirFields()
    {
        const Event action = Event::action(u"bash"_s, u"ls"_s);
        const Event observation = Event::observation(action, u"out"_s, 2, true);
        QCOMPARE(observation.actionId(), toWireId(action.id));
        QCOMPARE(observation.toolCallId(), action.toolCallId());
        Event stored = observation;
        stored.seq = 7;
        stored.timestamp = QDateTime::fromMSecsSinceEpoch(5, Qt::UTC);
        const auto back = Event::fromJson(stored.toJson());
        QVERIFY(back);
        QCOMPARE(back->seq, 7);
        QCOMPARE(back->kind, u"ObservationEvent"_s);
        QCOMPARE(back->fields.value(u"observation"_s).toObject().value(u"exit_code"_s).toInt(), 2);
        QCOMPARE(Event::message(u"user"_s, u"user"_s, u"hi"_s).messageText(), u"hi"_s);
    }

    void messageRequestsAreValidated_data()
    {
        QTest::addColumn<QByteArray>("json");
        QTest::addColumn<bool>("valid");
        QTest::addColumn<QString>("text");
        QTest::addRow("parts")
            << R"({"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]})"_ba
            << true << u"ab"_s;
        QTest::addRow("string content") << R"({"content":"plain"})"_ba << true << u"plain"_s;
        QTest::addRow("no content") << R"({"role":"user"})"_ba << false << QString();
        QTest::addRow("image part")
            << R"({"content":[{"type":"image","url":"x"}]})"_ba << false << QString();
        QTest::addRow("bad role") << R"({"role":"agent","content":"x"})"_ba << false << QString();
        QTest::addRow("bad run") << R"({"content":"x","run":"yes"})"_ba << false << QString();
    }
    void messageRequestsAreValidated()
    {
        QFETCH(QByteArray, json);
        QFETCH(bool, valid);
        QFETCH(QString, text);
        QString error;
        const auto request =
            MessageRequest::fromJson(QJsonDocument::fromJson(json).object(), &error);
        QCOMPARE(request.has_value(), valid);
        QCOMPARE(error.isEmpty(), valid);
        if (valid)
            QCOMPARE(request->text, text);
    }

    void createRequestsAreValidated_data()
    {
        QTest::addColumn<QByteArray>("json");
        QTest::addColumn<bool>("valid");
        // The agent is required, as OpenHands requires it.
        QTest::addRow("empty") << "{}"_ba << false;
        QTest::addRow("only an agent") << R"({"agent":{"kind":"shell"}})"_ba << true;
        QTest::addRow("agent kind not a string") << R"({"agent":{"kind":5}})"_ba << false;
        // OpenHands' agent spec, with or without its kind, is the llm agent's.
        QTest::addRow("openhands agent")
            << R"({"agent":{"kind":"Agent","llm":{"model":"openai/m","api_key":"k"},"tools":[{"name":"terminal"},{"name":"file_editor"}]},"workspace":{"type":"local","working_dir":"/tmp"},"max_iterations":500,"stuck_detection":true,"hook_config":null})"_ba
            << true;
        QTest::addRow("openhands agent without kind")
            << R"({"agent":{"llm":{"model":"m"}}})"_ba << true;
        QTest::addRow("openhands agent without llm") << R"({"agent":{"kind":"Agent"}})"_ba << false;
        QTest::addRow("openhands tool agentdeck lacks")
            << R"({"agent":{"kind":"Agent","llm":{"model":"m"},"tools":[{"name":"terminal"},{"name":"browser_tool_set"}]}})"_ba
            << false;
        QTest::addRow("full")
            << R"({"conversation_id":"5c0a1f0e6a4e4a8a9c7e0b5b8f3a2d11","title":"t","tags":{"a":"b"},"agent":{"kind":"echo"},"workspace":{"working_dir":"/x"},"confirmation_policy":{"kind":"AlwaysConfirm"},"initial_message":{"content":"hi","run":true},"unknown_field":1})"_ba
            << true;
        QTest::addRow("tag not string") << R"({"tags":{"a":1}})"_ba << false;
        QTest::addRow("title number") << R"({"title":3})"_ba << false;
        QTest::addRow("policy unknown")
            << R"({"confirmation_policy":{"kind":"Sometimes"}})"_ba << false;
        QTest::addRow("bad message") << R"({"initial_message":{"content":7}})"_ba << false;
    }
    void createRequestsAreValidated()
    {
        QFETCH(QByteArray, json);
        QFETCH(bool, valid);
        QString error;
        const auto request =
            CreateConversationRequest::fromJson(QJsonDocument::fromJson(json).object(), &error);
        QCOMPARE(request.has_value(), valid);
        if (valid) {
            const auto again = CreateConversationRequest::fromJson(request->toJson(), &error);
            QVERIFY(again);
            QCOMPARE(again->toJson(), request->toJson());
        }
    }

    // OpenHands' spec becomes the llm agent's settings: its tools named as AgentDeck's, the
    // model without LiteLLM's "openai/", max_iterations from beside the agent.
    void theOpenHandsAgentSpecIsTheLlmAgents()
    {
        const QByteArray json =
            R"({"agent":{"kind":"Agent","llm":{"model":"openai/gpt-4o","api_key":"k","base_url":"http://llm/v1","usage_id":"x","num_retries":99},"tools":[{"name":"terminal","params":{}},{"name":"file_editor"},{"name":"terminal"}]},"max_iterations":7})"_ba;
        QString error;
        const auto request =
            CreateConversationRequest::fromJson(QJsonDocument::fromJson(json).object(), &error);
        QVERIFY2(request, qPrintable(error));
        QCOMPARE(request->agentKind, u"llm"_s);
        const QJsonObject llm = request->agentConfig.value(u"llm"_s).toObject();
        QCOMPARE(llm.value(u"model"_s).toString(), u"gpt-4o"_s);
        QCOMPARE(llm.value(u"api_key"_s).toString(), u"k"_s);
        QCOMPARE(llm.value(u"base_url"_s).toString(), u"http://llm/v1"_s);
        QCOMPARE(llm.value(u"max_retries"_s).toInt(), 20);
        QVERIFY(!llm.contains(u"usage_id"_s));
        QCOMPARE(request->agentConfig.value(u"tools"_s).toArray(),
                 QJsonArray({u"bash"_s, u"read_file"_s, u"write_file"_s, u"str_replace"_s}));
        QCOMPARE(request->agentConfig.value(u"max_iterations"_s).toInt(), 7);

        const QByteArray lacking =
            R"({"agent":{"kind":"Agent","llm":{"model":"m"},"tools":[{"name":"task_tracker"},{"name":"terminal"},{"name":"browser_tool_set"}]}})"_ba;
        QVERIFY(!CreateConversationRequest::fromJson(QJsonDocument::fromJson(lacking).object(),
                                                     &error));
        QVERIFY2(error.contains(u"task_tracker, browser_tool_set"_s), qPrintable(error));
    }

    void labelsAreBounded_data()
    {
        using Labels = ConversationLabels;
        const auto tags = [](int count, const QString &name, const QString &value) {
            QJsonObject object;
            for (int i = 0; i < count; ++i)
                object.insert(count == 1 ? name : name + QString::number(i), value);
            return object;
        };
        // U+1F600 is two UTF-16 code units and one character.
        const QString emoji = QString::fromUcs4(U"\U0001F600");
        QTest::addColumn<QJsonObject>("body");
        QTest::addColumn<QString>("error"); // a word of the sentence; empty: valid
        QTest::addRow("nothing") << QJsonObject() << QString();
        QTest::addRow("nulls") << QJsonObject{{u"title"_s, QJsonValue::Null},
                                              {u"tags"_s, QJsonValue::Null}}
                               << QString();
        QTest::addRow("longest title")
            << QJsonObject{{u"title"_s, QString(Labels::MaxTitleLength, u'x')}} << QString();
        QTest::addRow("title one too long")
            << QJsonObject{{u"title"_s, QString(Labels::MaxTitleLength + 1, u'x')}} << u"title"_s;
        QTest::addRow("title of emoji at the limit")
            << QJsonObject{{u"title"_s, emoji.repeated(Labels::MaxTitleLength)}} << QString();
        QTest::addRow("title of emoji past the limit")
            << QJsonObject{{u"title"_s, emoji.repeated(Labels::MaxTitleLength + 1)}} << u"title"_s;
        QTest::addRow("most tags")
            << QJsonObject{{u"tags"_s, tags(Labels::MaxTags, u"t"_s, u"v"_s)}} << QString();
        QTest::addRow("one tag too many")
            << QJsonObject{{u"tags"_s, tags(Labels::MaxTags + 1, u"t"_s, u"v"_s)}} << u"tags"_s;
        QTest::addRow("empty tag name")
            << QJsonObject{{u"tags"_s, tags(1, {}, u"v"_s)}} << u"name"_s;
        QTest::addRow("longest tag name")
            << QJsonObject{{u"tags"_s, tags(1, QString(Labels::MaxTagNameLength, u'n'), {})}}
            << QString();
        QTest::addRow("tag name too long")
            << QJsonObject{{u"tags"_s, tags(1, QString(Labels::MaxTagNameLength + 1, u'n'), {})}}
            << u"name"_s;
        QTest::addRow("tag value too long")
            << QJsonObject{{u"tags"_s,
                            tags(1, u"n"_s, QString(Labels::MaxTagValueLength + 1, u'v'))}}
            << u"\"n\""_s;
        // Stored as SQLite text, a lone surrogate was joined to the character after it.
        const QString unpaired = u"a "_s + QChar(char16_t(0xd800)) + u" b"_s;
        QTest::addRow("title with an unpaired surrogate")
            << QJsonObject{{u"title"_s, unpaired}} << u"Unicode"_s;
        QTest::addRow("tag name with an unpaired surrogate")
            << QJsonObject{{u"tags"_s, tags(1, unpaired, u"v"_s)}} << u"Unicode"_s;
        QTest::addRow("tag value with an unpaired surrogate")
            << QJsonObject{{u"tags"_s, tags(1, u"n"_s, QChar(char16_t(0xdc00)))}} << u"Unicode"_s;
        // Stored whole, compared cut at the NUL by the tag filter.
        const QString nul = u"v"_s + QChar(0) + u"x"_s;
        QTest::addRow("tag value with a NUL")
            << QJsonObject{{u"tags"_s, tags(1, u"n"_s, nul)}} << u"NUL"_s;
        QTest::addRow("tag name with a NUL")
            << QJsonObject{{u"tags"_s, tags(1, nul, u"v"_s)}} << u"NUL"_s;
        QTest::addRow("paired surrogates")
            << QJsonObject{{u"title"_s, emoji}, {u"tags"_s, tags(1, emoji, emoji)}} << QString();
    }
    void labelsAreBounded()
    {
        QFETCH(QJsonObject, body);
        QFETCH(QString, error);
        QString sentence;
        const auto labels = ConversationLabels::fromJson(body, &sentence);
        QCOMPARE(labels.has_value(), error.isEmpty());
        QVERIFY2(sentence.contains(error), qPrintable(sentence));
        if (labels) {
            QCOMPARE(labels->title.has_value(), body.value(u"title"_s).isString());
            QCOMPARE(labels->tags.has_value(), body.value(u"tags"_s).isObject());
        }
        // A create body is read by the same rules.
        QJsonObject create = body;
        create.insert(u"agent"_s, QJsonObject{{u"kind"_s, u"shell"_s}});
        QCOMPARE(CreateConversationRequest::fromJson(create, &sentence).has_value(),
                 error.isEmpty());
    }

    void filterParsesAndMatches_data()
    {
        QTest::addColumn<QString>("query");
        QTest::addColumn<bool>("matchesActive");
        QTest::addColumn<bool>("matchesArchived");
        QTest::addRow("default shows active") << QString() << true << false;
        QTest::addRow("archived=true") << u"archived=true"_s << false << true;
        QTest::addRow("filter ALL") << u"archive_filter=ALL"_s << true << true;
        QTest::addRow("filter wins") << u"archived=true&archive_filter=ACTIVE"_s << true << false;
        QTest::addRow("status") << u"status=paused&archive_filter=ALL"_s << true << false;
        QTest::addRow("text") << u"q=DEPLOY&archive_filter=ALL"_s << true << true;
        QTest::addRow("tag value") << u"tag=team:infra&archive_filter=ALL"_s << true << false;
        QTest::addRow("tag key") << u"tag=team&archive_filter=ALL"_s << true << true;
    }
    void filterParsesAndMatches()
    {
        QFETCH(QString, query);
        QFETCH(bool, matchesActive);
        QFETCH(bool, matchesArchived);
        ConversationInfo active{QUuid::createUuid(), u"Deploy web"_s, {{u"team"_s, u"infra"_s}}};
        active.executionStatus = ExecutionStatus::Paused;
        ConversationInfo archived{QUuid::createUuid(), u"deploy db"_s, {{u"team"_s, u"data"_s}}};
        archived.archivedAt = QDateTime::currentDateTimeUtc();
        QString error;
        const auto filter = ConversationFilter::fromQuery(QUrlQuery(query), &error);
        QVERIFY2(filter, qPrintable(error));
        QCOMPARE(filter->matches(active), matchesActive);
        QCOMPARE(filter->matches(archived), matchesArchived);
        // Writing the filter back gives the same selection.
        QUrlQuery written;
        filter->writeTo(written);
        const auto reread = ConversationFilter::fromQuery(written, &error);
        QVERIFY(reread);
        QCOMPARE(reread->matches(active), matchesActive);
        QCOMPARE(reread->matches(archived), matchesArchived);
    }

    void filterRejectsBadParameters_data()
    {
        QTest::addColumn<QString>("query");
        QTest::addRow("archived") << u"archived=maybe"_s;
        QTest::addRow("archive_filter") << u"archive_filter=SOME"_s;
        QTest::addRow("status") << u"status=sleeping"_s;
        QTest::addRow("tag") << u"tag=:x"_s;
    }
    void filterRejectsBadParameters()
    {
        QFETCH(QString, query);
        QString error;
        QVERIFY(!ConversationFilter::fromQuery(QUrlQuery(query), &error));
        QVERIFY(!error.isEmpty());
    }
};

QTEST_GUILESS_MAIN(WireTypesTest)
#include "tst_wiretypes.moc"
