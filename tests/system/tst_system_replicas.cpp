// Several real replica processes sharing one PostgreSQL catalog (a throwaway cluster this test
// starts itself): handover after SIGTERM, SIGKILL and SIGSTOP, claim races, honest 409/503
// answers, cancellation across replicas, reads and live events written by any replica.
#include "postgrescluster.h"
#include "serverprocess.h"
#include "storage/database.h"
#include "testevents.h"
#include "wiretypes.h"

#include <QElapsedTimer>
#include <QFileInfo>
#include <QRandomGenerator>
#include <QSignalSpy>
#include <QSqlQuery>
#include <QTemporaryDir>
#include <QWebSocket>

#include <csignal>

using namespace Qt::StringLiterals;
using namespace AgentDeck::Testing;

namespace {

// Short enough for a quick test, long enough for a loaded 2-core CI machine to renew in time:
// renewal (and heartbeat) every second, unresponsive after 1.5 s of silence.
constexpr int LeaseTtlMs = 3000;
constexpr int RenewalMs = LeaseTtlMs / 3;

QJsonObject shellConversation(const QString &command, bool run)
{
    return QJsonObject{{u"agent"_s, QJsonObject{{u"kind"_s, u"shell"_s}}},
                       {u"initial_message"_s, userMessage(command, run)}};
}

// Both requests are on the wire before either answer is read.
QList<Reply> postTogether(const QList<QUrl> &urls, const QByteArray &body = "{}"_ba)
{
    QNetworkAccessManager network;
    QList<QNetworkReply *> pending;
    for (const QUrl &url : urls) {
        QNetworkRequest request(url);
        request.setAttribute(QNetworkRequest::Http2AllowedAttribute, false);
        request.setTransferTimeout(RequestTimeoutMs);
        request.setHeader(QNetworkRequest::ContentTypeHeader, "application/json"_ba);
        pending.append(network.post(request, body));
    }
    // A reply still unfinished at the timeout reads as status 0, which fails the test.
    (void)QTest::qWaitFor(
        [&] {
            return std::all_of(pending.cbegin(), pending.cend(),
                               [](QNetworkReply *reply) { return reply->isFinished(); });
        },
        RequestTimeoutMs);
    QList<Reply> replies;
    for (QNetworkReply *reply : pending) {
        Reply result;
        result.status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
        result.body = reply->readAll();
        result.json = QJsonDocument::fromJson(result.body).object();
        replies.append(result);
        reply->deleteLater();
    }
    return replies;
}

} // namespace

class SystemReplicasTest : public QObject
{
    Q_OBJECT

private:
    // A replica of the current test's database; `runtime` local starts sandbox hosts.
    ServerProcess &startReplica(const QString &name, const QString &runtime = u"process"_s,
                                bool waitReady = true, int leaseTtlMs = LeaseTtlMs,
                                const QString &dataDir = {}, bool console = false)
    {
        ServerProcess &replica =
            m_fleet.add(dataDir, {u"--database"_s, m_databaseUrl.toString(), u"--replica-id"_s,
                                  name, u"--lease-ttl"_s, u"%1ms"_s.arg(leaseTtlMs),
                                  u"--shutdown-grace"_s, u"0"_s, u"--runtime"_s, runtime});
        if (console)
            replica.runAsConsole();
        if (waitReady) {
            if (!replica.startReady())
                qWarning().noquote() << name << "did not start:" << replica.stderrText();
        } else {
            replica.start();
        }
        return replica;
    }

    QString sql(const QString &statement)
    {
        QString error;
        const QString result = m_cluster.psql(m_databaseName, statement, &error);
        if (result.isNull())
            qWarning().noquote() << "psql failed:" << error;
        return result;
    }

