// The headless daemon as a real subprocess: startup and refusals, graceful stop on signals,
// durability across SIGKILL, recovery of interrupted runs, and bad input over real HTTP.
#include <QDir>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QProcess>
#include <QRegularExpression>
#include <QScopeGuard>
#include <QSignalSpy>
#include <QSqlDatabase>
#include <QSqlQuery>
#include <QTcpServer>
#include <QTcpSocket>
#include <QTemporaryDir>
#include <QTest>

#include "catalogdamage.h"
#include "serverprocess.h"
#include "testevents.h"
#include "wiretypes.h"
#include <QUrlQuery>
#include <QUuid>
#include <QWebSocket>

#include <csignal>
#include <functional>
#include <memory>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

using namespace Qt::StringLiterals;
using namespace AgentDeck::Testing;

namespace {

QJsonObject shellConversation(const QString &command, bool run = true)
{
    return QJsonObject{{u"agent"_s, QJsonObject{{u"kind"_s, u"shell"_s}}},
                       {u"initial_message"_s, userMessage(command, run)}};
}

bool seqsAreGapless(const QList<QJsonObject> &events, QString *problem)
{
    for (qsizetype i = 0; i < events.size(); ++i) {
        const qint64 seq = events[i].value(u"seq"_s).toInteger(-1);
        if (seq != i + 1) {
            *problem = u"event #%1 has seq %2, expected %3"_s.arg(i).arg(seq).arg(i + 1);
            return false;
        }
    }
    return true;
}

// A conversation's runtime dir, where its sandbox host keeps its pid and its command record.
QString runtimeDir(const QString &dataDir, const QUuid &id)
{
    return dataDir + u"/runtimes/"_s + wireId(id);
}

// The pid of the conversation's sandbox host, 0 when none is recorded.
qint64 sandboxPid(const QString &dataDir, const QUuid &id)
{
    QFile file(runtimeDir(dataDir, id) + u"/sandbox.pid"_s);
    return file.open(QIODevice::ReadOnly) ? file.readAll().trimmed().toLongLong() : 0;
}

// The conversation's runtime status as the server reports it.
QString runtimeStatus(ServerProcess &server, const QUuid &id)
{
    return server.conversation(id)
        .value(u"runtime_info"_s)
        .toObject()
        .value(u"runtime_status"_s)
        .toString();
}

// The agent's last reply in the conversation.
QString finalResponse(ServerProcess &server, const QUuid &id)
{
    return server.get(conversationPath(id, u"agent_final_response"_s))
        .object()
        .value(u"response"_s)
        .toString();
}

// A size line of /proc/PID/status ("VmRSS", "VmHWM") in MiB, -1 when the process is gone.
qint64 memoryMiB(qint64 pid, QByteArrayView field)
{
    QFile status(u"/proc/%1/status"_s.arg(pid));
    if (!status.open(QIODevice::ReadOnly))
        return -1;
    for (const QByteArray &line : status.readAll().split('\n')) {
        if (line.startsWith(field) && line.mid(field.size()).startsWith(':'))
            return line.mid(field.size() + 1).trimmed().split(' ').first().toLongLong() / 1024;
    }
    return -1;
}

} // namespace

