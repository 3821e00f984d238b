// The containment of commands, tried as an attacker's command would, with the real binary run as
// root (as CI and the README run it) and as an unprivileged user: capabilities, mounts, the
// data dir, other workspaces and sandboxes, the host's loopback; the limits of a sandbox policy;
// the end of whole process trees; and how weaker isolation is reported.
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QScopeGuard>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

#include "serverprocess.h"

#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

using namespace Qt::StringLiterals;
using namespace AgentDeck::Testing;

namespace {

// The output of the conversation's last command, with its exit code.
struct Observed
{
    QString output;
    int exitCode = -1;
};

Observed lastObservation(ServerProcess &server, const QUuid &id)
{
    Observed observed;
    for (const QJsonObject &event : server.events(id)) {
        if (event.value(u"kind"_s) != u"ObservationEvent"_s)
            continue;
        const QJsonObject observation = event.value(u"observation"_s).toObject();
        observed.output = observation.value(u"output"_s).toString();
        observed.exitCode = observation.value(u"exit_code"_s).toInt(-1);
    }
    return observed;
}

// What the conversation's sandbox host logged.
QString sandboxLog(ServerProcess &server, const QUuid &id)
{
    QFile log(server.dataDir() + u"/runtimes/"_s + wireId(id) + u"/sandbox.log"_s);
    return log.open(QIODevice::ReadOnly) ? QString::fromUtf8(log.readAll()) : QString();
}

// The command lines of the processes that hold `marker`, for a failure to show.
QString commandLinesWith(const QByteArray &marker)
{
    QStringList lines;
    for (const pid_t pid : processesWith(marker)) {
        QFile cmdline(u"/proc/%1/cmdline"_s.arg(pid));
        if (cmdline.open(QIODevice::ReadOnly))
            lines << u"%1: %2"_s.arg(pid).arg(
                QString::fromLocal8Bit(cmdline.readAll().replace('\0', ' ')));
    }
    return lines.join(u'\n');
}

// A fake bubblewrap that cannot create namespaces, first on a server's PATH.
QString brokenBubblewrapDir(QTemporaryDir &dir)
{
    QFile bwrap(dir.filePath(u"bwrap"_s));
    if (!bwrap.open(QIODevice::WriteOnly))
        return {};
    bwrap.write("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n");
    bwrap.close();
    bwrap.setPermissions(bwrap.permissions() | QFileDevice::ExeOwner);
    return dir.path();
}

} // namespace

class SystemSandboxTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        QString problem;
        QVERIFY2(m_fleet.findBinary(&problem), qPrintable(problem));
        QProcess probe;
        probe.start(u"bwrap"_s, {u"--ro-bind"_s, u"/"_s, u"/"_s, u"--unshare-pid"_s, u"true"_s});
        m_bubblewrap = probe.waitForFinished(5000) && probe.exitCode() == 0;
    }

    void cleanup()
    {
        m_fleet.cleanUp();
        for (const QByteArray &marker : std::as_const(m_markers))
            killProcessesWith(marker);
        m_markers.clear();
    }

    // Each escape an attacker's command tried, with the server as root and as a plain user.
    void escapesFail_data()
    {
        QTest::addColumn<bool>("unprivileged");
        QTest::addRow("server as %s", ::geteuid() == 0 ? "root" : "its user") << false;
        if (::geteuid() == 0)
            QTest::addRow("server as nobody") << true;
    }
    void escapesFail()
    {
        QFETCH(bool, unprivileged);
        if (!m_bubblewrap)
            QSKIP("bubblewrap cannot create namespaces here: the fallback is tested below");
        const TestDataDir dataDir;
        QVERIFY(
            dataDir.make(unprivileged ? std::optional(std::pair{Nobody, NoGroup}) : std::nullopt));
        const QString &data = dataDir.path;
        QTemporaryDir otherWorkspace(QDir::currentPath() + u"/other-workspace-XXXXXX"_s);
        QFile secret(otherWorkspace.filePath(u"secret.txt"_s));
        QVERIFY(secret.open(QIODevice::WriteOnly));
        secret.write("other conversation's file\n");
        secret.close();
        if (unprivileged) {
            QCOMPARE(::chown(QFile::encodeName(otherWorkspace.path()).constData(), Nobody, NoGroup),
                     0);
            QCOMPARE(::chown(QFile::encodeName(secret.fileName()).constData(), Nobody, NoGroup), 0);
        }
        ServerProcess &server = m_fleet.add(data, {u"--workspace-root"_s, otherWorkspace.path()});
        if (unprivileged)
            server.runAsUser(Nobody, NoGroup);
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        QCOMPARE(server.get(u"/server_info"_s)
                     .object()
                     .value(u"sandbox"_s)
                     .toObject()
                     .value(u"isolation"_s)
                     .toString(),
                 u"bubblewrap"_s);

        // The other conversation: its sandbox up, its workspace the caller's.
        const QUuid other = server.create(shellCreate(
            u"true"_s, {{u"workspace"_s, QJsonObject{{u"working_dir"_s, otherWorkspace.path()}}}}));
        QVERIFY(server.waitForStatus(other, u"finished"_s));
        const QString otherSocket = server.dataDir() + u"/runtimes/"_s + wireId(other);

        const QString port = QString::number(server.url().port());
        const QString attack =
            u"grep CapEff /proc/self/status; echo uid=$(id -u);"
            "cd /; umount -l %1 2>/dev/null; umount -l /tmp 2>/dev/null;"
            "mount -o remount,rw / 2>/dev/null; mount -t tmpfs none /mnt 2>/dev/null && "
            "echo MOUNTED;"
            "test -e %1/agentdeck.db && echo CATALOG-VISIBLE;"
            "ls %2 2>/dev/null | grep -q . && echo OTHER-RUNTIME-VISIBLE;"
            "cat %3/secret.txt 2>/dev/null && echo OTHER-WORKSPACE-READ;"
            "touch /usr/escaped 2>/dev/null && echo HOST-WRITTEN;"
            "touch /etc/escaped 2>/dev/null && echo HOST-WRITTEN;"
            "cat /etc/shadow >/dev/null 2>&1 && echo SHADOW-READ;"
            "(exec 3<>/dev/tcp/127.0.0.1/%4) 2>/dev/null && echo REACHED-SERVER;"
            "unshare -Ur true 2>/dev/null && echo NEW-USERNS;"
            "cd \"$OLDPWD\"; touch in-workspace && echo WORKSPACE-WRITABLE;"
            "touch \"$HOME/in-home\" && echo HOME-WRITABLE;"
            "touch /tmp/in-tmp && echo TMP-WRITABLE;"
            "whoami >/dev/null 2>&1 && echo HAS-A-NAME"_s.arg(server.dataDir(), otherSocket,
                                                              otherWorkspace.path(), port);
        const QUuid id = server.create(shellCreate(attack));
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        const QString output = lastObservation(server, id).output;
        QVERIFY2(output.contains(u"CapEff:\t0000000000000000"_s), qPrintable(output));
        QVERIFY2(!output.contains(u"uid=0\n"_s), qPrintable(output));
        QStringList escapes{u"MOUNTED"_s, u"CATALOG-VISIBLE"_s, u"OTHER-RUNTIME-VISIBLE"_s,
                            u"OTHER-WORKSPACE-READ"_s, u"HOST-WRITTEN"_s, u"SHADOW-READ"_s,
                            u"REACHED-SERVER"_s,
                            // A root server's command is a plain uid of the host inside the
                            // sandbox: the seccomp filter keeps it from making a user namespace
                            // (an unprivileged server's is in bubblewrap's, which allows none).
                            u"NEW-USERNS"_s};
        for (const QString &escape : std::as_const(escapes))
            QVERIFY2(!output.contains(escape), qPrintable(escape + u":\n"_s + output));
        for (const QString &writable :
             {u"WORKSPACE-WRITABLE"_s, u"HOME-WRITABLE"_s, u"TMP-WRITABLE"_s, u"HAS-A-NAME"_s})
            QVERIFY2(output.contains(writable), qPrintable(writable + u":\n"_s + output));
        QVERIFY(!QFile::exists(u"/usr/escaped"_s));
    }

    // A link a conversation's command plants leads a transfer nowhere outside its workspace:
    // not to another conversation's files (read, or written through a link to its workspace),
    // nor into the server workspace; the transfer is not handed to the sandbox of the
    // workspace the link leads to. With the server as root and as a plain user.
    void aPlantedLinkLeadsNowhereElse_data() { escapesFail_data(); }
    void aPlantedLinkLeadsNowhereElse()
    {
        QFETCH(bool, unprivileged);
        const TestDataDir dataDir;
        QVERIFY(
            dataDir.make(unprivileged ? std::optional(std::pair{Nobody, NoGroup}) : std::nullopt));
        const QString &data = dataDir.path;
        ServerProcess &server = m_fleet.add(data);
        if (unprivileged)
            server.runAsUser(Nobody, NoGroup);
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QString serverWorkspace =
            server.get(u"/server_info"_s).object().value(u"workspace_dir"_s).toString();
        QVERIFY(!serverWorkspace.isEmpty());
        const auto workingDir = [&server](const QUuid &id) {
            return server.get(conversationPath(id))
                .object()
                .value(u"workspace"_s)
                .toObject()
                .value(u"working_dir"_s)
                .toString();
        };

        const QUuid victim = server.create(shellCreate(u"echo victim-secret > secret.txt"_s));
        QVERIFY(server.waitForStatus(victim, u"finished"_s));
        const QString victimDir = QFileInfo(workingDir(victim)).canonicalFilePath();
        QVERIFY(QFile::exists(victimDir + u"/secret.txt"_s));
        const QUuid attacker = server.create(
            shellCreate(u"ln -s %1/secret.txt file-link; ln -s %1 dir-link; ln -s %2 server-link; "
                        "ln -s ../%3/secret.txt up-link; true"_s.arg(
                            victimDir, serverWorkspace, QFileInfo(victimDir).fileName())));
        QVERIFY(server.waitForStatus(attacker, u"finished"_s));
        const QString attackerDir = QFileInfo(workingDir(attacker)).canonicalFilePath();
        QVERIFY(QFileInfo(attackerDir + u"/dir-link"_s).isSymLink());

        for (const QString &link : {u"file-link"_s, u"up-link"_s, u"dir-link/secret.txt"_s}) {
            const Reply read = server.get(u"/api/file/download"_s,
                                          QUrlQuery{{u"path"_s, attackerDir + u'/' + link}});
            QVERIFY2(read.status == 403, qPrintable(link + u": "_s + read.describe()));
            QVERIFY(!read.body.contains("victim-secret"));
            QCOMPARE(read.object().value(u"code"_s).toString(), u"path_outside_workspace"_s);
        }
        for (const QString &link : {u"dir-link/.bashrc"_s, u"dir-link/secret.txt"_s,
                                    u"server-link/planted.txt"_s, u"file-link"_s}) {
            const Reply written = server.upload(attackerDir + u'/' + link, "overwritten\n");
            QVERIFY2(written.status == 403, qPrintable(link + u": "_s + written.describe()));
        }
        QFile secret(victimDir + u"/secret.txt"_s);
        QVERIFY(secret.open(QIODevice::ReadOnly));
        QCOMPARE(secret.readAll(), QByteArray("victim-secret\n"));
        QVERIFY(!QFile::exists(victimDir + u"/.bashrc"_s));
        QVERIFY(!QFile::exists(serverWorkspace + u"/planted.txt"_s));
        // Its own files still go both ways.
        QCOMPARE(server.upload(attackerDir + u"/own.txt"_s, "own\n").status, 200);
        QCOMPARE(
            server.get(u"/api/file/download"_s, QUrlQuery{{u"path"_s, attackerDir + u"/own.txt"_s}})
                .body,
            QByteArray("own\n"));
    }

    // /tmp and /dev/shm are memory no rlimit counts: together they hold at most the memory
    // limit (a command under 256 MiB held 2 GB in them, 12 GB each), and the other memory file
    // systems of a sandbox (its /, /dev) are read-only. With the server as root and as nobody.
    void memoryFileSystemsAreBounded_data() { escapesFail_data(); }
    void memoryFileSystemsAreBounded()
    {
        QFETCH(bool, unprivileged);
        if (!m_bubblewrap)
            QSKIP("bubblewrap cannot create namespaces here");
        const TestDataDir dataDir;
        QVERIFY(
            dataDir.make(unprivileged ? std::optional(std::pair{Nobody, NoGroup}) : std::nullopt));
        const QString &data = dataDir.path;
        const qint64 memory = qint64(128) << 20;
        ServerProcess &server = m_fleet.add(data, {u"--sandbox-memory"_s, u"128MiB"_s});
        if (unprivileged)
            server.runAsUser(Nobody, NoGroup);
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        // One byte past the limit into each; what each kept, and why it stopped.
        const QUuid id =
            server.create(shellCreate(u"for d in /tmp /dev/shm / /dev; do "
                                      "( head -c %1 /dev/zero > $d/fill ) 2>\"$HOME/err\"; "
                                      "echo \"$d: $(stat -c %s $d/fill 2>/dev/null || echo "
                                      "0) $(sed 's/.*: //' \"$HOME/err\")\"; "
                                      "rm -f $d/fill; done"_s.arg(memory + 1)));
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        const QString output = lastObservation(server, id).output;
        const QStringList lines = output.split(u'\n', Qt::SkipEmptyParts);
        QCOMPARE(lines.size(), 4);
        const auto kept = [&](int line) { return lines[line].section(u' ', 1, 1).toLongLong(); };
        QVERIFY2(lines[0].endsWith(u"No space left on device"_s), qPrintable(output));
        QVERIFY2(lines[1].endsWith(u"No space left on device"_s), qPrintable(output));
        QVERIFY2(kept(0) + kept(1) <= memory && kept(0) > memory / 2, qPrintable(output));
        QVERIFY2(lines[2].endsWith(u"Read-only file system"_s), qPrintable(output));
        QVERIFY2(lines[3].endsWith(u"Read-only file system"_s), qPrintable(output));
        const QJsonObject tmpfs = server.conversation(id)
                                      .value(u"runtime_info"_s)
                                      .toObject()
                                      .value(u"sandbox"_s)
                                      .toObject()
                                      .value(u"tmpfs_bytes"_s)
                                      .toObject();
        QCOMPARE(tmpfs.value(u"/tmp"_s).toInteger() + tmpfs.value(u"/dev/shm"_s).toInteger(),
                 memory);
    }

    // `egress` is a network of the sandbox's own (slirp4netns) from which the host's loopback,
    // the server's port on it included, cannot be reached.
    void egressReachesNoHostLoopback()
    {
        if (!m_bubblewrap)
            QSKIP("bubblewrap cannot create namespaces here");
        if (QStandardPaths::findExecutable(u"slirp4netns"_s).isEmpty() ||
            ::access("/dev/net/tun", R_OK | W_OK) != 0)
            QSKIP("slirp4netns is not installed, or /dev/net/tun is not this user's to open");
        ServerProcess &server = m_fleet.add({}, {u"--sandbox-network"_s, u"egress"_s});
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QString port = QString::number(server.url().port());
        const QUuid id = server.create(shellCreate(
            u"grep -c tap0 /proc/net/dev; cat /etc/resolv.conf;"
            "(exec 3<>/dev/tcp/10.0.2.2/%1) 2>/dev/null && echo REACHED-HOST;"
            "(exec 3<>/dev/tcp/127.0.0.1/%1) 2>/dev/null && echo REACHED-LOOPBACK; true"_s.arg(
                port)));
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        const QString output = lastObservation(server, id).output;
        QString history;
        for (const QJsonObject &event : server.events(id))
            history +=
                QString::fromUtf8(QJsonDocument(event).toJson(QJsonDocument::Compact)) + u'\n';
        QVERIFY2(output.startsWith(u"1\nnameserver 10.0.2.3\n"_s),
                 qPrintable(u"output: "_s + output + u"\nsandbox log: "_s + sandboxLog(server, id) +
                            history));
        QVERIFY2(!output.contains(u"REACHED"_s), qPrintable(output));
        QVERIFY2(!output.contains(u"no network"_s), qPrintable(output));
        const QJsonObject sandbox = server.conversation(id)
                                        .value(u"runtime_info"_s)
                                        .toObject()
                                        .value(u"sandbox"_s)
                                        .toObject();
        QCOMPARE(sandbox.value(u"network"_s).toString(), u"egress"_s);
        QVERIFY(sandbox.value(u"not_enforced"_s).toArray().isEmpty());
    }

    // A 1 GiB allocation under a 256 MiB memory limit fails, and the observation says why; so do
    // the limits of CPU time and file size.
    void limitsStopCommandsAndSayWhich_data()
    {
        QTest::addColumn<QStringList>("arguments");
        QTest::addColumn<QString>("command");
        QTest::addColumn<QString>("note");
        QTest::addRow("memory") << QStringList{u"--sandbox-memory"_s, u"256MiB"_s}
                                << u"x=$(head -c 1G /dev/zero | tr '\\0' a); echo ${#x}"_s
                                << u"limit of 268435456 bytes of memory"_s;
        QTest::addRow("cpu") << QStringList{u"--sandbox-cpu"_s, u"1s"_s} << u"while :; do :; done"_s
                             << u"limit of 1 s of CPU time"_s;
        QTest::addRow("file size") << QStringList{u"--sandbox-file-size"_s, u"1MiB"_s}
                                   << u"head -c 5M /dev/zero > big; stat -c %s big"_s
                                   << u"limit of 1048576 bytes per file"_s;
    }
    void limitsStopCommandsAndSayWhich()
    {
        QFETCH(QStringList, arguments);
        QFETCH(QString, command);
        QFETCH(QString, note);
        ServerProcess &server = m_fleet.add({}, arguments);
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QUuid id = server.create(shellCreate(command));
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        const Observed observed = lastObservation(server, id);
        QVERIFY2(observed.output.contains(note), qPrintable(observed.output));
        if (qstrcmp(QTest::currentDataTag(), "file size") == 0)
            QVERIFY2(observed.output.contains(u"1048576\n"_s), qPrintable(observed.output));
    }

    // A fork loop under --sandbox-processes 64 stays bounded, and the server keeps answering.
    void forkLoopStaysBounded()
    {
        ServerProcess &server = m_fleet.add({}, {u"--sandbox-processes"_s, u"64"_s});
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QByteArray marker = "6403";
        m_markers.append(marker);
        // perl's fork does not retry (bash's waits 15 s on each refused one); the children
        // hold their places while the server is asked whether it still answers. The command
        // fails (exit 1) so that the refusal is the reason it ended.
        const QUuid id = server.create(shellCreate(
            u"perl -e 'my $n = 0; while ($n < 300) { my $p = fork; last unless defined $p; "
            "if (!$p) { exec \"sleep\", \"6403\" } $n++ } print \"forked $n: $!\\n\"; "
            "sleep 3; exit 1'"_s));
        QElapsedTimer running;
        running.start();
        // While the children hold the sandbox full, /alive answers within a second each time.
        while (server.status(id) != u"finished"_s && running.elapsed() < 30'000) {
            QElapsedTimer answer;
            answer.start();
            QCOMPARE(server.get(u"/alive"_s).status, 200);
            QVERIFY2(answer.elapsed() < 1000, qPrintable(QString::number(answer.elapsed())));
        }
        QCOMPARE(server.status(id), u"finished"_s);
        const QString output = lastObservation(server, id).output;
        QVERIFY2(output.contains(u"limit of 64 processes was reached"_s), qPrintable(output));
        static const QRegularExpression forked(u"forked (\\d+): Resource temporarily"_s);
        const auto match = forked.match(output);
        QVERIFY2(match.hasMatch() && match.captured(1).toInt() < 64, qPrintable(output));
        QTRY_VERIFY_WITH_TIMEOUT(processesWith(marker).isEmpty(), 5000);
    }

    // A conversation's `sandbox` may tighten the server's policy, never loosen it.
    void aConversationMayOnlyTighten_data()
    {
        QTest::addColumn<QJsonObject>("sandbox");
        QTest::addColumn<int>("status");
        QTest::addRow("fewer processes") << QJsonObject{{u"processes"_s, 16}} << 201;
        QTest::addRow("less memory") << QJsonObject{{u"memory_bytes"_s, 128 << 20}} << 201;
        QTest::addRow("more processes") << QJsonObject{{u"processes"_s, 65}} << 422;
        QTest::addRow("more memory") << QJsonObject{{u"memory_bytes"_s, 512 << 20}} << 422;
        QTest::addRow("host network") << QJsonObject{{u"network"_s, u"host"_s}} << 422;
        QTest::addRow("unknown network") << QJsonObject{{u"network"_s, u"wifi"_s}} << 422;
        QTest::addRow("negative") << QJsonObject{{u"cpu_seconds"_s, -1}} << 422;
        QTest::addRow("not a number") << QJsonObject{{u"file_size_bytes"_s, u"1G"_s}} << 422;
    }
    void aConversationMayOnlyTighten()
    {
        QFETCH(QJsonObject, sandbox);
        QFETCH(int, status);
        ServerProcess &server = m_fleet.add(
            {}, {u"--sandbox-processes"_s, u"64"_s, u"--sandbox-memory"_s, u"256MiB"_s});
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const Reply reply = server.post(
            u"/api/conversations"_s, QJsonObject{{u"agent"_s, QJsonObject{{u"kind"_s, u"shell"_s}}},
                                                 {u"sandbox"_s, sandbox}});
        QCOMPARE(reply.status, status);
        if (status != 201) {
            QVERIFY(reply.object().value(u"detail"_s).toString().contains(u"sandbox."_s));
            return;
        }
        // The policy in force is what it asked for, the server's for the rest.
        const QJsonObject inForce =
            reply.object().value(u"runtime_info"_s).toObject().value(u"sandbox"_s).toObject();
        for (auto it = sandbox.constBegin(); it != sandbox.constEnd(); ++it)
            QCOMPARE(inForce.value(it.key()), it.value());
        QCOMPARE(inForce.value(u"network"_s).toString(), u"none"_s);
        if (!sandbox.contains(u"memory_bytes"_s))
            QCOMPARE(inForce.value(u"memory_bytes"_s).toInteger(), 256 << 20);
        // And it is what the commands get.
        const QUuid id = QUuid::fromString(reply.object().value(u"id"_s).toString());
        const Reply sent = server.post(conversationPath(id, u"events"_s),
                                       userMessage(u"ulimit -u; ulimit -v"_s, true));
        QVERIFY(sent.ok());
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        const QString output = lastObservation(server, id).output;
        const QString processes = QString::number(sandbox.value(u"processes"_s).toInt(64));
        const QString memory =
            QString::number(sandbox.value(u"memory_bytes"_s).toInteger(256 << 20) / 1024);
        QCOMPARE(output, processes + u'\n' + memory + u'\n');
    }

    // What a command leaves running ends with it, its interrupt, and its conversation's
    // delete: in a sandbox with bubblewrap, without it, and inside the server.
    void processTreesEnd_data()
    {
        QTest::addColumn<QString>("runtime");
        QTest::addColumn<bool>("withoutBubblewrap");
        QTest::addRow("sandbox") << u"local"_s << false;
        QTest::addRow("sandbox without bubblewrap") << u"local"_s << true;
        QTest::addRow("in the server") << u"process"_s << false;
    }
    void processTreesEnd()
    {
        QFETCH(QString, runtime);
        QFETCH(bool, withoutBubblewrap);
        if (!withoutBubblewrap && runtime == u"local"_s && !m_bubblewrap)
            QSKIP("bubblewrap cannot create namespaces here");
        QTemporaryDir fakeBin;
        ServerProcess &server = m_fleet.add({}, {u"--runtime"_s, runtime});
        if (withoutBubblewrap)
            server.setEnvironmentVariable(u"PATH"_s, brokenBubblewrapDir(fakeBin) + u':' +
                                                         qEnvironmentVariable("PATH"));
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        // Markers no port, address or temporary name holds (the tests beside this one have
        // processes with ports such as 36212 on their command lines).
        const QByteArray ended = "6211.25", interrupted = "6212.25", deleted = "6213.25";
        m_markers << ended << interrupted << deleted;

        // A finished command's session of its own, and its child in the background.
        const QUuid first =
            server.create(shellCreate(u"(setsid sleep 6211.25 &); (sleep 6211.25 &); true"_s));
        QVERIFY(server.waitForStatus(first, u"finished"_s));
        QTRY_VERIFY_WITH_TIMEOUT(processesWith(ended).isEmpty(), 5000);

        // An interrupted one.
        const QUuid second =
            server.create(shellCreate(u"(setsid sleep 6212.25 &); sleep 6212.25"_s));
        QTRY_VERIFY_WITH_TIMEOUT(processesWith(interrupted).size() >= 2, 10'000);
        QVERIFY(server.post(conversationPath(second, u"interrupt"_s)).ok());
        QTRY_VERIFY2_WITH_TIMEOUT(processesWith(interrupted).isEmpty(),
                                  qPrintable(commandLinesWith(interrupted)), 5000);

        // One whose conversation is deleted while it runs.
        const QUuid third =
            server.create(shellCreate(u"(setsid sleep 6213.25 &); sleep 6213.25"_s));
        QTRY_VERIFY_WITH_TIMEOUT(processesWith(deleted).size() >= 2, 10'000);
        QVERIFY(server.call("DELETE", conversationPath(third)).ok());
        QTRY_VERIFY_WITH_TIMEOUT(processesWith(deleted).isEmpty(), 5000);

        // One whose conversation is archived, and one whose runtime is stopped, while it runs.
        for (const auto &[marker, stop] :
             {std::pair{QByteArray("6214.25"), QByteArray("archive")},
              std::pair{QByteArray("6215.25"), QByteArray("runtime")}}) {
            m_markers << marker;
            const QString sleep = u"sleep "_s + QString::fromLatin1(marker);
            const QUuid id = server.create(shellCreate(u"(setsid %1 &); %1"_s.arg(sleep)));
            QTRY_VERIFY_WITH_TIMEOUT(processesWith(marker).size() >= 2, 10'000);
            const Reply stopped = stop == "archive"
                                      ? server.post(conversationPath(id, u"archive"_s))
                                      : server.call("DELETE", conversationPath(id, u"runtime"_s));
            QVERIFY2(stopped.ok(), qPrintable(stopped.describe()));
            QTRY_VERIFY_WITH_TIMEOUT(processesWith(marker).isEmpty(), 5000);
        }
    }

    // Without bubblewrap the server says so at startup, in /server_info and in each runtime's
    // info; --require-isolation refuses to start.
    void weakerIsolationIsLoud()
    {
        QTemporaryDir fakeBin;
        const QString path = brokenBubblewrapDir(fakeBin) + u':' + qEnvironmentVariable("PATH");
        ServerProcess &server = m_fleet.add();
        server.setEnvironmentVariable(u"PATH"_s, path);
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        QVERIFY2(server.stderrText().contains(u"commands are not isolated"_s),
                 qPrintable(server.stderrText()));
        const QJsonObject info =
            server.get(u"/server_info"_s).object().value(u"sandbox"_s).toObject();
        QCOMPARE(info.value(u"isolation"_s).toString(), u"none"_s);
        QVERIFY2(info.value(u"reason"_s).toString().contains(u"No permissions"_s),
                 qPrintable(info.value(u"reason"_s).toString()));
        // Even so, the command's leader keeps it from making a user namespace of its own.
        const QUuid id = server.create(
            shellCreate(u"unshare -Ur true 2>/dev/null && echo NEW-USERNS; echo ran"_s));
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        QCOMPARE(lastObservation(server, id).output, u"ran\n"_s);
        const QJsonObject runtime = server.conversation(id)
                                        .value(u"runtime_info"_s)
                                        .toObject()
                                        .value(u"sandbox"_s)
                                        .toObject();
        QCOMPARE(runtime.value(u"isolation"_s).toString(), u"none"_s);
        QVERIFY(!runtime.value(u"not_enforced"_s).toArray().isEmpty());

        ServerProcess &strict = m_fleet.add({}, {u"--require-isolation"_s});
        strict.setEnvironmentVariable(u"PATH"_s, path);
        QVERIFY(!strict.start());
        QVERIFY(strict.waitForExit(10'000));
        QVERIFY(strict.exitCode() != 0);
        QVERIFY2(strict.stderrText().contains(u"--require-isolation"_s),
                 qPrintable(strict.stderrText()));
    }

    // A command that fills the data dir's file system (a workspace has no quota) does not stop
    // the catalog: its reserve is freed, and other conversations are created and run. Without
    // it, runs failed ("database or disk is full") and creates answered 503. The file system is
    // a small tmpfs in a mount namespace of this test's own.
    void aFullDiskLeavesTheCatalogRoom()
    {
        if (::geteuid() != 0)
            QSKIP("needs root, for a file system of the test's own");
        QVERIFY(::unshare(CLONE_NEWNS) == 0);
        QVERIFY(::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0);
        QTemporaryDir disk(QDir::currentPath() + u"/small-disk-XXXXXX"_s);
        QVERIFY(disk.isValid());
        const QByteArray mountPoint = QFile::encodeName(disk.path());
        QVERIFY(::mount("none", mountPoint.constData(), "tmpfs", 0, "size=200m") == 0);
        const auto unmount = qScopeGuard([&] { ::umount2(mountPoint.constData(), MNT_DETACH); });
        const QString data = disk.filePath(u"data"_s);
        ServerProcess &server = m_fleet.add(data);
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QString reserve = data + u"/disk-reserve"_s;
        QVERIFY(QFile::exists(reserve));
        const QUuid filler =
            server.create(shellCreate(u"head -c 1G /dev/zero > fill; echo filled"_s));
        QTRY_VERIFY_WITH_TIMEOUT(!QFile::exists(reserve), 20'000);
        QTRY_VERIFY_WITH_TIMEOUT(server.status(filler) != u"running"_s, 20'000);
        for (int i = 0; i < 3; ++i) {
            const QUuid id = server.create(shellCreate(u"echo ok"_s));
            QVERIFY2(!id.isNull(), qPrintable(server.stderrText().right(2000)));
            QVERIFY2(server.waitForStatus(id, u"finished"_s),
                     qPrintable(server.stderrText().right(2000)));
            QCOMPARE(lastObservation(server, id).output, u"ok\n"_s);
        }
        QVERIFY(server.stderrText().contains(u"its reserve of 67108864 bytes is freed"_s));
        m_fleet.cleanUp();
    }

    // A bubblewrap older than 0.8 knows no --size: its commands still run in it, with /tmp and
    // /dev/shm unsized, and runtime_info says so. Sized unconditionally, every command failed.
    void anOldBubblewrapRunsCommandsWithUnsizedTmpfs()
    {
        if (!m_bubblewrap)
            QSKIP("bubblewrap cannot create namespaces here");
        QTemporaryDir fakeBin;
        QFile bwrap(fakeBin.filePath(u"bwrap"_s));
        QVERIFY(bwrap.open(QIODevice::WriteOnly));
        bwrap.write("#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = --size ] && "
                    "{ echo 'bwrap: Unknown option --size' >&2; exit 1; }; done\n"
                    "exec " +
                    QFile::encodeName(QStandardPaths::findExecutable(u"bwrap"_s)) + " \"$@\"\n");
        bwrap.close();
        bwrap.setPermissions(bwrap.permissions() | QFileDevice::ExeOwner | QFileDevice::ExeOther);
        ServerProcess &server = m_fleet.add();
        server.setEnvironmentVariable(u"PATH"_s,
                                      fakeBin.path() + u':' + qEnvironmentVariable("PATH"));
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QUuid id = server.create(shellCreate(u"echo ran"_s));
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        QCOMPARE(lastObservation(server, id).output, u"ran\n"_s);
        const QJsonObject sandbox = server.conversation(id)
                                        .value(u"runtime_info"_s)
                                        .toObject()
                                        .value(u"sandbox"_s)
                                        .toObject();
        QCOMPARE(sandbox.value(u"isolation"_s).toString(), u"bubblewrap"_s);
        QVERIFY(!sandbox.contains(u"tmpfs_bytes"_s));
        const QString unenforced =
            sandbox.value(u"not_enforced"_s).toVariant().toStringList().join(u'\n');
        QVERIFY2(unenforced.contains(u"older than 0.8"_s), qPrintable(unenforced));
    }

private:
    ServerFleet m_fleet;
    QList<QByteArray> m_markers;
    bool m_bubblewrap = false;
};

QTEST_GUILESS_MAIN(SystemSandboxTest)
#include "tst_system_sandbox.moc"
