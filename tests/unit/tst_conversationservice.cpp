// The conversation service with injected fakes: a clock, a scripted runtime provider.
#include "apierror.h"
#include "conversationservice.h"
#include "execution/agent.h"
#include "fakes.h"
#include "storage/conversationstore.h"
#include "storage/database.h"
#include "testevents.h"
#include "testserver.h"
#include "trash.h"

#include <QJsonArray>
#include <QSignalSpy>
#include <QTcpSocket>
#include <QTest>

using namespace Qt::StringLiterals;
using namespace AgentDeck;
using namespace AgentDeck::Testing;

namespace {
int countKind(const QList<QJsonObject> &events, const QString &kind)
{
    return int(std::count_if(events.cbegin(), events.cend(), [&](const QJsonObject &event) {
        return event.value(u"kind"_s).toString() == kind;
    }));
}

// A conversation of the echo agent, which answers each message with it.
QJsonObject echoAgent()
{
    return {{u"agent"_s, QJsonObject{{u"kind"_s, u"echo"_s}}}};
}
QJsonObject shell(const QString &command, bool run = true)
{
    return TestServer::shellConversation(command, run);
}
// The built-in agents, given the history in the scope a test asks for; records where the
// first history a run gave its agent began.
class RecordingAgentFactory final : public AgentFactory
{
public:
    explicit RecordingAgentFactory(Agent::HistoryScope scope)
        : m_scope(scope)
    {}
    bool knows(const QString &kind) const override { return m_builtin.knows(kind); }
    QStringList kinds() const override { return m_builtin.kinds(); }
    std::unique_ptr<Agent> create(const QString &kind) const override
    {
        return std::make_unique<Recording>(m_builtin.create(kind), m_scope, &firstSeqRead);
    }

    mutable qint64 firstSeqRead = -1; // 0: the history was empty

private:
    class Recording final : public Agent
    {
    public:
        Recording(std::unique_ptr<Agent> agent, HistoryScope scope, qint64 *firstSeqRead)
            : m_agent(std::move(agent))
            , m_scope(scope)
            , m_firstSeqRead(firstSeqRead)
        {}
        HistoryScope historyScope() const override { return m_scope; }
        QCoro::Task<AgentStep> next(const QList<Event> &history) override
        {
            if (*m_firstSeqRead < 0)
                *m_firstSeqRead = history.isEmpty() ? 0 : history.first().seq;
            return m_agent->next(history);
        }

    private:
        std::unique_ptr<Agent> m_agent;
        HistoryScope m_scope;
        qint64 *m_firstSeqRead;
    };

    BuiltinAgentFactory m_builtin;
    Agent::HistoryScope m_scope;
};
} // namespace

class ConversationServiceTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void init()
    {
        m_commitLost = false;
        m_control = std::make_unique<FakeRuntimeControl>();
        m_dir = std::make_unique<QTemporaryDir>();
    }
    void cleanup()
    {
        m_server.reset();
        m_control.reset();
        m_dir.reset();
    }

    void staleRunningIsResolvedAtStartup()
    {
        // A row left `running` with an action in flight, as a killed server leaves it.
        const QUuid id = QUuid::createUuid();
        {
            QString error;
            auto db = Database::openSqlite(m_dir->filePath(u"agentdeck.db"_s), &error);
            QVERIFY(db);
            ConversationStore store(*db);
            ConversationInfo info{id, u"stale"_s};
            info.createdAt = info.updatedAt = QDateTime::currentDateTimeUtc();
            info.agentKind = u"shell"_s;
            info.workingDir = m_dir->filePath(u"w"_s);
            info.executionStatus = ExecutionStatus::Running;
            store.insert(info);
            // A step of two commands, killed in the first: the second is called off with it,
            // as an interrupt calls it off (the next run ran it).
            store.append(id,
                         {Event::message(u"user"_s, u"user"_s, u"sleep 30"_s),
                          Event::toolCall(u"bash"_s, u"call-a"_s, {{u"command"_s, u"sleep 30"_s}}),
                          Event::toolCall(u"bash"_s, u"call-b"_s, {{u"command"_s, u"rm -rf b"_s}})},
                         ExecutionStatus::Running, 1);
        }
        startServer();
        QCOMPARE(m_server->status(id), u"paused"_s);
        const QList<QJsonObject> events = m_server->events(id);
        QCOMPARE(countKind(events, u"ObservationEvent"_s), 2);
        QCOMPARE(countKind(events, u"AgentErrorEvent"_s), 1);
        for (const QJsonObject &event : events) {
            if (event.value(u"kind"_s) == u"ObservationEvent"_s)
                QVERIFY(event.value(u"observation"_s).toObject().value(u"interrupted"_s).toBool());
            if (event.value(u"kind"_s) == u"AgentErrorEvent"_s)
                QCOMPARE(event.value(u"code"_s).toString(), u"run_interrupted"_s);
        }
        // Run continues where the run stopped: the command the restart cut short runs again,
        // the one called off with it does not.
        QVERIFY(m_server->post(ServerConnection::conversationPath(id, u"run")).ok());
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QCOMPARE(m_control->commands, QStringList{u"sleep 30"_s});
    }

    // The outcome from what the runtime said of the command.
    void theOutcomeSaysHowTheCommandEnded_data()
    {
        QTest::addColumn<QString>("output");
        QTest::addColumn<int>("exitCode");
        QTest::addColumn<bool>("interrupted");
        QTest::addColumn<QString>("status");
        QTest::addColumn<QString>("kind");
        QTest::addColumn<QString>("interruptedBy");
        QTest::addRow("timed out") << u"partial\n[command timed out]\n"_s << 124 << false
                                   << u"finished"_s << u"timed_out"_s << QString();
        QTest::addRow("124 of its own")
            << u"no\n"_s << 124 << false << u"finished"_s << u"failed"_s << QString();
        QTest::addRow("sandbox went away")
            << u"[the sandbox went away while the command ran]"_s << -1 << true << u"paused"_s
            << u"interrupted"_s << u"sandbox_lost"_s;
    }
    void theOutcomeSaysHowTheCommandEnded()
    {
        QFETCH(QString, output);
        QFETCH(int, exitCode);
        QFETCH(bool, interrupted);
        QFETCH(QString, status);
        QFETCH(QString, kind);
        QFETCH(QString, interruptedBy);
        startServer();
        m_control->results.insert(u"the command"_s, CommandResult{output, exitCode, interrupted});
        const QUuid id = m_server->create(shell(u"the command"_s));
        QVERIFY(m_server->waitForStatus(id, status));
        const QJsonObject outcome = m_server->get(ServerConnection::conversationPath(id))
                                        .json.toObject()
                                        .value(u"outcome"_s)
                                        .toObject();
        QCOMPARE(outcome.value(u"kind"_s).toString(), kind);
        QCOMPARE(outcome.value(u"interrupted_by"_s).toString(), interruptedBy);
    }

    void staleRunningInALiveServerIsRecoverableByRunAndPause_data()
    {
        QTest::addColumn<QString>("action");
        QTest::addRow("run") << u"run"_s;
        QTest::addRow("pause") << u"pause"_s;
        QTest::addRow("message with run") << u"events"_s;
    }
    void staleRunningInALiveServerIsRecoverableByRunAndPause()
    {
        QFETCH(QString, action);
        startServer();
        const QUuid id = m_server->create(shell(u"true"_s, false));
        // The run loop died without an executor: only the row says `running`.
        m_server->server().store().append(id, {}, ExecutionStatus::Running,
                                          QDateTime::currentMSecsSinceEpoch());
        QCOMPARE(m_server->status(id), u"running"_s);
        const ApiReply reply = action == u"events"_s
                                   ? m_server->post(ServerConnection::conversationPath(id, action),
                                                    TestServer::message(u"echo more"_s, true))
                                   : m_server->post(ServerConnection::conversationPath(id, action));
        QVERIFY2(reply.ok(), qPrintable(reply.detail));
        QVERIFY(QTest::qWaitFor([&] { return m_server->status(id) != u"running"_s; }));
        QCOMPARE(countKind(m_server->events(id), u"AgentErrorEvent"_s), 1);
    }

    void failedProvisioningLeavesNothingBehind()
    {
        startServer();
        const QUuid id = m_server->create(shell(u"echo hi"_s, false));
        m_control->failProvisioning = true;
        const ApiReply failed = m_server->post(ServerConnection::conversationPath(id, u"run"));
        QCOMPARE(failed.status, 502);
        QCOMPARE(failed.errorCode, u"provision_failed"_s);
        QVERIFY(!m_server->server().service().isLive(id));
        QCOMPARE(m_server->status(id), u"idle"_s);
        m_control->failProvisioning = false;
        QVERIFY(m_server->post(ServerConnection::conversationPath(id, u"run")).ok());
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QCOMPARE(m_control->commands, QStringList{u"echo hi"_s});
    }

    // A rejection whose run could not start was written all the same: the conversation waited
    // on with nothing left to answer, and the retry the error asked for was refused 409.
    void aRejectionWhoseRunCannotStartIsNotWritten()
    {
        startServer();
        QJsonObject request = shell(u"rm -rf important"_s);
        request.insert(u"confirmation_policy"_s, QJsonObject{{u"kind"_s, u"AlwaysConfirm"_s}});
        const QUuid id = m_server->create(request);
        QVERIFY(m_server->waitForStatus(id, u"waiting_for_confirmation"_s));
        m_control->failProvisioning = true;
        const QString answer =
            ServerConnection::conversationPath(id, u"events/respond_to_confirmation");
        const QJsonObject reject{{u"accept"_s, false}, {u"reason"_s, u"no"_s}};
        QCOMPARE(m_server->post(answer, reject).status, 502);
        QCOMPARE(m_server->status(id), u"waiting_for_confirmation"_s);
        QCOMPARE(countKind(m_server->events(id), u"UserRejectObservation"_s), 0);

        m_control->failProvisioning = false;
        const ApiReply retried = m_server->post(answer, reject);
        QVERIFY2(retried.ok(), qPrintable(retried.detail));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QCOMPARE(countKind(m_server->events(id), u"UserRejectObservation"_s), 1);
        QVERIFY(m_control->commands.isEmpty());
    }

    // A create with an id is retried as it was sent when its answer was an error to retry: the
    // retry found the conversation there and answered 200, its initial message never run.
    void aRetriedCreateRunsTheInitialMessageItsFirstTryCouldNot()
    {
        startServer();
        m_control->failProvisioning = true;
        QJsonObject request = shell(u"echo hi"_s);
        request.insert(u"conversation_id"_s, toWireId(QUuid::createUuid()));
        QCOMPARE(m_server->post(u"/api/conversations"_s, request).status, 502);
        m_control->failProvisioning = false;
        const ApiReply retried = m_server->post(u"/api/conversations"_s, request);
        QCOMPARE(retried.status, 200);
        const QUuid id = QUuid::fromString(request.value(u"conversation_id"_s).toString());
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QCOMPARE(m_control->commands, QStringList{u"echo hi"_s});
        QCOMPARE(m_server->events(id, QUrlQuery(u"source=user"_s)).size(), 1);

        // Once it ran, a retry is only the answer again.
        QCOMPARE(m_server->post(u"/api/conversations"_s, request).status, 200);
        QCOMPARE(m_control->commands, QStringList{u"echo hi"_s});
    }

    // A create whose initial message could not start its run answered 502 alone, and a client
    // that retried without an id made the conversation again. The answer names it now.
    void aCreateWhoseRunCannotStartNamesTheConversation()
    {
        startServer();
        m_control->failProvisioning = true;
        const ApiReply failed = m_server->post(u"/api/conversations"_s, shell(u"echo hi"_s));
        QCOMPARE(failed.status, 502);
        QCOMPARE(failed.errorCode, u"provision_failed"_s);
        const QString id = failed.json.toObject().value(u"conversation_id"_s).toString();
        QVERIFY2(failed.detail.startsWith(u"Conversation %1 was created"_s.arg(id)),
                 qPrintable(failed.detail));
        const QUuid created = QUuid::fromString(id);
        QVERIFY(!created.isNull());
        QCOMPARE(m_server->status(created), u"idle"_s);
        QCOMPARE(countKind(m_server->events(created), u"MessageEvent"_s), 1);

        // So does a message sent with run: true: it is stored, and a client told only that the
        // run failed would send it again.
        const ApiReply message = m_server->send(created, u"echo again"_s, true);
        QCOMPARE(message.status, 502);
        QCOMPARE(message.json.toObject().value(u"seq"_s).toInteger(), 2);
        QVERIFY2(message.detail.startsWith(
                     u"The message was stored (seq 2), but its run did not start: Cannot start"_s),
                 qPrintable(message.detail));
        QCOMPARE(countKind(m_server->events(created), u"MessageEvent"_s), 2);
        m_control->failProvisioning = false;
        QVERIFY(m_server->post(ServerConnection::conversationPath(created, u"run")).ok());
        QVERIFY(m_server->waitForStatus(created, u"finished"_s));
    }

    // The echo agent runs no commands, and a load test of thousands of echo conversations
    // started a sandbox host for each: its runs bring no runtime up, and so cannot fail to.
    void aRunOfTheEchoAgentBringsNoRuntimeUp()
    {
        startServer();
        m_control->failProvisioning = true;
        const QUuid id = m_server->create(
            QJsonObject{{u"agent"_s, QJsonObject{{u"kind"_s, u"echo"_s}}},
                        {u"initial_message"_s, TestServer::message(u"hello"_s, true)}});
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QVERIFY(m_server->send(id, u"again"_s, true).ok());
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QStringList replies;
        for (const QJsonObject &event : m_server->events(id, QUrlQuery(u"source=agent"_s)))
            replies.append(messageText(event));
        QCOMPARE(replies, (QStringList{u"hello"_s, u"again"_s}));
        QCOMPARE(m_control->acquisitions, 0);
        QVERIFY(m_control->commands.isEmpty());
        // Asked for explicitly, it still comes up.
        m_control->failProvisioning = false;
        QVERIFY(m_server->post(ServerConnection::conversationPath(id, u"runtime/resume")).ok());
        QCOMPARE(m_control->acquisitions, 1);
    }

    // A conversation deleted while its run started, and created again with the same id: the
    // new one's message was stored and never run (the old start kept the id "starting", and
    // then lost its lease to the new row), and the create answered 201 `idle`.
    void aConversationCreatedAgainWhileItsOldRunStartedRunsItsOwnMessage()
    {
        startServer();
        m_control->holdProvisioning = true;
        const QUuid id = m_server->create(shell(u"echo first"_s, false));
        auto oldRun = m_server->client().request(
            "POST"_ba, ServerConnection::conversationPath(id, u"run"_s), {}, {});
        QVERIFY(QTest::qWaitFor([&] { return m_control->acquisitions == 1; }, 10'000));
        QVERIFY(m_server->call("DELETE"_ba, ServerConnection::conversationPath(id)).ok());
        QJsonObject again = shell(u"echo second"_s);
        again.insert(u"conversation_id"_s, toWireId(id));
        auto creating = m_server->client().post(u"/api/conversations"_s, again);
        QVERIFY(QTest::qWaitFor([&] { return m_control->acquisitions == 2; }, 10'000));
        m_control->finishProvisioning();

        const ApiReply old = QCoro::waitFor(std::move(oldRun));
        QCOMPARE(old.status, 404);
        const ApiReply created = QCoro::waitFor(std::move(creating));
        QCOMPARE(created.status, 201);
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QCOMPARE(m_control->commands, QStringList{u"echo second"_s});
        QStringList replies;
        for (const QJsonObject &event :
             m_server->events(id, QUrlQuery(u"source=agent&kind=MessageEvent"_s)))
            replies.append(messageText(event));
        QCOMPARE(replies, QStringList{u"ran: echo second"_s});
        // Released by the delete only: the old start leaves the new run's runtime alone.
        QCOMPARE(m_control->releases, 1);
    }

    // A pause or an interrupt while the run's runtime came up was answered and dropped: the
    // run then ran its command.
    void aStopAskedWhileTheRuntimeStartsIsCarriedOut_data()
    {
        QTest::addColumn<QString>("action");
        QTest::addRow("pause") << u"pause"_s;
        QTest::addRow("interrupt") << u"interrupt"_s;
    }
    void aStopAskedWhileTheRuntimeStartsIsCarriedOut()
    {
        QFETCH(QString, action);
        startServer();
        m_control->holdProvisioning = true;
        const QUuid id = m_server->create(shell(u"touch side_effect"_s, false));
        auto running = m_server->client().request(
            "POST"_ba, ServerConnection::conversationPath(id, u"run"_s), {}, {});
        QVERIFY(QTest::qWaitFor([&] { return m_control->acquisitions == 1; }, 10'000));
        QVERIFY(m_server->post(ServerConnection::conversationPath(id, action)).ok());
        m_control->finishProvisioning();
        QVERIFY(QCoro::waitFor(std::move(running)).ok());
        QVERIFY(m_server->waitForStatus(id, u"paused"_s));
        QVERIFY(m_control->commands.isEmpty());
        // Run again, it goes on where it stopped.
        m_control->holdProvisioning = false;
        const ApiReply again = m_server->post(ServerConnection::conversationPath(id, u"run"_s));
        QVERIFY2(again.ok(), qPrintable(again.detail));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QCOMPARE(m_control->commands, QStringList{u"touch side_effect"_s});
    }

    // A catalog shared with a newer replica may hold an agent this server does not have: a
    // run of it is refused, and nothing is left held.
    void aRunOfAnAgentThisServerDoesNotHaveIsRefused()
    {
        startServer();
        ConversationInfo info;
        info.id = QUuid::createUuid();
        info.agentKind = u"from-the-future"_s;
        info.title = u"newer"_s;
        info.workingDir = QDir::tempPath();
        info.workspaceOwnedByServer = false;
        info.createdAt = info.updatedAt = QDateTime::currentDateTimeUtc();
        m_server->server().store().insert(info);
        const ApiReply refused =
            m_server->post(ServerConnection::conversationPath(info.id, u"run"));
        QCOMPARE(refused.status, 409);
        QCOMPARE(refused.errorCode, u"unknown_agent"_s);
        QVERIFY2(refused.detail.contains(u"from-the-future"_s), qPrintable(refused.detail));
        QVERIFY(!m_server->server().service().isLive(info.id));
        QCOMPARE(m_control->acquisitions, 0);
        QCOMPARE(m_server->status(info.id), u"idle"_s);
    }

    void interruptRecordsTheCommandAsInterrupted()
    {
        startServer();
        m_control->blocking = {u"long"_s};
        QSignalSpy started(m_control.get(), &FakeRuntimeControl::commandStarted);
        const QUuid id = m_server->create(shell(u"long"_s));
        QVERIFY(started.count() == 1 || started.wait());
        QVERIFY(m_server->post(ServerConnection::conversationPath(id, u"interrupt")).ok());
        QVERIFY(m_server->waitForStatus(id, u"paused"_s));
        const QList<QJsonObject> events = m_server->events(id);
        QCOMPARE(countKind(events, u"ObservationEvent"_s), 1);
        for (const QJsonObject &event : events) {
            if (event.value(u"kind"_s) == u"ObservationEvent"_s) {
                const QJsonObject observation = event.value(u"observation"_s).toObject();
                QVERIFY(observation.value(u"interrupted"_s).toBool());
                QCOMPARE(observation.value(u"output"_s).toString(), u"partial output\n"_s);
            }
        }
    }

    // The connection can go after the database took a COMMIT and before its answer came. The
    // run wrote what the command did again, met the stored observation's id, retried for its
    // storage outage limit (a minute) and ended in error.
    void aCommitWhoseAnswerWasLostIsNotWrittenTwice()
    {
        const QUuid id =
            runLosingACommit([](const Event &event) { return event.kind == u"ObservationEvent"_s; },
                             "commit: server closed the connection unexpectedly");
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QVERIFY(m_commitLost);
        const QList<QJsonObject> events = m_server->events(id);
        QCOMPARE(countKind(events, u"ObservationEvent"_s), 1);
        QCOMPARE(countKind(events, u"AgentErrorEvent"_s), 0);
        QCOMPARE(messageText(events.at(events.size() - 2)), u"ran: long"_s);
    }

    // A write that fails outside the outage wait (or after it) ends the run with a sentence
    // saying what to do; it carried the driver's text as it came, PostgreSQL's over three lines.
    void aRunStoppedByStorageSaysSo()
    {
        const QUuid id = runLosingACommit(
            [](const Event &event) {
                return event.kind == u"MessageEvent"_s && event.source == u"agent"_s;
            },
            "commit: server closed the connection unexpectedly\n\tThis probably means the server "
            "terminated abnormally\n(QPSQL: Unable to commit transaction)");
        QVERIFY(m_server->waitForStatus(id, u"error"_s));
        QVERIFY(m_commitLost);
        const QList<QJsonObject> events = m_server->events(id);
        QCOMPARE(countKind(events, u"AgentErrorEvent"_s), 1);
        const QJsonObject failure = events.at(events.size() - 2);
        QCOMPARE(failure.value(u"code"_s).toString(), u"storage_unavailable"_s);
        const QString detail = failure.value(u"error"_s).toString();
        QVERIFY2(detail.startsWith(u"The run stopped because the server could not write to its "
                                   "database (commit: server closed the connection unexpectedly "
                                   "This probably means"_s),
                 qPrintable(detail));
        QVERIFY(!detail.contains(u'\n'));
    }

    // Steps that wait for nothing (echo replies) held the thread for the whole run, and each
    // read the whole history: 8,000 queued messages kept every request, a pause included,
    // waiting 7 s. A run now takes a turn per step.
    void aLongRunLetsRequestsInBetweenItsSteps()
    {
        constexpr int Backlog = 2000;
        startServer();
        const QUuid id = m_server->create(echoAgent());
        QList<Event> messages;
        for (int i = 0; i < Backlog; ++i)
            messages.append(Event::message(u"user"_s, u"user"_s, u"message %1"_s.arg(i)));
        m_server->server().store().append(id, messages, std::nullopt,
                                          QDateTime::currentMSecsSinceEpoch());
        QVERIFY(m_server->post(ServerConnection::conversationPath(id, u"run")).ok());
        // Answered, and the state read, while the run goes on.
        QCOMPARE(m_server->status(id), u"running"_s);
        QVERIFY(m_server->post(ServerConnection::conversationPath(id, u"pause")).ok());
        QVERIFY(m_server->waitForStatus(id, u"paused"_s));
        const int replies =
            countKind(m_server->events(id, QUrlQuery(u"source=agent"_s)), u"MessageEvent"_s);
        QVERIFY2(replies > 0 && replies < Backlog, qPrintable(QString::number(replies)));
        // The rest are answered in order when it runs again.
        QVERIFY(m_server->post(ServerConnection::conversationPath(id, u"run")).ok());
        QVERIFY(m_server->waitForStatus(id, u"finished"_s, 60'000));
        QStringList answers;
        for (const QJsonObject &event : m_server->events(id, QUrlQuery(u"source=agent"_s)))
            answers.append(messageText(event));
        QCOMPARE(answers.size(), Backlog);
        QCOMPARE(answers.first(), u"message 0"_s);
        QCOMPARE(answers.last(), u"message %1"_s.arg(Backlog - 1));
    }

    // A run that reads the whole history read it in one go: 220,000 events held every other
    // request for 2.6 s. It now reads a page per turn of the event loop. (Messages of the
    // environment answer nothing, so even the echo agent reads all of them.)
    void aRunReadingALongHistoryLetsRequestsInBetween()
    {
        startServer();
        const QUuid id = m_server->create(echoAgent());
        QList<Event> notes;
        for (int i = 0; i < 20'000; ++i)
            notes.append(Event::message(u"environment"_s, u"system"_s, u"note %1"_s.arg(i)));
        m_server->server().store().append(id, notes, std::nullopt,
                                          QDateTime::currentMSecsSinceEpoch());
        const auto replies = [&] {
            return m_server
                ->get(ServerConnection::conversationPath(id, u"events/count"),
                      QUrlQuery(u"source=agent"_s))
                .json.toInteger();
        };
        QVERIFY(m_server->send(id, u"one more"_s, true).ok());
        // Served while the run reads what came before.
        QCOMPARE(replies(), 0);
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QCOMPARE(replies(), 1);
    }

    // An agent that answers each user message in turn is given the history from the last point
    // where every message had its answer: a run on 100,000 answered events parsed all of them
    // first (~1 s, ~150 MB). Each agent message answers the oldest open one, so a message can
    // still be open before the last agent message.
    void aRunOfAnAgentThatAnswersMessagesReadsOnlyWhatIsOpen_data()
    {
        QTest::addColumn<bool>("answersMessages");
        QTest::addColumn<QStringList>("history"); // "u:text" from the user, "a:text" the agent
        QTest::addColumn<qint64>("firstSeqRead");
        QTest::addColumn<QString>("reply");
        const QStringList answered{u"u:a"_s, u"a:a"_s, u"u:b"_s, u"a:b"_s};
        QTest::addRow("all answered") << true << answered << 5ll << u"new"_s;
        QTest::addRow("all answered, whole history") << false << answered << 1ll << u"new"_s;
        QTest::addRow("one open before the last answer")
            << true << QStringList{u"u:a"_s, u"u:b"_s, u"a:a"_s} << 1ll << u"b"_s;
        QTest::addRow("open after an answered stretch")
            << true << QStringList{u"u:a"_s, u"a:a"_s, u"u:b"_s, u"u:c"_s, u"a:b"_s} << 3ll
            << u"c"_s;
        QTest::addRow("an answer with nothing open")
            << true << QStringList{u"u:a"_s, u"a:a"_s, u"a:unasked"_s, u"u:b"_s, u"a:b"_s} << 6ll
            << u"new"_s;
    }
    void aRunOfAnAgentThatAnswersMessagesReadsOnlyWhatIsOpen()
    {
        QFETCH(bool, answersMessages);
        QFETCH(QStringList, history);
        QFETCH(qint64, firstSeqRead);
        QFETCH(QString, reply);
        auto agents = std::make_unique<RecordingAgentFactory>(
            answersMessages ? Agent::HistoryScope::OpenMessages : Agent::HistoryScope::Whole);
        const RecordingAgentFactory &recording = *agents;
        TestServerOptions options = optionsWithFakes();
        options.parts.agents = std::move(agents);
        m_server = std::make_unique<TestServer>(std::move(options));
        QVERIFY2(m_server->start(), qPrintable(m_server->errorString()));
        const QUuid id = m_server->create(echoAgent());
        QList<Event> events;
        for (const QString &line : std::as_const(history))
            events.append(line.startsWith(u"u:")
                              ? Event::message(u"user"_s, u"user"_s, line.mid(2))
                              : Event::message(u"agent"_s, u"assistant"_s, line.mid(2)));
        // In two appends: the second starts from what the first left in the row.
        const qsizetype half = events.size() / 2;
        ConversationStore &store = m_server->server().store();
        store.append(id, events.first(half), std::nullopt, 1);
        store.append(id, events.sliced(half), std::nullopt, 2);

        QVERIFY(m_server->send(id, u"new"_s, reply == u"new"_s).ok());
        if (reply != u"new"_s)
            QVERIFY(m_server->post(ServerConnection::conversationPath(id, u"run")).ok());
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QCOMPARE(recording.firstSeqRead, firstSeqRead);
        const QList<QJsonObject> answers = m_server->events(id, QUrlQuery(u"source=agent"_s));
        const auto seeded =
            std::count_if(history.cbegin(), history.cend(),
                          [](const QString &line) { return line.startsWith(u"a:"); });
        QCOMPARE(messageText(answers.value(seeded)), reply);
    }

    // One statement deleted a long history, with every other request waiting: 220,000 events
    // took 5.3 s. The history now goes a batch per turn.
    void deletingALongHistoryLetsRequestsInBetween()
    {
        startServer();
        const QUuid id = m_server->create(echoAgent());
        QList<Event> messages;
        for (int i = 0; i < 5000; ++i)
            messages.append(Event::message(u"user"_s, u"user"_s, u"message %1"_s.arg(i)));
        m_server->server().store().append(id, messages, std::nullopt,
                                          QDateTime::currentMSecsSinceEpoch());
        bool deleted = false;
        auto deleting =
            m_server->client().request("DELETE"_ba, ServerConnection::conversationPath(id));
        QCoro::connect(std::move(deleting), this,
                       [&deleted](const ApiReply &reply) { deleted = reply.ok(); });
        // Its id is still taken: a create of it again is told to wait (it answered 404).
        const QJsonObject again{{u"conversation_id"_s, toWireId(id)},
                                {u"agent"_s, QJsonObject{{u"kind"_s, u"echo"_s}}}};
        const ApiReply early = m_server->post(u"/api/conversations"_s, again);
        QCOMPARE(early.status, 409);
        QCOMPARE(early.errorCode, u"conversation_being_deleted"_s);
        QVERIFY(m_server->get(u"/alive"_s).ok());
        QVERIFY2(!deleted, "the delete held every request until it was done");
        // Gone to every request meanwhile: nothing can start a run in it, and the lists do not
        // show it (they did, while GET said it did not exist).
        QCOMPARE(m_server->get(ServerConnection::conversationPath(id)).status, 404);
        QVERIFY(m_server->get(u"/api/conversations/search"_s)
                    .json.toObject()
                    .value(u"items"_s)
                    .toArray()
                    .isEmpty());
        QCOMPARE(m_server->get(u"/api/conversations/count"_s).json.toInteger(), 0);
        QCOMPARE(m_server->get(u"/api/conversations"_s, QUrlQuery{{u"ids"_s, toWireId(id)}})
                     .json.toArray(),
                 QJsonArray{QJsonValue::Null});
        QCOMPARE(m_server->send(id, u"too late"_s, true).status, 404);
        QTRY_VERIFY_WITH_TIMEOUT(deleted, 10'000);
        QCOMPARE(m_server->get(ServerConnection::conversationPath(id)).status, 404);
        QVERIFY(m_server->server().store().history(id, 0).isEmpty());
        QCOMPARE(m_server->post(u"/api/conversations"_s, again).status, 201);
    }

    // A server stopped (or killed) during a delete left the oldest part of the history under a
    // row that still counted every event, and the next event's seq skipped the rest. The delete
    // is marked before it begins, the conversation stays gone, and the next start finishes it.
    void aDeleteCutShortIsFinishedByTheNextStart()
    {
        startServer();
        const QUuid id = m_server->create(echoAgent());
        const QUuid kept = m_server->create(echoAgent());
        QList<Event> messages;
        for (int i = 0; i < 5000; ++i)
            messages.append(Event::message(u"user"_s, u"user"_s, u"message %1"_s.arg(i)));
        m_server->server().store().append(id, messages, std::nullopt,
                                          QDateTime::currentMSecsSinceEpoch());
        // The first steps of a delete, as a server killed after them left them (a graceful
        // stop finishes a delete while it drains the requests).
        ConversationStore &store = m_server->server().store();
        QVERIFY(store.beginRemoval(id, u"killed/1"_s));
        QCOMPARE(store.removeNewestEvents(id, 500), 500);
        m_server->stop();
        m_server.reset();

        if (!TestServer::usesPostgres()) { // what the stop left, before a server finishes it
            QString error;
            auto db = Database::openSqlite(QDir(m_dir->path()).filePath(u"agentdeck.db"_s), &error);
            QVERIFY2(db, qPrintable(error));
            ConversationStore store(*db);
            QVERIFY(!store.history(id, 0).isEmpty());
            QVERIFY(!store.find(id));
            QCOMPARE(store.count({}), 1);
        }

        startServer();
        QCOMPARE(m_server->get(ServerConnection::conversationPath(id)).status, 404);
        QTRY_VERIFY_WITH_TIMEOUT(m_server->server().store().history(id, 0).isEmpty(), 10'000);
        QTRY_VERIFY_WITH_TIMEOUT(!m_server->server().store().isBeingRemoved(id), 10'000);
        QCOMPARE(m_server->get(ServerConnection::conversationPath(kept)).status, 200);
        const QJsonObject again{{u"conversation_id"_s, toWireId(id)},
                                {u"agent"_s, QJsonObject{{u"kind"_s, u"echo"_s}}}};
        QCOMPARE(m_server->post(u"/api/conversations"_s, again).status, 201);
        const ApiReply sent = m_server->send(id, u"first"_s);
        QCOMPARE(sent.json.toObject().value(u"seq"_s).toInteger(), 1);
    }

    // Messages sent while a command runs are picked up by the same run, each in turn, and each
    // answered from its own command. The shell agent took the first action after a message
    // for that message's, so these three got the first one's reply and never ran.
    void messagesSentWhileACommandRunsEachRunInTurn()
    {
        startServer();
        m_control->blocking = {u"long"_s};
        QSignalSpy started(m_control.get(), &FakeRuntimeControl::commandStarted);
        const QUuid id = m_server->create(shell(u"long"_s));
        QVERIFY(started.count() == 1 || started.wait());
        const QStringList later{u"echo a"_s, u"echo b"_s, u"echo c"_s};
        for (const QString &command : later)
            QVERIFY(m_server->send(id, command, true).ok());
        m_control->release();
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));

        QCOMPARE(m_control->commands, QStringList{u"long"_s} + later);
        QStringList replies;
        for (const QJsonObject &event : m_server->events(id)) {
            if (event.value(u"kind"_s) == u"MessageEvent"_s &&
                event.value(u"source"_s) == u"agent"_s)
                replies.append(messageText(event));
        }
        QCOMPARE(replies, (QStringList{u"ran: long"_s, u"ran: echo a"_s, u"ran: echo b"_s,
                                       u"ran: echo c"_s}));
    }

    // A message with `run: true` after a pause or an interrupt of the run in flight: the run
    // ended at the pause, answered 200 and never ran the message.
    void aMessageToRunAfterAPauseOrInterruptRunsOnceTheRunStopped_data()
    {
        QTest::addColumn<QString>("stop");
        QTest::addColumn<bool>("whileStarting"); // the run's runtime still coming up
        QTest::addRow("pause") << u"pause"_s << false;
        QTest::addRow("interrupt") << u"interrupt"_s << false;
        QTest::addRow("pause while starting") << u"pause"_s << true;
        QTest::addRow("interrupt while starting") << u"interrupt"_s << true;
    }
    void aMessageToRunAfterAPauseOrInterruptRunsOnceTheRunStopped()
    {
        QFETCH(QString, stop);
        QFETCH(bool, whileStarting);
        startServer();
        if (!whileStarting)
            m_control->blocking = {u"long"_s};
        m_control->holdProvisioning = whileStarting;
        QSignalSpy started(m_control.get(), &FakeRuntimeControl::commandStarted);
        const QUuid id = m_server->create(shell(u"long"_s, false));
        auto running = m_server->client().request(
            "POST"_ba, ServerConnection::conversationPath(id, u"run"_s), {}, {});
        if (whileStarting)
            QVERIFY(QTest::qWaitFor([&] { return m_control->acquisitions == 1; }, 10'000));
        else
            QVERIFY(started.count() == 1 || started.wait());
        QVERIFY(m_server->post(ServerConnection::conversationPath(id, stop)).ok());
        QVERIFY(m_server->send(id, u"echo two"_s, true).ok());
        m_control->holdProvisioning = false;
        if (whileStarting)
            m_control->finishProvisioning();
        else
            m_control->release();
        QVERIFY(QCoro::waitFor(std::move(running)).ok());
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QVERIFY(m_control->commands.endsWith(u"echo two"_s));
        QCOMPARE(m_control->commands.count(u"echo two"_s), 1);
    }

    // An archive interrupts the run for good: a message with run: true that came while it
    // stopped asked for a run after it, and the archive waited while that run went through the
    // conversation's whole backlog.
    void anArchiveIsNotFollowedByTheRunAMessageAskedFor()
    {
        startServer();
        m_control->blocking = {u"long"_s};
        QSignalSpy started(m_control.get(), &FakeRuntimeControl::commandStarted);
        const QUuid id = m_server->create(shell(u"long"_s));
        QVERIFY(started.count() == 1 || started.wait());
        for (const QString &queued : {u"echo a"_s, u"echo b"_s})
            QVERIFY(m_server->send(id, queued).ok());
        connect(m_control.get(), &FakeRuntimeControl::interrupted, this, [this, id] {
            m_server->server().service().sendMessage(
                id, MessageRequest{u"user"_s, u"echo late"_s, true});
        });
        const ApiReply archived =
            m_server->post(ServerConnection::conversationPath(id, u"archive"));
        QVERIFY2(archived.ok(), qPrintable(archived.detail));
        QVERIFY(m_server->events(id, QUrlQuery(u"source=user"_s)).size() == 4);
        QCOMPARE(m_control->commands, QStringList{u"long"_s});
        QVERIFY(!m_server->server().service().isLive(id));
    }

    // Requests that change what runs a conversation take its turn one at a time, each deciding
    // on what the one before left. A reprovision called a resume's sandbox start off (the
    // resume was answered 409 runtime_start_cancelled); a resume during an archive's stop
    // brought the runtime up for a conversation about to be archived, and was answered 200.
    void aRuntimeRequestWaitsForTheOneBeforeIt()
    {
        startServer();
        m_control->holdProvisioning = true;
        const QUuid id = m_server->create(shell(u"true"_s, false));
        ConversationService &service = m_server->server().service();
        auto resuming = service.resumeRuntime(id); // its sandbox is coming up
        auto reprovisioning = service.reprovisionRuntime(id);
        // Its turn comes after the resume's: nothing was released or started for it yet.
        QCOMPARE(m_control->acquisitions, 1);
        QCOMPARE(m_control->releasedIds.count(id), 0);
        m_control->holdProvisioning = false;
        m_control->finishProvisioning();
        QCOMPARE(refusalOf(std::move(resuming)), QString());
        QCOMPARE(refusalOf(std::move(reprovisioning)), QString());
        QCOMPARE(m_control->acquisitions, 2);
        QCOMPARE(m_control->releasedIds.count(id), 1); // the reprovision's, of the resumed one
    }

    void aResumeWhileAnArchiveStopsTheRunFindsItArchived()
    {
        startServer();
        m_control->blocking = {u"long"_s};
        QSignalSpy started(m_control.get(), &FakeRuntimeControl::commandStarted);
        const QUuid id = m_server->create(shell(u"long"_s));
        QVERIFY(started.count() == 1 || started.wait());
        ConversationService &service = m_server->server().service();
        auto archiving = service.archive(id); // waits for the run to stop
        auto resuming = service.resumeRuntime(id);
        QVERIFY(QCoro::waitFor(std::move(archiving)).isArchived());
        QCOMPARE(refusalOf(std::move(resuming)), u"conversation_archived"_s);
        QCOMPARE(m_control->acquisitions, 1);
    }

    // A fork copies the workspace with its turn held: a run asked meanwhile starts once the
    // fork is made, and the fork's history is the one from before it.
    void aRunAskedWhileAForkCopiesTheWorkspaceWaitsForIt()
    {
        startServer();
        const QUuid id = m_server->create(shell(u"echo one"_s));
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QVERIFY(m_server->send(id, u"echo two"_s).ok());
        const qsizetype before = m_server->events(id).size();
        ConversationService &service = m_server->server().service();
        auto forking = service.fork(id, {});
        auto running = service.run(id);
        QCOMPARE(m_control->commands, QStringList{u"echo one"_s}); // not started yet
        const ConversationInfo fork = QCoro::waitFor(std::move(forking));
        QCoro::waitFor(std::move(running));
        QCOMPARE(m_server->events(fork.id).size(), before);
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QCOMPARE(m_control->commands, (QStringList{u"echo one"_s, u"echo two"_s}));
    }

    // With no stop asked for, the run in flight picks the message up (no second run).
    void aMessageToRunDuringARunIsPickedUpByIt()
    {
        startServer();
        m_control->blocking = {u"long"_s};
        QSignalSpy started(m_control.get(), &FakeRuntimeControl::commandStarted);
        const QUuid id = m_server->create(shell(u"long"_s));
        QVERIFY(started.count() == 1 || started.wait());
        QVERIFY(m_server->send(id, u"echo two"_s, true).ok());
        m_control->release();
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QCOMPARE(m_control->commands, (QStringList{u"long"_s, u"echo two"_s}));
        QCOMPARE(m_control->acquisitions, 1);
    }

    // Each archive waits for its run to stop. Two runs stopping in one turn of the event loop
    // woke a waiter that was already gone (QCoro's signal awaiter), and the server crashed.
    void runsStoppingTogetherAreEachWaitedFor()
    {
        startServer();
        m_control->blocking = {u"long"_s};
        QSignalSpy started(m_control.get(), &FakeRuntimeControl::commandStarted);
        QList<QUuid> ids;
        for (int i = 0; i < 4; ++i)
            ids.append(m_server->create(shell(u"long"_s)));
        QVERIFY(QTest::qWaitFor([&] { return started.count() == 4; }, 10'000));

        ConversationService &service = m_server->server().service();
        std::vector<QCoro::Task<ConversationInfo>> archiving;
        for (const QUuid &id : ids)
            archiving.push_back(service.archive(id));
        for (auto &task : archiving)
            QVERIFY(QCoro::waitFor(std::move(task)).isArchived());
        for (const QUuid &id : ids)
            QCOMPARE(m_server->status(id), u"paused"_s);
    }

    void gracefulStopPausesAndInterruptsAfterGrace()
    {
        TestServerOptions options = optionsWithFakes();
        options.shutdownGrace = std::chrono::milliseconds(100);
        m_server = std::make_unique<TestServer>(std::move(options));
        QVERIFY2(m_server->start(), qPrintable(m_server->errorString()));
        m_control->blocking = {u"long"_s};
        QSignalSpy started(m_control.get(), &FakeRuntimeControl::commandStarted);
        const QUuid id = m_server->create(shell(u"long"_s));
        QVERIFY(started.count() == 1 || started.wait());
        m_server->stop();

        QString error;
        auto db = Database::openSqlite(m_dir->filePath(u"agentdeck.db"_s), &error);
        QVERIFY(db);
        const auto info = ConversationStore(*db).find(id);
        QVERIFY(info->executionStatus == ExecutionStatus::Paused);
    }

    // A stop lets requests already in a handler finish: the client of a run that was still
    // bringing up its runtime gets its answer, and the run is paused with the others. The stop
    // closed the catalog under it: the run then failed ("Driver not loaded") after the stop,
    // its lease never released, and the client had no answer.
    void aStopLetsRequestsInHandlersFinish()
    {
        TestServerOptions options = optionsWithFakes();
        options.shutdownGrace = std::chrono::milliseconds(1000);
        m_server = std::make_unique<TestServer>(std::move(options));
        QVERIFY2(m_server->start(), qPrintable(m_server->errorString()));
        m_control->holdProvisioning = true;
        m_control->blocking = {u"long"_s};
        const QUuid id = m_server->create(shell(u"long"_s, false));
        QVERIFY(!id.isNull());
        auto running = m_server->client().request(
            "POST"_ba, ServerConnection::conversationPath(id, u"run"_s), {}, {});
        QVERIFY(QTest::qWaitFor([&] { return m_control->acquisitions == 1; }, 10'000));
        // A connection the server has taken, and answered once.
        QTcpSocket open;
        QVERIFY(exchange(open, "GET /alive").startsWith("HTTP/1.1 200"));
        auto stopping = m_server->server().stop();

        // While the stop waits for that request, what an open connection sends is answered
        // 503 `shutting_down` (it said the server was starting), and /ready says so too.
        const QByteArray refused = exchange(open, "GET /api/conversations/count");
        QVERIFY2(refused.startsWith("HTTP/1.1 503") && refused.contains("\"shutting_down\""),
                 refused.constData());
        const QByteArray ready = exchange(open, "GET /ready");
        QVERIFY2(ready.startsWith("HTTP/1.1 503") && ready.contains("\"stopping\""),
                 ready.constData());
        // A new connection is refused: one accepted now was reset when the process exited.
        QTcpSocket late;
        late.connectToHost(QHostAddress::LocalHost, quint16(m_server->url().port()));
        QVERIFY(QTest::qWaitFor([&] { return late.state() == QAbstractSocket::UnconnectedState; },
                                5000));
        QCOMPARE(late.error(), QAbstractSocket::ConnectionRefusedError);

        m_control->finishProvisioning();
        const ApiReply reply = QCoro::waitFor(std::move(running));
        QCOMPARE(reply.status, 200);
        QCoro::waitFor(std::move(stopping));
        m_server->stop();

        QString error;
        auto db = Database::openSqlite(m_dir->filePath(u"agentdeck.db"_s), &error);
        QVERIFY2(db, qPrintable(error));
        const auto info = ConversationStore(*db).find(id);
        QVERIFY(info);
        QCOMPARE(toString(info->executionStatus), u"paused"_s);
    }

    // A start still bringing up its runtime when the grace is over is called off, and its
    // request answered before storage closes: the client got no answer (curl: "Empty reply
    // from server") though its message had been stored.
    void aStartOutlastingTheGraceIsAnswered_data()
    {
        QTest::addColumn<bool>("message");
        QTest::addRow("run") << false;
        QTest::addRow("message with run") << true;
    }
    void aStartOutlastingTheGraceIsAnswered()
    {
        QFETCH(bool, message);
        TestServerOptions options = optionsWithFakes();
        options.shutdownGrace = std::chrono::milliseconds(200);
        m_server = std::make_unique<TestServer>(std::move(options));
        QVERIFY2(m_server->start(), qPrintable(m_server->errorString()));
        m_control->holdProvisioning = true;
        const QUuid id = m_server->create(shell(u"echo never"_s, false));
        QVERIFY(!id.isNull());
        auto request =
            message ? m_server->client().post(ServerConnection::conversationPath(id, u"events"_s),
                                              TestServer::message(u"echo stored"_s, true))
                    : m_server->client().request(
                          "POST"_ba, ServerConnection::conversationPath(id, u"run"_s), {}, {});
        QVERIFY(QTest::qWaitFor([&] { return m_control->acquisitions == 1; }, 10'000));
        auto stopping = m_server->server().stop();
        const ApiReply reply = QCoro::waitFor(std::move(request));
        QCOMPARE(reply.status, 503);
        QCOMPARE(reply.errorCode, u"shutting_down"_s);
        if (message) {
            QCOMPARE(reply.json.toObject().value(u"seq"_s).toInteger(), 2);
            QVERIFY2(reply.detail.contains(u"was stored"_s), qPrintable(reply.detail));
        }
        QCoro::waitFor(std::move(stopping));
        QVERIFY(m_control->commands.isEmpty());
    }

    // Sends `requestLine` on `socket` (connecting it first to the test server) and returns the
    // whole answer, head and body, once it has come; the server runs in this thread.
    QByteArray exchange(QTcpSocket &socket, const QByteArray &requestLine)
    {
        if (socket.state() != QAbstractSocket::ConnectedState) {
            socket.connectToHost(QHostAddress::LocalHost, quint16(m_server->url().port()));
            if (!QTest::qWaitFor([&] { return socket.state() == QAbstractSocket::ConnectedState; },
                                 5000))
                return "[not connected] " + socket.errorString().toUtf8();
        }
        socket.write(requestLine + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        QByteArray answer;
        const auto whole = [&] {
            answer += socket.readAll();
            const qsizetype headEnd = answer.indexOf("\r\n\r\n");
            if (headEnd < 0)
                return false;
            const qsizetype at = answer.toLower().indexOf("content-length:");
            const qsizetype length = at < 0
                                         ? 0
                                         : answer.mid(at + 15, answer.indexOf("\r\n", at) - at - 15)
                                               .trimmed()
                                               .toLongLong();
            return answer.size() >= headEnd + 4 + length;
        };
        if (!QTest::qWaitFor(whole, 5000))
            return "[no whole answer] " + answer;
        return answer;
    }

    // A delete removes the row, then the files: a crash in between, or a delete by another
    // replica, left directories nothing refers to, for good. So did a crash while the trash
    // was deleting a tree.
    void startupRemovesDirectoriesOfConversationsThatAreGone()
    {
        startServer();
        const QUuid kept = m_server->create(shell(u"echo hi"_s, false));
        QVERIFY(!kept.isNull());
        m_server->stop();
        const QDir data(m_dir->path());
        const QString gone = toWireId(QUuid::createUuid());
        const QString trashed = u"/"_s + Trash::DirName + u"/half-deleted/src"_s;
        const QStringList made{u"workspaces/"_s + gone + u"/src"_s,
                               u"runtimes/"_s + gone + u"/home"_s, u"workspaces/notes"_s,
                               u"workspaces"_s + trashed, u"runtimes"_s + trashed};
        for (const QString &path : made)
            QVERIFY(data.mkpath(path));

        startServer();
        QVERIFY(QTest::qWaitFor(
            [&] {
                return !data.exists(u"workspaces/"_s + gone) &&
                       !data.exists(u"runtimes/"_s + gone) &&
                       !data.exists(u"workspaces"_s + trashed) &&
                       !data.exists(u"runtimes"_s + trashed);
            },
            5000));
        QVERIFY(data.exists(u"workspaces/"_s + toWireId(kept)));
        QVERIFY(data.exists(u"workspaces/notes"_s)); // not a conversation's
    }

    // A catalog lost, emptied or replaced knows none of the conversations: the sweep took every
    // workspace in the data dir for a deleted conversation's, users' files and all.
    void startupKeepsDirectoriesMadeBeforeTheCatalog()
    {
        startServer();
        const QUuid old = m_server->create(shell(u"echo hi"_s, false));
        QVERIFY(!old.isNull());
        m_server->stop();
        QDir data(m_dir->path());
        const QString oldWorkspace = u"workspaces/"_s + toWireId(old);
        QFile file(data.filePath(oldWorkspace + u"/precious.txt"_s));
        QVERIFY(file.open(QIODevice::WriteOnly) && file.write("kept") == 4);
        file.close();
        for (const QString &name : data.entryList({u"agentdeck.db*"_s}, QDir::Files))
            QVERIFY(data.remove(name));

        startServer();
        QVERIFY(!m_server->server().store().find(old));
        const QString fresh = u"workspaces/"_s + toWireId(QUuid::createUuid());
        QVERIFY(data.mkpath(fresh));
        auto sweeping = m_server->server().service().removeOrphanedDirs(
            {data.filePath(u"workspaces"_s), data.filePath(u"runtimes"_s)},
            m_server->server().database().createdAtMs());
        const OrphanSweep sweep = QCoro::waitFor(std::move(sweeping));
        QVERIFY(data.exists(oldWorkspace + u"/precious.txt"_s));
        QVERIFY(!data.exists(fresh)); // made since: a deleted conversation's
        QVERIFY(sweep.kept >= 1);
    }

    // A request that claimed the conversation while its run's end waited for storage: the
    // claim (of this server's own lease) made the end look settled elsewhere, and it was
    // dropped; the conversation stayed `running` for good, or was said to be interrupted by a
    // server that stopped.
    void aRequestWhileARunsEndWaitsForStorageLetsItBeWritten_data()
    {
        QTest::addColumn<QString>("request");
        QTest::addRow("pause") << u"pause"_s;
        QTest::addRow("interrupt") << u"interrupt"_s;
        QTest::addRow("run") << u"run"_s;
        QTest::addRow("message") << u"events"_s;
    }
    void aRequestWhileARunsEndWaitsForStorageLetsItBeWritten()
    {
        QFETCH(QString, request);
        startServer();
        m_control->blocking = {u"long"_s};
        QSignalSpy started(m_control.get(), &FakeRuntimeControl::commandStarted);
        const QUuid id = m_server->create(shell(u"long"_s));
        QVERIFY(started.count() > 0 || started.wait());
        Database &db = m_server->server().store().database();
        // Storage refuses every write but the ones the test lets through: on a full disk, one
        // that needs no new page (the claim of a lease) may still go through.
        int letThrough = 0;
        db.beforeCommit = [&letThrough] {
            if (letThrough-- <= 0)
                throw StorageError("commit: database or disk is full");
        };
        QSignalSpy stopped(&m_server->server().service(), &ConversationService::runnerStopped);
        m_control->release();
        QVERIFY(stopped.wait());
        letThrough = 1;
        const ApiReply reply = m_server->post(
            ServerConnection::conversationPath(id, request),
            request == u"events"_s ? TestServer::message(u"echo later"_s, false) : QJsonValue());
        QVERIFY2(reply.status == 200 || reply.status == 201 || reply.status == 503,
                 qPrintable(u"%1 %2"_s.arg(reply.status).arg(reply.detail)));
        db.beforeCommit = {};
        QVERIFY(m_server->waitForStatus(id, u"error"_s));
        const QList<QJsonObject> errors = ofKind(m_server->events(id), u"AgentErrorEvent"_s);
        QCOMPARE(errors.size(), 1);
        QCOMPARE(errors.first().value(u"code"_s).toString(), u"storage_full"_s);
    }

    // A run stopped by a full disk cannot write its end either: the conversation stayed
    // `running`, with nothing running it and nothing said of why, until someone touched it.
    void theEndOfARunStorageRefusedIsWrittenWhenStorageIsBack()
    {
        startServer();
        m_control->blocking = {u"long"_s};
        QSignalSpy started(m_control.get(), &FakeRuntimeControl::commandStarted);
        const QUuid id = m_server->create(shell(u"long"_s));
        QVERIFY(started.count() > 0 || started.wait());
        Database &db = m_server->server().store().database();
        db.beforeCommit = [] { throw StorageError("commit: database or disk is full"); };
        QSignalSpy stopped(&m_server->server().service(), &ConversationService::runnerStopped);
        m_control->release();
        QVERIFY(stopped.wait());
        QCOMPARE(m_server->status(id), u"running"_s); // what storage still says

        db.beforeCommit = {};
        QVERIFY(m_server->waitForStatus(id, u"error"_s));
        const QList<QJsonObject> events = m_server->events(id);
        QCOMPARE(events.last().value(u"kind"_s).toString(), u"ConversationStateUpdateEvent"_s);
        const auto failure = std::find_if(events.crbegin(), events.crend(), [](const auto &event) {
            return event.value(u"kind"_s) == u"AgentErrorEvent"_s;
        });
        QVERIFY(failure != events.crend());
        QCOMPARE(failure->value(u"code"_s).toString(), u"storage_full"_s);
        // What the command did is written with it, so it is not run again.
        QCOMPARE(countKind(events, u"ObservationEvent"_s), 1);
        // Its lease was given back: a run can start at once.
        QVERIFY(m_server->send(id, u"echo again"_s, true).ok());
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QCOMPARE(m_control->commands, (QStringList{u"long"_s, u"echo again"_s}));
    }

    // An interrupt that came after the agent's action was stored and before its command started
    // left the action without an observation: the run paused, and the next run ran the command
    // the operator had interrupted.
    void anInterruptBeforeTheCommandStartsCallsItOff()
    {
        startServer();
        const QUuid id = m_server->create(shell(u"rm -rf precious"_s, false));
        ConversationStore &store = m_server->server().store();
        ConversationService &service = m_server->server().service();
        auto interrupted = std::make_shared<bool>(false);
        store.database().afterCommit = [&store, &service, id, interrupted] {
            if (*interrupted)
                return;
            const QList<Event> history = store.history(id, 0);
            if (!history.isEmpty() && history.last().kind == EventKind::Action) {
                *interrupted = true;
                service.interrupt(id);
            }
        };
        QVERIFY(m_server->post(ServerConnection::conversationPath(id, u"run")).ok());
        QVERIFY(m_server->waitForStatus(id, u"paused"_s));
        store.database().afterCommit = {};
        QVERIFY(*interrupted);
        const QList<QJsonObject> events = m_server->events(id);
        QCOMPARE(countKind(events, u"ObservationEvent"_s), 1);
        for (const QJsonObject &event : events) {
            if (event.value(u"kind"_s) == u"ObservationEvent"_s)
                QVERIFY(event.value(u"observation"_s).toObject().value(u"interrupted"_s).toBool());
        }
        // Nothing of the interrupted step runs when the conversation resumes.
        QVERIFY(m_server->post(ServerConnection::conversationPath(id, u"run")).ok());
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        QVERIFY(m_control->commands.isEmpty());
    }

    // The server's own workspaces dir being unusable was answered 422 invalid_parameter, as if
    // the client had sent something wrong; a load balancer would not retry it elsewhere.
    void aWorkspaceTheServerCannotMakeIsNotTheCallersFault()
    {
        startServer();
        const QDir data(m_dir->path());
        QVERIFY(QDir(data.filePath(u"workspaces"_s)).removeRecursively());
        QFile blocker(data.filePath(u"workspaces"_s));
        QVERIFY(blocker.open(QIODevice::WriteOnly));
        blocker.close();
        const ApiReply ours = m_server->post(u"/api/conversations"_s, TestServer::withAgent({}));
        QCOMPARE(ours.status, 503);
        QCOMPARE(ours.errorCode, u"workspace_unavailable"_s);
        // The caller's own directory is the caller's to fix.
        QTemporaryDir elsewhere;
        QFile file(elsewhere.filePath(u"a-file"_s));
        QVERIFY(file.open(QIODevice::WriteOnly));
        file.close();
        const QString underAFile = file.fileName() + u"/w"_s;
        const ApiReply theirs = m_server->post(
            u"/api/conversations"_s,
            TestServer::withAgent({{u"workspace"_s, QJsonObject{{u"working_dir"_s, underAFile}}}}));
        QCOMPARE(theirs.status, 422);
        QVERIFY2(theirs.detail.startsWith(u"Cannot create the workspace"_s),
                 qPrintable(theirs.detail));
    }

    void seqsStayGaplessWhenWritersInterleave()
    {
        startServer();
        const QUuid a = m_server->create(echoAgent());
        const QUuid b = m_server->create(echoAgent());
        for (int i = 0; i < 20; ++i) {
            for (const QUuid &id : {a, b})
                QCoro::waitFor(m_server->server().service().sendMessage(
                    id, MessageRequest{u"user"_s, QString::number(i), i % 5 == 0 || i == 19}));
        }
        QVERIFY(m_server->waitForStatus(a, u"finished"_s));
        QVERIFY(m_server->waitForStatus(b, u"finished"_s));
        for (const QUuid &id : {a, b}) {
            const QList<QJsonObject> events = m_server->events(id);
            for (qsizetype i = 0; i < events.size(); ++i)
                QCOMPARE(events[i].value(u"seq"_s).toInt(), i + 1);
            QCOMPARE(countKind(events, u"MessageEvent"_s), 40);
        }
    }

private:
    // The code of the ApiError `task` ended with; empty when it ended well. (QCoro 0.8's waitFor
    // never returns from a task that threw.)
    static QString refusalOf(QCoro::Task<ConversationInfo> task)
    {
        auto caught = [](QCoro::Task<ConversationInfo> task) -> QCoro::Task<QString> {
            try {
                co_await std::move(task);
            } catch (const ApiError &error) {
                co_return error.code;
            }
            co_return QString();
        }(std::move(task));
        return QCoro::waitFor(std::move(caught));
    }

    TestServerOptions optionsWithFakes()
    {
        TestServerOptions options;
        options.dataDir = m_dir->path();
        options.parts.runtimes = std::make_unique<FakeRuntimeProvider>(*m_control);
        options.parts.clock = std::make_unique<FakeClock>();
        return options;
    }
    void startServer()
    {
        m_server = std::make_unique<TestServer>(optionsWithFakes());
        QVERIFY2(m_server->start(), qPrintable(m_server->errorString()));
    }

    // Runs a shell conversation whose command ends once the database is set to fail the first
    // COMMIT it takes that stores an event `matching`: the COMMIT is done, and then it throws
    // `error`, as when the connection goes before the COMMIT's answer comes (m_commitLost says
    // it did). Null when the command did not start.
    QUuid runLosingACommit(std::function<bool(const Event &)> matching, const char *error)
    {
        startServer();
        m_control->blocking = {u"long"_s};
        QSignalSpy started(m_control.get(), &FakeRuntimeControl::commandStarted);
        const QUuid id = m_server->create(shell(u"long"_s));
        if (started.count() == 0 && !started.wait())
            return {};
        ConversationStore &store = m_server->server().store();
        store.database().afterCommit = [this, &store, id, matching, error] {
            if (m_commitLost)
                return;
            const QList<Event> history = store.history(id, 0);
            if (std::any_of(history.cbegin(), history.cend(), matching)) {
                m_commitLost = true;
                throw StorageError(error);
            }
        };
        m_control->release();
        return id;
    }

    std::unique_ptr<FakeRuntimeControl> m_control;
    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<TestServer> m_server;
    bool m_commitLost = false;
};

QTEST_GUILESS_MAIN(ConversationServiceTest)
#include "tst_conversationservice.moc"
