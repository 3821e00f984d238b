// `--runtime docker` end to end: the real binary against a dockerd of the test's own (no bridge,
// no iptables, its own data and socket) and an image imported from busybox-static and the host's
// bash, so no registry and no network are involved. Root only, as dockerd is.
#include <QJsonArray>
#include <QJsonObject>
#include <QTest>

#include <QCoroTask>

#include "dockerdaemon.h"
#include "runtime/dockerengine.h"
#include "runtime/sandboxcontainers.h"
#include "serverprocess.h"

#include <unistd.h>

using namespace Qt::StringLiterals;
using namespace std::chrono_literals;
using namespace AgentDeck;
using namespace AgentDeck::Testing;

namespace {

const QString TestImage = QString::fromLatin1(DockerDaemon::TestImage);
constexpr qint64 Memory = 64 * 1024 * 1024;

QJsonObject runtimeInfo(ServerProcess &server, const QUuid &id)
{
    return server.conversation(id).value(u"runtime_info"_s).toObject();
}

} // namespace

class SystemDockerTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void cleanup();
    void cleanupTestCase();

    void commandsRunInTheConversationsContainer();
    void limitsHoldForTheWholeSandbox();
    void whatACommandLeavesEndsWithIt();
    void adoptedAfterAServerIsKilled();
    void aContainerLeftAloneStops();
    void theNextCommandsExecWaitsReady();
    void containersGoWithTheirConversations();
    void idleContainersCostNothingAndComeBack();
    void imagesAreTheOperators();
    void engineProblemsAreClearErrors();
    void aRemoteEngineOverTls();

private:
    ServerProcess &dockerServer(const QStringList &more = {}, const QString &dataDir = {});
    // The containers of the conversation on the engine (by its label).
    QJsonArray containersOf(const QUuid &id);

    ServerFleet m_fleet;
    DockerDaemon m_daemon;
    std::unique_ptr<DockerEngine> m_engine;
};

void SystemDockerTest::initTestCase()
{
    if (::geteuid() != 0)
        QSKIP("dockerd runs as root only");
    QString problem;
    QVERIFY2(m_fleet.findBinary(&problem), qPrintable(problem));
    QVERIFY2(m_daemon.startWithTestImage(&problem, true), qPrintable(problem));
    m_engine = m_daemon.client();
}

void SystemDockerTest::cleanup()
{
    m_fleet.cleanUp();
}

void SystemDockerTest::cleanupTestCase()
{
    m_engine.reset();
    m_daemon.stop();
}

ServerProcess &SystemDockerTest::dockerServer(const QStringList &more, const QString &dataDir)
{
    return m_fleet.add(dataDir, QStringList{u"--runtime"_s, u"docker"_s, u"--docker-host"_s,
                                            m_daemon.host(), u"--sandbox-image"_s, TestImage} +
                                    more);
}

QJsonArray SystemDockerTest::containersOf(const QUuid &id)
{
    return containersLabelled(
        *m_engine,
        {u"%1=%2"_s.arg(QLatin1StringView(SandboxContainers::ConversationLabel), wireId(id))});
}

