// The size limit of workspaces (--sandbox-disk), with the real binary: a command that fills its
// workspace gets "No space left on device" while other conversations and the catalog go on
// writing; the limit and the files outlast a SIGKILL and a lost mount (a reboot); a delete
// leaves no mount and no image; and where the limit cannot be enforced, the server says why.
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonObject>
#include <QScopeGuard>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

#include "serverprocess.h"

#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace Qt::StringLiterals;
using namespace AgentDeck::Testing;

namespace {

QString diskLimitOf(const QJsonObject &sandbox)
{
    return sandbox.value(u"disk_limit"_s).toString();
}

QString diskLimit(ServerProcess &server, const QUuid &id)
{
    return diskLimitOf(
        server.conversation(id).value(u"runtime_info"_s).toObject().value(u"sandbox"_s).toObject());
}

// The mount points of this mount namespace under `dir`.
QStringList mountsUnder(const QString &dir)
{
    QFile table(u"/proc/self/mountinfo"_s);
    QStringList points;
    if (!table.open(QIODevice::ReadOnly))
        return points;
    for (const QByteArray &line : table.readAll().split('\n')) {
        const QString point = QString::fromUtf8(line.split(' ').value(4));
        if (point == dir || point.startsWith(dir + u'/'))
            points << point;
    }
    return points;
}

// The loop devices attached to `image`.
QStringList loopsOf(const QString &image)
{
    QStringList loops;
    const QDir block(u"/sys/block"_s);
    for (const QString &name : block.entryList({u"loop*"_s}, QDir::AllEntries | QDir::System)) {
        QFile backing(block.filePath(name + u"/loop/backing_file"_s));
        if (backing.open(QIODevice::ReadOnly) &&
            QString::fromUtf8(backing.readAll().trimmed()).startsWith(image))
            loops << name;
    }
    return loops;
}

void unmountAllUnder(const QString &dir)
{
    for (int round = 0; round < 8 && !mountsUnder(dir).isEmpty(); ++round) {
        for (const QString &point : mountsUnder(dir))
            ::umount2(QFile::encodeName(point).constData(), MNT_DETACH);
    }
}

} // namespace

class SystemDiskLimitTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        QString problem;
        QVERIFY2(m_fleet.findBinary(&problem), qPrintable(problem));
    }

    void cleanup() { m_fleet.cleanUp(); }

    void aFullWorkspaceStopsOnlyItsOwnWrites()
    {
        if (::geteuid() != 0)
            QSKIP("needs root: a loop mount is root's");
        if (::access("/dev/loop-control", R_OK | W_OK) != 0)
            QSKIP("this machine has no loop devices");
        if (QStandardPaths::findExecutable(u"mkfs.ext4"_s, {u"/usr/sbin"_s, u"/sbin"_s}).isEmpty())
            QSKIP("mkfs.ext4 (e2fsprogs) is not installed");
        // The server's mounts are made in a mount namespace of this test's own, and go with it
        // whatever happens; the guard unmounts them before that.
        QVERIFY(::unshare(CLONE_NEWNS) == 0);
        QVERIFY(::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0);
        const TestDataDir dataDir;
        QVERIFY(dataDir.make());
        const QString data = dataDir.path;
        QTemporaryDir callers(QDir::currentPath() + u"/callers-XXXXXX"_s);
        const auto unmount = qScopeGuard([&] {
            m_fleet.cleanUp();
            killProcessesWith(QFile::encodeName(data));
            unmountAllUnder(data);
        });
        const QStringList arguments{u"--sandbox-disk"_s, u"16M"_s, u"--workspace-root"_s,
                                    callers.path()};

        ServerProcess &server = m_fleet.add(data, arguments);
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QJsonObject info = server.get(u"/server_info"_s).object();
        QCOMPARE(diskLimitOf(info.value(u"sandbox"_s).toObject()), u"16 MiB (enforced)"_s);

        const QUuid filler = server.create(
            shellCreate(u"echo kept > kept.txt && head -c 32M /dev/zero > fill; echo exit=$?"_s));
        QVERIFY(!filler.isNull());
        QVERIFY(server.waitForStatus(filler, u"finished"_s));
        const QString filled = observations(server, filler).value(0);
        QVERIFY2(filled.contains(u"No space left on device"_s) && filled.contains(u"exit=1"_s),
                 qPrintable(filled));
        QCOMPARE(diskLimit(server, filler), u"16 MiB (enforced)"_s);
        const QString workspace = data + u"/workspaces/"_s + wireId(filler);
        const QString image = data + u"/workspace-disks/"_s + wireId(filler) + u".ext4"_s;
        QCOMPARE(mountsUnder(workspace), QStringList{workspace});
        struct stat status
        {};
        QCOMPARE(::stat(QFile::encodeName(image).constData(), &status), 0);
        QCOMPARE(status.st_mode & 07777, 0600u);
        QCOMPARE(status.st_uid, 0u);

        // Others write on: a conversation of its own (the catalog stores its events), and one
        // in a caller's directory, which no limit covers and runtime_info says so.
        const QUuid other = server.create(shellCreate(u"echo ok > note && cat note"_s));
        QVERIFY(server.waitForStatus(other, u"finished"_s));
        QCOMPARE(observations(server, other).value(0), u"ok\n"_s);
        const QUuid outside = server.create(shellCreate(
            u"echo ok"_s,
            {{u"workspace"_s, QJsonObject{{u"working_dir"_s, callers.filePath(u"ws"_s)}}}}));
        QVERIFY(server.waitForStatus(outside, u"finished"_s));
        QVERIFY2(diskLimit(server, outside)
                     .startsWith(u"not enforced: the workspace is a directory the caller named"_s),
                 qPrintable(diskLimit(server, outside)));
        QVERIFY2(diskLimit(server, outside).endsWith(u"; the catalog keeps a 64 MiB reserve"_s),
                 qPrintable(diskLimit(server, outside)));

        // A fork's workspace is a disk of its own with the files copied.
        const Reply forked = server.post(conversationPath(other, u"fork"_s));
        QCOMPARE(forked.status, 201);
        const QUuid fork = QUuid::fromString(forked.object().value(u"id"_s).toString());
        QCOMPARE(diskLimit(server, fork), u"16 MiB (enforced)"_s);
        QCOMPARE(runNext(server, fork, u"cat note"_s), u"ok\n"_s);
        QCOMPARE(mountsUnder(data + u"/workspaces/"_s + wireId(fork)).size(), 1);

        // A SIGKILL, then the mount gone as after a reboot, and its sandbox with it: the next
        // server mounts the disk again when the workspace is used, files and limit both there.
        server.kill();
        killProcessesWith(QFile::encodeName(data));
        unmountAllUnder(data);
        QVERIFY(mountsUnder(data).isEmpty());
        ServerProcess &restarted = m_fleet.add(data, arguments);
        QVERIFY2(restarted.startReady(), qPrintable(restarted.stderrText()));
        // Not at startup: one mount per conversation would make a start slow.
        QVERIFY(mountsUnder(data).isEmpty());
        QCOMPARE(diskLimit(restarted, filler), u"16 MiB (enforced)"_s);
        const QString again =
            runNext(restarted, filler,
                    u"cat kept.txt; rm fill; head -c 32M /dev/zero > fill; echo exit=$?"_s);
        QVERIFY2(again.startsWith(u"kept\n"_s) && again.contains(u"No space left on device"_s) &&
                     again.contains(u"exit=1"_s),
                 qPrintable(again));
        QCOMPARE(mountsUnder(workspace), QStringList{workspace});
        // A reprovisioned sandbox is on the same disk.
        QVERIFY(restarted.post(conversationPath(filler, u"runtime/reprovision"_s)).ok());
        const QString reprovisioned = runNext(
            restarted, filler, u"cat kept.txt; head -c 1M /dev/zero > more; echo exit=$?"_s);
        QVERIFY2(reprovisioned.startsWith(u"kept\n"_s) &&
                     reprovisioned.contains(u"No space left on device"_s),
                 qPrintable(reprovisioned));
        QCOMPARE(runNext(restarted, other, u"echo more >> note && cat note"_s), u"ok\nmore\n"_s);

        // A delete takes the mount, the image and its loop device.
        QVERIFY(restarted.call("DELETE"_ba, conversationPath(filler)).ok());
        QTRY_VERIFY_WITH_TIMEOUT(mountsUnder(workspace).isEmpty(), 10'000);
        QTRY_VERIFY_WITH_TIMEOUT(!QFile::exists(image), 10'000);
        QTRY_VERIFY_WITH_TIMEOUT(loopsOf(image).isEmpty(), 10'000);
        QTRY_VERIFY_WITH_TIMEOUT(!QFile::exists(workspace), 10'000);
    }

    // A server that is not root cannot mount: it says so at startup and in runtime_info, with
    // the catalog's reserve, and --require-isolation refuses to start.
    void withoutRootTheLimitIsNotEnforced()
    {
        const TestDataDir dataDir;
        const bool root = ::geteuid() == 0;
        QVERIFY(dataDir.make(root ? std::optional(std::pair{Nobody, NoGroup}) : std::nullopt));
        const auto asNobody = [&](ServerProcess &server) {
            if (root)
                server.runAsUser(Nobody, NoGroup);
        };
        const auto stop = qScopeGuard([&] {
            m_fleet.cleanUp();
            killProcessesWith(QFile::encodeName(dataDir.path));
        });
        ServerProcess &server = m_fleet.add(dataDir.path, {u"--sandbox-disk"_s, u"16M"_s});
        asNobody(server);
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        QVERIFY2(server.stderrText().contains(
                     u"--sandbox-disk 16 MiB is not enforced: the server is not root"_s),
                 qPrintable(server.stderrText()));
        const QJsonObject sandbox =
            server.get(u"/server_info"_s).object().value(u"sandbox"_s).toObject();
        const QString expected = u"not enforced: the server is not root (a loop mount needs "
                                 "root); the catalog keeps a 64 MiB reserve"_s;
        QCOMPARE(diskLimitOf(sandbox), expected);
        const QUuid id = server.create(shellCreate(u"echo ran"_s));
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        QCOMPARE(diskLimit(server, id), expected);
        QVERIFY(!QDir(dataDir.path + u"/workspace-disks"_s).exists());
        const bool isolated = sandbox.value(u"isolation"_s).toString() == u"bubblewrap"_s;
        server.kill();

        ServerProcess &strict =
            m_fleet.add(dataDir.path, {u"--sandbox-disk"_s, u"16M"_s, u"--require-isolation"_s});
        asNobody(strict);
        QVERIFY(!strict.start());
        QVERIFY(strict.waitForExit(10'000));
        QVERIFY(strict.exitCode() != 0);
        // Weak isolation is refused first, where it is weak.
        if (isolated)
            QVERIFY2(strict.stderrText().contains(
                         u"--require-isolation: --sandbox-disk cannot be enforced"_s),
                     qPrintable(strict.stderrText()));
    }

private:
    ServerFleet m_fleet;
};

QTEST_GUILESS_MAIN(SystemDiskLimitTest)
#include "tst_system_disklimit.moc"