    // Starts a `sleep` on `owner` and waits until it runs there.
    QUuid startLongRun(ServerProcess &owner)
    {
        const QUuid id = owner.create(shellConversation(u"sleep 30"_s, true));
        if (!id.isNull() && !QTest::qWaitFor(
                                [&] {
                                    const auto events = owner.events(id);
                                    return std::any_of(events.cbegin(), events.cend(),
                                                       [](const QJsonObject &event) {
                                                           return event.value(u"kind"_s) ==
                                                                  u"ActionEvent"_s;
                                                       });
                                },
                                15'000))
            return {};
        return id;
    }

    // What the command line of `replica`'s sandbox host for `id` carries: the runtime dir in
    // that replica's data dir.
    static QByteArray sandboxOn(const ServerProcess &replica, const QUuid &id)
    {
        return QDir(replica.dataDir()).filePath(u"runtimes/"_s + wireId(id)).toLocal8Bit();
    }

    // Runs `echo hi` on `owner` to its end, and waits until its sandbox host is up there.
    QUuid finishedRunWithItsSandbox(ServerProcess &owner)
    {
        const QUuid id = owner.create(shellConversation(u"echo hi"_s, true));
        if (id.isNull() || !owner.waitForStatus(id, u"finished"_s) ||
            !QTest::qWaitFor([&] { return !processesWith(sandboxOn(owner, id)).isEmpty(); },
                             10'000))
            return {};
        return id;
    }

    // Starts a long command on `owner` whose processes carry a marker of their own in their
    // command line, and waits until it runs there.
    QUuid startMarkedCommand(ServerProcess &owner, QByteArray *marker)
    {
        *marker = "marked-" + QByteArray::number(QRandomGenerator::global()->generate());
        const QUuid id = owner.create(
            shellConversation(u"sleep 300; echo "_s + QString::fromLatin1(*marker), true));
        if (id.isNull() ||
            !QTest::qWaitFor([&] { return !processesWith(*marker).isEmpty(); }, 15'000))
            return {};
        return id;
    }

    // Whether the processes carrying `marker` end within `timeoutMs`; those left are killed.
    static bool endWithin(const QByteArray &marker, int timeoutMs)
    {
        const bool ended =
            QTest::qWaitFor([&] { return processesWith(marker).isEmpty(); }, timeoutMs);
        killProcessesWith(marker);
        return ended;
    }

    // Opens the event stream of `id` on `replica`, collecting the seqs of its frames.
    bool openStream(QWebSocket &socket, ServerProcess &replica, const QUuid &id,
                    const QString &query, QList<qint64> *seqs)
    {
        connect(&socket, &QWebSocket::textMessageReceived, this, [seqs](const QString &frame) {
            seqs->append(
                QJsonDocument::fromJson(frame.toUtf8()).object().value(u"seq"_s).toInteger());
        });
        QUrl url = replica.url();
        url.setScheme(u"ws"_s);
        url.setPath(u"/sockets/events/"_s + wireId(id));
        url.setQuery(query);
        QSignalSpy connected(&socket, &QWebSocket::connected);
        socket.open(url);
        return connected.wait(10'000);
    }

private Q_SLOTS:
    void initTestCase()
    {
        QString problem;
        QVERIFY2(m_fleet.findBinary(&problem), qPrintable(problem));
        QString error;
        QVERIFY2(m_cluster.start(&error), qPrintable(error));
    }

    void init()
    {
        m_databaseName = u"replicas_%1"_s.arg(++m_databases);
        QString error;
        m_databaseUrl = m_cluster.createDatabase(m_databaseName, &error);
        QVERIFY2(m_databaseUrl.isValid(), qPrintable(error));
    }

    void cleanup() { m_fleet.cleanUp(); }

    // Replicas started together against an empty database: one migrates, none fails.
    void concurrentStartMigratesOnce()
    {
        for (const QString &name : {u"a"_s, u"b"_s, u"c"_s})
            startReplica(name, u"process"_s, false);
        for (const auto &replica : m_fleet.servers())
            QVERIFY2(QTest::qWaitFor([&] { return replica->get(u"/ready"_s).status == 200; },
                                     StartTimeoutMs),
                     qPrintable(replica->stderrText()));
        // Every migration applied exactly once, none skipped.
        QCOMPARE(
            sql(u"SELECT COUNT(*) = MAX(version) AND MAX(version) >= 6 FROM schema_migrations"_s),
            u"t"_s);
        const Reply listed = m_fleet.servers().front()->get(u"/api/replicas"_s);
        QCOMPARE(listed.status, 200);
        QCOMPARE(listed.json.toArray().size(), 3);
        for (const QJsonValue &replica : listed.json.toArray())
            QVERIFY(replica.toObject().value(u"alive"_s).toBool());
    }

    // /server_info names the replica; /api/replicas lists heartbeats and owned conversations.
    void replicasAreListed()
    {
        ServerProcess &a = startReplica(u"alpha"_s);
        ServerProcess &b = startReplica(u"beta"_s);
        QCOMPARE(a.get(u"/server_info"_s).object().value(u"replica_id"_s).toString(), u"alpha"_s);
        const QUuid id = startLongRun(a);
        QVERIFY(!id.isNull());

        const QJsonArray listed = b.get(u"/api/replicas"_s).json.toArray();
        QCOMPARE(listed.size(), 2);
        const QJsonObject alpha = listed[0].toObject();
        QCOMPARE(alpha.value(u"id"_s).toString(), u"alpha"_s);
        QCOMPARE(alpha.value(u"advertise_url"_s).toString(), a.urlText());
        QCOMPARE(alpha.value(u"owned_conversations"_s).toInt(), 1);
        QVERIFY(alpha.value(u"alive"_s).toBool());
        QVERIFY(!alpha.value(u"last_heartbeat_at"_s).toString().isEmpty());
        QVERIFY(!alpha.value(u"is_self"_s).toBool());
        QCOMPARE(listed[1].toObject().value(u"owned_conversations"_s).toInt(), 0);
        QVERIFY(listed[1].toObject().value(u"is_self"_s).toBool());

        // A heartbeat moves on without any run.
        const QString before = alpha.value(u"last_heartbeat_at"_s).toString();
        QVERIFY(QTest::qWaitFor(
            [&] {
                return b.get(u"/api/replicas"_s)
                           .json.toArray()[0]
                           .toObject()
                           .value(u"last_heartbeat_at"_s)
                           .toString() != before;
            },
            5 * RenewalMs));

        a.sendSignal(SIGTERM);
        QVERIFY(a.waitForExit(10'000));
        const QJsonObject stopped = b.get(u"/api/replicas"_s).json.toArray()[0].toObject();
        QVERIFY(!stopped.value(u"alive"_s).toBool());
        QVERIFY(stopped.value(u"stopped_at"_s).isString());
        QCOMPARE(stopped.value(u"owned_conversations"_s).toInt(), 0);
    }

    // The owner renews: 409 naming it; a pause or interrupt through another replica is a
    // cancellation, never an ownership problem, and reaches the owner's run.
    void conflictNamesOwnerAndCancellationCrossesReplicas()
    {
        ServerProcess &a = startReplica(u"alpha"_s);
        ServerProcess &b = startReplica(u"beta"_s);
        const QUuid id = startLongRun(a);
        QVERIFY(!id.isNull());

        const Reply conflict = b.post(conversationPath(id, u"run"_s));
        QCOMPARE(conflict.status, 409);
        QCOMPARE(conflict.object().value(u"code"_s).toString(), u"held_by_other_replica"_s);
        QCOMPARE(conflict.object().value(u"owner"_s).toString(), u"alpha"_s);
        QCOMPARE(conflict.object().value(u"advertise_url"_s).toString(), a.urlText());
        QVERIFY(conflict.object().value(u"detail"_s).toString().contains(u"alpha"_s));
        // The runtime is on alpha: beta says so instead of calling it missing.
        const QJsonObject runtime = b.get(conversationPath(id, u"runtime"_s)).object();
        QCOMPARE(runtime.value(u"runtime_status"_s).toString(), u"ownership_lost"_s);
        QCOMPARE(runtime.value(u"runtime_error"_s).toObject().value(u"code"_s).toString(),
                 u"held_by_other_replica"_s);
        for (const QString &message : {u"run"_s, u"recover"_s}) {
            const Reply refused = b.post(conversationPath(id, message));
            QCOMPARE(refused.status, 409);
            QVERIFY(refused.body.contains("held_by_other_replica"));
        }

        // Answered with the conversation, not an error: no code, no Retry-After. A pause waits
        // for the command to end; the interrupt after it cancels the command.
        const Reply paused = b.post(conversationPath(id, u"pause"_s));
        QCOMPARE(paused.status, 200);
        QVERIFY(!paused.object().contains(u"code"_s));
        QCOMPARE(
            sql(u"SELECT cancel_requested FROM conversations WHERE id = '%1'"_s.arg(wireId(id))),
            u"1"_s);
        const Reply interrupted = b.post(conversationPath(id, u"interrupt"_s));
        QCOMPARE(interrupted.status, 200);
        QVERIFY(!interrupted.object().contains(u"code"_s));
        QCOMPARE(interrupted.object().value(u"id"_s).toString(), wireId(id));
        // Announced: the owner stops well before its next renewal would tell it.
        QElapsedTimer timer;
        timer.start();
        QVERIFY(a.waitForStatus(id, u"paused"_s, 10'000));
        qInfo() << "interrupt through another replica took effect after" << timer.elapsed() << "ms";
        const auto observations = a.events(id);
        QVERIFY(std::any_of(observations.cbegin(), observations.cend(), [](const QJsonObject &e) {
            return e.value(u"kind"_s) == u"ObservationEvent"_s &&
                   e.value(u"observation"_s).toObject().value(u"interrupted"_s).toBool();
        }));
        // Lease released: beta may run it now.
        QCOMPARE(b.post(conversationPath(id, u"run"_s)).status, 200);
    }

    // What only the owner may do is refused elsewhere before anything changes: a run: true
    // message was stored and then refused, so it ran twice when the client sent it to the
    // owner; archive and stopping the runtime left the owner's run going; resume and reprovision
    // started a second sandbox on the running workspace.
    void requestsForARunElsewhereChangeNothing()
    {
        ServerProcess &a = startReplica(u"alpha"_s);
        ServerProcess &b = startReplica(u"beta"_s);
        const QUuid id = startLongRun(a);
        QVERIFY(!id.isNull());
        const qsizetype eventsBefore = a.events(id).size();

        const struct
        {
            QByteArray method;
            QString path;
            QJsonObject body;
        } requests[] = {
            {"POST"_ba, conversationPath(id, u"events"_s), userMessage(u"echo again"_s, true)},
            {"POST"_ba, conversationPath(id, u"archive"_s), {}},
            {"POST"_ba, conversationPath(id, u"runtime/resume"_s), {}},
            {"POST"_ba, conversationPath(id, u"runtime/reprovision"_s), {}},
            {"DELETE"_ba, conversationPath(id, u"runtime"_s), {}},
        };
        for (const auto &request : requests) {
            const Reply refused =
                b.call(request.method, request.path, QJsonDocument(request.body).toJson());
            QVERIFY2(refused.status == 409,
                     qPrintable(request.path + u": "_s + refused.describe()));
            QCOMPARE(refused.object().value(u"code"_s).toString(), u"held_by_other_replica"_s);
        }
        QCOMPARE(a.events(id).size(), eventsBefore);
        const QJsonObject conversation = a.conversation(id);
        QVERIFY(conversation.value(u"archived_at"_s).isNull());
        QCOMPARE(conversation.value(u"execution_status"_s).toString(), u"running"_s);
        QCOMPARE(
            conversation.value(u"runtime_info"_s).toObject().value(u"runtime_status"_s).toString(),
            u"available"_s);
    }

    // A run finished on alpha, and beta is asked to do something with the conversation. An
    // archive, or stopping the runtime, stops alpha's sandbox (it stayed up until its idle
    // timeout). Taking the conversation up there (a run, a resume, a reprovision) runs it in a
    // sandbox of beta's, and stops alpha's too: both stayed up, `available`, until alpha's idle
    // timeout.
    void aSandboxStopsWhenAnotherReplicaStopsItOrTakesTheConversationUp_data()
    {
        QTest::addColumn<QByteArray>("method");
        QTest::addColumn<QString>("action");
        QTest::addColumn<QJsonObject>("body");
        QTest::addColumn<bool>("takenUp");
        QTest::addRow("archive") << "POST"_ba << u"archive"_s << QJsonObject{} << false;
        QTest::addRow("DELETE runtime") << "DELETE"_ba << u"runtime"_s << QJsonObject{} << false;
        QTest::addRow("message with run")
            << "POST"_ba << u"events"_s << userMessage(u"echo again"_s, true) << true;
        QTest::addRow("resume") << "POST"_ba << u"runtime/resume"_s << QJsonObject{} << true;
        QTest::addRow("reprovision")
            << "POST"_ba << u"runtime/reprovision"_s << QJsonObject{} << true;
    }
    void aSandboxStopsWhenAnotherReplicaStopsItOrTakesTheConversationUp()
    {
        QFETCH(QByteArray, method);
        QFETCH(QString, action);
        QFETCH(QJsonObject, body);
        QFETCH(bool, takenUp);
        ServerProcess &a = startReplica(u"alpha"_s, u"local"_s);
        ServerProcess &b = startReplica(u"beta"_s, u"local"_s);
        const QUuid id = finishedRunWithItsSandbox(a);
        QVERIFY(!id.isNull());

        const Reply done = b.call(method, conversationPath(id, action),
                                  body.isEmpty() ? QByteArray() : QJsonDocument(body).toJson());
        QVERIFY2(done.ok(), qPrintable(done.describe()));
        QTRY_VERIFY2_WITH_TIMEOUT(processesWith(sandboxOn(a, id)).isEmpty(),
                                  "the sandbox on alpha is still up", 10'000);
        const auto runtimeStatusOn = [&](ServerProcess &replica) {
            return replica.conversation(id)
                .value(u"runtime_info"_s)
                .toObject()
                .value(u"runtime_status"_s)
                .toString();
        };
        if (takenUp) {
            QVERIFY(b.waitForStatus(id, u"finished"_s));
            QCOMPARE(runtimeStatusOn(b), u"available"_s);
            QVERIFY(!processesWith(sandboxOn(b, id)).isEmpty());
        }
        QCOMPARE(runtimeStatusOn(a), u"missing"_s);
    }

    // SIGTERM: the owner releases its leases; another replica serves /recover at once.
    void sigtermHandsOverWithinOneSecond()
    {
        ServerProcess &a = startReplica(u"alpha"_s);
        ServerProcess &b = startReplica(u"beta"_s);
        const QUuid id = startLongRun(a);
        QVERIFY(!id.isNull());

        QElapsedTimer timer;
        timer.start();
        a.sendSignal(SIGTERM);
        Reply recovered;
        QVERIFY(QTest::qWaitFor(
            [&] {
                recovered = b.post(conversationPath(id, u"recover"_s));
                return recovered.status == 200;
            },
            10'000));
        const qint64 handover = timer.elapsed();
        qInfo() << "handover after SIGTERM:" << handover << "ms";
        QVERIFY2(handover < 1000, qPrintable(u"%1 ms"_s.arg(handover)));
        QVERIFY(a.waitForExit(10'000));
        QCOMPARE(sql(u"SELECT lease_owner LIKE 'beta/%' OR lease_owner IS NULL FROM "
                     "conversations WHERE id = '%1'"_s.arg(wireId(id))),
                 u"t"_s);
    }

    // SIGKILL: 409 while the heartbeat is fresh, then 503 with the seconds left until the lease
    // lapses, then adoption with the next epoch; the runtime is missing but resumable there.
    void sigkillAnswers503UntilTheLeaseLapses()
    {
        ServerProcess &a = startReplica(u"alpha"_s, u"local"_s);
        ServerProcess &b = startReplica(u"beta"_s, u"local"_s);
        const QUuid id = startLongRun(a);
        QVERIFY(!id.isNull());
        const qint64 epochBefore =
            sql(u"SELECT lease_epoch FROM conversations WHERE id = '%1'"_s.arg(wireId(id)))
                .toLongLong();

        QElapsedTimer timer;
        timer.start();
        a.sendSignal(SIGKILL);
        QList<int> answers;
        int unavailable = 0;
        Reply recovered;
        QVERIFY(QTest::qWaitFor(
            [&] {
                recovered = b.post(conversationPath(id, u"recover"_s));
                if (answers.isEmpty() || answers.last() != recovered.status)
                    answers.append(recovered.status);
                if (recovered.status == 503) {
                    ++unavailable;
                    const int retryAfter = recovered.object().value(u"retry_after"_s).toInt(-1);
                    if (retryAfter < 1 || retryAfter > LeaseTtlMs / 1000 ||
                        recovered.object().value(u"owner"_s).toString() != u"alpha"_s ||
                        recovered.object().value(u"code"_s).toString() != u"owner_unresponsive"_s)
                        qWarning() << "unexpected 503:" << recovered.body;
                }
                return recovered.status == 200;
            },
            3 * LeaseTtlMs));
        const qint64 handover = timer.elapsed();
        qInfo() << "handover after SIGKILL:" << handover << "ms; answers" << answers;
        QVERIFY2(handover < LeaseTtlMs + RenewalMs + 500, qPrintable(u"%1 ms"_s.arg(handover)));
        QVERIFY2(unavailable > 0, "the lapsing lease was never reported with 503");
        QCOMPARE(answers.last(), 200);
        for (const int status : answers)
            QVERIFY2(status == 409 || status == 503 || status == 200,
                     qPrintable(u"unexpected status %1"_s.arg(status)));
        QCOMPARE(
            sql(u"SELECT lease_epoch > %1 FROM conversations WHERE id = '%2'"_s.arg(epochBefore)
                    .arg(wireId(id))),
            u"t"_s);
        // The stale run was resolved on beta, which brought up a sandbox of its own. The answer
        // says so, and so does the history (beta's renewal may have resolved the run first,
        // on its own); a second recover has nothing to do.
        const auto events = b.events(id);
        QVERIFY(std::any_of(events.cbegin(), events.cend(), [](const QJsonObject &e) {
            return e.value(u"code"_s) == u"run_interrupted"_s;
        }));
        const QStringList actions =
            AgentDeck::recoveryActionsOf(recovered.object()).value_or(QStringList{u"none"_s});
        QVERIFY2(actions == (QStringList{AgentDeck::RecoveryAction::ResolvedStaleRun,
                                         AgentDeck::RecoveryAction::StartedRuntime}) ||
                     actions == QStringList{AgentDeck::RecoveryAction::StartedRuntime},
                 qPrintable(actions.join(u", "_s)));
        QCOMPARE(recoveryActionsIn(events), actions);
        QCOMPARE(AgentDeck::recoveryActionsOf(b.post(conversationPath(id, u"recover"_s)).object())
                     .value_or(QStringList{u"none"_s}),
                 QStringList{});
        const QJsonObject runtime = b.get(conversationPath(id, u"runtime"_s)).object();
        QVERIFY2(runtime.value(u"runtime_status"_s) == u"available"_s ||
                     runtime.value(u"runtime_status"_s) == u"missing"_s,
                 QJsonDocument(runtime).toJson().constData());
        QVERIFY(runtime.value(u"can_resume"_s).toBool());
    }

    // Nobody touches a conversation whose replica died: another replica resolves it anyway once
    // the lease lapses (paused, the interrupted command said so, run_interrupted).
    void runsOfADeadReplicaAreResolvedWithoutARequest()
    {
        ServerProcess &a = startReplica(u"alpha"_s);
        ServerProcess &b = startReplica(u"beta"_s);
        const QUuid id = startLongRun(a);
        QVERIFY(!id.isNull());
        QElapsedTimer timer;
        timer.start();
        a.sendSignal(SIGKILL);
        QVERIFY(a.waitForExit(10'000));
        QVERIFY2(
            QTest::qWaitFor(
                [&] {
                    return sql(u"SELECT execution_status FROM conversations WHERE id = '%1'"_s.arg(
                               wireId(id))) == u"paused"_s;
                },
                3 * LeaseTtlMs),
            qPrintable(b.stderrText().right(2000)));
        qInfo() << "resolved without a request" << timer.elapsed() << "ms after SIGKILL";
        const auto events = b.events(id);
        QVERIFY(std::any_of(events.cbegin(), events.cend(), [](const QJsonObject &e) {
            return e.value(u"code"_s) == u"run_interrupted"_s;
        }));
        QVERIFY(std::any_of(events.cbegin(), events.cend(), [](const QJsonObject &e) {
            return e.value(u"observation"_s).toObject().value(u"interrupted"_s).toBool();
        }));
        // Resolved and released: any replica may run it now.
        QCOMPARE(
            sql(u"SELECT lease_owner IS NULL FROM conversations WHERE id = '%1'"_s.arg(wireId(id))),
            u"t"_s);
    }

    // A replica died with a command running in its sandbox, and another resolved the run as
    // interrupted. The sandbox outlived its server, and the command ran on, next to the other
    // replica's new runs on the same workspace, until the replica came back and adopted the
    // sandbox. Now the sandbox stops the command when its server stops renewing the lease, so
    // the interrupted observation the other replica writes is true; the replica, restarted,
    // writes nothing about it.
    void aDeadReplicasCommandStopsWithItsLease()
    {
        const QString alphaDir = m_fleet.newDataDir();
        ServerProcess &a = startReplica(u"alpha"_s, u"local"_s, true, LeaseTtlMs, alphaDir);
        ServerProcess &b = startReplica(u"beta"_s);
        QByteArray marker;
        const QUuid id = startMarkedCommand(a, &marker);
        QVERIFY(!id.isNull());
        a.kill();
        QVERIFY(QTest::qWaitFor([&] { return b.status(id) == u"paused"_s; }, 3 * LeaseTtlMs));
        // Gone before the lease lapsed; a renewal interval more for a loaded machine.
        QVERIFY2(endWithin(marker, RenewalMs), "the command outlived its server's lease");
        const qsizetype eventsBefore = b.events(id).size();

        // The same replica again, on the same data dir: it adopts the sandbox.
        ServerProcess &again = startReplica(u"alpha"_s, u"local"_s, true, LeaseTtlMs, alphaDir);
        QVERIFY2(again.isRunning(), qPrintable(again.stderrText().right(2000)));
        QCOMPARE(b.events(id).size(), eventsBefore); // nothing written about it again
        QCOMPARE(b.status(id), u"paused"_s);
    }

    // A command that runs longer than the sandbox waits for word from its server: the server's
    // renewals reach the sandbox, and the command runs to its end.
    void aCommandLongerThanTheLeaseRunsToItsEnd()
    {
        ServerProcess &a = startReplica(u"alpha"_s, u"local"_s);
        const QUuid id = a.create(
            shellConversation(u"sleep %1; echo done"_s.arg(LeaseTtlMs / 1000.0 + 0.5), true));
        QVERIFY(!id.isNull());
        QVERIFY(a.waitForStatus(id, u"finished"_s, 20'000));
        const QList<QJsonObject> events = a.events(id);
        const auto observation =
            std::find_if(events.cbegin(), events.cend(), [](const QJsonObject &event) {
                return event.value(u"kind"_s) == u"ObservationEvent"_s;
            });
        QVERIFY(observation != events.cend());
        const QJsonObject result = observation->value(u"observation"_s).toObject();
        QVERIFY2(!result.value(u"interrupted"_s).toBool(),
                 qPrintable(result.value(u"output"_s).toString()));
        QCOMPARE(result.value(u"output"_s).toString(), u"done\n"_s);
    }

    // Frozen past its lease, the owner cannot stop its command, and the replica that takes
    // over starts a sandbox of its own: the command ran on next to that replica's. The sandbox
    // stops it by the time the lease can be taken.
    void aFrozenOwnersCommandStopsBeforeAnotherReplicaTakesOver()
    {
        ServerProcess &a = startReplica(u"alpha"_s, u"local"_s);
        ServerProcess &b = startReplica(u"beta"_s);
        QByteArray marker;
        const QUuid id = startMarkedCommand(a, &marker);
        QVERIFY(!id.isNull());
        a.sendSignal(SIGSTOP);
        QVERIFY(QTest::qWaitFor(
            [&] { return b.post(conversationPath(id, u"recover"_s)).status == 200; },
            3 * LeaseTtlMs));
        const bool stopped = endWithin(marker, RenewalMs);
        a.sendSignal(SIGCONT);
        QVERIFY2(stopped, "the frozen owner's command ran on after its lease");
        // The shell command cut short is offered again rather than reported as a finish.
        QCOMPARE(b.status(id), u"paused"_s);
        const QJsonObject outcome = b.conversation(id).value(u"outcome"_s).toObject();
        QCOMPARE(outcome.value(u"kind"_s).toString(), u"interrupted"_s);
        QCOMPARE(outcome.value(u"interrupted_by"_s).toString(), u"takeover"_s);
    }

    // The owner was frozen, another replica archived the conversation once the lease had
    // lapsed, and the owner woke: its run stopped, fenced off, but its sandbox stayed up,
    // `available`, until its idle timeout. The archive's release reached it while the fenced
    // run was still registered, and was ignored.
    void aRunThatLostItsLeaseLetsItsSandboxGo()
    {
        ServerProcess &a = startReplica(u"alpha"_s, u"local"_s);
        ServerProcess &b = startReplica(u"beta"_s);
        const QUuid id = startLongRun(a);
        QVERIFY(!id.isNull());
        const QByteArray hostMarker = "sandbox-host";
        const auto hostsOf = [&] {
            QList<pid_t> hosts;
            for (const pid_t pid : processesWith(wireId(id).toLatin1())) {
                QFile cmdline(u"/proc/%1/cmdline"_s.arg(pid));
                if (cmdline.open(QIODevice::ReadOnly) && cmdline.readAll().contains(hostMarker))
                    hosts.append(pid);
            }
            return hosts;
        };
        QVERIFY(!hostsOf().isEmpty());
        a.sendSignal(SIGSTOP);
        QVERIFY(QTest::qWaitFor(
            [&] { return b.post(conversationPath(id, u"archive"_s)).status == 200; },
            3 * LeaseTtlMs));
        // Archived means stopped: the run is resolved, not left to go on when its owner wakes.
        QCOMPARE(b.status(id), u"paused"_s);
        a.sendSignal(SIGCONT);
        const bool gone = QTest::qWaitFor([&] { return hostsOf().isEmpty(); }, 3 * LeaseTtlMs);
        for (const pid_t pid : hostsOf())
            ::kill(pid, SIGKILL);
        QVERIFY2(gone, qPrintable(a.stderrText().right(2000)));
    }

    // Frozen past its TTL, adopted elsewhere, resumed: the zombie writes nothing more, and does
    // not release or overwrite the new owner's state.
    void sigstoppedOwnerIsFencedOff()
    {
        ServerProcess &a = startReplica(u"alpha"_s);
        ServerProcess &b = startReplica(u"beta"_s);
        const QUuid id = startLongRun(a);
        QVERIFY(!id.isNull());

        a.sendSignal(SIGSTOP);
        QVERIFY(QTest::qWaitFor(
            [&] { return b.post(conversationPath(id, u"recover"_s)).status == 200; },
            3 * LeaseTtlMs));
        const QString where = u"WHERE conversation_id = '%1'"_s.arg(wireId(id));
        const qint64 adoptedEpoch =
            sql(u"SELECT lease_epoch FROM conversations WHERE id = '%1'"_s.arg(wireId(id)))
                .toLongLong();
        // Beta keeps the conversation busy with a run of its own while alpha wakes up. (The
        // recovered shell command was offered again, not continued.)
        QCOMPARE(b.status(id), u"paused"_s);
        QVERIFY(b.post(conversationPath(id, u"events"_s), userMessage(u"sleep 30"_s, true)).ok());
        QVERIFY(QTest::qWaitFor([&] { return b.status(id) == u"running"_s; }, 10'000));
        const qint64 ownerEpoch =
            sql(u"SELECT lease_epoch FROM conversations WHERE id = '%1'"_s.arg(wireId(id)))
                .toLongLong();
        const QString ownerBefore =
            sql(u"SELECT lease_owner FROM conversations WHERE id = '%1'"_s.arg(wireId(id)));
        const QString countBefore = sql(u"SELECT COUNT(*) FROM events "_s + where);

        a.sendSignal(SIGCONT);
        QVERIFY2(QTest::qWaitFor(
                     [&] {
                         return a.stderrText().contains(u"lease lost"_s) ||
                                a.stderrText().contains(u"lost its lease"_s);
                     },
                     5 * LeaseTtlMs),
                 qPrintable(a.stderrText()));
        // Alpha is alive and well, and wrote nothing more.
        QCOMPARE(a.get(u"/alive"_s).status, 200);
        QCOMPARE(sql(u"SELECT COUNT(*) FROM events "_s + where), countBefore);
        QCOMPARE(sql(u"SELECT lease_owner FROM conversations WHERE id = '%1'"_s.arg(wireId(id))),
                 ownerBefore);
        QCOMPARE(sql(u"SELECT lease_epoch FROM conversations WHERE id = '%1'"_s.arg(wireId(id)))
                     .toLongLong(),
                 ownerEpoch);
        QCOMPARE(b.status(id), u"running"_s);
        // Every event after the adoption carries the new epochs, in seq order.
        QCOMPARE(sql(u"SELECT COUNT(*) FROM events "_s + where +
                     u" AND seq > (SELECT MIN(seq) FROM events "_s + where +
                     u" AND epoch >= %1) AND epoch < %1"_s.arg(adoptedEpoch)),
                 u"0"_s);
        QCOMPARE(sql(u"SELECT COUNT(*) FROM events e1 JOIN events e2 ON e1.conversation_id = "
                     "e2.conversation_id AND e2.seq > e1.seq AND e2.epoch < e1.epoch "
                     "WHERE e1.conversation_id = '%1'"_s.arg(wireId(id))),
                 u"0"_s);
        QCOMPARE(b.post(conversationPath(id, u"interrupt"_s)).status, 200);
    }

    // Replicas with different lease TTLs: each heartbeat is judged by the window of the replica
    // that beats. One with a short TTL took one with a longer TTL, which beats less often, for
    // stopped between its beats: 503 owner_unresponsive for its runs, `alive: false`.
    void aReplicaIsJudgedByItsOwnLeaseTtl()
    {
        ServerProcess &slow = startReplica(u"alpha"_s, u"process"_s, true, 10 * LeaseTtlMs);
        ServerProcess &quick = startReplica(u"beta"_s);
        const QUuid id = startLongRun(slow);
        QVERIFY(!id.isNull());
        // Past beta's window (half its TTL) since alpha's last beat, within alpha's.
        QVERIFY(QTest::qWaitFor(
            [&] {
                return sql(u"SELECT COUNT(*) FROM replicas WHERE id = 'alpha' AND heartbeat_at < "
                           "agentdeck_now_ms() - %1"_s.arg(LeaseTtlMs))
                           .trimmed() == u"1"_s;
            },
            10 * LeaseTtlMs / 3 + 1000));
        const Reply conflict = quick.post(conversationPath(id, u"run"_s));
        QCOMPARE(conflict.status, 409);
        QCOMPARE(conflict.object().value(u"code"_s).toString(), u"held_by_other_replica"_s);
        for (const QJsonValue &replica : quick.get(u"/api/replicas"_s).json.toArray())
            QVERIFY2(replica.toObject().value(u"alive"_s).toBool(),
                     QJsonDocument(replica.toObject()).toJson().constData());
        QCOMPARE(slow.post(conversationPath(id, u"interrupt"_s)).status, 200);
    }

    // Frozen past the liveness window, a replica's id may be taken by a server started with it.
    // Woken, the first one went on under the same id, unseen in /replicas (its heartbeats
    // changed nothing) and starting runs of its own; it stops now, and says why. So does a
    // console whose embedded server is the replica.
    void aReplicaWhoseIdWasTakenWhileItWasFrozenStops_data()
    {
        QTest::addColumn<bool>("console");
        QTest::addRow("headless") << false;
        QTest::addRow("console") << true;
    }
    void aReplicaWhoseIdWasTakenWhileItWasFrozenStops()
    {
        QFETCH(bool, console);
        ServerProcess &first =
            startReplica(u"alpha"_s, u"process"_s, true, LeaseTtlMs, {}, console);
        QVERIFY2(first.isRunning(), qPrintable(first.stderrText()));
        first.sendSignal(SIGSTOP);
        QVERIFY(QTest::qWaitFor(
            [&] {
                return sql(u"SELECT COUNT(*) FROM replicas WHERE id = 'alpha' AND heartbeat_at < "
                           "agentdeck_now_ms() - %1"_s.arg(LeaseTtlMs))
                           .trimmed() == u"1"_s;
            },
            5 * LeaseTtlMs));
        ServerProcess &second = startReplica(u"alpha"_s);
        QVERIFY2(second.get(u"/ready"_s).status == 200, qPrintable(second.stderrText()));

        first.sendSignal(SIGCONT);
        QVERIFY2(first.waitForExit(5 * LeaseTtlMs), qPrintable(first.stderrText().right(2000)));
        QCOMPARE(first.exitStatus(), QProcess::NormalExit);
        QCOMPARE(first.exitCode(), 1);
        QVERIFY2(first.stderrText().contains(u"replica id alpha was taken over"_s),
                 qPrintable(first.stderrText().right(2000)));
        // The server that took the id goes on as the replica.
        QCOMPARE(second.get(u"/ready"_s).status, 200);
        const QJsonArray replicas = second.get(u"/api/replicas"_s).json.toArray();
        QCOMPARE(replicas.size(), 1);
        QCOMPARE(replicas.first().toObject().value(u"is_self"_s).toBool(), true);
    }

    // The same conversation_id created through two replicas at the same moment: the loser's
    // insert met the winner's row, and it answered 503 storage_unavailable, "retry shortly".
    // In the bug hunt the race came in 25 of 40 rounds.
    void aCreateRaceIsAnsweredWithTheConversation()
    {
        ServerProcess &a = startReplica(u"alpha"_s);
        ServerProcess &b = startReplica(u"beta"_s);
        for (int round = 0; round < 20; ++round) {
            const QString id = wireId(QUuid::createUuid());
            QUrl first = a.url();
            first.setPath(u"/api/conversations"_s);
            QUrl second = b.url();
            second.setPath(u"/api/conversations"_s);
            const QList<Reply> replies = postTogether(
                {first, second},
                QJsonDocument(QJsonObject{{u"conversation_id"_s, id},
                                          {u"agent"_s, QJsonObject{{u"kind"_s, u"shell"_s}}}})
                    .toJson(QJsonDocument::Compact));
            QList<int> statuses{replies[0].status, replies[1].status};
            std::sort(statuses.begin(), statuses.end());
            QVERIFY2(statuses == (QList<int>{200, 201}),
                     qPrintable(replies[0].describe() + u" / "_s + replies[1].describe()));
            QCOMPARE(replies[0].object().value(u"id"_s).toString(), id);
            QCOMPARE(replies[1].object().value(u"id"_s).toString(), id);
        }
    }

    // A second server started with a live replica's id (a copied configuration) took its
    // leases at once and interrupted its runs, and pushed it out of /api/replicas. It is
    // refused; a restart of a replica that died still adopts its leases.
    void aSecondServerWithALiveReplicasIdIsRefused()
    {
        ServerProcess &a = startReplica(u"alpha"_s);
        const QUuid id = startLongRun(a);
        QVERIFY(!id.isNull());
        ServerProcess &twin = startReplica(u"alpha"_s, u"process"_s, false);
        QVERIFY(twin.waitForExit(15'000));
        QVERIFY2(twin.stderrText().contains(u"replica id alpha is in use by a server that is "
                                            "running"_s),
                 qPrintable(twin.stderrText()));
        QCOMPARE(a.status(id), u"running"_s);
        const QString owner =
            sql(u"SELECT lease_owner FROM conversations WHERE id = '%1'"_s.arg(wireId(id)));
        QVERIFY(owner.startsWith(u"alpha/"_s));

        a.kill();
        ServerProcess &again = startReplica(u"alpha"_s);
        QVERIFY2(again.get(u"/ready"_s).status == 200, qPrintable(again.stderrText()));
        QVERIFY(again.waitForStatus(id, u"paused"_s, 10'000));
    }

    // A replica frozen inside a transaction held the conversation's row lock, and the other
    // replicas' requests for it, their sweeps of lapsed runs, and then everything else waited
    // for it, `/alive` too. Here the test's own session takes the lock and sends nothing more.
    void aRowLockHeldElsewhereIsAnswered503AndHoldsUpNothingElse()
    {
        ServerProcess &b = startReplica(u"beta"_s);
        const QUuid id = b.create(shellConversation(u"true"_s, false));
        QVERIFY(!id.isNull());
        QString error;
        const std::unique_ptr<AgentDeck::Database> holder = AgentDeck::Database::openPostgres(
            m_databaseUrl, &error, AgentDeck::Database::Migrations::Skip,
            AgentDeck::PostgresTimeouts{std::chrono::milliseconds(500),
                                        std::chrono::milliseconds(0)});
        QVERIFY2(holder, qPrintable(error));
        holder->begin();
        QSqlQuery lock = holder->prepare(u"SELECT id FROM conversations WHERE id = ? FOR UPDATE"_s);
        lock.addBindValue(wireId(id));
        holder->exec(lock);
        lock.finish();

        const Reply locked =
            b.post(conversationPath(id, u"events"_s), userMessage(u"echo again"_s, false));
        QCOMPARE(locked.status, 503);
        QCOMPARE(locked.object().value(u"code"_s).toString(), u"conversation_locked"_s);
        QCOMPARE(b.get(u"/alive"_s).status, 200);
        QVERIFY(b.get(conversationPath(id, {})).ok()); // reads take no lock
        holder->rollback();
        QVERIFY(
            b.post(conversationPath(id, u"events"_s), userMessage(u"echo again"_s, false)).ok());
    }

    // Two replicas asked to run the same conversation at the same moment: one runs it, the
    // other answers 409 naming the winner. A hundred times.
    void claimRaceHasOneWinner()
    {
        ServerProcess &a = startReplica(u"alpha"_s);
        ServerProcess &b = startReplica(u"beta"_s);
        int wonByAlpha = 0;
        for (int round = 0; round < 100; ++round) {
            const QUuid id = a.create(shellConversation(u"sleep 30"_s, false));
            QVERIFY(!id.isNull());
            const QList<Reply> replies =
                postTogether({a.url().resolved(QUrl(conversationPath(id, u"run"_s))),
                              b.url().resolved(QUrl(conversationPath(id, u"run"_s)))});
            const QList<int> statuses{replies[0].status, replies[1].status};
            QVERIFY2((statuses == QList<int>{200, 409} || statuses == QList<int>{409, 200}),
                     qPrintable(u"round %1: %2 / %3"_s.arg(round).arg(
                         QString::fromUtf8(replies[0].body), QString::fromUtf8(replies[1].body))));
            const bool alphaWon = statuses[0] == 200;
            wonByAlpha += alphaWon;
            const Reply &loser = replies[alphaWon ? 1 : 0];
            QCOMPARE(loser.object().value(u"owner"_s).toString(),
                     alphaWon ? u"alpha"_s : u"beta"_s);
            ServerProcess &winner = alphaWon ? a : b;
            QCOMPARE(winner.post(conversationPath(id, u"interrupt"_s)).status, 200);
            QVERIFY(winner.waitForStatus(id, u"paused"_s, 10'000));
        }
        qInfo() << "alpha won" << wonByAlpha << "of 100 races";
    }

    // Reads on every replica, and live events written by one streamed by another.
    void eventsWrittenByOneReplicaStreamFromAnother()
    {
        ServerProcess &a = startReplica(u"alpha"_s);
        ServerProcess &b = startReplica(u"beta"_s);
        const QUuid id = a.create(QJsonObject{{u"agent"_s, QJsonObject{{u"kind"_s, u"echo"_s}}},
                                              {u"title"_s, u"Shared Catalog"_s},
                                              {u"tags"_s, QJsonObject{{u"team"_s, u"ops"_s}}}});
        QVERIFY(!id.isNull());
        QUrlQuery query;
        query.addQueryItem(u"tag"_s, u"team:ops"_s);
        query.addQueryItem(u"q"_s, u"shared"_s);
        const Reply found = b.get(u"/api/conversations/search"_s, query);
        QCOMPARE(found.object().value(u"items"_s).toArray().size(), 1);

        QWebSocket socket;
        QList<qint64> seqs;
        QVERIFY(openStream(socket, b, id, u"resend_all=true"_s, &seqs));

        constexpr int Messages = 20;
        for (int i = 0; i < Messages; ++i)
            QVERIFY(a.post(conversationPath(id, u"events"_s),
                           userMessage(u"hello %1"_s.arg(i), i == Messages - 1))
                        .ok());
        QVERIFY(a.waitForStatus(id, u"finished"_s, 15'000));
        const qint64 total =
            a.conversation(id).value(u"stats"_s).toObject().value(u"event_count"_s).toInteger();
        QVERIFY(total > Messages);
        QVERIFY2(QTest::qWaitFor([&] { return seqs.size() >= total; }, 10'000),
                 qPrintable(u"%1 of %2 frames"_s.arg(seqs.size()).arg(total)));
        for (qsizetype i = 0; i < seqs.size(); ++i)
            QCOMPARE(seqs[i], i + 1);

        // A deletion on alpha ends beta's stream.
        QSignalSpy closed(&socket, &QWebSocket::disconnected);
        QCOMPARE(a.call("DELETE"_ba, conversationPath(id)).status, 200);
        QVERIFY(QTest::qWaitFor([&] { return !closed.isEmpty(); }, 10'000));
        QCOMPARE(int(socket.closeCode()), 4004);
        QCOMPARE(b.get(conversationPath(id)).status, 404);
    }

    // A deletion announced while a replica's listening connection was down was never heard
    // there: its streams of the conversation stayed open on nothing. The listener, once back,
    // finds the conversation gone.
    void aDeletionMissedByAListenerIsNoticedWhenItIsBack()
    {
        ServerProcess &a = startReplica(u"alpha"_s);
        ServerProcess &b = startReplica(u"beta"_s);
        const QUuid id = a.create({});
        QVERIFY(!id.isNull());
        QWebSocket socket;
        QList<qint64> seqs;
        QVERIFY(openStream(socket, b, id, {}, &seqs));
        QSignalSpy closed(&socket, &QWebSocket::disconnected);

        // The listeners are the connections whose last statement was LISTEN or the watchdog's
        // probe; a replica notices the loss at its next probe, within 5 s.
        QCOMPARE(sql(u"SELECT count(pg_terminate_backend(pid)) > 0 FROM pg_stat_activity WHERE "
                     "application_name = 'agentdeck' AND state = 'idle' AND "
                     "(query LIKE 'LISTEN%' OR query = 'SELECT 1')"_s)
                     .trimmed(),
                 u"t"_s);
        QCOMPARE(a.call("DELETE"_ba, conversationPath(id)).status, 200);
        QVERIFY2(QTest::qWaitFor([&] { return !closed.isEmpty(); }, 15'000),
                 qPrintable(b.stderrText().right(2000)));
        QCOMPARE(int(socket.closeCode()), 4004);
        QVERIFY(b.stderrText().contains(u"change listener reconnected"_s));
    }

    // The database restarts under two replicas: requests fail (503, never a crash) until the
    // replicas reconnect, then everything works again, live streams across replicas included.
    void replicasReconnectAfterADatabaseRestart()
    {
        ServerProcess &a = startReplica(u"alpha"_s);
        ServerProcess &b = startReplica(u"beta"_s);
        const QUuid id = a.create(QJsonObject{{u"agent"_s, QJsonObject{{u"kind"_s, u"echo"_s}}}});
        QVERIFY(!id.isNull());
        QWebSocket socket;
        QList<qint64> seqs;
        QVERIFY(openStream(socket, b, id, {}, &seqs));

        QString error;
        QVERIFY2(m_cluster.restart(&error), qPrintable(error));
        for (ServerProcess *replica : {&a, &b}) {
            QVERIFY2(QTest::qWaitFor(
                         [&] {
                             const int status = replica->get(conversationPath(id)).status;
                             if (status != 200 && status != 503)
                                 qWarning() << "unexpected status" << status;
                             return status == 200;
                         },
                         20'000),
                     qPrintable(replica->stderrText().right(2000)));
            QCOMPARE(replica->get(u"/alive"_s).status, 200);
        }
        // Events written by alpha reach beta's stream again once its listener reconnected.
        QVERIFY(
            a.post(conversationPath(id, u"events"_s), userMessage(u"after restart"_s, true)).ok());
        QVERIFY(a.waitForStatus(id, u"finished"_s, 15'000));
        const qint64 total =
            a.conversation(id).value(u"stats"_s).toObject().value(u"event_count"_s).toInteger();
        // Written while beta's listener may still be down: it catches up when it reconnects.
        QVERIFY2(QTest::qWaitFor([&] { return !seqs.isEmpty() && seqs.last() == total; }, 20'000),
                 qPrintable(b.stderrText().right(2000)));
        QVERIFY(total > 0);
        for (qsizetype i = 0; i < seqs.size(); ++i)
            QCOMPARE(seqs[i], i + 1);
    }

    // A delete a replica left half done (killed, or stopped mid-way) is finished by another
    // one: only a restart of that replica's data dir finished it, and the id stayed refused
    // (409 conversation_being_deleted) for good when that never came.
    void aDeleteLeftHalfDoneIsFinishedByAnotherReplica()
    {
        ServerProcess &b = startReplica(u"beta"_s);
        const QUuid id = b.create(shellConversation(u"echo hi"_s, true));
        QVERIFY(!id.isNull());
        QVERIFY(b.waitForStatus(id, u"finished"_s));
        // As a replica killed during the delete leaves it: marked, by a process that is gone.
        sql(u"INSERT INTO pending_deletes (conversation_id, deleter) VALUES ('%1', 'gone/1')"_s.arg(
            wireId(id)));
        QCOMPARE(b.get(conversationPath(id)).status, 404);
        QVERIFY2(
            QTest::qWaitFor(
                [&] { return sql(u"SELECT COUNT(*) FROM pending_deletes"_s).trimmed() == u"0"_s; },
                10'000),
            qPrintable(b.stderrText().right(2000)));
        QCOMPARE(sql(u"SELECT COUNT(*) FROM events WHERE conversation_id = '%1'"_s.arg(wireId(id)))
                     .trimmed(),
                 u"0"_s);
        QJsonObject again = shellConversation(u"echo again"_s, false);
        again.insert(u"conversation_id"_s, wireId(id));
        Reply created;
        QVERIFY(!b.create(again, &created).isNull());
        QCOMPARE(created.status, 201);
    }

    // The first request after a database restart reconnects and succeeds: a transaction used
    // to fail with 503 on every replica, once per restart, and so did a search or a batch get
    // (their statement's prepare). (A long TTL: no renewal or heartbeat comes first to find the
    // connection gone.)
    void theFirstRequestAfterADatabaseRestartSucceeds_data()
    {
        QTest::addColumn<QString>("request");
        QTest::addRow("a create") << u"create"_s;
        QTest::addRow("a search") << u"search"_s;
        QTest::addRow("a batch get") << u"batch"_s;
    }
    void theFirstRequestAfterADatabaseRestartSucceeds()
    {
        QFETCH(QString, request);
        ServerProcess &a = startReplica(u"alpha"_s, u"process"_s, true, 60'000);
        const QUuid id = a.create({});
        QVERIFY(!id.isNull());
        QString error;
        QVERIFY2(m_cluster.restart(&error), qPrintable(error));
        Reply reply;
        if (request == u"create"_s) {
            QVERIFY2(!a.create({}, &reply).isNull(), qPrintable(reply.describe()));
            return;
        }
        reply = request == u"search"_s
                    ? a.get(u"/api/conversations/search"_s, QUrlQuery(u"limit=5"_s))
                    : a.get(u"/api/conversations"_s, QUrlQuery{{u"ids"_s, wireId(id)}});
        QVERIFY2(reply.status == 200, qPrintable(reply.describe()));
    }

    // A command that ends while the database restarts, or while it is down, is recorded once
    // the database is back: the run finishes and nothing runs twice. The run used to end in
    // `error`, its command's output lost and the command run again by the next /run.
    void aRunOutlastsADatabaseOutage_data()
    {
        QTest::addColumn<bool>("downWhenItEnds");
        QTest::addRow("restarted during the command") << false;
        QTest::addRow("down when the command ends") << true;
    }
    void aRunOutlastsADatabaseOutage()
    {
        QFETCH(bool, downWhenItEnds);
        ServerProcess &a = startReplica(u"alpha"_s);
        const QUuid id = a.create(shellConversation(
            u"echo ran >> counter; while [ ! -e gate ]; do sleep 0.05; done; echo done"_s, true));
        QVERIFY(!id.isNull());
        const QString workspace =
            a.conversation(id).value(u"workspace"_s).toObject().value(u"working_dir"_s).toString();
        QTRY_VERIFY_WITH_TIMEOUT(QFile::exists(workspace + u"/counter"_s), 10'000);
        QString error;
        if (downWhenItEnds) {
            QVERIFY2(m_cluster.pause(&error), qPrintable(error));
            QVERIFY(QFile(workspace + u"/gate"_s).open(QIODevice::WriteOnly));
            QTRY_VERIFY_WITH_TIMEOUT(a.stderrText().contains(u"retrying while storage is back"_s),
                                     10'000);
            // Down for a while: a lease renewal fails too (within a second).
            QTRY_VERIFY_WITH_TIMEOUT(a.stderrText().contains(u"lease renewal failed"_s), 10'000);
            QVERIFY2(m_cluster.resume(&error), qPrintable(error));
        } else {
            QVERIFY2(m_cluster.restart(&error), qPrintable(error));
            QVERIFY(QFile(workspace + u"/gate"_s).open(QIODevice::WriteOnly));
        }
        QVERIFY2(a.waitForStatus(id, u"finished"_s, 20'000),
                 qPrintable(a.stderrText().right(2000)));
        const QList<QJsonObject> observations = ofKind(a.events(id), u"ObservationEvent"_s);
        QCOMPARE(observations.size(), 1);
        QCOMPARE(
            observations.first().value(u"observation"_s).toObject().value(u"output"_s).toString(),
            u"done\n"_s);
        QFile counter(workspace + u"/counter"_s);
        QVERIFY(counter.open(QIODevice::ReadOnly));
        QCOMPARE(counter.readAll(), "ran\n"_ba);
    }

    // SIGTERM while the database is down: the leases cannot be handed over and lapse instead,
    // and the replica still stops (it used to stay up, serving nothing, for good).
    void sigtermWhileTheDatabaseIsDownStillStops()
    {
        ServerProcess &a = startReplica(u"alpha"_s);
        const QUuid id = startLongRun(a);
        QVERIFY(!id.isNull());
        QString error;
        QVERIFY2(m_cluster.pause(&error), qPrintable(error));
        a.sendSignal(SIGTERM);
        const bool exited = a.waitForExit(15'000);
        QVERIFY2(m_cluster.resume(&error), qPrintable(error));
        QVERIFY2(exited, qPrintable(a.stderrText().right(2000)));
        QCOMPARE(a.exitStatus(), QProcess::NormalExit);
        QCOMPARE(a.exitCode(), 0);
        QVERIFY(a.stderrText().contains(u"lapse after their TTL"_s));

        // The next replica resolves the run once the lease has lapsed.
        ServerProcess &b = startReplica(u"beta"_s);
        QVERIFY(b.waitForStatus(id, u"paused"_s, 15'000));
    }

private:
    ServerFleet m_fleet;
    PostgresCluster m_cluster;
    int m_databases = 0;
    QString m_databaseName;
    QUrl m_databaseUrl;
};

QTEST_GUILESS_MAIN(SystemReplicasTest)
#include "tst_system_replicas.moc"