void SystemDockerTest::commandsRunInTheConversationsContainer()
{
    ServerProcess &server = dockerServer();
    QVERIFY(server.startReady());
    const QUuid id = server.create(shellCreate(
        u"echo uid=$(id -u); pwd; echo home=$HOME; echo hi > note; cat /proc/1/cmdline | tr '\\0' "
        u"' '; "
        "echo; ls /usr 2>&1; ls $(dirname $(dirname $HOME)) 2>&1; echo $SECRET_NAME"_s,
        QJsonObject{{u"secrets"_s, QJsonObject{{u"SECRET_NAME"_s, u"s3cr3t-value"_s}}}}));
    QVERIFY(server.waitForStatus(id, u"finished"_s));
    const QString output = observations(server, id).value(0);
    const QString workspace =
        server.conversation(id).value(u"workspace"_s).toObject().value(u"working_dir"_s).toString();
    // A uid of the conversation's own (sandboxUid(), not root's, not the host's users'), in its
    // workspace, with its home, in the container.
    static const QRegularExpression uidLine(u"^uid=(\\d+)$"_s, QRegularExpression::MultilineOption);
    QVERIFY2(uidLine.match(output).captured(1).toUInt() >= 1'800'000'000u, qPrintable(output));
    QVERIFY2(output.contains(workspace + u'\n'), qPrintable(output));
    QVERIFY2(output.contains(u"/runtimes/"_s + wireId(id) + u"/home"_s), qPrintable(output));
    QVERIFY2(output.contains(u"docker-init -- /bin/sh"_s), qPrintable(output));
    // Nothing else of the host: not its /usr, not the rest of the data dir (the catalog).
    QVERIFY2(output.contains(u"/usr: No such file or directory"_s), qPrintable(output));
    QVERIFY2(!output.contains(u"agentdeck.db"_s), qPrintable(output));
    // Secrets reach the command and are masked in what it prints.
    QVERIFY2(!output.contains(u"s3cr3t-value"_s), qPrintable(output));
    QCOMPARE(QFile(QDir(workspace).filePath(u"note"_s)).exists(), true);

    const QJsonObject info = runtimeInfo(server, id);
    QCOMPARE(info.value(u"runtime_status"_s).toString(), u"available"_s);
    const QJsonObject sandbox = info.value(u"sandbox"_s).toObject();
    QCOMPARE(sandbox.value(u"isolation"_s).toString(), u"container"_s);
    QCOMPARE(sandbox.value(u"image"_s).toString(), TestImage);

    const QJsonArray containers = containersOf(id);
    QCOMPARE(containers.size(), 1);
    const QJsonObject labels = containers.at(0).toObject().value(u"Labels"_s).toObject();
    QCOMPARE(labels.value(QLatin1StringView(SandboxContainers::RuntimesLabel)).toString(),
             QDir(server.dataDir()).filePath(u"runtimes"_s));
    // What it uses, measured by the engine: in runtime_info and, summed, in /metrics.
    QTRY_VERIFY_WITH_TIMEOUT(runtimeInfo(server, id).contains(u"usage"_s), 20'000);
    const QJsonObject usage = runtimeInfo(server, id).value(u"usage"_s).toObject();
    QVERIFY2(usage.value(u"memory_bytes"_s).toInteger() > 0 &&
                 usage.value(u"processes"_s).toInteger() >= 1 && usage.value(u"at"_s).isString(),
             QJsonDocument(usage).toJson().constData());
    const QByteArray metrics = server.get(u"/metrics"_s).body;
    QVERIFY2(metrics.contains("agentdeck_sandbox_memory_bytes ") &&
                 metrics.contains("agentdeck_sandboxes{state=\"running\"} 1"),
             metrics.constData());

    // The root is the image's and read-only; /tmp is the container's own.
    const QString written = runNext(
        server, id, u"touch /etc/x 2>&1; echo tmp > /tmp/t && cat /tmp/t; unshare -U -r id 2>&1"_s);
    QVERIFY2(written.contains(u"Read-only file system"_s), qPrintable(written));
    QVERIFY2(written.contains(u"tmp\n"_s), qPrintable(written));
    // No user namespace of its own, as with bubblewrap.
    QVERIFY2(written.contains(u"unshare(0x10000000): Operation not permitted"_s),
             qPrintable(written));
}

void SystemDockerTest::limitsHoldForTheWholeSandbox()
{
    ServerProcess &server = dockerServer(
        {u"--sandbox-memory"_s, QString::number(Memory), u"--sandbox-processes"_s, u"48"_s});
    QVERIFY(server.startReady());
    // Memory held by one process past the limit: the kernel's OOM killer, named.
    const QUuid id =
        server.create(shellCreate(u"x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo ${#x}"_s));
    QVERIFY(server.waitForStatus(id, u"paused"_s) || server.status(id) == u"finished"_s);
    const QString oom = observations(server, id).value(0);
    QVERIFY2(oom.contains(u"the sandbox's limit of %1 bytes of memory was reached"_s.arg(Memory)),
             qPrintable(oom));
    // /tmp is memory the limit counts: it holds the policy's share, no more.
    const QString tmp = runNext(
        server, id, u"head -c 100000000 /dev/zero > /tmp/big; echo status=$?; wc -c < /tmp/big"_s);
    static const QRegularExpression written(u"^(\\d+)$"_s, QRegularExpression::MultilineOption);
    QVERIFY2(!tmp.contains(u"status=0"_s), qPrintable(tmp));
    QVERIFY2(written.match(tmp).captured(1).toLongLong() <= Memory * 3 / 4, qPrintable(tmp));
    // Processes of the sandbox together, not per process.
    const QString forks = runNext(
        server, id, u"rm -f /tmp/big; for i in $(seq 80); do sleep 5 & done; wait; echo done"_s);
    QVERIFY2(forks.contains(u"the sandbox's limit of 48 processes was reached"_s),
             qPrintable(forks));
    const QJsonObject outcome = server.conversation(id).value(u"outcome"_s).toObject();
    QCOMPARE(outcome.value(u"code"_s).toString(), u"sandbox_limit"_s);
}

void SystemDockerTest::whatACommandLeavesEndsWithIt()
{
    ServerProcess &server = dockerServer();
    QVERIFY(server.startReady());
    const QUuid id = server.create(shellCreate(u"sleep 600 & echo started"_s));
    QVERIFY(server.waitForStatus(id, u"finished"_s));
    QVERIFY2(observations(server, id).value(0).contains(u"started"_s),
             qPrintable(observations(server, id).value(0)));
    const QString left = runNext(server, id, u"ps -o pid,args | grep -c '[s]leep 600'"_s);
    QVERIFY2(left.startsWith(u"0\n"_s), qPrintable(left));
}

void SystemDockerTest::adoptedAfterAServerIsKilled()
{
    const QString dataDir = m_fleet.newDataDir();
    ServerProcess &first = dockerServer({}, dataDir);
    QVERIFY(first.startReady());
    const QUuid id = first.create(shellCreate(u"echo kept > /tmp/mark; echo ok"_s));
    QVERIFY(first.waitForStatus(id, u"finished"_s));
    const QString container = containersOf(id).at(0).toObject().value(u"Id"_s).toString();
    QVERIFY(!container.isEmpty());
    QVERIFY(
        first.post(conversationPath(id, u"events"_s), userMessage(u"echo begun; sleep 600"_s, true))
            .ok());
    const QStringList ps{u"ps"_s, u"-o"_s, u"args"_s};
    QTRY_VERIFY_WITH_TIMEOUT(
        QCoro::waitFor(m_engine->exec(container, ps, 10s)).standardOutput.contains("sleep 600"),
        20'000);
    first.kill();

    ServerProcess &second = dockerServer({}, dataDir);
    QVERIFY(second.startReady());
    // The same container, its /tmp as the commands left it; the run is resolved, not lost.
    QVERIFY(second.waitForStatus(id, u"paused"_s));
    const QJsonArray after = containersOf(id);
    QCOMPARE(after.size(), 1);
    QCOMPARE(after.at(0).toObject().value(u"Id"_s).toString(), container);
    const QString output =
        runNext(second, id, u"cat /tmp/mark; ps -o args | grep -c '[s]leep 600'"_s);
    QVERIFY2(output.startsWith(u"kept\n0\n"_s), qPrintable(output));
}

// A server killed and not started again: its sandbox host exits once idle for its timeout, and
// stops the container on its way out; the next server's command starts it again.
void SystemDockerTest::aContainerLeftAloneStops()
{
    const QString dataDir = m_fleet.newDataDir();
    const QStringList idleSoon{u"--sandbox-idle-timeout"_s, u"2s"_s};
    ServerProcess &first = dockerServer(idleSoon, dataDir);
    QVERIFY(first.startReady());
    const QUuid id = first.create(shellCreate(u"echo kept > $HOME/mark"_s));
    QVERIFY(first.waitForStatus(id, u"finished"_s));
    const auto running = [this, &id] {
        return containersOf(id).at(0).toObject().value(u"State"_s).toString();
    };
    QCOMPARE(running(), u"running"_s);
    first.kill();
    QTRY_COMPARE_WITH_TIMEOUT(running(), u"exited"_s, 20'000);

    ServerProcess &second = dockerServer(idleSoon, dataDir);
    QVERIFY(second.startReady());
    QCOMPARE(runNext(second, id, u"cat $HOME/mark"_s), u"kept\n"_s);
    QCOMPARE(running(), u"running"_s);
}

// A sandbox host starts the next command's container-exec ahead (the spawn of the binary was a
// third of a command's time); the command and its environment, secrets set meanwhile
// included, reach it on its standard input.
void SystemDockerTest::theNextCommandsExecWaitsReady()
{
    ServerProcess &server = dockerServer();
    QVERIFY(server.startReady());
    const QUuid id = server.create(shellCreate(u"echo one"_s));
    QVERIFY(server.waitForStatus(id, u"finished"_s));
    const QByteArray container =
        containersOf(id).at(0).toObject().value(u"Id"_s).toString().toLatin1();
    const auto waiting = [&container] {
        QList<pid_t> ready;
        for (const pid_t pid : processesWith(container)) {
            QFile cmdline(u"/proc/%1/cmdline"_s.arg(pid));
            if (cmdline.open(QIODevice::ReadOnly) &&
                cmdline.readAll().contains("--command-on-stdin"))
                ready.append(pid);
        }
        return ready;
    };
    QTRY_COMPARE_WITH_TIMEOUT(waiting().size(), 1, 10'000);
    const pid_t first = waiting().at(0);
    QVERIFY(server
                .post(conversationPath(id, u"secrets"_s),
                      QJsonObject{{u"secrets"_s, QJsonObject{{u"LATE_TOKEN"_s, u"late-value"_s}}}})
                .ok());
    QCOMPARE(runNext(server, id, u"echo ${#LATE_TOKEN} $(pwd)"_s),
             u"10 %1\n"_s.arg(server.conversation(id)
                                  .value(u"workspace"_s)
                                  .toObject()
                                  .value(u"working_dir"_s)
                                  .toString()));
    // That one ran it, and the next waits.
    QTRY_VERIFY_WITH_TIMEOUT(waiting().size() == 1 && waiting().at(0) != first, 10'000);
    QVERIFY(!QFile::exists(u"/proc/%1"_s.arg(first)));
}

void SystemDockerTest::containersGoWithTheirConversations()
{
    const QString dataDir = m_fleet.newDataDir();
    // Left by a server that died: one of a conversation that is gone, with this data dir's
    // label, and one of another data dir's, which is not this server's to remove.
    const auto leftOver = [this](const QString &runtimes) {
        DockerContainerSpec spec;
        spec.image = TestImage;
        spec.command = {u"sleep"_s, u"3600"_s};
        spec.labels = {
            {QLatin1StringView(SandboxContainers::ConversationLabel), wireId(QUuid::createUuid())},
            {QLatin1StringView(SandboxContainers::RuntimesLabel), runtimes}};
        const DockerResult created = QCoro::waitFor(m_engine->createContainer(spec));
        return created.json.object().value(u"Id"_s).toString();
    };
    const QString ours = leftOver(QDir(dataDir).filePath(u"runtimes"_s));
    const QString theirs = leftOver(u"/elsewhere/runtimes"_s);
    QVERIFY(!ours.isEmpty() && !theirs.isEmpty());
    const auto exists = [this](const QString &container) {
        return QCoro::waitFor(m_engine->inspectContainer(container)).status != 404;
    };

    ServerProcess &server = dockerServer({}, dataDir);
    QVERIFY(server.startReady());
    QTRY_VERIFY_WITH_TIMEOUT(!exists(ours), 10'000);
    QVERIFY(exists(theirs));
    QVERIFY(QCoro::waitFor(m_engine->removeContainer(theirs)).ok());

    // Delete and archive take the container with them.
    const QUuid deleted = server.create(shellCreate(u"echo a"_s));
    const QUuid archived = server.create(shellCreate(u"echo b"_s));
    QVERIFY(server.waitForStatus(deleted, u"finished"_s));
    QVERIFY(server.waitForStatus(archived, u"finished"_s));
    QCOMPARE(containersOf(deleted).size(), 1);
    QCOMPARE(containersOf(archived).size(), 1);
    QVERIFY(server.call("DELETE", conversationPath(deleted)).ok());
    QVERIFY(server.post(conversationPath(archived, u"archive"_s)).ok());
    QTRY_COMPARE_WITH_TIMEOUT(containersOf(deleted).size(), 0, 10'000);
    QTRY_COMPARE_WITH_TIMEOUT(containersOf(archived).size(), 0, 10'000);
}

void SystemDockerTest::idleContainersCostNothingAndComeBack()
{
    ServerProcess &server =
        dockerServer({u"--sandbox-idle-pause"_s, u"1s"_s, u"--sandbox-idle-stop"_s, u"6s"_s});
    QVERIFY(server.startReady());
    const QUuid id = server.create(shellCreate(u"echo one"_s));
    QVERIFY(server.waitForStatus(id, u"finished"_s));
    const QString container = containersOf(id).at(0).toObject().value(u"Id"_s).toString();
    const auto state = [&] {
        return QCoro::waitFor(m_engine->inspectContainer(container))
            .json.object()
            .value(u"State"_s)
            .toObject();
    };
    const auto status = [&] {
        return runtimeInfo(server, id).value(u"runtime_status"_s).toString();
    };

    // Frozen by the engine, and said so with why and since when.
    QTRY_COMPARE_WITH_TIMEOUT(status(), u"paused"_s, 15'000);
    QTRY_VERIFY_WITH_TIMEOUT(state().value(u"Paused"_s).toBool(), 10'000);
    const QJsonObject paused = runtimeInfo(server, id);
    QCOMPARE(paused.value(u"runtime_status_reason"_s).toString(), u"idle for 1s"_s);
    QVERIFY(paused.value(u"runtime_status_since"_s).isString());
    // The next command thaws it by itself.
    QCOMPARE(runNext(server, id, u"echo two"_s), u"two\n"_s);
    QVERIFY(!state().value(u"Paused"_s).toBool());

    // Stopped, its disk kept; the next command starts it again.
    QTRY_COMPARE_WITH_TIMEOUT(status(), u"stopped"_s, 30'000);
    QTRY_VERIFY_WITH_TIMEOUT(!state().value(u"Running"_s).toBool(), 10'000);
    QCOMPARE(containersOf(id).size(), 1);
    QCOMPARE(runNext(server, id, u"echo three"_s), u"three\n"_s);
    QVERIFY(state().value(u"Running"_s).toBool());
    QCOMPARE(containersOf(id).at(0).toObject().value(u"Id"_s).toString(), container);
    // The audit log says the idle policy did both, and why.
    QStringList records;
    const QUrlQuery query{{u"actor"_s, u"server"_s}, {u"conversation_id"_s, wireId(id)}};
    for (const QJsonValue &record : server.get(u"/api/audit"_s, query).json[u"items"_s].toArray())
        records << record[u"client"_s].toString() + u' ' + record[u"action"_s].toString() +
                       u": "_s + record[u"reason"_s].toString();
    QVERIFY2(records.contains(u"idle pause_runtime: idle for 1s (--sandbox-idle-pause)"_s),
             qPrintable(records.join(u'\n')));
    QVERIFY2(records.contains(u"idle stop_runtime: idle for 6s (--sandbox-idle-stop); its "
                              "container's disk kept"_s),
             qPrintable(records.join(u'\n')));
}

void SystemDockerTest::imagesAreTheOperators()
{
    ServerProcess &server = dockerServer({u"--sandbox-images"_s, u"agentdeck-test:*"_s});
    QVERIFY(server.startReady());
    // Not on the allow-list: refused at create.
    Reply refused;
    server.create(QJsonObject{{u"sandbox"_s, QJsonObject{{u"image"_s, u"debian:bookworm"_s}}}},
                  &refused);
    QCOMPARE(refused.status, 422);
    QVERIFY2(refused.body.contains("--sandbox-images"), refused.body.constData());
    // Allowed, and on the engine: used.
    const QUuid busybox = server.create(shellCreate(
        u"echo ran"_s, QJsonObject{{u"sandbox"_s, QJsonObject{{u"image"_s, TestImage}}}}));
    QVERIFY(server.waitForStatus(busybox, u"finished"_s));
    // Allowed, but not on the engine: the engine's words, in the create's answer (its run could
    // not start) and on the conversation.
    Reply failed;
    server.create(shellCreate(u"echo never"_s,
                              QJsonObject{{u"sandbox"_s,
                                           QJsonObject{{u"image"_s, u"agentdeck-test:absent"_s}}}}),
                  &failed);
    QCOMPARE(failed.status, 502);
    QVERIFY2(failed.body.contains("agentdeck-test:absent"), failed.body.constData());
    const QUuid missing(failed.object().value(u"conversation_id"_s).toString());
    QTRY_COMPARE_WITH_TIMEOUT(runtimeInfo(server, missing).value(u"runtime_status"_s).toString(),
                              u"error"_s, 20'000);
    const QString message = runtimeInfo(server, missing)
                                .value(u"runtime_error"_s)
                                .toObject()
                                .value(u"message"_s)
                                .toString();
    QVERIFY2(message.contains(u"agentdeck-test:absent"_s), qPrintable(message));
}

void SystemDockerTest::engineProblemsAreClearErrors()
{
    // No image: the server does not start.
    ServerProcess &noImage = m_fleet.add({}, {u"--runtime"_s, u"docker"_s});
    QVERIFY(!noImage.start());
    QVERIFY(noImage.waitForExit(10'000));
    QCOMPARE(noImage.exitCode(), 2);
    QVERIFY2(noImage.stderrText().contains(u"--sandbox-image"_s), qPrintable(noImage.stderrText()));

    // An engine that is not there: said at startup, and on the conversation, not a hang.
    ServerProcess &server =
        m_fleet.add({}, {u"--runtime"_s, u"docker"_s, u"--docker-host"_s,
                         u"unix://"_s + QDir::currentPath() + u"/no-engine.sock"_s,
                         u"--sandbox-image"_s, TestImage});
    QVERIFY(server.startReady());
    QTRY_VERIFY2_WITH_TIMEOUT(server.stderrText().contains(u"is not reachable"_s),
                              qPrintable(server.stderrText()), 10'000);
    Reply failed;
    server.create(shellCreate(u"echo never"_s), &failed);
    QCOMPARE(failed.status, 502);
    QVERIFY2(failed.body.contains("is not reachable"), failed.body.constData());
    const QUuid id(failed.object().value(u"conversation_id"_s).toString());
    QTRY_COMPARE_WITH_TIMEOUT(runtimeInfo(server, id).value(u"runtime_status"_s).toString(),
                              u"error"_s, 20'000);
    const QString message =
        runtimeInfo(server, id).value(u"runtime_error"_s).toObject().value(u"message"_s).toString();
    QVERIFY2(message.contains(u"is not reachable"_s), qPrintable(message));
}

void SystemDockerTest::aRemoteEngineOverTls()
{
    // The client: with its certificate over https; without, or with another CA's, refused.
    DockerEngine engine(m_daemon.tlsHost());
    engine.setTlsDirectory(m_daemon.tlsDirectory());
    QVERIFY2(engine.hostError().isEmpty(), qPrintable(engine.hostError()));
    QTRY_VERIFY_WITH_TIMEOUT(QCoro::waitFor(engine.ping()).ok(), 10'000);
    DockerEngine plain(m_daemon.tlsHost());
    QVERIFY(!QCoro::waitFor(plain.ping()).ok());
    DockerEngine foreign(m_daemon.tlsHost());
    foreign.setTlsDirectory(m_daemon.foreignTlsDirectory());
    const DockerResult refused = QCoro::waitFor(foreign.ping());
    QVERIFY2(!refused.ok() && !refused.error.isEmpty(), qPrintable(refused.error));
    DockerEngine socketWithTls(m_daemon.host());
    socketWithTls.setTlsDirectory(m_daemon.tlsDirectory());
    QVERIFY(socketWithTls.hostError().contains(u"tcp://"_s));

    // The server, its sandbox hosts and their commands all reach the engine that way.
    ServerProcess &server = m_fleet.add(
        {}, {u"--runtime"_s, u"docker"_s, u"--docker-host"_s, m_daemon.tlsHost(),
             u"--docker-tls-dir"_s, m_daemon.tlsDirectory(), u"--sandbox-image"_s, TestImage});
    QVERIFY(server.startReady());
    const QUuid id = server.create(shellCreate(u"echo over tls"_s));
    QVERIFY(server.waitForStatus(id, u"finished"_s));
    QCOMPARE(observations(server, id).value(0), u"over tls\n"_s);
    QCOMPARE(containersOf(id).size(), 1);
    // Its startup check of the engine, answered by now, found nothing to say.
    QVERIFY2(!server.stderrText().contains(u"--runtime docker:"_s),
             qPrintable(server.stderrText()));

    // A TLS directory without the client's files: refused before anything starts.
    ServerProcess &missing = m_fleet.add(
        {}, {u"--runtime"_s, u"docker"_s, u"--docker-host"_s, m_daemon.tlsHost(),
             u"--docker-tls-dir"_s, QDir::currentPath(), u"--sandbox-image"_s, TestImage});
    QVERIFY(!missing.start());
    QVERIFY(missing.waitForExit(10'000));
    QCOMPARE(missing.exitCode(), 2);
    QVERIFY2(missing.stderrText().contains(u"ca.pem"_s), qPrintable(missing.stderrText()));
}

QTEST_GUILESS_MAIN(SystemDockerTest)
#include "tst_system_docker.moc"
