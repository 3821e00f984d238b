// Runtime lifecycle and archive over real HTTP, with real sandbox processes when the binary is
// at hand (ctest passes it), and with a scripted provider where a failure must be provoked.
#include "fakes.h"
#include "runtime/commandoutput.h"
#include "runtime/localsandboxprovider.h"
#include "runtimedetails.h"
#include "serverprocess.h"
#include "storage/database.h"
#include "testevents.h"
#include "testserver.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <QTimer>
#include <thread>

#include <algorithm>
#include <csignal>

using namespace Qt::StringLiterals;
using namespace AgentDeck;
using namespace AgentDeck::Testing;

namespace {
QJsonObject shell(const QString &command, bool run = true)
{
    return TestServer::shellConversation(command, run);
}
} // namespace

class ApiRuntimeTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        if (qEnvironmentVariableIsEmpty("AGENTDECK_BINARY"))
            QSKIP(
                "needs AGENTDECK_BINARY (the agentdeck binary) for real sandboxes; run via ctest");
    }
    void init()
    {
        m_server = std::make_unique<TestServer>();
        QVERIFY2(m_server->start(), qPrintable(m_server->errorString()));
        QVERIFY(m_server->usesSandboxes());
    }
    void cleanup() { m_server.reset(); }

    // What a command prints reaches the conversation's subscribers while it runs, as
    // transient CommandOutput frames of its action (its secrets masked), not only once it ends:
    // a command printing a line a second showed nothing for minutes. The command waits for a
    // file the test makes once the first line came live.
    void aCommandsOutputIsSeenWhileItRuns_data() { bothRuntimes(); }
    void aCommandsOutputIsSeenWhileItRuns()
    {
        QVERIFY(startOnTheRowsRuntime());
        const QUuid id = m_server->create(shell(u"true"_s));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QVERIFY(m_server
                    ->post(ServerConnection::conversationPath(id, u"secrets"_s),
                           QJsonObject{{u"secrets"_s, QJsonObject{{u"TOKEN"_s, u"hunter22"_s}}}})
                    .ok());
        std::unique_ptr<EventStream> stream(m_server->client().openEventStream(id, 0));
        QSignalSpy connected(stream.get(), &EventStream::connected);
        QVERIFY(connected.wait(SettleTimeoutMs));
        QString live;
        QStringList actionIds;
        connect(stream.get(), &EventStream::transientReceived, this, [&](const QJsonObject &frame) {
            if (frame.value(u"kind"_s) != u"CommandOutput"_s)
                return;
            live += frame.value(u"text"_s).toString();
            actionIds.append(frame.value(u"action_id"_s).toString());
        });
        QVERIFY(m_server
                    ->send(id,
                           u"echo \"first $TOKEN\"; while [ ! -e go ]; do sleep 0.05; done; "
                           "echo second"_s,
                           true)
                    .ok());
        QTRY_VERIFY_WITH_TIMEOUT(live.contains(u"first"_s), SettleTimeoutMs);
        QCOMPARE(m_server->status(id), u"running"_s);
        // A stream opened now is sent what the command printed before it, once.
        std::unique_ptr<EventStream> late(m_server->client().openEventStream(id, 0));
        QString lateText;
        connect(late.get(), &EventStream::transientReceived, this,
                [&, output = CommandOutputFollower()](const QJsonObject &frame) mutable {
                    lateText += output.take(frame).text;
                });
        QTRY_VERIFY_WITH_TIMEOUT(lateText.contains(u"first"_s), SettleTimeoutMs);
        QVERIFY(!live.contains(u"hunter22"_s));
        QVERIFY(live.contains(u"first "_s));
        const QString workspace = m_server->workingDir(id);
        QVERIFY(QFile(QDir(workspace).filePath(u"go"_s)).open(QIODevice::WriteOnly));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        const QList<QJsonObject> actions = ofKind(m_server->events(id), u"ActionEvent"_s);
        QVERIFY(!actions.isEmpty());
        QCOMPARE(actionIds.first(), actions.last().value(u"id"_s).toString());
        QCOMPARE(lateText, live);
    }

    // A secret where a command's output is cut, at every byte of it: at the result's limit
    // (the observation, agent_final_response) and at the end of a live piece of a line too
    // long to hold back (the live frames). Masked after the cut, all of it but what fell on the
    // other side showed. The command waits at the end of the long line for a file the test
    // makes once a piece of it came live, so that the piece is cut there.
    void noPartOfASecretShowsWhereOutputIsCut_data()
    {
        QTest::addColumn<bool>("inProcess");
        QTest::addColumn<bool>("live"); // the cut of a live piece, else the result's
        for (const bool inProcess : {false, true}) {
            const char *runtime = inProcess ? "in-server runtime" : "sandbox host";
            QTest::addRow("%s, result limit", runtime) << inProcess << false;
            QTest::addRow("%s, live piece", runtime) << inProcess << true;
        }
    }
    void noPartOfASecretShowsWhereOutputIsCut()
    {
        QFETCH(bool, live);
        QVERIFY(startOnTheRowsRuntime());
        const QString secret = u"31415926535897"_s;
        const QUuid id = m_server->create(shell(u"true"_s));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QVERIFY(m_server
                    ->post(ServerConnection::conversationPath(id, u"secrets"_s),
                           QJsonObject{{u"secrets"_s, QJsonObject{{u"TOKEN"_s, secret}}}})
                    .ok());
        std::unique_ptr<EventStream> stream(m_server->client().openEventStream(id, 0));
        QSignalSpy connected(stream.get(), &EventStream::connected);
        QVERIFY(connected.wait(SettleTimeoutMs));
        QString liveText;
        connect(stream.get(), &EventStream::transientReceived, this, [&](const QJsonObject &frame) {
            if (frame.value(u"kind"_s) == u"CommandOutput"_s)
                liveText += frame.value(u"text"_s).toString();
        });
        // The line saying how much the live window skipped is the only one with digits.
        const auto digits = [](QString text) {
            static const QRegularExpression skipped(
                u"\\[… \\d+ bytes more were printed meanwhile\\]"_s);
            text.remove(skipped);
            return std::count_if(text.cbegin(), text.cend(), [](QChar c) { return c.isDigit(); });
        };
        const QString workspace = m_server->workingDir(id);
        for (int cut = 1; cut < secret.size(); ++cut) {
            const qsizetype limit = live ? LiveOutput::MaxHeldBytes : MaxCommandOutputBytes;
            const QString go = u"go-%1"_s.arg(cut);
            QVERIFY(m_server
                        ->send(id,
                               u"head -c %1 /dev/zero | tr '\\0' x; printf '%s' \"$TOKEN\"; "_s.arg(
                                   limit - cut) +
                                   (live ? u"while [ ! -e %1 ]; do sleep 0.05; done; "_s.arg(go)
                                         : QString()) +
                                   u"echo"_s,
                               true)
                        .ok());
            if (live) {
                QTRY_VERIFY_WITH_TIMEOUT(liveText.contains(u'x'), SettleTimeoutMs);
                QVERIFY(QFile(QDir(workspace).filePath(go)).open(QIODevice::WriteOnly));
            }
            QTRY_COMPARE_WITH_TIMEOUT(ofKind(m_server->events(id), u"ObservationEvent"_s).size(),
                                      cut + 1, SettleTimeoutMs);
            const QString output = ofKind(m_server->events(id), u"ObservationEvent"_s)
                                       .last()
                                       .value(u"observation"_s)
                                       .toObject()
                                       .value(u"output"_s)
                                       .toString();
            QVERIFY2(digits(output) == 0, qPrintable(output.right(100)));
            QVERIFY(m_server->waitForStatus(id, u"finished"_s));
            const QString response =
                m_server->get(ServerConnection::conversationPath(id, u"agent_final_response"))
                    .json.toObject()
                    .value(u"response"_s)
                    .toString();
            QVERIFY2(digits(response) == 0, qPrintable(response.right(100)));
            QVERIFY2(digits(liveText) == 0,
                     qPrintable(QString::number(cut) + u": "_s + liveText.right(200)));
            liveText.clear();
        }
    }

    // A command printing 100 MB: its live output goes on past the first MiB (the result
    // keeps), to its last lines, in a bounded number of bounded frames.
    void liveOutputIsBoundedWhateverACommandPrints_data() { bothRuntimes(); }
    void liveOutputIsBoundedWhateverACommandPrints()
    {
        QVERIFY(startOnTheRowsRuntime());
        const QUuid id = m_server->create(shell(u"true"_s));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        std::unique_ptr<EventStream> stream(m_server->client().openEventStream(id, 0));
        QSignalSpy connected(stream.get(), &EventStream::connected);
        QVERIFY(connected.wait(SettleTimeoutMs));
        qint64 frames = 0;
        qint64 bytes = 0;
        QElapsedTimer elapsed;
        elapsed.start();
        QString last;
        connect(stream.get(), &EventStream::transientReceived, this, [&](const QJsonObject &frame) {
            if (frame.value(u"kind"_s) != u"CommandOutput"_s)
                return;
            ++frames;
            last = frame.value(u"text"_s).toString();
            bytes += last.size();
        });
        QVERIFY(m_server
                    ->send(id,
                           u"head -c 100000000 /dev/zero | tr '\\0' x | fold -w 99; "
                           "echo end-of-output; while [ ! -e go ]; do sleep 0.05; done"_s,
                           true)
                    .ok());
        QTRY_VERIFY_WITH_TIMEOUT(last.contains(u"end-of-output"_s), 60'000);
        // At most a piece per interval (and the first at once), each of at most a piece's
        // bytes and the line saying what was skipped.
        const qint64 intervals = elapsed.elapsed() / LiveOutput::Interval.count() + 2;
        QVERIFY2(frames <= intervals,
                 qPrintable(u"%1 frames in %2 ms"_s.arg(frames).arg(elapsed.elapsed())));
        QVERIFY2(bytes <= frames * (LiveOutput::MaxPieceBytes + 100),
                 qPrintable(QString::number(bytes)));
        QVERIFY(bytes < 8 * 1024 * 1024);

        const QString workspace = m_server->workingDir(id);
        QVERIFY(QFile(QDir(workspace).filePath(u"go"_s)).open(QIODevice::WriteOnly));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s, 60'000));
        // The record is the observation, bounded as before.
        const QList<QJsonObject> observations = ofKind(m_server->events(id), u"ObservationEvent"_s);
        QVERIFY(!observations.isEmpty());
        const QByteArray output = QJsonDocument(observations.last()).toJson();
        QVERIFY(output.size() < MaxCommandOutputBytes + 64 * 1024);
        QVERIFY(output.contains("[output truncated]"));
    }

    // GET .../runtime says which process the sandbox is, since when it runs and idles, and who
    // holds the conversation: the details pane of the console shows it.
    void theRuntimeSaysItsProcessAndItsOwner()
    {
        const QUuid id = m_server->create(shell(u"while [ ! -e go ]; do sleep 0.05; done"_s));
        QVERIFY(m_server->waitForStatus(id, u"running"_s));
        QTRY_VERIFY_WITH_TIMEOUT(sandboxPid(id).has_value(), SettleTimeoutMs);
        const auto detailsOf = [this, id] {
            const ApiReply reply =
                m_server->get(ServerConnection::conversationPath(id, u"runtime"));
            return reply.ok() ? RuntimeDetails::fromJson(reply.json.toObject().value(u"details"_s))
                              : RuntimeDetails{};
        };
        const QDateTime now = QDateTime::currentDateTimeUtc();
        RuntimeDetails running = detailsOf();
        QCOMPARE(running.sandboxPid, sandboxPid(id));
        QVERIFY(running.startedAt);
        QVERIFY2(running.startedAt->secsTo(now) >= -2 && running.startedAt->secsTo(now) < 60,
                 qPrintable(running.startedAt->toString(Qt::ISODateWithMs)));
        QVERIFY(!running.idleSince); // a command runs
        QVERIFY(running.runtimeDir.endsWith(toWireId(id)));
        QVERIFY(running.ownedHere);
        QVERIFY(!running.leaseOwner.isEmpty());
        QVERIFY(running.leaseEpoch > 0);
        QVERIFY(running.leaseMsLeft && *running.leaseMsLeft > 0);

        const QString workspace = m_server->workingDir(id);
        QVERIFY(QFile(QDir(workspace).filePath(u"go"_s)).open(QIODevice::WriteOnly));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QTRY_VERIFY_WITH_TIMEOUT(detailsOf().idleSince.has_value(), SettleTimeoutMs);
        QCOMPARE(detailsOf().sandboxPid, running.sandboxPid);

        QVERIFY(
            m_server->call("DELETE"_ba, ServerConnection::conversationPath(id, u"runtime")).ok());
        QVERIFY(!detailsOf().sandboxPid);
        QVERIFY(!detailsOf().startedAt);
        QCOMPARE(m_server->get(ServerConnection::conversationPath(QUuid::createUuid(), u"runtime"))
                     .status,
                 404);
    }

    // In its sandbox a command sees its workspace and home in the data dir, and nothing else
    // of it: it read the catalog and every other conversation's files, and through another
    // host's socket it ran commands in that conversation's sandbox, out of its reach.
    void aSandboxDoesNotSeeTheDataDir()
    {
        // Outside /tmp, which every sandbox has a private one of: as a data dir usually is.
        QTemporaryDir outsideTmp(QDir::homePath() + u"/.agentdeck-test-XXXXXX"_s);
        QVERIFY(outsideTmp.isValid());
        TestServerOptions options;
        options.dataDir = outsideTmp.path();
        m_server = std::make_unique<TestServer>(std::move(options));
        QVERIFY2(m_server->start(), qPrintable(m_server->errorString()));
        const QUuid other = m_server->create(shell(u"echo mine > mine.txt"_s));
        QVERIFY(m_server->waitForStatus(other, u"finished"_s));
        const QUuid id = m_server->create(shell(u"true"_s));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QFile log(
            QDir(m_server->dataDir()).filePath(u"runtimes/"_s + toWireId(id) + u"/sandbox.log"_s));
        QVERIFY(log.open(QIODevice::ReadOnly));
        // A container (AGENTDECK_TEST_DOCKER) sees the same: the two bound at their paths.
        const QByteArray said = log.readAll();
        if (!said.contains("sandbox isolation: bubblewrap") &&
            !said.contains("sandbox isolation: container"))
            QSKIP("bubblewrap cannot run here: commands see the whole system (documented)");
        const QString data = m_server->dataDir();
        const QString seen = answerTo(
            id,
            u"cd '%1' && ls && ls runtimes workspaces && echo kept > $HOME/h && cat $HOME/h"_s.arg(
                data));
        QCOMPARE(seen, u"runtimes\nworkspaces\n"_s +
                           u"runtimes:\n%1\n\nworkspaces:\n%1\nkept\n"_s.arg(toWireId(id)));
        m_server.reset(); // before its data dir goes
    }

    void inspectingProvisionsNothingAndResumeReusesTheSandbox()
    {
        const QUuid id = m_server->create();
        QCOMPARE(runtimeStatus(id), u"missing"_s);
        QVERIFY(!sandboxPid(id));
        QVERIFY(post(id, u"runtime/resume"_s).ok());
        QCOMPARE(runtimeStatus(id), u"available"_s);
        const auto first = sandboxPid(id);
        QVERIFY(first && processAlive(*first));
        QVERIFY(post(id, u"runtime/resume"_s).ok());
        QCOMPARE(sandboxPid(id), first);
        // Resume runs nothing.
        QCOMPARE(m_server->status(id), u"idle"_s);
    }

    // The echo agent runs no commands: its runs start no sandbox host, a shell run does.
    void aRunOfTheEchoAgentStartsNoSandbox()
    {
        const QUuid echoed = m_server->create(
            QJsonObject{{u"agent"_s, QJsonObject{{u"kind"_s, u"echo"_s}}},
                        {u"initial_message"_s, TestServer::message(u"ping"_s, true)}});
        const QUuid shelled = m_server->create(shell(u"true"_s));
        QVERIFY(m_server->waitForStatus(echoed, u"finished"_s));
        QVERIFY(m_server->waitForStatus(shelled, u"finished"_s));
        QCOMPARE(finalResponse(echoed), u"ping"_s);
        QCOMPARE(runtimeStatus(echoed), u"missing"_s);
        QVERIFY(!sandboxPid(echoed));
        QCOMPARE(runtimeStatus(shelled), u"available"_s);
        QVERIFY(sandboxPid(shelled));
    }

    void reprovisionReplacesTheSandboxOnTheSameWorkspace()
    {
        const QUuid id = m_server->create(shell(u"echo kept > file"_s));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        const auto first = sandboxPid(id);
        QVERIFY(first);
        QVERIFY(post(id, u"runtime/reprovision"_s).ok());
        const auto second = sandboxPid(id);
        QVERIFY(second && *second != *first);
        QVERIFY(QTest::qWaitFor([&] { return !processAlive(*first); }, 5000));
        QCOMPARE(m_server->status(id), u"finished"_s); // the agent did not run
        QCOMPARE(answerTo(id, u"cat file"_s), u"kept\n"_s);
    }

    void deleteRuntimeStopsItAndKeepsHistory()
    {
        const QUuid id = m_server->create(shell(u"echo hi"_s));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        const auto pid = sandboxPid(id);
        QVERIFY(pid);
        const qsizetype events = m_server->events(id).size();
        QVERIFY(
            m_server->call("DELETE"_ba, ServerConnection::conversationPath(id, u"runtime")).ok());
        QCOMPARE(runtimeStatus(id), u"missing"_s);
        QVERIFY(QTest::qWaitFor([&] { return !processAlive(*pid); }, 5000));
        // The history keeps all it had, and says the runtime was stopped.
        const QList<QJsonObject> after = m_server->events(id);
        QCOMPARE(after.size(), events + 1);
        QCOMPARE(after.last().value(u"key"_s).toString(), u"runtime"_s);
        QCOMPARE(after.last().value(u"value"_s).toString(), u"stopped"_s);
        // It comes back on demand.
        QCOMPARE(answerTo(id, u"echo again"_s), u"again\n"_s);
        QCOMPARE(runtimeStatus(id), u"available"_s);
    }

    void archiveStopsTheRunAndRuntimeFirstAndKeepsTheFirstTimestamp()
    {
        const QUuid id = m_server->create(shell(u"sleep 30"_s));
        QVERIFY(QTest::qWaitFor([&] { return sandboxPid(id).has_value(); }));
        const auto pid = sandboxPid(id);
        const ApiReply archived = post(id, u"archive"_s);
        QVERIFY2(archived.ok(), qPrintable(archived.detail));
        const QJsonObject info = archived.json.toObject();
        QVERIFY(info.value(u"archived_at"_s).isString());
        QCOMPARE(info.value(u"execution_status"_s).toString(), u"paused"_s);
        QCOMPARE(info.value(u"runtime_info"_s).toObject().value(u"runtime_status"_s).toString(),
                 u"missing"_s);
        QVERIFY(QTest::qWaitFor([&] { return !processAlive(*pid); }, 5000));

        const QString first = info.value(u"archived_at"_s).toString();
        const ApiReply again = post(id, u"archive"_s);
        QCOMPARE(again.json.toObject().value(u"archived_at"_s).toString(), first);
    }

    void archivedConversationsRefuseRuntimeUseAndLeaveNoRuntime_data()
    {
        QTest::addColumn<QString>("action");
        QTest::addRow("run") << u"run"_s;
        QTest::addRow("resume") << u"runtime/resume"_s;
        QTest::addRow("reprovision") << u"runtime/reprovision"_s;
        QTest::addRow("recover") << u"recover"_s;
        QTest::addRow("message with run") << u"events"_s;
    }
    void archivedConversationsRefuseRuntimeUseAndLeaveNoRuntime()
    {
        QFETCH(QString, action);
        const QUuid id = m_server->create();
        QVERIFY(post(id, u"archive"_s).ok());
        const ApiReply reply = action == u"events"_s
                                   ? m_server->post(ServerConnection::conversationPath(id, action),
                                                    TestServer::message(u"echo x"_s, true))
                                   : post(id, action);
        QCOMPARE(reply.status, 409);
        QCOMPARE(reply.errorCode, u"conversation_archived"_s);
        QCOMPARE(reply.detail,
                 u"Conversation is archived; unarchive it before using its runtime"_s);
        QCOMPARE(runtimeStatus(id), u"missing"_s);
        QVERIFY(!sandboxPid(id));
    }

    void unarchiveProvisionsAndRunsNothing()
    {
        const QUuid id = m_server->create(shell(u"echo one"_s, false));
        QVERIFY(post(id, u"archive"_s).ok());
        const ApiReply reply = post(id, u"unarchive"_s);
        QVERIFY(reply.ok());
        QVERIFY(reply.json.toObject().value(u"archived_at"_s).isNull());
        QCOMPARE(runtimeStatus(id), u"missing"_s);
        QVERIFY(!sandboxPid(id));
        QCOMPARE(m_server->status(id), u"idle"_s);
    }

    void searchAndCountShowPartitions()
    {
        const QUuid active = m_server->create();
        const QUuid archived = m_server->create();
        QVERIFY(post(archived, u"archive"_s).ok());
        const auto ids = [this](const QString &query) {
            QSet<QString> found;
            const ApiReply reply = m_server->get(u"/api/conversations/search"_s, QUrlQuery(query));
            for (const QJsonValue &item : reply.json.toObject().value(u"items"_s).toArray())
                found.insert(item.toObject().value(u"id"_s).toString());
            const qint64 count =
                m_server->get(u"/api/conversations/count"_s, QUrlQuery(query)).json.toInteger();
            return count == found.size() ? found : QSet<QString>{u"count differs"_s};
        };
        QCOMPARE(ids({}), QSet<QString>{toWireId(active)});
        QCOMPARE(ids(u"archived=true"_s), QSet<QString>{toWireId(archived)});
        // As every flag of a query: `archived=TRUE` was refused (422) where `run=TRUE` was not.
        QCOMPARE(ids(u"archived=TRUE"_s), QSet<QString>{toWireId(archived)});
        QCOMPARE(ids(u"archived=0"_s), QSet<QString>{toWireId(active)});
        QCOMPARE(ids(u"archive_filter=ARCHIVED"_s), QSet<QString>{toWireId(archived)});
        QCOMPARE(ids(u"archive_filter=ALL"_s),
                 (QSet<QString>{toWireId(active), toWireId(archived)}));
    }

    void archivedHistoryStaysReadableAndDeletable()
    {
        const QUuid id = m_server->create(
            QJsonObject{{u"agent"_s, QJsonObject{{u"kind"_s, u"echo"_s}}},
                        {u"initial_message"_s, TestServer::message(u"keep me"_s, true)}});
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QVERIFY(post(id, u"archive"_s).ok());
        const QList<QJsonObject> events = m_server->events(id);
        QVERIFY(events.size() >= 3);
        QCOMPARE(
            m_server->get(ServerConnection::conversationPath(id, u"events/count")).json.toInteger(),
            events.size());
        const QString eventId = events.first().value(u"id"_s).toString();
        QVERIFY(m_server->get(ServerConnection::conversationPath(id, u"events/") + eventId).ok());
        QUrlQuery batch;
        batch.addQueryItem(u"event_ids"_s, eventId);
        QCOMPARE(m_server->get(ServerConnection::conversationPath(id, u"events"), batch)
                     .json.toArray()
                     .size(),
                 1);
        QCOMPARE(finalResponse(id), u"keep me"_s);
        // A message without run is history, and allowed.
        QVERIFY(m_server->send(id, u"note"_s, false).ok());

        // The WebSocket replays an archived conversation's history too.
        QList<qint64> seqs;
        EventStream *stream = m_server->client().openEventStream(id, 0);
        connect(stream, &EventStream::eventReceived, this,
                [&seqs](const Event &event) { seqs.append(event.seq); });
        QTRY_COMPARE_WITH_TIMEOUT(seqs.size(), events.size() + 1, SettleTimeoutMs);
        delete stream;

        QVERIFY(m_server->call("DELETE"_ba, ServerConnection::conversationPath(id)).ok());
        QCOMPARE(m_server->get(ServerConnection::conversationPath(id)).status, 404);
    }

    void idleSandboxesStopAndComeBackOnDemand()
    {
        TestServerOptions options;
        options.sandboxIdleTimeout = std::chrono::milliseconds(200);
        TestServer server(std::move(options));
        QVERIFY(server.start());
        const QUuid id = server.create(shell(u"echo first"_s));
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        QTRY_COMPARE_WITH_TIMEOUT(runtimeStatusIn(server, id), u"missing"_s, SettleTimeoutMs);
        // The audit log says who stopped it, and why.
        verifyPolicyRecord(server, id, u"idle"_s, u"idle for 200ms (--sandbox-idle-timeout)"_s);
        QVERIFY(server.send(id, u"echo second"_s, true).ok());
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        QCOMPARE(server.get(ServerConnection::conversationPath(id, u"agent_final_response"))
                     .json.toObject()
                     .value(u"response"_s)
                     .toString(),
                 u"second\n"_s);
    }

    // An idle timeout shorter than a sandbox takes to come up (0, 1 ms): the host exited before
    // the server connected, and every run failed with provision_failed after 10 s.
    void anIdleTimeoutShorterThanAStartStillRuns()
    {
        TestServerOptions options;
        options.sandboxIdleTimeout = std::chrono::milliseconds(0);
        TestServer server(std::move(options));
        QVERIFY(server.start());
        for (int i = 0; i < 3; ++i) {
            const QUuid id = server.create(shell(u"echo ran"_s));
            QVERIFY(server.waitForStatus(id, u"finished"_s));
            QCOMPARE(server.get(ServerConnection::conversationPath(id, u"agent_final_response"))
                         .json.toObject()
                         .value(u"response"_s)
                         .toString(),
                     u"ran\n"_s);
        }
    }

    // The action a conversation waits to have confirmed runs in the sandbox it was proposed in;
    // the idle sweep stopped that one, and what the commands before it left there was gone.
    void aSandboxWaitingForConfirmationIsNotIdle()
    {
        TestServerOptions options;
        options.sandboxIdleTimeout = std::chrono::milliseconds(200);
        TestServer server(std::move(options));
        QVERIFY(server.start());
        QJsonObject confirmed = shell(u"echo proposed"_s);
        confirmed.insert(u"confirmation_policy"_s, QJsonObject{{u"kind"_s, u"AlwaysConfirm"_s}});
        const QUuid waiting = server.create(confirmed);
        QVERIFY(server.waitForStatus(waiting, u"waiting_for_confirmation"_s));
        const auto pid = sandboxPidIn(server, waiting);
        QVERIFY(pid);
        // A sandbox idle since after the waiting one's last command is stopped...
        const QUuid finished = server.create(shell(u"echo done"_s));
        QVERIFY(server.waitForStatus(finished, u"finished"_s));
        QTRY_COMPARE_WITH_TIMEOUT(runtimeStatusIn(server, finished), u"missing"_s, SettleTimeoutMs);
        // ... the waiting one is kept, and the action runs there once accepted.
        QCOMPARE(runtimeStatusIn(server, waiting), u"available"_s);
        QVERIFY(processAlive(*pid));
        QVERIFY(acceptConfirmation(server, waiting));
        QVERIFY(server.waitForStatus(waiting, u"finished"_s));
        QCOMPARE(sandboxPidIn(server, waiting), pid);
    }

    // ... and a stop of the server longer than the idle timeout does not stop it either: its
    // host exited on its own, and the action ran in a fresh sandbox once accepted.
    void aSandboxWaitingForConfirmationOutlivesAStop()
    {
        if (!m_server->usesSandboxes())
            QSKIP("needs the real binary for sandbox hosts");
        QTemporaryDir dir;
        const auto options = [&dir] {
            TestServerOptions options;
            options.dataDir = dir.path();
            options.sandboxIdleTimeout = std::chrono::milliseconds(200);
            return options;
        };
        QUuid waiting;
        std::optional<qint64> pid;
        {
            TestServer server(options());
            QVERIFY(server.start());
            QJsonObject confirmed = shell(u"echo proposed"_s);
            confirmed.insert(u"confirmation_policy"_s,
                             QJsonObject{{u"kind"_s, u"AlwaysConfirm"_s}});
            waiting = server.create(confirmed);
            QVERIFY(server.waitForStatus(waiting, u"waiting_for_confirmation"_s));
            pid = sandboxPidIn(server, waiting);
            QVERIFY(pid);
            server.stopKeepingSandboxes();
        }
        // Many idle timeouts with no server.
        QVERIFY(!QTest::qWaitFor([&] { return !processAlive(*pid); }, 2000));
        TestServer server(options());
        QVERIFY(server.start());
        QVERIFY(acceptConfirmation(server, waiting));
        QVERIFY(server.waitForStatus(waiting, u"finished"_s));
        QCOMPARE(sandboxPidIn(server, waiting), pid);
    }

    // Each sandbox is a process and a few MB, and a shell conversation kept its own for the idle
    // timeout: without a bound, a busy server ran out of process ids or descriptors. At the
    // limit, the sandbox idle the longest makes room.
    void atTheSandboxLimitTheOneIdleTheLongestMakesRoom()
    {
        if (!m_server->usesSandboxes())
            QSKIP("needs the real binary for sandbox hosts");
        TestServerOptions options;
        options.maxSandboxes = 2;
        TestServer server(std::move(options));
        QVERIFY(server.start());
        const QUuid first = server.create(shell(u"echo first"_s));
        QVERIFY(server.waitForStatus(first, u"finished"_s));
        const QUuid second = server.create(shell(u"echo second"_s));
        QVERIFY(server.waitForStatus(second, u"finished"_s));
        // The first is used again: the second is now the one idle the longest.
        QVERIFY(server.send(first, u"echo again"_s, true).ok());
        QVERIFY(server.waitForStatus(first, u"finished"_s));
        const auto secondPid = sandboxPidIn(server, second);
        QVERIFY(secondPid);

        const QUuid third = server.create(shell(u"echo third"_s));
        QVERIFY(server.waitForStatus(third, u"finished"_s));
        QCOMPARE(runtimeStatusIn(server, second), u"missing"_s);
        QCOMPARE(runtimeStatusIn(server, first), u"available"_s);
        QCOMPARE(runtimeStatusIn(server, third), u"available"_s);
        QTRY_VERIFY_WITH_TIMEOUT(!processAlive(*secondPid), SettleTimeoutMs);
        verifyPolicyRecord(server, second, u"limit"_s,
                           u"idle the longest when --max-sandboxes 2 was reached"_s);
        // It comes back on demand, in the place of the one idle the longest then.
        QVERIFY(server.send(second, u"echo back"_s, true).ok());
        QVERIFY(server.waitForStatus(second, u"finished"_s));
        QCOMPARE(runtimeStatusIn(server, first), u"missing"_s);
        QCOMPARE(runtimeStatusIn(server, second), u"available"_s);
    }

    // A server restarted with a lower limit adopts the sandboxes the last one left; a start
    // then stopped one of them, and the server stayed over its limit.
    void aLowerLimitAfterARestartIsReachedAtTheNextStart()
    {
        if (!m_server->usesSandboxes())
            QSKIP("needs the real binary for sandbox hosts");
        QTemporaryDir dir;
        QList<QUuid> ids;
        {
            TestServerOptions options;
            options.dataDir = dir.path();
            TestServer server(std::move(options));
            QVERIFY(server.start());
            for (int i = 0; i < 3; ++i) {
                ids.append(server.create(shell(u"echo %1"_s.arg(i))));
                QVERIFY(server.waitForStatus(ids.last(), u"finished"_s));
            }
            server.stopKeepingSandboxes();
        }
        TestServerOptions options;
        options.dataDir = dir.path();
        options.maxSandboxes = 2;
        TestServer server(std::move(options));
        QVERIFY(server.start());
        for (const QUuid &id : std::as_const(ids))
            QCOMPARE(runtimeStatusIn(server, id), u"available"_s);
        ids.append(server.create(shell(u"echo new"_s)));
        QVERIFY(server.waitForStatus(ids.last(), u"finished"_s));
        int live = 0;
        for (const QUuid &id : std::as_const(ids))
            live += runtimeStatusIn(server, id) == u"available"_s;
        QCOMPARE(live, 2);
        QCOMPARE(runtimeStatusIn(server, ids.last()), u"available"_s);
    }

    // A server started with --runtime process after one with --runtime local: the sandboxes
    // left were neither adopted nor stopped, and a command recorded as interrupted went on.
    void sandboxesLeftForAServerWithoutThemAreStopped()
    {
        if (!m_server->usesSandboxes())
            QSKIP("needs the real binary for sandbox hosts");
        QTemporaryDir dir;
        std::optional<qint64> pid;
        {
            TestServerOptions options;
            options.dataDir = dir.path();
            TestServer server(std::move(options));
            QVERIFY(server.start());
            const QUuid id = server.create(shell(u"echo ran"_s));
            QVERIFY(server.waitForStatus(id, u"finished"_s));
            pid = sandboxPidIn(server, id);
            QVERIFY(pid);
            server.stopKeepingSandboxes();
        }
        QVERIFY(processAlive(*pid));
        TestServerOptions options;
        options.dataDir = dir.path();
        options.inProcessRuntime = true;
        TestServer server(std::move(options));
        QVERIFY(server.start());
        QTRY_VERIFY_WITH_TIMEOUT(!processAlive(*pid), SettleTimeoutMs);
    }

    // With every sandbox held by a run, a start is refused with 503 and Retry-After, and
    // nothing is recorded against the conversation: a sandbox is free once a run ends.
    void atTheSandboxLimitWithEverySandboxInUseAStartIsRefused()
    {
        if (!m_server->usesSandboxes())
            QSKIP("needs the real binary for sandbox hosts");
        TestServerOptions options;
        options.maxSandboxes = 1;
        TestServer server(std::move(options));
        QVERIFY(server.start());
        const QUuid busy = server.create(shell(u"echo started; sleep 60"_s));
        QVERIFY(!busy.isNull());
        QTRY_VERIFY_WITH_TIMEOUT(hasKindIn(server, busy, u"ActionEvent"_s), SettleTimeoutMs);
        const QUuid waiting = server.create(shell(u"echo waited"_s, false));
        QVERIFY(!waiting.isNull());

        const ApiReply refused = server.post(ServerConnection::conversationPath(waiting, u"run"));
        QCOMPARE(refused.status, 503);
        QCOMPARE(refused.errorCode, u"sandbox_limit_reached"_s);
        QCOMPARE(refused.retryAfter, "5"_ba);
        QCOMPARE(server.status(busy), u"running"_s);
        const QJsonObject runtime =
            server.get(ServerConnection::conversationPath(waiting, u"runtime")).json.toObject();
        QCOMPARE(runtime.value(u"runtime_status"_s).toString(), u"missing"_s);
        QVERIFY(runtime.value(u"runtime_error"_s).isNull());
        // A message with run: true is refused before it is stored: stored, it was there twice
        // once its client sent it again after the Retry-After.
        const ApiReply message = server.send(waiting, u"echo twice"_s, true);
        QCOMPARE(message.status, 503);
        QCOMPARE(message.errorCode, u"sandbox_limit_reached"_s);
        QCOMPARE(message.retryAfter, "5"_ba);
        QCOMPARE(server.events(waiting).size(), 1);
        // The echo agent needs no sandbox: its messages still run.
        const QUuid echo = server.create(
            {{u"agent"_s, QJsonObject{{u"kind"_s, u"echo"_s}}},
             {u"initial_message"_s, TestServer::message(u"no sandbox needed"_s, true)}});
        QVERIFY(!echo.isNull());
        QVERIFY(server.waitForStatus(echo, u"finished"_s));

        QVERIFY(server.post(ServerConnection::conversationPath(busy, u"interrupt")).ok());
        QVERIFY(server.waitForStatus(busy, u"paused"_s));
        QVERIFY(server.post(ServerConnection::conversationPath(waiting, u"run")).ok());
        QVERIFY(server.waitForStatus(waiting, u"finished"_s));
        QCOMPARE(runtimeStatusIn(server, busy), u"missing"_s);
    }

    // A frozen sandbox host (SIGSTOP here; a paused VM alike) answers nothing: an interrupt
    // left the run `running` and an archive waiting for it, for as long as the host was frozen.
    void aFrozenSandboxIsStoppedWhenItDoesNotAnswerAnInterrupt()
    {
        const QUuid id = m_server->create(shell(u"echo started; sleep 60"_s));
        QTRY_VERIFY_WITH_TIMEOUT(sandboxPid(id).has_value(), SettleTimeoutMs);
        const qint64 pid = *sandboxPid(id);
        QTRY_VERIFY_WITH_TIMEOUT(hasKind(id, u"ActionEvent"_s), SettleTimeoutMs);
        QCOMPARE(::kill(pid_t(pid), SIGSTOP), 0);
        QElapsedTimer timer;
        timer.start();
        QVERIFY(post(id, u"interrupt"_s).ok());
        QVERIFY(m_server->waitForStatus(id, u"paused"_s, 20'000));
        QVERIFY2(timer.elapsed() >= SandboxRuntime::UnresponsiveMs - 100, "it had time to answer");
        QTRY_VERIFY_WITH_TIMEOUT(!processAlive(pid), SettleTimeoutMs);
        bool observed = false;
        for (const QJsonObject &event : m_server->events(id)) {
            if (event.value(u"kind"_s) != u"ObservationEvent"_s)
                continue;
            const QJsonObject observation = event.value(u"observation"_s).toObject();
            QVERIFY(observation.value(u"interrupted"_s).toBool());
            QVERIFY2(observation.value(u"output"_s).toString().contains(u"did not answer"_s),
                     qPrintable(observation.value(u"output"_s).toString()));
            observed = true;
        }
        QVERIFY(observed);
        const auto runtimeError = [&] {
            return m_server->get(ServerConnection::conversationPath(id, u"runtime"))
                .json.toObject()
                .value(u"runtime_error"_s);
        };
        QCOMPARE(runtimeStatus(id), u"missing"_s);
        QCOMPARE(runtimeError().toObject().value(u"code"_s).toString(), u"sandbox_lost"_s);
        // The next run brings up a new sandbox.
        QCOMPARE(answerTo(id, u"echo again"_s), u"again\n"_s);
        QVERIFY(runtimeError().isNull());
    }

    // A sandbox killed while its command runs: what the command printed (seen live by a
    // subscriber) stays in the observation, before the reason it ended. It held only the reason.
    void whatACommandPrintedOutlivesItsSandbox()
    {
        const QUuid id = m_server->create(shell(u"true"_s));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        std::unique_ptr<EventStream> stream(m_server->client().openEventStream(id, 0));
        QSignalSpy connected(stream.get(), &EventStream::connected);
        QVERIFY(connected.wait(SettleTimeoutMs));
        QString live;
        connect(stream.get(), &EventStream::transientReceived, this, [&](const QJsonObject &frame) {
            if (frame.value(u"kind"_s) == u"CommandOutput"_s)
                live += frame.value(u"text"_s).toString();
        });
        const QString command =
            u"for i in $(seq 1 10); do echo line-$i; done; [ -e go ] || sleep 60"_s;
        QVERIFY(m_server->send(id, command, true).ok());
        QTRY_VERIFY_WITH_TIMEOUT(live.contains(u"line-10"_s), SettleTimeoutMs);
        QVERIFY(sandboxPid(id).has_value());
        QCOMPARE(::kill(pid_t(*sandboxPid(id)), SIGKILL), 0);
        QTRY_VERIFY_WITH_TIMEOUT(m_server->status(id) != u"running"_s, SettleTimeoutMs);
        const QList<QJsonObject> observations = ofKind(m_server->events(id), u"ObservationEvent"_s);
        QVERIFY(!observations.isEmpty());
        const QJsonObject observation = observations.last().value(u"observation"_s).toObject();
        QString expected;
        for (int i = 1; i <= 10; ++i)
            expected += u"line-%1\n"_s.arg(i);
        expected += u"[the sandbox went away while the command ran]"_s;
        QCOMPARE(observation.value(u"output"_s).toString(), expected);
        QVERIFY(observation.value(u"interrupted"_s).toBool());

        // Run again: the history shows the old attempt once, as the old attempt; the agent's
        // reply to it, written now, does not repeat its output as if it were the new run's.
        QVERIFY(QFile(QDir(m_server->workingDir(id)).filePath(u"go"_s)).open(QIODevice::WriteOnly));
        QVERIFY(post(id, u"outcome/retry"_s).ok());
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        const QList<QJsonObject> events = m_server->events(id);
        QStringList replies;
        for (const QJsonObject &message : ofKind(events, u"MessageEvent"_s)) {
            if (message.value(u"source"_s) == u"agent"_s)
                replies << messageText(message);
        }
        QCOMPARE(replies.size(), 3); // to `true`, to the interrupted attempt, to the retry
        QCOMPARE(replies[1], u"[command interrupted]"_s);
        QVERIFY2(replies[2].startsWith(u"line-1\n"_s), qPrintable(replies[2]));
        QCOMPARE(ofKind(events, u"ObservationEvent"_s).size(), 3);
    }

    // With replicas, a server frozen past its lease cannot stop its command, and the replica
    // that takes the conversation over starts a sandbox of its own on the workspace: the old
    // command ran on next to the new ones. A sandbox now stops the command of a server that
    // went silent, and lets it run for as long as the server says it still holds the lease.
    void aSandboxStopsTheCommandOfASilentOwner_data()
    {
        QTest::addColumn<bool>("ownerRenews");
        QTest::addRow("silent owner") << false;
        QTest::addRow("owner renewing") << true;
    }
    void aSandboxStopsTheCommandOfASilentOwner()
    {
        QFETCH(bool, ownerRenews);
        QTemporaryDir root;
        LocalSandboxProvider sandboxes({qEnvironmentVariable("AGENTDECK_BINARY"),
                                        root.filePath(u"runtimes"_s), std::chrono::minutes(5),
                                        std::chrono::milliseconds(400)});
        ConversationInfo conversation;
        conversation.id = QUuid::createUuid();
        conversation.workingDir = root.filePath(u"workspace"_s);
        const RuntimeAcquisition acquired = QCoro::waitFor(sandboxes.acquire(conversation));
        QVERIFY2(acquired.runtime, qPrintable(acquired.error.message));
        QTimer renewal;
        connect(&renewal, &QTimer::timeout, this, [&] { acquired.runtime->ownerAlive(); });
        if (ownerRenews)
            renewal.start(100);
        QElapsedTimer timer;
        timer.start();
        const CommandResult result = QCoro::waitFor(acquired.runtime->execute(
            CommandRequest{u"sleep 2; echo done"_s, conversation.workingDir}));
        sandboxes.release(conversation.id);
        QCOMPARE(result.interrupted, !ownerRenews);
        if (ownerRenews) {
            QCOMPARE(result.exitCode, 0);
            QCOMPARE(result.output, u"done\n"_s);
        } else {
            QVERIFY2(result.output.contains(u"did not renew its lease for 400 ms"_s),
                     qPrintable(result.output));
            QVERIFY2(timer.elapsed() < 2000, "the command ran to its end");
        }
    }

    // A server frozen (SIGSTOP, a paused VM) while a sandbox started woke past the start's
    // timeout with the host up: it gave up on the host without a look (502 provision_failed),
    // and the host stayed, unknown, beside the one the next start brought up.
    void aStartFrozenPastItsTimeoutTakesTheHostThatCameUp()
    {
        QTemporaryDir root;
        LocalSandboxSettings settings{qEnvironmentVariable("AGENTDECK_BINARY"),
                                      root.filePath(u"runtimes"_s), std::chrono::minutes(5),
                                      std::chrono::milliseconds(0)};
        settings.startTimeout = std::chrono::milliseconds(300);
        LocalSandboxProvider sandboxes(settings);
        ConversationInfo conversation;
        conversation.id = QUuid::createUuid();
        conversation.workingDir = root.filePath(u"workspace"_s);
        QElapsedTimer frozen;
        frozen.start();
        auto acquiring = sandboxes.acquire(conversation); // runs until it first waits
        // Frozen: this thread runs no event loop until the host listens and the timeout passed.
        // Its sleeps are the frozen time the test is about, not waits for something to happen:
        // QTest::qWaitFor would run the event loop, and the provider with it.
        const QString runtimeDir = sandboxes.runtimeDirectory(conversation.id);
        const auto listening = [&] {
            QFile named(QDir(runtimeDir).filePath(u"sandbox.socket"_s));
            return named.open(QIODevice::ReadOnly) &&
                   QFileInfo::exists(QString::fromUtf8(named.readAll().trimmed()));
        };
        while (!listening() && frozen.elapsed() < 10'000)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        QVERIFY(listening());
        // Past the 300 ms start timeout, as a server stopped for longer than it would be.
        std::this_thread::sleep_for(std::max<std::chrono::milliseconds>(
            std::chrono::milliseconds(400 - frozen.elapsed()), std::chrono::milliseconds(0)));

        const RuntimeAcquisition acquired = QCoro::waitFor(std::move(acquiring));
        QVERIFY2(acquired.runtime, qPrintable(acquired.error.message));
        const QList<pid_t> hosts = processesWith("--runtime-dir\0"_ba + runtimeDir.toUtf8() + '\0');
        QCOMPARE(std::count_if(hosts.cbegin(), hosts.cend(), processAlive), 1);
        sandboxes.release(conversation.id);
    }

    // A delete while a run's sandbox came up: the sandbox made its files again after the delete
    // had removed them, and they stayed for good.
    void aDeleteWhileTheSandboxStartsLeavesNoFiles()
    {
        const QUuid id = m_server->create(shell(u"echo hi"_s, false));
        const QDir data(m_server->dataDir());
        const QString runtimeDir = data.filePath(u"runtimes/"_s + toWireId(id));
        const QString workspace = data.filePath(u"workspaces/"_s + toWireId(id));
        auto running = m_server->client().request(
            "POST"_ba, ServerConnection::conversationPath(id, u"run"_s), {}, {});
        QVERIFY(QTest::qWaitFor([&] { return QFileInfo::exists(runtimeDir); }, 10'000));
        QVERIFY(m_server->call("DELETE"_ba, ServerConnection::conversationPath(id)).ok());
        const ApiReply run = QCoro::waitFor(std::move(running));
        QCOMPARE(run.status, 404);
        QVERIFY(!QFileInfo::exists(runtimeDir));
        QVERIFY(!QFileInfo::exists(workspace));
    }

    // Created again with the same id while the deleted one's sandbox still started: the new
    // conversation's start waited 10 s for that sandbox to fail, and was then given its error
    // (runtime `error`, provision_failed) though its own sandbox ran.
    void aConversationCreatedAgainWhileTheOldSandboxStartsIsNotHeldByIt()
    {
        const QUuid id = m_server->create(shell(u"echo first"_s, false));
        const QString runtimeDir =
            QDir(m_server->dataDir()).filePath(u"runtimes/"_s + toWireId(id));
        auto oldRun = m_server->client().request(
            "POST"_ba, ServerConnection::conversationPath(id, u"run"_s), {}, {});
        // Its host is up (its pid file is written before it listens), not yet connected to.
        QVERIFY(QTest::qWaitFor([&] { return QFileInfo::exists(runtimeDir + u"/sandbox.pid"_s); },
                                10'000));
        QVERIFY(m_server->call("DELETE"_ba, ServerConnection::conversationPath(id)).ok());
        QJsonObject again = shell(u"echo second"_s);
        again.insert(u"conversation_id"_s, toWireId(id));
        QElapsedTimer clock;
        clock.start();
        const ApiReply created = m_server->post(u"/api/conversations"_s, again);
        QCOMPARE(created.status, 201);
        QVERIFY2(clock.elapsed() < 5000, qPrintable(u"%1 ms"_s.arg(clock.elapsed())));
        // 404, or 200 when that host came up before the delete.
        const int oldStatus = QCoro::waitFor(std::move(oldRun)).status;
        QVERIFY2(oldStatus == 404 || oldStatus == 200, qPrintable(QString::number(oldStatus)));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QCOMPARE(finalResponse(id), u"second\n"_s);
        QCOMPARE(runtimeStatus(id), u"available"_s);
        QVERIFY(sandboxPid(id));
    }

    // A host killed from outside left its socket behind for good, and each host's socket has a
    // name of its own: with a deep data dir they gathered in the temporary dir.
    void socketsOfHostsThatWentAwayAreRemoved_data()
    {
        QTest::addColumn<bool>("deepDataDir");
        QTest::addRow("in the runtime dir") << false;
        QTest::addRow("in the temporary dir") << true;
    }
    void socketsOfHostsThatWentAwayAreRemoved()
    {
        QFETCH(bool, deepDataDir);
        QTemporaryDir root;
        if (deepDataDir) {
            TestServerOptions options;
            options.dataDir = root.filePath(QString(60, u'd'));
            m_server = std::make_unique<TestServer>(std::move(options));
            QVERIFY2(m_server->start(), qPrintable(m_server->errorString()));
        }
        const auto killHost = [this](const QUuid &id) {
            const auto pid = sandboxPid(id);
            return pid && ::kill(pid_t(*pid), SIGKILL) == 0 &&
                   QTest::qWaitFor([&] { return !processAlive(*pid); }, 5000);
        };
        const QUuid id = m_server->create(shell(u"echo hi"_s));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        const QString first = socketOf(id);
        QVERIFY(QFile::exists(first));
        QCOMPARE(first.startsWith(QDir::tempPath() + u"/agentdeck-"_s), deepDataDir);

        QVERIFY(killHost(id));
        QCOMPARE(answerTo(id, u"echo again"_s), u"again\n"_s);
        const QString second = socketOf(id);
        QVERIFY(second != first);
        QVERIFY(QFile::exists(second));
        QVERIFY(!QFile::exists(first));

        QVERIFY(killHost(id));
        QVERIFY(m_server->call("DELETE"_ba, ServerConnection::conversationPath(id)).ok());
        QVERIFY(!QFile::exists(second));
        // Stopped before its data dir goes: its trash was still deleting in there, and the
        // temporary dir was left behind.
        m_server.reset();
    }

    // Two runtime requests at once each started a host on the workspace: the one the server did
    // not keep stayed until its idle timeout, out of reach of a stop or an archive. And an
    // archive while a host came up left the archived conversation with it.
    void runtimeRequestsAtOnceLeaveOneHostAtMost_data()
    {
        QTest::addColumn<QString>("first");
        QTest::addColumn<QString>("second");
        QTest::addRow("resume and reprovision") << u"runtime/resume"_s << u"runtime/reprovision"_s;
        QTest::addRow("two reprovisions") << u"runtime/reprovision"_s << u"runtime/reprovision"_s;
        QTest::addRow("reprovision and archive") << u"runtime/reprovision"_s << u"archive"_s;
    }
    void runtimeRequestsAtOnceLeaveOneHostAtMost()
    {
        QFETCH(QString, first);
        QFETCH(QString, second);
        const QUuid id = m_server->create();
        auto one = m_server->client().post(ServerConnection::conversationPath(id, first));
        auto other = m_server->client().post(ServerConnection::conversationPath(id, second));
        QCoro::waitFor(std::move(one));
        QCoro::waitFor(std::move(other));
        const bool archived = second == u"archive"_s;
        QVERIFY(QTest::qWaitFor([&] { return hostsOf(id) == (archived ? 0 : 1); }, 5000));
        QCOMPARE(runtimeStatus(id), archived ? u"missing"_s : u"available"_s);
    }

    void aSearchPageCostsTheSameStatementsAt10And1000()
    {
        const auto statementsOfAPage = [this] {
            Database &db = m_server->server().database();
            // The creates' audit records are written a turn later, maybe while the page is
            // read: a search of the audit log writes them first.
            if (!m_server->get(u"/api/audit"_s).ok())
                return qint64(-1);
            const qint64 before = db.statementCount();
            QUrlQuery query;
            query.addQueryItem(u"limit"_s, u"100"_s);
            const ApiReply reply = m_server->get(u"/api/conversations/search"_s, query);
            return reply.ok() ? db.statementCount() - before : qint64(-1);
        };
        for (int i = 0; i < 10; ++i)
            m_server->create();
        const qint64 atTen = statementsOfAPage();
        for (int i = 10; i < 1000; ++i)
            m_server->create();
        QCOMPARE(statementsOfAPage(), atTen);
        QCOMPARE(atTen, 1);
    }

private:
    ApiReply post(const QUuid &id, const QString &action)
    {
        return m_server->post(ServerConnection::conversationPath(id, action));
    }
    static bool acceptConfirmation(TestServer &server, const QUuid &id)
    {
        return server
            .post(ServerConnection::conversationPath(id, u"events/respond_to_confirmation"_s),
                  QJsonObject{{u"accept"_s, true}})
            .ok();
    }
    // The audit log's record of the server stopping the conversation's sandbox by `policy`.
    static void verifyPolicyRecord(TestServer &server, const QUuid &id, const QString &policy,
                                   const QString &reason)
    {
        const QUrlQuery query{{u"conversation_id"_s, toWireId(id)},
                              {u"action"_s, u"stop_runtime"_s}};
        QJsonArray records;
        QTRY_VERIFY_WITH_TIMEOUT(
            !(records = server.get(u"/api/audit"_s, query).json[u"items"_s].toArray()).isEmpty(),
            SettleTimeoutMs);
        const QJsonObject record = records.first().toObject();
        QCOMPARE(record.value(u"actor"_s).toString(), u"server"_s);
        QCOMPARE(record.value(u"client"_s).toString(), policy);
        QCOMPARE(record.value(u"reason"_s).toString(), reason);
        QCOMPARE(record.value(u"result"_s).toString(), u"done"_s);
    }

    static QString runtimeStatusIn(TestServer &server, const QUuid &id)
    {
        return server.get(ServerConnection::conversationPath(id, u"runtime"))
            .json.toObject()
            .value(u"runtime_status"_s)
            .toString();
    }
    QString runtimeStatus(const QUuid &id) { return runtimeStatusIn(*m_server, id); }
    QString finalResponse(const QUuid &id)
    {
        return m_server->get(ServerConnection::conversationPath(id, u"agent_final_response"))
            .json.toObject()
            .value(u"response"_s)
            .toString();
    }
    // Sends `command` with run: true and returns the agent's reply once the run has finished,
    // or a sentence saying what went wrong.
    QString answerTo(const QUuid &id, const QString &command)
    {
        const ApiReply sent = m_server->send(id, command, true);
        if (!sent.ok())
            return u"[message refused: %1]"_s.arg(sent.status);
        if (!m_server->waitForStatus(id, u"finished"_s))
            return u"[the run did not finish: %1]"_s.arg(m_server->status(id));
        return finalResponse(id);
    }
    static std::optional<qint64> sandboxPidIn(const TestServer &server, const QUuid &id)
    {
        QFile file(
            QDir(server.dataDir()).filePath(u"runtimes/"_s + toWireId(id) + u"/sandbox.pid"_s));
        if (!file.open(QIODevice::ReadOnly))
            return std::nullopt;
        return file.readAll().trimmed().toLongLong();
    }
    std::optional<qint64> sandboxPid(const QUuid &id) { return sandboxPidIn(*m_server, id); }
    // Data rows: a command runs in a sandbox host, or in the server's own process.
    static void bothRuntimes()
    {
        QTest::addColumn<bool>("inProcess");
        QTest::addRow("sandbox host") << false;
        QTest::addRow("in-server runtime") << true;
    }
    // A server running commands where the row says; false (and why, in the log) when it did
    // not start.
    bool startOnTheRowsRuntime()
    {
        QFETCH(bool, inProcess);
        TestServerOptions options;
        options.inProcessRuntime = inProcess;
        m_server = std::make_unique<TestServer>(std::move(options));
        if (m_server->start())
            return true;
        qWarning() << m_server->errorString();
        return false;
    }
    // How many sandbox hosts run for `id`, whether the server knows them or not.
    int hostsOf(const QUuid &id) const
    {
        const QByteArray runtimeDir =
            QDir(m_server->dataDir()).filePath(u"runtimes/"_s + toWireId(id)).toUtf8();
        const QList<pid_t> hosts = processesWith("--runtime-dir\0"_ba + runtimeDir + '\0');
        return int(std::count_if(hosts.cbegin(), hosts.cend(), processAlive));
    }
    // Where the sandbox host of `id` listens, as it wrote it.
    QString socketOf(const QUuid &id)
    {
        QFile file(QDir(m_server->dataDir())
                       .filePath(u"runtimes/"_s + toWireId(id) + u"/sandbox.socket"_s));
        return file.open(QIODevice::ReadOnly) ? QString::fromUtf8(file.readAll().trimmed())
                                              : QString();
    }
    bool hasKind(const QUuid &id, const QString &kind) { return hasKindIn(*m_server, id, kind); }
    static bool hasKindIn(TestServer &server, const QUuid &id, const QString &kind)
    {
        const QList<QJsonObject> events = server.events(id);
        return std::any_of(events.cbegin(), events.cend(), [&](const QJsonObject &event) {
            return event.value(u"kind"_s) == kind;
        });
    }
    static bool processAlive(qint64 pid)
    {
        // A zombie is not alive: the sandbox host is not our child, so it is reaped elsewhere.
        QFile status(u"/proc/%1/status"_s.arg(pid));
        if (!status.open(QIODevice::ReadOnly))
            return false;
        return !status.readAll().contains("State:\tZ");
    }

    std::unique_ptr<TestServer> m_server;
};

// A server with the fake runtimes and clock that expires runtimes inactive for an hour, looking
// every 20 ms.
struct RetainingServer
{
    FakeRuntimeControl control;
    FakeClock *clock = nullptr;
    std::unique_ptr<TestServer> server;

    bool start()
    {
        auto fakeClock = std::make_unique<FakeClock>();
        clock = fakeClock.get();
        TestServerOptions options;
        options.parts.runtimes = std::make_unique<FakeRuntimeProvider>(control);
        options.parts.clock = std::move(fakeClock);
        options.runtimeRetention = std::chrono::hours(1);
        options.retentionInterval = std::chrono::milliseconds(20);
        server = std::make_unique<TestServer>(std::move(options));
        return server->start();
    }
    // The error of the conversation's runtime; null when it has none.
    QJsonValue runtimeError(const QUuid &id)
    {
        return server->get(ServerConnection::conversationPath(id, u"runtime"))
            .json.toObject()
            .value(u"runtime_error"_s);
    }
    bool expired(const QUuid &id)
    {
        return runtimeError(id).toObject().value(u"code"_s).toString() == u"runtime_expired"_s;
    }
};

// Provisioning failures need a provider that fails on demand.
class ApiRuntimeFailureTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void failedStartRecordsAnErrorUntilAStopOrAStart()
    {
        FakeRuntimeControl control;
        TestServerOptions options;
        options.parts.runtimes = std::make_unique<FakeRuntimeProvider>(control);
        TestServer server(std::move(options));
        QVERIFY(server.start());
        const QUuid id = server.create();
        control.failProvisioning = true;
        const ApiReply failed =
            server.post(ServerConnection::conversationPath(id, u"runtime/resume"));
        QCOMPARE(failed.status, 502);
        QCOMPARE(failed.errorCode, u"provision_failed"_s);
        const QJsonObject runtime =
            server.get(ServerConnection::conversationPath(id, u"runtime")).json.toObject();
        QCOMPARE(runtime.value(u"runtime_status"_s).toString(), u"error"_s);
        QCOMPARE(runtime.value(u"runtime_error"_s).toObject().value(u"code"_s).toString(),
                 u"provision_failed"_s);

        // A stop clears it...
        QVERIFY(server.call("DELETE"_ba, ServerConnection::conversationPath(id, u"runtime")).ok());
        QVERIFY(server.get(ServerConnection::conversationPath(id, u"runtime"))
                    .json.toObject()
                    .value(u"runtime_error"_s)
                    .isNull());
        // ...as does an archive, which stops the runtime too (it was left `error`)...
        const auto runtimeError = [&] {
            return server.get(ServerConnection::conversationPath(id, u"runtime"))
                .json.toObject()
                .value(u"runtime_error"_s);
        };
        QCOMPARE(server.post(ServerConnection::conversationPath(id, u"runtime/resume")).status,
                 502);
        QVERIFY(!runtimeError().isNull());
        QVERIFY(server.post(ServerConnection::conversationPath(id, u"archive")).ok());
        QVERIFY(runtimeError().isNull());
        QVERIFY(server.post(ServerConnection::conversationPath(id, u"unarchive")).ok());
        // ...and so does a successful start after another failure.
        QCOMPARE(server.post(ServerConnection::conversationPath(id, u"run")).status, 502);
        control.failProvisioning = false;
        QVERIFY(server.post(ServerConnection::conversationPath(id, u"run")).ok());
        QVERIFY(server.get(ServerConnection::conversationPath(id, u"runtime"))
                    .json.toObject()
                    .value(u"runtime_error"_s)
                    .isNull());
    }

    void expiredRuntimesAnswer410AndArchiveLeavesThemExpired()
    {
        RetainingServer retaining;
        QVERIFY(retaining.start());
        TestServer &server = *retaining.server;
        const QUuid id = server.create();
        const QString workspace = server.workingDir(id);
        retaining.clock->advance(2 * 3600 * 1000);
        const auto runtime = [&] {
            return server.get(ServerConnection::conversationPath(id, u"runtime")).json.toObject();
        };
        QTRY_COMPARE_WITH_TIMEOUT(
            runtime().value(u"runtime_error"_s).toObject().value(u"code"_s).toString(),
            u"runtime_expired"_s, SettleTimeoutMs);
        QCOMPARE(runtime().value(u"runtime_status"_s).toString(), u"missing"_s);
        QCOMPARE(runtime().value(u"can_resume"_s).toBool(), false);
        QVERIFY(!QDir(workspace).exists());
        for (const QString &action :
             {u"runtime/resume"_s, u"runtime/reprovision"_s, u"recover"_s, u"run"_s}) {
            const ApiReply reply = server.post(ServerConnection::conversationPath(id, action));
            QCOMPARE(reply.status, 410);
            QCOMPARE(reply.errorCode, u"runtime_expired"_s);
            QVERIFY(reply.detail.contains(u"nothing can run in it again"_s));
            // Not archived: unarchiving is not the way out, and the sentence does not say so.
            QVERIFY(!reply.detail.contains(u"unarchiv"_s));
        }
        QVERIFY(server.post(ServerConnection::conversationPath(id, u"archive")).ok());
        QVERIFY(server.post(ServerConnection::conversationPath(id, u"unarchive")).ok());
        QCOMPARE(runtime().value(u"runtime_error"_s).toObject().value(u"code"_s).toString(),
                 u"runtime_expired"_s);
        QCOMPARE(server.post(ServerConnection::conversationPath(id, u"runtime/resume")).status,
                 410);
        QVERIFY(server.get(ServerConnection::conversationPath(id, u"events/search")).ok());
    }

    // An expired runtime can be started again, fresh: the history stays and says so, the
    // server's workspace starts empty, and the conversation runs again. It was a dead end.
    void anExpiredRuntimeStartsAgainWithAnEmptyWorkspace()
    {
        RetainingServer retaining;
        QVERIFY(retaining.start());
        TestServer &server = *retaining.server;
        const QUuid id = server.create();
        const QUuid archived = server.create();
        const QString startFresh = u"runtime/start_fresh"_s;
        const ApiReply early = server.post(ServerConnection::conversationPath(id, startFresh));
        QCOMPARE(early.status, 409);
        QCOMPARE(early.errorCode, u"runtime_not_expired"_s);
        const QString workspace = server.workingDir(id);
        QVERIFY(QFile(QDir(workspace).filePath(u"left-behind"_s)).open(QIODevice::WriteOnly));
        const qsizetype eventsBefore = server.events(id).size();

        retaining.clock->advance(2 * 3600 * 1000);
        QTRY_VERIFY_WITH_TIMEOUT(retaining.expired(id) && retaining.expired(archived),
                                 SettleTimeoutMs);
        const ApiReply refused = server.post(ServerConnection::conversationPath(id, u"run"_s));
        QCOMPARE(refused.status, 410);
        QVERIFY2(refused.detail.contains(u"runtime/start_fresh"_s), qPrintable(refused.detail));

        const ApiReply fresh = server.post(ServerConnection::conversationPath(id, startFresh));
        QVERIFY2(fresh.ok(), qPrintable(fresh.detail));
        const QJsonObject runtime = fresh.json.toObject().value(u"runtime_info"_s).toObject();
        QCOMPARE(runtime.value(u"runtime_status"_s).toString(), u"available"_s);
        QVERIFY(runtime.value(u"runtime_error"_s).isNull());
        QVERIFY(!retaining.expired(id));
        QVERIFY(!QFile::exists(QDir(workspace).filePath(u"left-behind"_s)));
        // The history says that the retention expired it, and that it started fresh.
        const QList<QJsonObject> events = server.events(id);
        QCOMPARE(events.size(), eventsBefore + 2);
        const QJsonObject expiry = events.at(events.size() - 2);
        QCOMPARE(expiry.value(u"value"_s).toString(), u"expired"_s);
        QCOMPARE(expiry.value(u"actor_display"_s).toString(), u"server (retention)"_s);
        QCOMPARE(events.last().value(u"kind"_s).toString(), u"ConversationStateUpdateEvent"_s);
        QCOMPARE(events.last().value(u"value"_s).toString(), u"started_fresh"_s);
        QVERIFY(server.send(id, u"again"_s, true).ok());
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        // Once started, it is not expired any more: a second start_fresh is refused.
        QCOMPARE(server.post(ServerConnection::conversationPath(id, startFresh)).errorCode,
                 u"runtime_not_expired"_s);

        QVERIFY(server.post(ServerConnection::conversationPath(archived, u"archive"_s)).ok());
        QCOMPARE(server.post(ServerConnection::conversationPath(archived, startFresh)).errorCode,
                 u"conversation_archived"_s);
        QCOMPARE(
            server.post(ServerConnection::conversationPath(QUuid::createUuid(), startFresh)).status,
            404);
    }

    // A resume found the conversation inactive past the retention: a pass during the start
    // expired it and deleted its workspace under the sandbox coming up. It is left alone until
    // its runtime is up, and counts as active from the resume on.
    void aRuntimeComingUpIsNotExpiredUnderIt()
    {
        RetainingServer retaining;
        QVERIFY(retaining.start());
        TestServer &server = *retaining.server;
        FakeRuntimeControl &control = retaining.control;
        const QUuid id = server.create();
        const QUuid witness = server.create(); // expired by the passes, to show they ran
        const auto expired = [&](const QUuid &which) { return retaining.expired(which); };

        control.holdProvisioning = true;
        auto resuming = server.client().request(
            "POST"_ba, ServerConnection::conversationPath(id, u"runtime/resume"_s), {}, {});
        QVERIFY(QTest::qWaitFor([&] { return control.acquisitions == 1; }, 10'000));
        retaining.clock->advance(2 * 3600 * 1000);
        QTRY_VERIFY_WITH_TIMEOUT(expired(witness), SettleTimeoutMs);
        QVERIFY(!expired(id));
        QVERIFY(!control.releasedIds.contains(id));
        control.finishProvisioning();
        const ApiReply resumed = QCoro::waitFor(std::move(resuming));
        QVERIFY2(resumed.ok(), qPrintable(resumed.detail));

        // Up, it is inactive since the resume two hours ago (the start took them), and goes.
        QTRY_VERIFY_WITH_TIMEOUT(expired(id), SettleTimeoutMs);
    }

    // Resuming a runtime is using it: the retention counts from the resume, not from the last
    // event.
    void aResumeCountsAsActivity()
    {
        RetainingServer retaining;
        QVERIFY(retaining.start());
        TestServer &server = *retaining.server;
        const QUuid id = server.create();
        const QUuid witness = server.create();
        constexpr qint64 Minute = 60 * 1000;
        retaining.clock->advance(50 * Minute);
        QVERIFY(server.post(ServerConnection::conversationPath(id, u"runtime/resume"_s)).ok());
        retaining.clock->advance(20 * Minute);
        QTRY_VERIFY_WITH_TIMEOUT(retaining.expired(witness), SettleTimeoutMs);
        QVERIFY(retaining.runtimeError(id).isNull());
    }

    // Expiry deletes a workspace only if the server made it; the answer said "its workspace
    // was deleted" of one the conversation was given, which was kept.
    void theExpiryOfASuppliedWorkspaceSaysItWasKept()
    {
        RetainingServer retaining;
        QVERIFY(retaining.start());
        TestServer &server = *retaining.server;
        QTemporaryDir workspace;
        QVERIFY(workspace.isValid());
        const QUuid id = server.create(
            QJsonObject{{u"workspace"_s, QJsonObject{{u"working_dir"_s, workspace.path()}}}});
        QVERIFY(!id.isNull());
        retaining.clock->advance(2 * 3600 * 1000);
        QTRY_VERIFY_WITH_TIMEOUT(retaining.expired(id), SettleTimeoutMs);
        const ApiReply reply =
            server.post(ServerConnection::conversationPath(id, u"runtime/resume"_s));
        QCOMPARE(reply.status, 410);
        QVERIFY2(reply.detail.contains(
                     u"the workspace it was given, %1, was kept"_s.arg(workspace.path())),
                 qPrintable(reply.detail));
        QVERIFY(!reply.detail.contains(u"its workspace was deleted"_s));
        QVERIFY(QDir(workspace.path()).exists());
    }
};

int main(int argc, char *argv[])
{
    QCoreApplication app(argc, argv);
    int status = 0;
    {
        ApiRuntimeTest test;
        status |= QTest::qExec(&test, argc, argv);
    }
    {
        ApiRuntimeFailureTest test;
        status |= QTest::qExec(&test, argc, argv);
    }
    return status;
}

#include "tst_api_runtime.moc"