class SystemHeadlessTest : public QObject
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
        for (const QByteArray &marker : std::as_const(m_markers))
            killProcessesWith(marker);
        m_markers.clear();
    }

    // 1. Startup: one listening line, health routes, readiness; keys guard /api only.
    void startsAndAnswersHealthRoutes()
    {
        ServerProcess &server = m_fleet.add({}, {u"--session-api-key"_s, u"sekrit"_s});
        QVERIFY2(server.start(), qPrintable(server.stderrText()));
        QCOMPARE(server.listeningLines().size(), 1);
        QVERIFY(server.url().port() > 0);
        QTRY_COMPARE_WITH_TIMEOUT(server.get(u"/ready"_s).status, 200, StartTimeoutMs);

        for (const QString &path : {u"/"_s, u"/alive"_s, u"/ready"_s, u"/server_info"_s}) {
            const Reply reply = server.get(path);
            QVERIFY2(reply.status == 200, qPrintable(path + u": "_s + reply.describe()));
            QVERIFY2(reply.json.isObject(), qPrintable(path + u": "_s + reply.describe()));
        }
        // As OpenHands answers it: the JSON string "OK".
        const Reply health = server.get(u"/health"_s);
        QVERIFY2(health.status == 200 && health.body.trimmed() == "\"OK\"",
                 qPrintable(health.describe()));
        QCOMPARE(server.get(u"/ready"_s).object().value(u"status"_s).toString(), u"ready"_s);
        const QJsonObject info = server.get(u"/server_info"_s).object();
        QVERIFY(!info.value(u"version"_s).toString().isEmpty());
        QVERIFY(!info.value(u"replica_id"_s).toString().isEmpty());
        QCOMPARE(info.value(u"ready"_s).toBool(), true);

        const Reply unauthorized = server.get(u"/api/conversations/search"_s);
        QCOMPARE(unauthorized.status, 401);
        QCOMPARE(unauthorized.object().value(u"code"_s).toString(), u"unauthorized"_s);
        QVERIFY(server.isRunning());
    }

    // Web pages of other sites, and names a page could make lead here, are refused unless the
    // operator allows them.
    void allowsTheOriginsAndHostsItIsToldTo()
    {
        ServerProcess &server = m_fleet.add({}, {u"--allow-origin"_s, u"https://tools.example/"_s,
                                                 u"--allow-host"_s, u"agentdeck.lan"_s});
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QByteArray port = QByteArray::number(server.url().port());
        const auto status = [&](const QByteArray &host, const QByteArray &origin) {
            server.setHeader("Host", host);
            server.setHeader("Origin", origin);
            const Reply reply =
                server.post(u"/api/conversations"_s,
                            QJsonObject{{u"agent"_s, QJsonObject{{u"kind"_s, u"shell"_s}}}});
            return std::pair{reply.status, reply.object().value(u"code"_s).toString()};
        };
        QCOMPARE(status({}, "https://tools.example"), std::pair(201, QString()));
        QCOMPARE(status({}, "https://evil.example"), std::pair(403, u"origin_not_allowed"_s));
        QCOMPARE(status("agentdeck.lan:" + port, {}), std::pair(201, QString()));
        QCOMPARE(status("evil.example:" + port, {}), std::pair(403, u"host_not_allowed"_s));
        server.setHeader("Host", {});
        server.setHeader("Origin", {});
        QCOMPARE(server.get(u"/api/conversations/count"_s).json.toInteger(), 2);
    }

    // At the limit of open files Qt's accept failed and was tried again at once: a core busy
    // (90 % measured) for as long as clients kept connecting. The listener now stops accepting
    // while few descriptors are left and no connection waits for a request head (those it
    // evicts: see tst_system_bounds), and takes the waiting connections once some close.
    void connectionsPastTheOpenFileLimitWaitTheirTurn()
    {
        constexpr int Limit = 128;
        ServerProcess &server = m_fleet.add();
        server.setOpenFileLimit(Limit);
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QUuid id =
            server.create(QJsonObject{{u"agent"_s, QJsonObject{{u"kind"_s, u"echo"_s}}}});
        QVERIFY(!id.isNull());
        const QByteArray upgrade = "GET /sockets/events/" +
                                   id.toString(QUuid::WithoutBraces).toUtf8() +
                                   " HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
                                   "Connection: Upgrade\r\nSec-WebSocket-Key: "
                                   "dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
        // As many event streams as the limit (none of them evictable): the server takes what its
        // descriptors allow, the rest wait in the kernel's queue.
        std::vector<std::unique_ptr<QTcpSocket>> clients;
        for (int i = 0; i < Limit; ++i) {
            auto &client = clients.emplace_back(std::make_unique<QTcpSocket>());
            client->connectToHost(QHostAddress::LocalHost, quint16(server.url().port()));
            QVERIFY(client->waitForConnected(5'000));
            client->write(upgrade);
            // Now: a connection that sends nothing for a while is evicted first.
            QVERIFY(client->waitForBytesWritten(5'000));
        }
        QTRY_VERIFY_WITH_TIMEOUT(
            server.stderrText().contains(u"no new connections until some close"_s), 10'000);
        const QDir descriptors(u"/proc/%1/fd"_s.arg(server.pid()));
        QVERIFY(
            descriptors.entryList(QDir::AllEntries | QDir::System | QDir::NoDotAndDotDot).size() <
            Limit);
        // Once most go, every one left is served, the last connected included.
        clients.erase(clients.begin(), clients.begin() + 3 * Limit / 4);
        for (const auto &client : clients) {
            QTRY_VERIFY_WITH_TIMEOUT(client->bytesAvailable() > 0 || client->waitForReadyRead(100),
                                     10'000);
            QVERIFY(client->readAll().startsWith("HTTP/1.1 101"));
        }
        QTRY_VERIFY_WITH_TIMEOUT(server.stderrText().contains(u"accepting connections again"_s),
                                 5'000);
        QCOMPARE(server.get(u"/alive"_s).status, 200);
        QVERIFY(server.isRunning());
    }

    // The server raises its soft limit of open files to the hard one. What it starts gets the
    //  one it was started with: some programs close every descriptor up to the limit, and a
    //  million takes them a while.
    void commandsGetTheOpenFileLimitTheServerWasStartedWith_data() { bothRuntimes(); }
    void commandsGetTheOpenFileLimitTheServerWasStartedWith()
    {
        QFETCH(QString, runtime);
        ServerProcess &server = m_fleet.add({}, {u"--runtime"_s, runtime});
        server.setOpenFileLimit(256, 4096);
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        QFile limits(u"/proc/%1/limits"_s.arg(server.pid()));
        QVERIFY(limits.open(QIODevice::ReadOnly));
        const QRegularExpression openFiles(u"Max open files\\s+(\\d+)\\s+(\\d+)"_s);
        const auto match = openFiles.match(QString::fromLatin1(limits.readAll()));
        QVERIFY(match.hasMatch());
        QCOMPARE(match.captured(1), u"4096"_s);
        const QUuid id = server.create(shellConversation(u"ulimit -Sn"_s));
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        QCOMPARE(finalResponse(server, id), u"256\n"_s);
    }

    // The server's environment is not the commands': the catalog's PGPASSWORD reached every
    // command, then an AWS_* or any token of the service's did (only three names were taken
    // out), and a sandbox host kept them in its own environment, which a command without
    // bubblewrap read from /proc/$PPID/environ. Commands get an allow-list.
    void commandsAndSandboxesGetNoneOfTheServersSecrets_data() { bothRuntimes(); }
    void commandsAndSandboxesGetNoneOfTheServersSecrets()
    {
        QFETCH(QString, runtime);
        ServerProcess &server = m_fleet.add({}, {u"--runtime"_s, runtime});
        server.setEnvironmentVariable(u"AGENTDECK_LLM_API_KEY"_s, u"llm-secret"_s);
        server.setEnvironmentVariable(u"PGPASSWORD"_s, u"pg-secret"_s);
        server.setEnvironmentVariable(u"AWS_SECRET_ACCESS_KEY"_s, u"aws-secret"_s);
        server.setEnvironmentVariable(u"GITHUB_TOKEN"_s, u"token-secret"_s);
        server.setEnvironmentVariable(u"LC_TIME"_s, u"C.UTF-8"_s);
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QUuid id = server.create(shellConversation(u"env"_s));
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        const QString env = finalResponse(server, id);
        QVERIFY2(env.contains(u"PATH=/"_s), qPrintable(env));
        QVERIFY2(env.contains(u"LC_TIME=C.UTF-8"_s), qPrintable(env));
        QVERIFY2(!env.contains(u"secret"_s), qPrintable(env));
        if (runtime != u"local"_s)
            return;
        QFile pidFile(
            QDir(server.dataDir()).filePath(u"runtimes/"_s + wireId(id) + u"/sandbox.pid"_s));
        QVERIFY(pidFile.open(QIODevice::ReadOnly));
        QFile hostEnvironment(u"/proc/%1/environ"_s.arg(QString::fromLatin1(pidFile.readAll())));
        QVERIFY(hostEnvironment.open(QIODevice::ReadOnly));
        const QByteArray hostEnv = hostEnvironment.readAll();
        QVERIFY(hostEnv.contains("LC_TIME=C.UTF-8"));
        QVERIFY(!hostEnv.contains("secret"));
    }

    // Without bubblewrap (it cannot run everywhere) a sandbox has no PID namespace to end what
    // a command leaves in the background: `sleep 1000 &` outlived the command, the archive and
    // the delete. The command's process group ends with it.
    void whatACommandLeavesRunningEndsWithItWithoutBubblewrap()
    {
        QTemporaryDir fakeBin;
        QFile bwrap(fakeBin.filePath(u"bwrap"_s));
        QVERIFY(bwrap.open(QIODevice::WriteOnly));
        bwrap.write("#!/bin/sh\nexit 1\n");
        bwrap.close();
        QVERIFY(bwrap.setPermissions(bwrap.permissions() | QFileDevice::ExeOwner));
        ServerProcess &server = m_fleet.add();
        server.setEnvironmentVariable(u"PATH"_s,
                                      fakeBin.path() + u':' + qEnvironmentVariable("PATH"));
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QUuid id = server.create(shellConversation(u"sleep 1000 & echo $!"_s));
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        QFile log(QDir(server.dataDir()).filePath(u"runtimes/"_s + wireId(id) + u"/sandbox.log"_s));
        QVERIFY(log.open(QIODevice::ReadOnly));
        QVERIFY(log.readAll().contains("sandbox isolation: none"));
        const QString pid = finalResponse(server, id).trimmed();
        QVERIFY2(!pid.isEmpty() && pid.toInt() > 0, qPrintable(pid));
        QTRY_VERIFY_WITH_TIMEOUT(!QFile::exists(u"/proc/"_s + pid), 5000);
    }

    // 2. Refusals: non-zero exit, a clear message, and never a listening line.
    void refusesPortInUse()
    {
        QTcpServer holder;
        QVERIFY(holder.listen(QHostAddress::LocalHost, 0));
        const QString port = QString::number(holder.serverPort());
        ServerProcess &server = m_fleet.add({}, {}, u"127.0.0.1:"_s + port);
        verifyRefuses(server, {u"cannot listen"_s, port});
    }

    void refusesDataDirThatIsAFile()
    {
        const QString path = m_fleet.newDataDir() + u"/not-a-dir"_s;
        QFile file(path);
        QVERIFY(file.open(QIODevice::WriteOnly));
        file.write("a regular file\n");
        file.close();
        ServerProcess &server = m_fleet.add(path);
        verifyRefuses(server, {u"data dir"_s, path});
        QVERIFY2(QFileInfo(path).isFile(), "the file must be left as it was");
    }

    void refusesBadOptionValues_data()
    {
        QTest::addColumn<QString>("option");
        QTest::addColumn<QString>("value");
        QTest::addColumn<QString>("words");
        const QString walLimit = u"--wal-limit takes a size"_s;
        QTest::addRow("wal limit below 64KiB") << u"--wal-limit"_s << u"63KiB"_s << walLimit;
        QTest::addRow("wal limit above 16GiB") << u"--wal-limit"_s << u"17GiB"_s << walLimit;
        QTest::addRow("wal limit not a size") << u"--wal-limit"_s << u"lots"_s << walLimit;
        const QString sandboxes = u"--max-sandboxes takes a number from 0 (no limit) to 1000000"_s;
        QTest::addRow("negative sandboxes") << u"--max-sandboxes"_s << u"-1"_s << sandboxes;
        QTest::addRow("sandboxes not a number") << u"--max-sandboxes"_s << u"lots"_s << sandboxes;
        QTest::addRow("sandboxes past the most")
            << u"--max-sandboxes"_s << u"1000001"_s << sandboxes;
        QTest::addRow("key with a line break") << u"--session-api-key"_s << u"K\nX-Injected: yes"_s
                                               << u"cannot contain control characters"_s;
        // An empty key turned the check off, and with it the warning about listening beyond
        // loopback.
        QTest::addRow("empty key") << u"--session-api-key"_s << QString() << u"cannot be empty"_s;
        QTest::addRow("blank key") << u"--session-api-key"_s << u"  "_s << u"cannot be empty"_s;
        QTest::addRow("empty data dir") << u"--data-dir"_s << QString() << u"cannot be empty"_s;
        // Renewed every third of it, a shorter lease lapsed between renewals: the replica called
        // itself silent, and another took its live runs over.
        QTest::addRow("lease ttl of 0") << u"--lease-ttl"_s << u"0s"_s << u"at least 1s"_s;
        QTest::addRow("lease ttl under 1s") << u"--lease-ttl"_s << u"999ms"_s << u"at least 1s"_s;
        QTest::addRow("watching with the daemon")
            << u"--connect"_s << u"127.0.0.1:1"_s << u"--connect is for the console"_s;
        QTest::addRow("unknown network") << u"--sandbox-network"_s << u"wifi"_s
                                         << u"--sandbox-network takes none, egress or host"_s;
        // Below a few MiB not even bash starts: every command would fail.
        QTest::addRow("memory too small")
            << u"--sandbox-memory"_s << u"1MiB"_s << u"--sandbox-memory takes a size of 16MiB"_s;
        QTest::addRow("too few processes")
            << u"--sandbox-processes"_s << u"3"_s << u"--sandbox-processes takes a number"_s;
        QTest::addRow("cpu not a duration")
            << u"--sandbox-cpu"_s << u"lots"_s << u"--sandbox-cpu takes a duration"_s;
        QTest::addRow("file size not a size")
            << u"--sandbox-file-size"_s << u"big"_s << u"--sandbox-file-size takes a size"_s;
        // mkfs.ext4 and its journal take a few MiB: a smaller disk held next to nothing.
        QTest::addRow("disk too small")
            << u"--sandbox-disk"_s << u"1MiB"_s << u"--sandbox-disk takes a size of 16MiB"_s;
        QTest::addRow("disk not a size")
            << u"--sandbox-disk"_s << u"big"_s << u"--sandbox-disk takes a size"_s;
    }
    void refusesBadOptionValues()
    {
        QFETCH(QString, option);
        QFETCH(QString, value);
        QFETCH(QString, words);
        ServerProcess &server = m_fleet.add({}, {option, value});
        verifyRefuses(server, {words});
    }

    // The processes of every sandbox the server may keep, with their own, fit the host's PIDs
    // and threads with room for the rest of the host: three fork loops took 3,094 of the host's
    // 32,768 PIDs when 256 sandboxes of 1,024 each were allowed. A policy that does not fit,
    // or has no bound, is refused at start.
    void refusesSandboxesPastTheHostsProcesses_data()
    {
        QTest::addColumn<QStringList>("arguments");
        QTest::addColumn<QString>("words");
        QTest::addRow("too many")
            << QStringList{u"--max-sandboxes"_s, u"1000000"_s, u"--sandbox-processes"_s,
                           u"100000"_s}
            << u"--max-sandboxes 1000000 sandboxes of --sandbox-processes 100000"_s;
        QTest::addRow("no process limit") << QStringList{u"--sandbox-processes"_s, u"0"_s}
                                          << u"--sandbox-processes 0 (no limit) puts no bound"_s;
        QTest::addRow("no sandbox limit")
            << QStringList{u"--max-sandboxes"_s, u"0"_s} << u"--max-sandboxes 0 (no limit)"_s;
        QTest::addRow("too many to fit a default")
            << QStringList{u"--max-sandboxes"_s, u"1000000"_s}
            << u"leaves fewer than 64 processes to each sandbox"_s;
    }
    void refusesSandboxesPastTheHostsProcesses()
    {
        QFETCH(QStringList, arguments);
        QFETCH(QString, words);
        ServerProcess &server = m_fleet.add({}, arguments);
        verifyRefuses(server, {words, u"kernel.pid_max"_s});
        // A mistake in the settings, not a fault a restart may find gone: the unit does not
        // start it again and again (RestartPreventExitStatus=2).
        QCOMPARE(server.exitCode(), 2);
    }

    // A policy that fits starts as given; without --sandbox-processes, the default is lowered
    // to what fits (at most 1,024).
    void startsWithSandboxesThatFit_data()
    {
        QTest::addColumn<QStringList>("arguments");
        QTest::addColumn<qint64>("processes"); // 0: the default, fitted
        QTest::addRow("given") << QStringList{u"--max-sandboxes"_s, u"4"_s,
                                              u"--sandbox-processes"_s, u"64"_s}
                               << qint64(64);
        QTest::addRow("default") << QStringList{} << qint64(0);
    }
    void startsWithSandboxesThatFit()
    {
        QFETCH(QStringList, arguments);
        QFETCH(qint64, processes);
        ServerProcess &server = m_fleet.add({}, arguments);
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const qint64 inForce = server.get(u"/server_info"_s)
                                   .object()
                                   .value(u"sandbox"_s)
                                   .toObject()
                                   .value(u"processes"_s)
                                   .toInteger();
        if (processes > 0) {
            QCOMPARE(inForce, processes);
            return;
        }
        QFile pidMax(u"/proc/sys/kernel/pid_max"_s);
        QVERIFY(pidMax.open(QIODevice::ReadOnly));
        QVERIFY2(inForce >= 64 && inForce <= 1024, qPrintable(QString::number(inForce)));
        QVERIFY2(256 * (inForce + 16) <= pidMax.readAll().trimmed().toLongLong(),
                 qPrintable(QString::number(inForce)));
    }

    // "$KEY1,$KEY2" with neither set ran the server open while the operator believed it keyed;
    // left empty, as agentdeck.conf ships it, the variable still means no key.
    void refusesAKeyListWithoutKeys_data()
    {
        QTest::addColumn<QString>("keys");
        QTest::addRow("comma") << u","_s;
        QTest::addRow("blank") << u" "_s;
        QTest::addRow("blanks and commas") << u" , ,"_s;
    }
    void refusesAKeyListWithoutKeys()
    {
        QFETCH(QString, keys);
        ServerProcess &server = m_fleet.add();
        server.setEnvironmentVariable(u"AGENTDECK_SESSION_API_KEYS"_s, keys);
        verifyRefuses(server, {u"AGENTDECK_SESSION_API_KEYS holds no key"_s});
    }

    // Without a key, listening beyond loopback is warned about; 127.0.0.2 is loopback too, and
    // was warned about as if it were not.
    void warnsOfNoKeyOnlyBeyondLoopback_data()
    {
        QTest::addColumn<QString>("listen");
        QTest::addColumn<bool>("warned");
        QTest::addRow("127.0.0.1") << u"127.0.0.1:0"_s << false;
        QTest::addRow("127.0.0.2") << u"127.0.0.2:0"_s << false;
        QTest::addRow("all interfaces") << u"0.0.0.0:0"_s << true;
    }
    void warnsOfNoKeyOnlyBeyondLoopback()
    {
        QFETCH(QString, listen);
        QFETCH(bool, warned);
        QProcess server;
        QByteArray text;
        connect(&server, &QProcess::readyReadStandardError, this,
                [&] { text += server.readAllStandardError(); });
        server.start(m_fleet.binary(), {u"--headless"_s, u"--listen"_s, listen, u"--data-dir"_s,
                                        m_fleet.newDataDir()});
        QTRY_VERIFY2_WITH_TIMEOUT(text.contains("listening on"), text.constData(), StartTimeoutMs);
        QCOMPARE(text.contains("no session API key is configured"), warned);
        // Where it listens, as given (all interfaces were shown as 127.0.0.1).
        const QString host = listen.left(listen.lastIndexOf(u':'));
        QVERIFY2(text.contains(QByteArray("listening on http://" + host.toUtf8() + ':')),
                 text.constData());
        server.kill();
        server.waitForFinished();
    }

    // The binary reads its options from a --config file and AGENTDECK_* variables, the command
    // line winning over the environment and the environment over the file:
    // `AGENTDECK_LISTEN=127.0.0.1:0 agentdeck --headless` listened on 8000.
    void readsConfigFileEnvironmentAndCommandLine_data()
    {
        QTest::addColumn<bool>("withFile"); // else its keys are variables
        QTest::addColumn<bool>("inEnvironment");
        QTest::addColumn<bool>("onCommandLine");
        QTest::addColumn<QString>("host");
        QTest::addRow("environment alone") << false << true << false << u"127.0.0.2"_s;
        QTest::addRow("file") << true << false << false << u"127.0.0.3"_s;
        QTest::addRow("environment over file") << true << true << false << u"127.0.0.2"_s;
        QTest::addRow("command line over both") << true << true << true << u"127.0.0.4"_s;
    }
    void readsConfigFileEnvironmentAndCommandLine()
    {
        QFETCH(bool, withFile);
        QFETCH(bool, inEnvironment);
        QFETCH(bool, onCommandLine);
        QFETCH(QString, host);
        const QList<std::pair<QString, QString>> keys{
            {u"AGENTDECK_SESSION_API_KEYS"_s, u"conf-key"_s},
            {u"AGENTDECK_REPLICA_ID"_s, u"from-conf"_s},
            {u"AGENTDECK_SHUTDOWN_GRACE"_s, QString()},
            {u"AGENTDECK_DATA_DIR"_s, m_fleet.newDataDir()}};
        QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
        QStringList arguments{u"--headless"_s};
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        QFile conf(dir.filePath(u"agentdeck.conf"_s));
        if (withFile) {
            QVERIFY(conf.open(QIODevice::WriteOnly));
            conf.write("# as packaging/agentdeck.conf\nAGENTDECK_LISTEN=127.0.0.3:0\n");
            for (const auto &[key, value] : keys)
                conf.write((key + u'=' + value + u'\n').toUtf8());
            conf.close();
            arguments << u"--config"_s << conf.fileName();
        } else {
            for (const auto &[key, value] : keys)
                environment.insert(key, value);
        }
        // `AGENTDECK_LISTEN=127.0.0.1:0 agentdeck --headless` listened on 8000.
        if (inEnvironment)
            environment.insert(u"AGENTDECK_LISTEN"_s, u"127.0.0.2:0"_s);
        QProcess server;
        server.setProcessEnvironment(environment);
        if (onCommandLine)
            arguments << u"--listen"_s << u"127.0.0.4:0"_s;
        QByteArray text;
        connect(&server, &QProcess::readyReadStandardError, this,
                [&] { text += server.readAllStandardError(); });
        server.start(m_fleet.binary(), arguments);
        const auto stop = qScopeGuard([&server] {
            server.kill();
            server.waitForFinished();
        });
        const QRegularExpression listening(u"listening on (http://([0-9.]+):\\d+)"_s);
        QTRY_VERIFY2_WITH_TIMEOUT(listening.match(QString::fromUtf8(text)).hasMatch() ||
                                      server.state() == QProcess::NotRunning,
                                  text.constData(), StartTimeoutMs);
        const auto match = listening.match(QString::fromUtf8(text));
        QVERIFY2(match.hasMatch(), text.constData());
        QCOMPARE(match.captured(2), host);

        // The file's other keys hold whatever the listening address came from.
        QNetworkAccessManager network;
        const auto status = [&](const QString &path, const QByteArray &key, QJsonObject *body) {
            QNetworkRequest request(QUrl(match.captured(1) + path));
            if (!key.isEmpty())
                request.setRawHeader("X-Session-API-Key", key);
            std::unique_ptr<QNetworkReply> reply(network.get(request));
            if (!QTest::qWaitFor([&] { return reply->isFinished(); }, StartTimeoutMs))
                return -1;
            *body = QJsonDocument::fromJson(reply->readAll()).object();
            return reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
        };
        QJsonObject body;
        QCOMPARE(status(u"/server_info"_s, {}, &body), 200);
        QCOMPARE(body.value(u"replica_id"_s).toString(), u"from-conf"_s);
        QCOMPARE(status(u"/api/conversations/count"_s, {}, &body), 401);
        QCOMPARE(status(u"/api/conversations/count"_s, "conf-key", &body), 200);
    }

    // A mistake in the file stops the start with exit status 2 (no restart loop under systemd),
    // naming the file, the line and the key.
    void refusesAMistakeInTheConfigFile()
    {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        QFile conf(dir.filePath(u"agentdeck.conf"_s));
        QVERIFY(conf.open(QIODevice::WriteOnly));
        conf.write("AGENTDECK_LISTEN=127.0.0.1:0\nAGENTDECK_SANDBOX_MEMROY=2GiB\n");
        conf.close();
        QProcess server;
        server.start(m_fleet.binary(), {u"--headless"_s, u"--config"_s, conf.fileName()});
        QVERIFY(server.waitForFinished(StartTimeoutMs));
        QCOMPARE(server.exitCode(), 2);
        const QByteArray text = server.readAllStandardError();
        QVERIFY2(text.contains(QByteArray(conf.fileName().toUtf8() +
                                          ":2: unknown key AGENTDECK_SANDBOX_MEMROY")),
                 text.constData());
    }

    // HTTP hands a header over without the blanks around its value, so a key given with them
    // could never be sent; it is the key without them.
    void acceptsAKeyGivenWithBlanksAround()
    {
        ServerProcess &server = m_fleet.add({}, {u"--session-api-key"_s, u" sekrit "_s});
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        QCOMPARE(server.get(u"/api/conversations/count"_s).status, 401);
        server.setHeader("X-Session-API-Key", "sekrit");
        const Reply reply = server.get(u"/api/conversations/count"_s);
        QVERIFY2(reply.status == 200, qPrintable(reply.describe()));
    }

    // Qt's timers count milliseconds in an int: a --command-timeout of 30d stopped nothing.
    void refusesDurationsPastWhatATimerHolds_data()
    {
        QTest::addColumn<QStringList>("arguments");
        QTest::addColumn<QString>("words");
        QTest::addRow("command timeout") << QStringList{u"--command-timeout"_s, u"25d"_s}
                                         << u"--command-timeout is at most 24d"_s;
        QTest::addRow("idle timeout") << QStringList{u"--sandbox-idle-timeout"_s, u"30d"_s}
                                      << u"--sandbox-idle-timeout is at most 24d"_s;
        QTest::addRow("llm timeout")
            << QStringList{u"--llm-timeout"_s, u"25h"_s} << u"--llm-timeout is at most 1d"_s;
        QTest::addRow("no llm timeout")
            << QStringList{u"--llm-timeout"_s, u"0s"_s} << u"--llm-timeout must be longer than 0"_s;
    }
    void refusesDurationsPastWhatATimerHolds()
    {
        QFETCH(QStringList, arguments);
        QFETCH(QString, words);
        ServerProcess &server = m_fleet.add({}, arguments);
        verifyRefuses(server, {words});
    }

    // A DISPLAY naming an X server that is not there made Qt abort: exit status 134 and a core,
    // where a console without a window system is a refusal like the others.
    void theConsoleWithoutAWindowSystemIsRefused()
    {
        QTemporaryDir dataDir;
        QVERIFY(dataDir.isValid());
        QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
        environment.remove(u"QT_QPA_PLATFORM"_s);
        environment.remove(u"WAYLAND_DISPLAY"_s);
        environment.insert(u"DISPLAY"_s, u":4242"_s); // no X server is there
        QProcess process;
        process.setProcessEnvironment(environment);
        process.start(m_fleet.binary(), {u"--data-dir"_s, dataDir.path()});
        QVERIFY(process.waitForFinished(StartTimeoutMs));
        const QString text = QString::fromUtf8(process.readAllStandardError());
        QVERIFY2(process.exitStatus() == QProcess::NormalExit, qPrintable(text));
        QCOMPARE(process.exitCode(), 2);
        QVERIFY2(text.contains(u"agentdeck --headless"_s), qPrintable(text));
        QVERIFY2(!text.contains(u"listening on"_s), qPrintable(text));
    }

    // "-headless" was read as the short options -h -e -a ..., and printed the help.
    void anOptionWithOneDashIsTheOption()
    {
        QProcess server;
        QByteArray text;
        connect(&server, &QProcess::readyReadStandardError, this,
                [&] { text += server.readAllStandardError(); });
        server.start(m_fleet.binary(), {u"-headless"_s, u"-listen"_s, u"127.0.0.1:0"_s,
                                        u"-data-dir"_s, m_fleet.newDataDir()});
        QTRY_VERIFY2_WITH_TIMEOUT(text.contains("listening on http://127.0.0.1:"), text.constData(),
                                  StartTimeoutMs);
        server.kill();
        server.waitForFinished();
    }

    // The help is made before any QCoreApplication exists, and Qt named the program
    // "<executable_name>"; it did not say where ctl's commands are either.
    void helpNamesTheProgramAndCtl()
    {
        QProcess process;
        process.start(m_fleet.binary(), {u"--help"_s});
        QVERIFY(process.waitForFinished(10'000));
        QCOMPARE(process.exitCode(), 0);
        const QString help =
            QString::fromUtf8(process.readAllStandardOutput() + process.readAllStandardError());
        QVERIFY2(help.startsWith(u"Usage: agentdeck [options]"_s), qPrintable(help));
        QVERIFY2(help.contains(u"agentdeck ctl --help"_s), qPrintable(help));
    }

    // The console's --connect reads a server address as ctl's --server does; an ftp:// URL
    // opened a window that said "Protocol "ftp" is unknown".
    void connectTakesOnlyWebAddresses()
    {
        for (const QString &address :
             {u"ftp://127.0.0.1:8000"_s, u"http://127.0.0.1:8000/?x=1"_s}) {
            QProcess process;
            process.start(m_fleet.binary(), {u"--connect"_s, address});
            QVERIFY(process.waitForFinished(10'000));
            QCOMPARE(process.exitCode(), 2);
            const QString error = QString::fromUtf8(process.readAllStandardError());
            QVERIFY2(error.contains(u"--connect takes HOST:PORT or an http:// or https:// URL"_s),
                     qPrintable(error));
        }
    }

    void refusesDataDirInUse()
    {
        const QString dir = m_fleet.newDataDir();
        ServerProcess &first = m_fleet.add(dir);
        QVERIFY2(first.startReady(), qPrintable(first.stderrText()));
        const QUuid before = first.create(QJsonObject{{u"title"_s, u"first"_s}});
        QVERIFY(!before.isNull());

        ServerProcess &second = m_fleet.add(dir);
        verifyRefuses(second, {u"in use"_s, QString::number(first.pid())});

        // The refused server touched nothing: the first one still serves and writes.
        QVERIFY(first.isRunning());
        QCOMPARE(first.get(u"/ready"_s).status, 200);
        QCOMPARE(first.conversation(before).value(u"title"_s).toString(), u"first"_s);
        QVERIFY(!first.create(QJsonObject{{u"title"_s, u"second"_s}}).isNull());
    }

    // A lock file that names no owner (a crash or a power cut right after its creation leaves
    // it empty) kept every start out, saying the dir was in use by pid 0.
    void takesOverALockThatNamesNoOwner_data()
    {
        QTest::addColumn<QByteArray>("content");
        QTest::addRow("empty") << QByteArray();
        QTest::addRow("garbage") << QByteArray("\x93\x01not a lock\xff");
    }
    void takesOverALockThatNamesNoOwner()
    {
        QFETCH(QByteArray, content);
        const QString dir = m_fleet.newDataDir();
        QFile lock(dir + u"/agentdeck.lock"_s);
        QVERIFY(lock.open(QIODevice::WriteOnly) && lock.write(content) == content.size());
        QVERIFY(lock.flush()); // before the time is set, or the write sets it again
        QVERIFY(lock.setFileTime(QDateTime::currentDateTimeUtc().addSecs(-60),
                                 QFileDevice::FileModificationTime));
        lock.close();
        ServerProcess &server = m_fleet.add(dir);
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        QVERIFY(!server.create(QJsonObject{{u"title"_s, u"after"_s}}).isNull());
    }

    // A damaged catalog was answered 503 "retry shortly" for good while /ready said ready, and a
    // run retried its writes for a minute.
    void aDamagedCatalogIsSaidToBeDamaged()
    {
        const QString dir = m_fleet.newDataDir();
        ServerProcess &before = m_fleet.add(dir);
        QVERIFY2(before.startReady(), qPrintable(before.stderrText()));
        for (int i = 0; i < 60; ++i)
            QVERIFY(
                !before
                     .create({{u"title"_s, u"conversation %1 %2"_s.arg(i).arg(QString(200, u'x'))}})
                     .isNull());
        before.sendSignal(SIGTERM);
        QVERIFY(before.waitForExit(10'000));
        QFile db(dir + u"/agentdeck.db"_s);
        QVERIFY(db.size() > 3 * 4096);
        QVERIFY(db.open(QIODevice::ReadWrite) && db.seek(2 * 4096));
        QVERIFY(db.write(QByteArray(4096, '\x5a')) == 4096);
        db.close();

        ServerProcess &after = m_fleet.add(dir);
        QVERIFY2(after.start(), qPrintable(after.stderrText()));
        // Ready, or found damaged by the check after startup already.
        QTRY_VERIFY_WITH_TIMEOUT(
            after.get(u"/ready"_s).object().value(u"status"_s).toString() != u"starting"_s, 10000);
        const auto search = after.get(u"/api/conversations/search"_s);
        QCOMPARE(search.status, 503);
        QCOMPARE(search.object().value(u"code"_s).toString(), u"storage_corrupt"_s);
        const auto ready = after.get(u"/ready"_s);
        QCOMPARE(ready.status, 503);
        QCOMPARE(ready.object().value(u"status"_s).toString(), u"storage_corrupt"_s);
        QVERIFY(after.stderrText().contains(u"the database is damaged"_s));
    }

    // A damaged page that no request had read went unnoticed: /ready said ready until a request
    // happened to touch it, maybe days later. The catalog is checked once after startup.
    void aDamagedPageIsFoundAtStartup()
    {
        const QString dir = m_fleet.newDataDir();
        ServerProcess &before = m_fleet.add(dir);
        QVERIFY2(before.startReady(), qPrintable(before.stderrText()));
        const QUuid id = before.create(QJsonObject{{u"title"_s, u"long history"_s}});
        QVERIFY(!id.isNull());
        for (int i = 0; i < 200; ++i)
            QCOMPARE(
                before
                    .post(conversationPath(id, u"events"_s),
                          userMessage(u"message %1 %2"_s.arg(i).arg(QString(2000, u'x')), false))
                    .status,
                200);
        QTRY_VERIFY_WITH_TIMEOUT(before.stderrText().contains(u"checked the catalog's integrity"_s),
                                 10000);
        before.sendSignal(SIGTERM);
        QVERIFY(before.waitForExit(10'000));
        // A page near the end of the file: the history's, which starting up does not read.
        QFile db(dir + u"/agentdeck.db"_s);
        const qint64 pages = db.size() / 4096;
        QVERIFY(pages > 100);
        QVERIFY(db.open(QIODevice::ReadWrite) && db.seek((pages - 3) * 4096));
        QVERIFY(db.write(QByteArray(4096, '\x5a')) == 4096);
        db.close();

        ServerProcess &after = m_fleet.add(dir);
        QVERIFY2(after.start(), qPrintable(after.stderrText()));
        QTRY_COMPARE_WITH_TIMEOUT(after.get(u"/ready"_s).object().value(u"status"_s).toString(),
                                  u"storage_corrupt"_s, 20000);
        QCOMPARE(after.get(u"/ready"_s).status, 503);
        QVERIFY2(after.stderrText().contains(u"the database is damaged"_s),
                 qPrintable(after.stderrText()));
        QVERIFY2(after.stderrText().contains(u"PRAGMA integrity_check found"_s),
                 qPrintable(after.stderrText()));
        // What is intact is still served.
        QCOMPARE(after.get(u"/api/conversations/search"_s).status, 200);
    }

    // An index that lost entries passed the check after startup, which did not compare indexes
    // with their tables: /ready said ready, and events/search listed an event that GET
    // .../events/{id} answered 404.
    void anIndexThatLostEntriesIsFoundAtStartup()
    {
        const QString dir = m_fleet.newDataDir();
        ServerProcess &before = m_fleet.add(dir);
        QVERIFY2(before.startReady(), qPrintable(before.stderrText()));
        const QUuid id = before.create(QJsonObject{{u"title"_s, u"lost entries"_s}});
        QVERIFY(!id.isNull());
        for (int i = 0; i < 3; ++i)
            QCOMPARE(before
                         .post(conversationPath(id, u"events"_s),
                               userMessage(u"message %1"_s.arg(i), false))
                         .status,
                     200);
        before.sendSignal(SIGTERM);
        QVERIFY(before.waitForExit(10'000));
        const QString failure =
            loseIndexEntries(dir + u"/agentdeck.db"_s, u"events_by_id"_s, u"seq = 2"_s);
        QVERIFY2(failure.isEmpty(), qPrintable(failure));

        ServerProcess &after = m_fleet.add(dir);
        QVERIFY2(after.start(), qPrintable(after.stderrText()));
        QTRY_COMPARE_WITH_TIMEOUT(after.get(u"/ready"_s).object().value(u"status"_s).toString(),
                                  u"storage_corrupt"_s, 20000);
        QCOMPARE(after.get(u"/ready"_s).status, 503);
        const QString text = after.stderrText();
        QVERIFY2(text.contains(u"the database is damaged"_s), qPrintable(text));
        QVERIFY2(text.contains(u"PRAGMA integrity_check found"_s), qPrintable(text));
        QVERIFY2(text.contains(u"missing from index events_by_id"_s), qPrintable(text));
        // The damage as a client met it, which the check now names.
        const auto events = after.get(conversationPath(id, u"events/search"_s));
        QCOMPARE(events.status, 200);
        const QJsonArray items = events.object().value(u"items"_s).toArray();
        QCOMPARE(items.size(), 3);
        for (const QJsonValue &item : items) {
            const QString eventId = item.toObject().value(u"id"_s).toString();
            const int status = item.toObject().value(u"seq"_s).toInt() == 2 ? 404 : 200;
            QCOMPARE(after.get(conversationPath(id, u"events/"_s + eventId)).status, status);
        }
    }

    // A damaged header byte (the write version): SQLite opened the catalog read-only without a
    // word, the server said it was ready, and every write failed with "attempt to write a
    // readonly database" in a writable data dir. It refuses to start, naming the damaged file.
    void aDamagedHeaderIsNamedAtStartup()
    {
        const QString dir = m_fleet.newDataDir();
        ServerProcess &before = m_fleet.add(dir);
        QVERIFY2(before.startReady(), qPrintable(before.stderrText()));
        QVERIFY(!before.create(QJsonObject{{u"title"_s, u"header"_s}}).isNull());
        before.sendSignal(SIGTERM);
        QVERIFY(before.waitForExit(10'000));
        const QString path = QDir(dir).absoluteFilePath(u"agentdeck.db"_s);
        const QString failure = overwriteByte(path, 18, '\x5a');
        QVERIFY2(failure.isEmpty(), qPrintable(failure));

        ServerProcess &after = m_fleet.add(dir);
        verifyRefuses(after, {u"database file %1 is damaged"_s.arg(path), u"byte 18"_s,
                              u"restore it from a backup"_s});
    }

    // 3. A signal stops the server gracefully: a running command is interrupted after the grace
    // period, the conversation is paused with its history, and the exit code is 0.
    void signalStopsGracefully_data()
    {
        QTest::addColumn<int>("signal");
        QTest::addRow("SIGTERM") << int(SIGTERM);
        QTest::addRow("SIGINT") << int(SIGINT);
        // The terminal it ran in closed: it ended at once, its command cut short and unrecorded.
        QTest::addRow("SIGHUP") << int(SIGHUP);
    }
    void signalStopsGracefully()
    {
        QFETCH(int, signal);
        struct sigaction hangUp = {};
        if (signal == SIGHUP && ::sigaction(SIGHUP, nullptr, &hangUp) == 0 &&
            hangUp.sa_handler == SIG_IGN)
            QSKIP("SIGHUP is ignored here (nohup), and so by the server, as it should be");
        const QString dir = m_fleet.newDataDir();
        ServerProcess &server = m_fleet.add(dir, {u"--shutdown-grace"_s, u"1s"_s});
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QByteArray marker = newMarker();
        const QString command = sleepCommand(marker);
        const QUuid id = startSleepingConversation(server, command, marker);
        QVERIFY(!id.isNull());
        // A live stream is told the server is going away (1001), from the streams' thread.
        QWebSocket stream;
        QUrl streamUrl = server.url();
        streamUrl.setScheme(u"ws"_s);
        streamUrl.setPath(u"/sockets/events/"_s + wireId(id));
        QSignalSpy streamOpened(&stream, &QWebSocket::connected);
        QSignalSpy streamClosed(&stream, &QWebSocket::disconnected);
        stream.open(streamUrl);
        QVERIFY(QTest::qWaitFor([&] { return !streamOpened.isEmpty(); }, 10'000));

        QElapsedTimer stopping;
        stopping.start();
        server.sendSignal(signal);
        // A second one (Ctrl-C again) is answered, and changes nothing. (Sent before the first
        // was taken, the two would be one.)
        QTRY_VERIFY_WITH_TIMEOUT(server.stderrText().contains(u"received, stopping"_s), 5'000);
        server.sendSignal(signal);
        QVERIFY2(server.waitForExit(10'000), "the server did not stop within 10 s");
        QVERIFY(QTest::qWaitFor([&] { return !streamClosed.isEmpty(); }, 5'000));
        QVERIFY2(server.stderrText().contains(u"already stopping"_s),
                 qPrintable(server.stderrText()));
        QCOMPARE(int(stream.closeCode()), 1001);
        QVERIFY2(stopping.elapsed() < 6'000,
                 qPrintable(u"stopping took %1 ms with a 1 s grace"_s.arg(stopping.elapsed())));
        QCOMPARE(server.exitStatus(), QProcess::NormalExit);
        QCOMPARE(server.exitCode(), 0);
        QVERIFY(server.stderrText().contains(u"stopping"_s));
        QTRY_VERIFY2_WITH_TIMEOUT(processesWith(marker).isEmpty(),
                                  "the command survived the graceful stop", 3'000);

        ServerProcess &restarted = m_fleet.add(dir);
        QVERIFY2(restarted.startReady(), qPrintable(restarted.stderrText()));
        QCOMPARE(restarted.status(id), u"paused"_s);
        const QList<QJsonObject> events = restarted.events(id);
        QString problem;
        QVERIFY2(seqsAreGapless(events, &problem), qPrintable(problem));
        const QList<QJsonObject> messages = ofKind(events, u"MessageEvent"_s);
        QVERIFY(!messages.isEmpty());
        QCOMPARE(messageText(messages.first()), command);
        const QList<QJsonObject> actions = ofKind(events, u"ActionEvent"_s);
        QCOMPARE(actions.size(), 1);
        QCOMPARE(actions.first().value(u"action"_s).toObject().value(u"command"_s).toString(),
                 command);
        const QList<QJsonObject> observations = ofKind(events, u"ObservationEvent"_s);
        QCOMPARE(observations.size(), 1);
        QCOMPARE(observations.first().value(u"action_id"_s).toString(),
                 actions.first().value(u"id"_s).toString());
        QVERIFY(observations.first()
                    .value(u"observation"_s)
                    .toObject()
                    .value(u"interrupted"_s)
                    .toBool());
        QVERIFY2(ofKind(events, u"AgentErrorEvent"_s).isEmpty(),
                 "a clean stop is not an interrupted run");

        // The paused conversation continues through the normal API: its command runs again.
        QVERIFY(runRunsTheCommandAgain(restarted, id, marker));
    }

    // 3b. The console's embedded server stops as gracefully on a signal: the console used to
    //     end at once, and the command in flight was recorded as interrupted.
    void consoleStopsGracefullyOnASignal()
    {
        const QString dir = m_fleet.newDataDir();
        ServerProcess &console = m_fleet.add(dir);
        console.runAsConsole();
        QVERIFY2(console.startReady(), qPrintable(console.stderrText()));
        const QByteArray marker = newMarker();
        const QUuid id = startSleepingConversation(
            console, u"sleep 1; echo %1"_s.arg(QString::fromLatin1(marker)), marker);
        QVERIFY(!id.isNull());
        console.sendSignal(SIGTERM);
        QVERIFY2(console.waitForExit(15'000), "the console did not stop");
        QCOMPARE(console.exitStatus(), QProcess::NormalExit);
        QCOMPARE(console.exitCode(), 0);

        ServerProcess &restarted = m_fleet.add(dir);
        QVERIFY2(restarted.startReady(), qPrintable(restarted.stderrText()));
        const QList<QJsonObject> observations = ofKind(restarted.events(id), u"ObservationEvent"_s);
        QCOMPARE(observations.size(), 1);
        const QJsonObject observation = observations.first().value(u"observation"_s).toObject();
        QVERIFY(!observation.value(u"interrupted"_s).toBool());
        QCOMPARE(observation.value(u"output"_s).toString(), QString::fromLatin1(marker) + u'\n');
    }

    // A signal while the server starts (here: connecting to a database that does not answer)
    // ended the process at once, its handler not yet installed. Taken now, it is carried out
    // once the start is over: here the start fails, and says so.
    void aSignalWhileStartingIsTakenCareOf()
    {
        QTcpServer silentDatabase;
        QVERIFY(silentDatabase.listen(QHostAddress::LocalHost));
        QProcess server;
        QByteArray text;
        connect(&server, &QProcess::readyReadStandardError, this,
                [&] { text += server.readAllStandardError(); });
        server.start(m_fleet.binary(), {u"--headless"_s, u"--listen"_s, u"127.0.0.1:0"_s,
                                        u"--data-dir"_s, m_fleet.newDataDir(), u"--database"_s,
                                        u"postgresql://agentdeck@127.0.0.1:%1/agentdeck"_s.arg(
                                            silentDatabase.serverPort())});
        QVERIFY(server.waitForStarted());
        QVERIFY2(silentDatabase.waitForNewConnection(StartTimeoutMs), text.constData());
        QTcpSocket *connection = silentDatabase.nextPendingConnection();
        ::kill(pid_t(server.processId()), SIGTERM);
        QVERIFY(server.state() == QProcess::Running);
        connection->abort();
        QVERIFY2(server.waitForFinished(StartTimeoutMs), text.constData());
        QCOMPARE(server.exitStatus(), QProcess::NormalExit);
        QCOMPARE(server.exitCode(), 1);
        QVERIFY2(text.contains("cannot connect"), text.constData());
    }

    // A console whose embedded server could not start (its data dir in use) said so only in a
    // dialog, and a SIGTERM left it waiting there for an answer.
    void aConsoleThatCannotServeSaysSoAndStopsOnASignal()
    {
        const QString dir = m_fleet.newDataDir();
        ServerProcess &holder = m_fleet.add(dir);
        QVERIFY2(holder.startReady(), qPrintable(holder.stderrText()));
        QProcess console;
        QByteArray text;
        connect(&console, &QProcess::readyReadStandardError, this,
                [&] { text += console.readAllStandardError(); });
        console.start(m_fleet.binary(), {u"--data-dir"_s, dir});
        QVERIFY(console.waitForStarted());
        QTRY_VERIFY2_WITH_TIMEOUT(text.contains("the embedded server cannot start"),
                                  text.constData(), StartTimeoutMs);
        ::kill(pid_t(console.processId()), SIGTERM);
        QVERIFY2(console.waitForFinished(10'000), "the console went on waiting in its dialog");
        QCOMPARE(console.exitStatus(), QProcess::NormalExit);
        QCOMPARE(console.exitCode(), 1);
        QVERIFY(holder.isRunning());
    }

    // 4. Every acknowledged write survives a SIGKILL that follows it at once.
    void acknowledgedWritesSurviveSigkill()
    {
        const QString dir = m_fleet.newDataDir();
        ServerProcess &server = m_fleet.add(dir);
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));

        constexpr int Conversations = 5;
        constexpr int Rounds = 4;
        QList<QUuid> ids;
        QMap<QUuid, QString> titles;
        for (int i = 0; i < Conversations; ++i) {
            Reply reply;
            const QUuid id =
                server.create(QJsonObject{{u"title"_s, u"durable %1"_s.arg(i)},
                                          {u"tags"_s, QJsonObject{{u"n"_s, QString::number(i)}}}},
                              &reply);
            QVERIFY2(!id.isNull(), qPrintable(reply.describe()));
            ids.append(id);
            titles.insert(id, u"durable %1"_s.arg(i));
        }
        // One conversation whose events the run loop wrote, finished before the kill.
        const QUuid echo =
            server.create(QJsonObject{{u"title"_s, u"echoed"_s},
                                      {u"agent"_s, QJsonObject{{u"kind"_s, u"echo"_s}}},
                                      {u"initial_message"_s, userMessage(u"hello echo"_s, true)}});
        QVERIFY(!echo.isNull());
        titles.insert(echo, u"echoed"_s);
        QVERIFY(server.waitForStatus(echo, u"finished"_s));
        const QList<QJsonObject> echoEvents = server.events(echo);
        QVERIFY(echoEvents.size() >= 3);

        const Reply renamed =
            server.call("PATCH"_ba, conversationPath(ids[2]),
                        QJsonDocument(QJsonObject{{u"title"_s, u"durable 2 renamed"_s}})
                            .toJson(QJsonDocument::Compact));
        QVERIFY2(renamed.ok(), qPrintable(renamed.describe()));
        titles.insert(ids[2], u"durable 2 renamed"_s);

        for (int round = 0; round < Rounds; ++round) {
            for (int i = 0; i < Conversations; ++i) {
                const Reply sent =
                    server.post(conversationPath(ids[i], u"events"_s),
                                userMessage(u"message %1.%2"_s.arg(i).arg(round), false));
                QVERIFY2(sent.ok(), qPrintable(sent.describe()));
            }
        }
        server.sendSignal(SIGKILL); // right after the last acknowledged write
        QVERIFY(server.waitForExit(10'000));
        QCOMPARE(server.exitStatus(), QProcess::CrashExit);

        ServerProcess &restarted = m_fleet.add(dir);
        QVERIFY2(restarted.startReady(), qPrintable(restarted.stderrText()));
        const Reply count = restarted.get(u"/api/conversations/count"_s);
        QVERIFY2(count.ok(), qPrintable(count.describe()));
        QCOMPARE(count.json.toInteger(), qint64(Conversations + 1));

        QUrlQuery query;
        query.addQueryItem(u"limit"_s, u"100"_s);
        const Reply search = restarted.get(u"/api/conversations/search"_s, query);
        QVERIFY2(search.ok(), qPrintable(search.describe()));
        QMap<QUuid, QString> found;
        for (const QJsonValue &item : search.object().value(u"items"_s).toArray())
            found.insert(QUuid::fromString(item.toObject().value(u"id"_s).toString()),
                         item.toObject().value(u"title"_s).toString());
        QCOMPARE(found, titles);

        for (int i = 0; i < Conversations; ++i) {
            const QJsonObject info = restarted.conversation(ids[i]);
            QCOMPARE(info.value(u"tags"_s).toObject().value(u"n"_s).toString(), QString::number(i));
            QCOMPARE(info.value(u"execution_status"_s).toString(), u"idle"_s);
            const QList<QJsonObject> events = restarted.events(ids[i]);
            QCOMPARE(events.size(), Rounds);
            QString problem;
            QVERIFY2(seqsAreGapless(events, &problem), qPrintable(problem));
            for (int round = 0; round < Rounds; ++round) {
                const QJsonObject event = events[round];
                QCOMPARE(event.value(u"kind"_s).toString(), u"MessageEvent"_s);
                QCOMPARE(event.value(u"source"_s).toString(), u"user"_s);
                QCOMPARE(event.value(u"llm_message"_s)
                             .toObject()
                             .value(u"content"_s)
                             .toArray()
                             .at(0)
                             .toObject()
                             .value(u"text"_s)
                             .toString(),
                         u"message %1.%2"_s.arg(i).arg(round));
            }
            QCOMPARE(info.value(u"stats"_s).toObject().value(u"event_count"_s).toInteger(),
                     qint64(Rounds));
        }
        QCOMPARE(restarted.status(echo), u"finished"_s);
        const QList<QJsonObject> echoAfter = restarted.events(echo);
        QString problem;
        QVERIFY2(seqsAreGapless(echoAfter, &problem), qPrintable(problem));
        QCOMPARE(echoAfter, echoEvents);
    }

    // 4b. The same while the log starts over again and again under concurrent writes: the
    // checkpointer's RESTART (and the sync before it) lose nothing that was acknowledged.
    void acknowledgedWritesSurviveSigkillWhileTheLogStartsOver()
    {
        const QString dir = m_fleet.newDataDir();
        // 64 KiB is 16 pages: past a few events the log is over it at every checkpoint.
        ServerProcess &server = m_fleet.add(dir, {u"--wal-limit"_s, u"64KiB"_s});
        server.setEnvironmentVariable(u"QT_LOGGING_RULES"_s, u"agentdeck.storage.debug=true"_s);
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QUuid id = server.create({});
        QVERIFY(!id.isNull());

        // Eight POSTs in flight at any time; a 201 read here is an acknowledged write.
        constexpr int InFlight = 8;
        QNetworkAccessManager network;
        QUrl url = server.url();
        url.setPath(conversationPath(id, u"events"_s));
        QMap<qint64, QString> acknowledged; // seq -> event id
        QStringList failures;
        int posted = 0;
        bool killed = false;
        std::function<void()> post = [&] {
            QNetworkRequest request(url);
            request.setAttribute(QNetworkRequest::Http2AllowedAttribute, false);
            request.setHeader(QNetworkRequest::ContentTypeHeader, "application/json"_ba);
            const QByteArray body = QJsonDocument(userMessage(u"message %1"_s.arg(posted++), false))
                                        .toJson(QJsonDocument::Compact);
            QNetworkReply *reply = network.post(request, body);
            QObject::connect(reply, &QNetworkReply::finished, reply, [&, reply] {
                reply->deleteLater();
                if (killed)
                    return;
                const int status =
                    reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
                const QJsonObject event = QJsonDocument::fromJson(reply->readAll()).object();
                if (status != 201 && status != 200)
                    failures.append(u"status %1: %2"_s.arg(status).arg(reply->errorString()));
                else
                    acknowledged.insert(event.value(u"seq"_s).toInteger(),
                                        event.value(u"id"_s).toString());
                post();
            });
        };
        for (int i = 0; i < InFlight; ++i)
            post();
        static const QRegularExpression restart(u"log restart at \\d+ frames: file synced"_s);
        const auto restarts = [&] { return server.stderrText().count(restart); };
        QVERIFY2(QTest::qWaitFor([&] { return restarts() >= 5 || !failures.isEmpty(); }, 60'000),
                 qPrintable(u"%1 restarts after %2 acknowledged writes"_s.arg(restarts())
                                .arg(acknowledged.size())));
        QVERIFY2(failures.isEmpty(), qPrintable(failures.join(u"; "_s)));
        killed = true;
        server.sendSignal(SIGKILL); // with writes in flight
        QVERIFY(server.waitForExit(10'000));
        QCOMPARE(server.exitStatus(), QProcess::CrashExit);

        ServerProcess &restarted = m_fleet.add(dir);
        QVERIFY2(restarted.startReady(), qPrintable(restarted.stderrText()));
        const QList<QJsonObject> events = restarted.events(id);
        QString problem;
        QVERIFY2(seqsAreGapless(events, &problem), qPrintable(problem));
        // Writes answered after the test stopped reading may be there too, never fewer.
        QVERIFY2(events.size() >= acknowledged.size(),
                 qPrintable(
                     u"%1 events, %2 acknowledged"_s.arg(events.size()).arg(acknowledged.size())));
        for (auto it = acknowledged.cbegin(); it != acknowledged.cend(); ++it)
            QCOMPARE(events.value(it.key() - 1).value(u"id"_s).toString(), it.value());
        qInfo("%d events stored, %lld acknowledged, across %lld log restarts", int(events.size()),
              qint64(acknowledged.size()), qint64(restarts()));
    }

    // 5. A run left `running` by a killed server is resolved at the next start and continues.
    void killedRunIsRecoveredAtRestart_data()
    {
        QTest::addColumn<bool>("continueWithMessage");
        QTest::addRow("continued with /run") << false;
        QTest::addRow("continued with a run:true message") << true;
    }
    void killedRunIsRecoveredAtRestart()
    {
        QFETCH(bool, continueWithMessage);
        KilledRun run;
        killMidRunAndRestart(&run);
        if (QTest::currentTestFailed())
            return;
        ServerProcess &restarted = *run.restarted;
        const QUuid id = run.id;
        QList<QJsonObject> events = restarted.events(id);
        QString problem;
        QVERIFY2(seqsAreGapless(events, &problem), qPrintable(problem));
        const QList<QJsonObject> actions = ofKind(events, u"ActionEvent"_s);
        QCOMPARE(actions.size(), 1);
        const QList<QJsonObject> observations = ofKind(events, u"ObservationEvent"_s);
        QCOMPARE(observations.size(), 1);
        QVERIFY(observations.first()
                    .value(u"observation"_s)
                    .toObject()
                    .value(u"interrupted"_s)
                    .toBool());
        QCOMPARE(observations.first().value(u"action_id"_s).toString(),
                 actions.first().value(u"id"_s).toString());
        const QList<QJsonObject> errors = ofKind(events, u"AgentErrorEvent"_s);
        QCOMPARE(errors.size(), 1);
        QCOMPARE(errors.first().value(u"code"_s).toString(), u"run_interrupted"_s);
        // It says what Run and Dismiss do.
        const QString advice = errors.first().value(u"error"_s).toString();
        QVERIFY2(advice.contains(u"Run runs the interrupted command again: $ "_s +
                                 sleepCommand(run.marker)) &&
                     advice.contains(u"Dismiss"_s),
                 qPrintable(advice));

        if (!continueWithMessage)
            QVERIFY(runRunsTheCommandAgain(restarted, id, run.marker));
        // A "continue" message with run: true resumes the interrupted run (and is answered).
        const Reply sent = restarted.post(conversationPath(id, u"events"_s),
                                          userMessage(u"echo second-run-ok"_s, true));
        QVERIFY2(sent.ok(), qPrintable(sent.describe()));
        QVERIFY(restarted.waitForStatus(id, u"finished"_s));
        const Reply finalResponse = restarted.get(conversationPath(id, u"agent_final_response"_s));
        QVERIFY2(finalResponse.ok(), qPrintable(finalResponse.describe()));
        QVERIFY2(
            finalResponse.object().value(u"response"_s).toString().contains(u"second-run-ok"_s),
            qPrintable(finalResponse.describe()));

        events = restarted.events(id);
        QVERIFY2(seqsAreGapless(events, &problem), qPrintable(problem));
        QCOMPARE(ofKind(events, u"AgentErrorEvent"_s).size(), 1);
        // With /run, the command ran again (and the test interrupted it).
        QCOMPARE(ofKind(events, u"ObservationEvent"_s).size(), continueWithMessage ? 2 : 3);
    }

    // 5b. DESIGN, Lifecycle: a stale run's command that is still running is stopped, so that the
    // interrupted observation tells the truth (runs with the server's default runtime provider).
    void killedRunsCommandDoesNotOutliveRecovery()
    {
        KilledRun run;
        killMidRunAndRestart(&run);
        if (QTest::currentTestFailed())
            return;
        const QByteArray marker = run.marker;
        QTRY_VERIFY2_WITH_TIMEOUT(
            processesWith(marker).isEmpty(),
            "the command of the killed run is still running after its run was recovered as "
            "interrupted",
            5'000);
    }

    // 5b'. Recover after a kill -9 mid-command says what it did (`actions`) and leaves each
    //      action in the history; a second one has nothing to do. With the sandbox adopted at
    //      the restart there is nothing to recover at all: the restart resolved the run, and
    //      running the command again is what is left (the console disables Recover then).
    void recoverAfterAKillSaysWhatItDid_data()
    {
        QTest::addColumn<bool>("sandboxDies");
        QTest::addRow("the sandbox was adopted") << false;
        QTest::addRow("the sandbox died with the server") << true;
    }
    void recoverAfterAKillSaysWhatItDid()
    {
        QFETCH(bool, sandboxDies);
        KilledRun run;
        killMidRunAndRestart(&run, sandboxDies);
        if (QTest::currentTestFailed())
            return;
        ServerProcess &restarted = *run.restarted;
        const QUuid id = run.id;
        QCOMPARE(runtimeStatus(restarted, id), sandboxDies ? u"missing"_s : u"available"_s);
        const QStringList expected =
            sandboxDies ? QStringList{AgentDeck::RecoveryAction::StartedRuntime} : QStringList{};
        const QString recover = conversationPath(id, u"recover"_s);
        const Reply recovered = restarted.post(recover);
        QVERIFY2(recovered.ok(), qPrintable(recovered.describe()));
        QCOMPARE(AgentDeck::recoveryActionsOf(recovered.object()).value_or(QStringList{u"none"_s}),
                 expected);
        QCOMPARE(recovered.object().value(u"id"_s).toString(), wireId(id));
        QCOMPARE(runtimeStatus(restarted, id), u"available"_s);
        // The command is offered to run again, not run.
        QCOMPARE(restarted.status(id), u"paused"_s);
        QCOMPARE(recoveryActionsIn(restarted.events(id)), expected);

        const Reply again = restarted.post(recover);
        QVERIFY2(again.ok(), qPrintable(again.describe()));
        QCOMPARE(AgentDeck::recoveryActionsOf(again.object()).value_or(QStringList{u"none"_s}),
                 QStringList{});
        QCOMPARE(recoveryActionsIn(restarted.events(id)), expected);
    }

    // 5c. The interrupted observation of a killed run keeps what the command printed; and a
    //     command that ended while no server watched is recorded as it ended.
    void killedRunKeepsWhatTheCommandPrinted_data()
    {
        QTest::addColumn<bool>("endsWhileDown");
        QTest::addRow("still running at the restart") << false;
        QTest::addRow("ended while the server was down") << true;
    }
    void killedRunKeepsWhatTheCommandPrinted()
    {
        QFETCH(bool, endsWhileDown);
        const QString dataDir = m_fleet.newDataDir();
        ServerProcess &server = m_fleet.add(dataDir);
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QByteArray marker = newMarker();
        // Prints a line, then waits for the test to create `gate` in the workspace.
        const QString command = u"echo printed-before-the-kill; "
                                "while [ ! -e gate ]; do sleep 0.05; done; echo %1; exit 3"_s.arg(
                                    QString::fromLatin1(marker));
        const QUuid id = startSleepingConversation(server, command, marker);
        QVERIFY(!id.isNull());
        const QString workspace = server.conversation(id)
                                      .value(u"workspace"_s)
                                      .toObject()
                                      .value(u"working_dir"_s)
                                      .toString();
        const auto record = [&](const QString &name) {
            QFile file(runtimeDir(dataDir, id) + u'/' + name);
            return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
        };
        QTRY_VERIFY_WITH_TIMEOUT(record(u"command.out"_s).contains("printed-before-the-kill"),
                                 5'000);
        server.sendSignal(SIGKILL);
        QVERIFY(server.waitForExit(10'000));
        if (endsWhileDown) {
            QVERIFY(QFile(workspace + u"/gate"_s).open(QIODevice::WriteOnly));
            QTRY_VERIFY_WITH_TIMEOUT(record(u"command.json"_s).contains("\"finished\":true"),
                                     5'000);
        }

        ServerProcess &restarted = m_fleet.add(dataDir);
        QVERIFY2(restarted.startReady(), qPrintable(restarted.stderrText()));
        QCOMPARE(restarted.status(id), u"paused"_s);
        const QList<QJsonObject> observations = ofKind(restarted.events(id), u"ObservationEvent"_s);
        QCOMPARE(observations.size(), 1);
        const QJsonObject observation = observations.first().value(u"observation"_s).toObject();
        if (endsWhileDown) {
            QCOMPARE(observation.value(u"output"_s).toString(),
                     u"printed-before-the-kill\n"_s + QString::fromLatin1(marker) + u'\n');
            QCOMPARE(observation.value(u"exit_code"_s).toInt(), 3);
            QVERIFY(!observation.value(u"interrupted"_s).toBool());
        } else {
            QCOMPARE(observation.value(u"output"_s).toString(), u"printed-before-the-kill\n"_s);
            QCOMPARE(observation.value(u"exit_code"_s).toInt(), -1);
            QVERIFY(observation.value(u"interrupted"_s).toBool());
            QTRY_VERIFY2_WITH_TIMEOUT(processesWith(marker).isEmpty(),
                                      "the interrupted command still runs", 5'000);
        }
    }

    // 5d. A command's output costs its runtime at most what an observation carries, however
    //     much it prints: the sandbox host's memory, or the server's with --runtime process.
    void commandOutputIsBoundedInMemory_data()
    {
        QTest::addColumn<QString>("runtime");
        QTest::addRow("sandbox host") << u"local"_s;
        QTest::addRow("in the server") << u"process"_s;
    }
    void commandOutputIsBoundedInMemory()
    {
        QFETCH(QString, runtime);
        const QString dataDir = m_fleet.newDataDir();
        ServerProcess &server = m_fleet.add(dataDir, {u"--runtime"_s, runtime});
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QUuid id = server.create(shellConversation(u"true"_s));
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        const qint64 pid = runtime == u"local"_s ? sandboxPid(dataDir, id) : server.pid();
        const qint64 before = memoryMiB(pid, "VmHWM");
        QVERIFY(before > 0);

        constexpr qint64 PrintedMiB = 256;
        QVERIFY(
            server
                .post(conversationPath(id, u"events"_s),
                      userMessage(
                          u"head -c %1 /dev/zero | tr '\\0' x; echo"_s.arg(PrintedMiB << 20), true))
                .ok());
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        const qint64 peak = memoryMiB(pid, "VmHWM");
        QVERIFY2(peak - before < 32,
                 qPrintable(
                     u"peak %1 MiB after %2 MiB, for %3 MiB of output"_s.arg(peak).arg(before).arg(
                         PrintedMiB)));
        const QList<QJsonObject> observations = ofKind(server.events(id), u"ObservationEvent"_s);
        QCOMPARE(observations.size(), 2);
        const QString output =
            observations.last().value(u"observation"_s).toObject().value(u"output"_s).toString();
        QVERIFY(output.endsWith(u"\n[output truncated]\n"_s));
        QCOMPARE(output.size(), 1024 * 1024 + QStringView(u"\n[output truncated]\n").size());
    }

    // 6. Bad input over the real binary: the right status, a JSON error, and no crash.
    void badInputIsAnsweredAndNeverCrashes()
    {
        ServerProcess &server = m_fleet.add();
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QUuid existing = server.create(QJsonObject{{u"title"_s, u"target"_s}});
        QVERIFY(!existing.isNull());
        const QString unknown = wireId(QUuid::createUuid());
        constexpr qsizetype Limit = 4 * 1024 * 1024;

        struct Case
        {
            const char *name;
            QByteArray method;
            QString path;
            QByteArray body;
            int status;
            QString code; // empty: any code
        };
        const QList<Case> cases{
            {"malformed JSON", "POST", u"/api/conversations"_s, "{\"agent\": ", 400,
             u"malformed_json"_s},
            {"JSON that is not an object", "POST", u"/api/conversations"_s, "[1, 2]", 400,
             u"malformed_json"_s},
            {"malformed message", "POST", conversationPath(existing, u"events"_s), "not json", 400,
             u"malformed_json"_s},
            {"bad UUID",
             "GET",
             u"/api/conversations/not-a-uuid"_s,
             {},
             422,
             u"invalid_parameter"_s},
            {"bad UUID on an action", "POST", u"/api/conversations/1234/run"_s, "{}", 422,
             u"invalid_parameter"_s},
            {"bad limit",
             "GET",
             u"/api/conversations/search?limit=0"_s,
             {},
             422,
             u"invalid_parameter"_s},
            {"unknown id", "GET", u"/api/conversations/"_s + unknown, {}, 404, u"not_found"_s},
            {"unknown id run", "POST", u"/api/conversations/"_s + unknown + u"/run"_s, "{}", 404,
             u"not_found"_s},
            {"unknown id events",
             "GET",
             u"/api/conversations/"_s + unknown + u"/events/search"_s,
             {},
             404,
             u"not_found"_s},
            {"wrong method", "PUT", u"/api/conversations"_s, "{}", 405, u"method_not_allowed"_s},
            {"wrong method on health", "DELETE", u"/alive"_s, {}, 405, u"method_not_allowed"_s},
            {"body over 4 MiB", "POST", u"/api/conversations"_s, QByteArray(Limit + 1, ' '), 413,
             u"payload_too_large"_s},
            {"unknown api route", "GET", u"/api/nope"_s, {}, 404, u"not_found"_s},
            {"unknown route", "GET", u"/nope/deeper"_s, {}, 404, u"not_found"_s},
        };
        for (const Case &c : cases) {
            QUrlQuery query;
            QString path = c.path;
            if (const qsizetype mark = path.indexOf(u'?'); mark >= 0) {
                query = QUrlQuery(path.mid(mark + 1));
                path = path.left(mark);
            }
            const Reply reply = server.call(c.method, path, c.body, query);
            const QString what = QString::fromLatin1(c.name) + u": "_s + reply.describe();
            QVERIFY2(reply.status == c.status, qPrintable(what));
            QVERIFY2(reply.json.isObject(), qPrintable(what));
            const QJsonObject error = reply.object();
            QVERIFY2(error.value(u"detail"_s).isString() &&
                         !error.value(u"detail"_s).toString().isEmpty(),
                     qPrintable(what));
            QVERIFY2(error.value(u"code"_s).isString() &&
                         !error.value(u"code"_s).toString().isEmpty(),
                     qPrintable(what));
            if (!c.code.isEmpty())
                QVERIFY2(error.value(u"code"_s).toString() == c.code, qPrintable(what));
            QVERIFY2(server.isRunning(), qPrintable(what));
        }

        // A body of exactly the limit is accepted.
        QByteArray atLimit = R"({"title": "at the limit", "agent": {"kind": "shell"}})"_ba;
        atLimit.append(QByteArray(Limit - atLimit.size(), ' '));
        const Reply accepted = server.call("POST"_ba, u"/api/conversations"_s, atLimit);
        QVERIFY2(accepted.status == 201, qPrintable(accepted.describe()));

        // Bytes that are not HTTP, and a request cut off mid-body.
        for (
            const QByteArray &raw :
            {"\x16\x03\x01 this is not HTTP\r\n\r\n"_ba,
             "POST /api/conversations HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"ti"_ba}) {
            QTcpSocket socket;
            socket.connectToHost(QHostAddress::LocalHost, quint16(server.url().port()));
            QVERIFY(socket.waitForConnected(5'000));
            socket.write(raw);
            QVERIFY(socket.waitForBytesWritten(5'000));
            socket.abort();
        }
        QVERIFY(server.isRunning());
        QCOMPARE(server.get(u"/alive"_s).status, 200);
        QCOMPARE(server.conversation(existing).value(u"title"_s).toString(), u"target"_s);
        QVERIFY(server.isRunning());
    }

    // 7. Sandboxes outlive a killed server and are adopted by the next one, nothing re-run.
    void sandboxSurvivesServerKillAndIsAdopted()
    {
        const QString dataDir = m_fleet.newDataDir();
        ServerProcess &first = m_fleet.add(dataDir);
        QVERIFY2(first.startReady(), qPrintable(first.stderrText()));
        const QUuid id = first.create(shellConversation(u"echo ran >> counter; cat counter"_s));
        QVERIFY(!id.isNull());
        QVERIFY(first.waitForStatus(id, u"finished"_s));
        QCOMPARE(runtimeStatus(first, id), u"available"_s);
        const qint64 host = sandboxPid(dataDir, id);
        QVERIFY(host > 0);

        first.sendSignal(SIGKILL);
        QVERIFY(first.waitForExit(10'000));
        QVERIFY2(::kill(static_cast<pid_t>(host), 0) == 0, "the sandbox died with the server");

        ServerProcess &second = m_fleet.add(dataDir);
        QVERIFY2(second.startReady(), qPrintable(second.stderrText()));
        const QJsonObject runtime = second.conversation(id).value(u"runtime_info"_s).toObject();
        QCOMPARE(runtime.value(u"runtime_status"_s).toString(), u"available"_s);
        QVERIFY(runtime.value(u"runtime_error"_s).isNull());
        QCOMPARE(sandboxPid(dataDir, id), host); // the same sandbox process, adopted
        QCOMPARE(second.status(id), u"finished"_s);
        QCOMPARE(ofKind(second.events(id), u"ObservationEvent"_s).size(), 1);
        QFile counter(second.conversation(id)
                          .value(u"workspace"_s)
                          .toObject()
                          .value(u"working_dir"_s)
                          .toString() +
                      u"/counter"_s);
        QVERIFY(counter.open(QIODevice::ReadOnly));
        QCOMPARE(counter.readAll(), "ran\n"_ba); // nothing re-ran

        // The adopted sandbox serves the next command.
        QVERIFY(second
                    .post(conversationPath(id, u"events"_s),
                          userMessage(u"echo ran >> counter; wc -l < counter"_s, true))
                    .ok());
        QVERIFY(second.waitForStatus(id, u"finished"_s));
        QCOMPARE(sandboxPid(dataDir, id), host);
        QCOMPARE(finalResponse(second, id).trimmed(), u"2"_s);
    }

    // 8. A dead sandbox is reported missing and resumable; the next run provisions a fresh one.
    void deadSandboxIsMissingAndReprovisionedOnTheSameWorkspace()
    {
        const QString dataDir = m_fleet.newDataDir();
        ServerProcess &server = m_fleet.add(dataDir);
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QUuid id = server.create(shellConversation(u"echo first > file"_s));
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        const qint64 host = sandboxPid(dataDir, id);
        QVERIFY(host > 0);
        ::kill(static_cast<pid_t>(host), SIGKILL);
        QTRY_COMPARE_WITH_TIMEOUT(runtimeStatus(server, id), u"missing"_s, 10'000);
        QVERIFY(server.conversation(id)
                    .value(u"runtime_info"_s)
                    .toObject()
                    .value(u"can_resume"_s)
                    .toBool());
        QVERIFY(
            server.post(conversationPath(id, u"events"_s), userMessage(u"cat file"_s, true)).ok());
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        QCOMPARE(finalResponse(server, id), u"first\n"_s);
    }

    // 8c. A host that died leaves its pid file, and sooner or later the pid is another
    //     process's: archiving the conversation killed that process, and so did a restart
    //     followed by an archive.
    void aDeadHostsPidIsNeverSignalled_data()
    {
        QTest::addColumn<bool>("restart");
        QTest::addRow("archive") << false;
        QTest::addRow("restart, then archive") << true;
    }
    void aDeadHostsPidIsNeverSignalled()
    {
        QFETCH(bool, restart);
        const QString dataDir = m_fleet.newDataDir();
        ServerProcess *server = &m_fleet.add(dataDir);
        QVERIFY2(server->startReady(), qPrintable(server->stderrText()));
        const QUuid id = server->create(shellConversation(u"echo hi"_s));
        QVERIFY(server->waitForStatus(id, u"finished"_s));
        const qint64 host = sandboxPid(dataDir, id);
        QVERIFY(host > 0);
        ::kill(static_cast<pid_t>(host), SIGKILL);
        QTRY_COMPARE_WITH_TIMEOUT(runtimeStatus(*server, id), u"missing"_s, 10'000);
        // The pid went to another process: the pid file names it now.
        QProcess bystander;
        bystander.start(u"sleep"_s, {u"600"_s});
        QVERIFY(bystander.waitForStarted());
        QFile pidFile(runtimeDir(dataDir, id) + u"/sandbox.pid"_s);
        QVERIFY(pidFile.open(QIODevice::WriteOnly | QIODevice::Truncate));
        pidFile.write(QByteArray::number(bystander.processId()));
        pidFile.close();
        if (restart) {
            server->kill();
            server = &m_fleet.add(dataDir);
            QVERIFY2(server->startReady(), qPrintable(server->stderrText()));
            QVERIFY(!server->stderrText().contains(u"adopted sandbox"_s));
        }
        QVERIFY(server->post(conversationPath(id, u"archive"_s)).ok());
        // What would kill it happens before the answer; a second is for the signal to land.
        bystander.waitForFinished(1000); // false also when it has finished already
        QVERIFY2(bystander.state() == QProcess::Running, "the bystander was killed");
        bystander.kill();
        bystander.waitForFinished();
    }

    // 8b. A sandbox whose runtime dir is removed while no server watches it (its conversation
    //     deleted, the server killed during the delete) ends, with its command.
    void sandboxWithoutItsRuntimeDirEnds()
    {
        const QString dataDir = m_fleet.newDataDir();
        ServerProcess &server = m_fleet.add(dataDir);
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QByteArray marker = newMarker();
        const QUuid id = startSleepingConversation(server, sleepCommand(marker), marker);
        QVERIFY(!id.isNull());
        const qint64 host = sandboxPid(dataDir, id);
        QVERIFY(host > 0);
        server.sendSignal(SIGKILL);
        QVERIFY(server.waitForExit(10'000));
        QVERIFY(::kill(static_cast<pid_t>(host), 0) == 0);

        QVERIFY(QDir(runtimeDir(dataDir, id)).removeRecursively());
        QTRY_VERIFY2_WITH_TIMEOUT(::kill(static_cast<pid_t>(host), 0) != 0,
                                  "the sandbox host outlived its runtime dir", 10'000);
        QTRY_VERIFY2_WITH_TIMEOUT(processesWith(marker).isEmpty(),
                                  "the command outlived its sandbox host", 5'000);
    }

    // 9. A server frozen past its lease TTL keeps serving when thawed, and its run continues or
    //    is resumable; /run never answers 409 without a live executor.
    void frozenServerContinuesAfterThaw()
    {
        ServerProcess &server = m_fleet.add({}, {u"--lease-ttl"_s, u"1s"_s});
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QByteArray marker = newMarker();
        const QUuid id =
            server.create(shellConversation(u"sleep 2; echo "_s + QString::fromLatin1(marker)));
        QVERIFY(server.waitForStatus(id, u"running"_s));
        server.sendSignal(SIGSTOP);
        // Frozen for three TTLs: long enough for the lease to lapse on the database clock.
        QElapsedTimer frozen;
        frozen.start();
        QVERIFY(QTest::qWaitFor([&] { return frozen.elapsed() > 3000; }, 10'000));
        server.sendSignal(SIGCONT);
        QCOMPARE(server.get(u"/alive"_s).status, 200);
        QVERIFY(QTest::qWaitFor(
            [&] {
                const QString status = server.status(id);
                return status == u"finished"_s || status == u"paused"_s;
            },
            15'000));
        if (server.status(id) == u"paused"_s) {
            const Reply run = server.post(conversationPath(id, u"run"_s));
            QVERIFY2(run.ok(), qPrintable(run.describe()));
            QVERIFY(server.waitForStatus(id, u"finished"_s));
        }
        QVERIFY(finalResponse(server, id).contains(QString::fromLatin1(marker)));
        // Nothing runs now, so /run is not a conflict.
        const Reply again = server.post(conversationPath(id, u"run"_s));
        QVERIFY2(again.ok(), qPrintable(again.describe()));
    }

    // A client may open a replay and read nothing. Such a stream holds its budget and a page
    // of the history while it waits, and all of it goes back to the system once it closes:
    // stalled replays of a history of large outputs left 200-300 MB in the heap every time
    // (glibc kept the freed blocks), and a waiting replay held its page for 30 s more.
    //    Events smaller than glibc's mmap threshold stay in its arenas when freed: eight
    //    stalled replays of 100,000 small events left 125 MB behind after they closed.
    void stalledReplaysGiveTheirMemoryBack_data()
    {
        QTest::addColumn<int>("eventBytes");
        QTest::addRow("1 MB events") << (1 << 20);
        QTest::addRow("100 kB events") << 100 * 1024;
    }
    void stalledReplaysGiveTheirMemoryBack()
    {
        QFETCH(int, eventBytes);
        ServerProcess &server = m_fleet.add({}, {});
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QUuid id = server.create({});
        QVERIFY(!id.isNull());
        for (int i = 0; i < (20 << 20) / eventBytes; ++i) // a history of 20 MB
            QVERIFY(server
                        .post(conversationPath(id, u"events"_s),
                              userMessage(QString(eventBytes, QChar(u'a' + i % 26)), false))
                        .ok());
        const auto rssMiB = [&] { return memoryMiB(server.pid(), "VmRSS"); };
        const qint64 before = rssMiB();

        const QByteArray upgrade = "GET /sockets/events/" + wireId(id).toLatin1() +
                                   "?resend_all=true HTTP/1.1\r\nHost: localhost\r\n"
                                   "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                                   "Sec-WebSocket-Version: 13\r\n\r\n";
        QList<int> stalled;
        for (int i = 0; i < 6; ++i) {
            const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
            const int small = 4096;
            ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
            sockaddr_in address{};
            address.sin_family = AF_INET;
            address.sin_port = htons(quint16(QUrl(server.listeningUrl()).port()));
            address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            QCOMPARE(::connect(fd, reinterpret_cast<const sockaddr *>(&address), sizeof address),
                     0);
            QCOMPARE(::send(fd, upgrade.constData(), size_t(upgrade.size()), MSG_NOSIGNAL),
                     upgrade.size());
            stalled.append(fd);
        }
        const bool holding = QTest::qWaitFor([&] { return rssMiB() > before + 60; }, 10'000);
        const qint64 held = rssMiB();
        for (const int fd : std::as_const(stalled))
            ::close(fd);
        QVERIFY2(holding,
                 qPrintable(u"%1 MiB before, %2 MiB with the replays"_s.arg(before).arg(held)));
        QVERIFY2(
            QTest::qWaitFor([&] { return rssMiB() < before + 20; }, 10'000),
            qPrintable(
                u"%1 MiB before, %2 MiB with the replays, %3 MiB after"_s.arg(before).arg(held).arg(
                    rssMiB())));
        QCOMPARE(server.get(u"/alive"_s).status, 200);
    }

    // 10. A lease row left by an earlier instance, expiring far in the future and naming the
    //     PID of a live unrelated process, is adopted at startup at once.
    void foreignLeaseIsAdoptedAtStartup()
    {
        const QString dataDir = m_fleet.newDataDir();
        QUuid id;
        {
            ServerProcess &first = m_fleet.add(dataDir);
            QVERIFY2(first.startReady(), qPrintable(first.stderrText()));
            id = first.create(shellConversation(u"echo ready"_s, false));
            QVERIFY(!id.isNull());
            first.sendSignal(SIGTERM);
            QVERIFY(first.waitForExit(10'000));
        }
        {
            QSqlDatabase db = QSqlDatabase::addDatabase(u"QSQLITE"_s, u"foreign-lease"_s);
            db.setDatabaseName(dataDir + u"/agentdeck.db"_s);
            QVERIFY(db.open());
            QSqlQuery query(db);
            query.prepare(u"UPDATE conversations SET execution_status = 'running', "
                          "lease_owner = ?, lease_epoch = 41, lease_expires_at = ? WHERE id = ?"_s);
            query.addBindValue(u"elsewhere/%1"_s.arg(QCoreApplication::applicationPid()));
            query.addBindValue(QDateTime::currentMSecsSinceEpoch() + 24LL * 3600 * 1000);
            query.addBindValue(wireId(id));
            QVERIFY(query.exec());
            QCOMPARE(query.numRowsAffected(), 1);
            db.close();
        }
        QSqlDatabase::removeDatabase(u"foreign-lease"_s);

        ServerProcess &second = m_fleet.add(dataDir);
        QElapsedTimer startup;
        startup.start();
        QVERIFY2(second.startReady(), qPrintable(second.stderrText()));
        QVERIFY(startup.elapsed() < 10'000);
        QCOMPARE(second.status(id), u"paused"_s);
        QCOMPARE(ofKind(second.events(id), u"AgentErrorEvent"_s).size(), 1);
        const Reply run = second.post(conversationPath(id, u"run"_s));
        QVERIFY2(run.ok(), qPrintable(run.describe()));
        QVERIFY(second.waitForStatus(id, u"finished"_s));
    }

    // 11. A graceful stop keeps the sandbox of a conversation waiting for confirmation, and the
    //     pending approval is still there after a restart.
    void gracefulStopKeepsAPendingConfirmation()
    {
        const QString dataDir = m_fleet.newDataDir();
        ServerProcess &first = m_fleet.add(dataDir);
        QVERIFY2(first.startReady(), qPrintable(first.stderrText()));
        QJsonObject body = shellConversation(u"echo approved"_s);
        body.insert(u"confirmation_policy"_s, QJsonObject{{u"kind"_s, u"AlwaysConfirm"_s}});
        const QUuid id = first.create(body);
        QVERIFY(first.waitForStatus(id, u"waiting_for_confirmation"_s));
        const qint64 host = sandboxPid(dataDir, id);
        QVERIFY(host > 0);
        first.sendSignal(SIGTERM);
        QVERIFY(first.waitForExit(10'000));
        QCOMPARE(first.exitCode(), 0);
        QVERIFY(::kill(static_cast<pid_t>(host), 0) == 0);

        ServerProcess &second = m_fleet.add(dataDir);
        QVERIFY2(second.startReady(), qPrintable(second.stderrText()));
        QCOMPARE(second.status(id), u"waiting_for_confirmation"_s);
        QCOMPARE(runtimeStatus(second, id), u"available"_s);
        const Reply accepted =
            second.post(conversationPath(id, u"events/respond_to_confirmation"_s),
                        QJsonObject{{u"accept"_s, true}});
        QVERIFY2(accepted.ok(), qPrintable(accepted.describe()));
        QVERIFY(second.waitForStatus(id, u"finished"_s));
        QCOMPARE(finalResponse(second, id), u"approved\n"_s);
    }

private:
    // A `runtime` column: commands in a sandbox host, and in the server.
    static void bothRuntimes()
    {
        QTest::addColumn<QString>("runtime");
        QTest::addRow("in a sandbox") << u"local"_s;
        QTest::addRow("in the server") << u"process"_s;
    }
    // A server killed with SIGKILL while a conversation's command sleeps, then started again on
    // the same data dir: the run is resolved by the time it is ready.
    struct KilledRun
    {
        ServerProcess *restarted = nullptr;
        QUuid id;
        QByteArray marker; // on the sleeping command's command line
    };
    // `sandboxDies`: its sandbox host is killed too, before the restart.
    void killMidRunAndRestart(KilledRun *run, bool sandboxDies = false)
    {
        const QString dir = m_fleet.newDataDir();
        ServerProcess &server = m_fleet.add(dir);
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        run->marker = newMarker();
        run->id = startSleepingConversation(server, sleepCommand(run->marker), run->marker);
        QVERIFY(!run->id.isNull());
        const qint64 host = sandboxPid(dir, run->id);
        server.sendSignal(SIGKILL);
        QVERIFY(server.waitForExit(10'000));
        if (sandboxDies) {
            QVERIFY(host > 0);
            QCOMPARE(::kill(static_cast<pid_t>(host), SIGKILL), 0);
            // Gone, or a zombie without a command line: not a sandbox host to adopt.
            QTRY_VERIFY_WITH_TIMEOUT(
                [host] {
                    QFile cmdline(u"/proc/%1/cmdline"_s.arg(host));
                    return !cmdline.open(QIODevice::ReadOnly) || cmdline.readAll().isEmpty();
                }(),
                5'000);
        }

        run->restarted = &m_fleet.add(dir);
        QVERIFY2(run->restarted->startReady(), qPrintable(run->restarted->stderrText()));
        QCOMPARE(run->restarted->status(run->id), u"paused"_s);
    }

    QByteArray newMarker()
    {
        m_markers.append("agentdeck-systest-" + QUuid::createUuid().toByteArray(QUuid::Id128));
        return m_markers.last();
    }

    // Keeps bash alive after `sleep` (and its command line carries the marker).
    static QString sleepCommand(const QByteArray &marker)
    {
        return u"sleep 30; echo "_s + QString::fromLatin1(marker);
    }

    // Creates a shell conversation running `command` and waits until the command is alive.
    static QUuid startSleepingConversation(ServerProcess &server, const QString &command,
                                           const QByteArray &marker)
    {
        Reply reply;
        const QUuid id = server.create(shellConversation(command), &reply);
        if (id.isNull()) {
            qWarning().noquote() << "create failed:" << reply.describe();
            return {};
        }
        if (!QTest::qWaitFor([&] { return !processesWith(marker).isEmpty(); }, 10'000)) {
            qWarning() << "the command did not start";
            return {};
        }
        if (server.status(id) != u"running"_s) {
            qWarning() << "the conversation is" << server.status(id) << "instead of running";
            return {};
        }
        return id;
    }

    // Run on a conversation whose command a stop cut short runs the command again (a second
    // action with the same command, alive), and the test interrupts it rather than wait for it.
    static bool runRunsTheCommandAgain(ServerProcess &server, const QUuid &id,
                                       const QByteArray &marker)
    {
        const QList<QJsonObject> before = ofKind(server.events(id), u"ActionEvent"_s);
        const Reply run = server.post(conversationPath(id, u"run"_s));
        if (run.status != 200) {
            qWarning().noquote() << "run:" << run.describe();
            return false;
        }
        const auto commandOf = [](const QJsonObject &action) {
            return action.value(u"action"_s).toObject().value(u"command"_s).toString();
        };
        const bool again = QTest::qWaitFor(
            [&] {
                const QList<QJsonObject> actions = ofKind(server.events(id), u"ActionEvent"_s);
                return actions.size() == before.size() + 1 &&
                       commandOf(actions.last()) == commandOf(before.last()) &&
                       !processesWith(marker).isEmpty();
            },
            10'000);
        if (!again) {
            qWarning() << "the interrupted command did not run again";
            return false;
        }
        return server.post(conversationPath(id, u"interrupt"_s)).ok() &&
               QTest::qWaitFor([&] { return server.status(id) != u"running"_s; }, 10'000);
    }

    static void verifyRefuses(ServerProcess &server, const QStringList &messageParts)
    {
        QVERIFY2(!server.start(), qPrintable(u"it started: "_s + server.stderrText()));
        QVERIFY2(server.waitForExit(StartTimeoutMs), "it neither listened nor exited");
        QCOMPARE(server.exitStatus(), QProcess::NormalExit);
        QVERIFY2(server.exitCode() != 0, qPrintable(server.stderrText()));
        const QString text = server.stderrText();
        QVERIFY2(server.listeningLines().isEmpty(), qPrintable(text));
        for (const QString &part : messageParts)
            QVERIFY2(text.contains(part), qPrintable(u"\""_s + part + u"\" not in: "_s + text));
    }

    ServerFleet m_fleet;
    QList<QByteArray> m_markers;
};

QTEST_GUILESS_MAIN(SystemHeadlessTest)
#include "tst_system_headless.moc"
