// What the server makes is its own: the data dir only its user may enter, the catalog, logs
// and keys only its user may read, whichever user runs it; another name of the data dir
// through a bind mount is as hidden from commands as the data dir; the console's embedded
// server asks for a key of its own, which only its user can read.
#include "serverprocess.h"

#include <QDirIterator>
#include <QFileInfo>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace Qt::StringLiterals;
using namespace AgentDeck::Testing;

namespace {

mode_t modeOf(const QString &path)
{
    struct stat status
    {};
    return ::lstat(QFile::encodeName(path).constData(), &status) == 0 ? status.st_mode : 0;
}

// Everything under `dir` that a user other than its owner may read, write or enter, but for
// the sandboxes' copies of what every user reads in the host's /etc.
QStringList openToOthers(const QString &dir)
{
    const QStringList public_{u"passwd"_s, u"group"_s, u"resolv.conf"_s};
    QStringList open;
    QDirIterator it(dir, QDir::AllEntries | QDir::Hidden | QDir::System | QDir::NoDotAndDotDot,
                    QDirIterator::Subdirectories);
    while (it.hasNext()) {
        const QString path = it.next();
        const mode_t mode = modeOf(path);
        const bool sandboxEtc = public_.contains(it.fileName()) &&
                                QFileInfo(it.fileInfo().path()).path().endsWith(u"/runtimes"_s);
        if (!S_ISLNK(mode) && (mode & 077) != 0 && !sandboxEtc)
            open.append(u"%1 (%2)"_s.arg(path, QString::number(mode & 07777, 8)));
    }
    return open;
}

} // namespace

class SystemOwnershipTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        QString problem;
        QVERIFY2(m_fleet.findBinary(&problem), qPrintable(problem));
    }

    void cleanup() { m_fleet.cleanUp(); }

    // A data dir the server makes, and one made open to others before it: after a command ran,
    // nothing in it is open to another user, as root and as a plain user.
    void whatTheServerMakesIsItsOwn_data()
    {
        QTest::addColumn<bool>("unprivileged");
        QTest::addColumn<bool>("madeBefore");
        QTest::addRow("made by the server") << false << false;
        QTest::addRow("made open before") << false << true;
        if (::geteuid() == 0) {
            QTest::addRow("as nobody, made by the server") << true << false;
            QTest::addRow("as nobody, made open before") << true << true;
        }
    }
    void whatTheServerMakesIsItsOwn()
    {
        QFETCH(bool, unprivileged);
        QFETCH(bool, madeBefore);
        // Outside /tmp, as a data dir usually is; a parent anyone may pass.
        QTemporaryDir parent(QDir::currentPath() + u"/ownership-XXXXXX"_s);
        QVERIFY(parent.isValid());
        QVERIFY(QFile::setPermissions(parent.path(), QFile::ReadOwner | QFile::WriteOwner |
                                                         QFile::ExeOwner | QFile::ReadOther |
                                                         QFile::ExeOther));
        const QString data = parent.filePath(u"data"_s);
        const auto giveToNobody = [](const QString &path) {
            return ::chown(QFile::encodeName(path).constData(), Nobody, NoGroup) == 0;
        };
        // Where the server as nobody can make its data dir.
        if (unprivileged)
            QVERIFY(giveToNobody(parent.path()));
        if (madeBefore) {
            QVERIFY(QDir().mkpath(data));
            QVERIFY(QFile::setPermissions(
                data, QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner | QFile::ReadGroup |
                          QFile::ExeGroup | QFile::ReadOther | QFile::ExeOther));
            if (unprivileged)
                QVERIFY(giveToNobody(data));
        }
        ServerProcess &server = m_fleet.add(data, {u"--session-api-key"_s, u"k"_s});
        server.setKey(u"k"_s);
        if (unprivileged)
            server.setChildSetup([] {
                if (::setgroups(0, nullptr) != 0 || ::setgid(NoGroup) != 0 || ::setuid(Nobody) != 0)
                    ::_exit(126);
            });
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QUuid id = server.create(shellCreate(u"echo made > file; mkdir dir; echo $HOME"_s));
        QVERIFY(!id.isNull());
        QVERIFY(server.waitForStatus(id, u"finished"_s));

        QCOMPARE(modeOf(data) & 07777, mode_t(0700));
        QVERIFY(QFile::exists(data + u"/agentdeck.db"_s));
        const QStringList open = openToOthers(data);
        QVERIFY2(open.isEmpty(), qPrintable(open.join(u'\n')));
        if (madeBefore)
            QVERIFY2(server.stderrText().contains(u"closed data dir"_s),
                     qPrintable(server.stderrText()));
    }

    // The data dir bound at another place (here /opt/agentdeck-alias, in a mount namespace of
    // the server's own) is hidden from commands there too. (A root server's commands could not
    // enter it anyway, the data dir being 0700 and theirs a uid of their own; an unprivileged
    // server's run as its user, and could.)
    void aMountAliasOfTheDataDirIsHidden_data()
    {
        QTest::addColumn<bool>("unprivileged");
        QTest::addRow("server as root") << false;
        QTest::addRow("server as nobody") << true;
    }
    void aMountAliasOfTheDataDirIsHidden()
    {
        QFETCH(bool, unprivileged);
        if (::geteuid() != 0)
            QSKIP("binding the data dir elsewhere needs root");
        QProcess probe;
        probe.start(u"bwrap"_s, {u"--ro-bind"_s, u"/"_s, u"/"_s, u"--unshare-pid"_s, u"true"_s});
        if (!probe.waitForFinished(5000) || probe.exitCode() != 0)
            QSKIP("bubblewrap cannot create namespaces here");
        const TestDataDir dataDir;
        QVERIFY(
            dataDir.make(unprivileged ? std::optional(std::pair{Nobody, NoGroup}) : std::nullopt));
        const QString &data = dataDir.path;
        const QByteArray source = QFile::encodeName(data);
        ServerProcess &server = m_fleet.add(data);
        // /opt in the server's own mount namespace: a tmpfs with the alias in it; then the
        // server's user.
        server.setChildSetup([source, unprivileged] {
            if (::unshare(CLONE_NEWNS) != 0 ||
                ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
                ::mount("none", "/opt", "tmpfs", 0, "mode=0755") != 0 ||
                ::mkdir("/opt/agentdeck-alias", 0755) != 0 ||
                ::mount(source.constData(), "/opt/agentdeck-alias", nullptr, MS_BIND, nullptr) != 0)
                ::_exit(125);
            if (unprivileged &&
                (::setgroups(0, nullptr) != 0 || ::setgid(NoGroup) != 0 || ::setuid(Nobody) != 0))
                ::_exit(126);
        });
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QUuid id = server.create(shellCreate(
            u"ls -a /opt/agentdeck-alias; test -e /opt/agentdeck-alias/agentdeck.db && "
            "echo CATALOG-VISIBLE; test -e %1/agentdeck.db && echo DATA-VISIBLE; true"_s.arg(
                data)));
        QVERIFY(!id.isNull());
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        const QString output = lastCommandOutput(server.events(id));
        QVERIFY2(output.startsWith(u".\n..\n"_s), qPrintable(output));
        QVERIFY2(!output.contains(u"VISIBLE"_s), qPrintable(output));
        QVERIFY2(!output.contains(u"agentdeck.db"_s), qPrintable(output));
    }

    // The console's server takes no request without the key it made for its data dir (only
    // its user can read it); the console uses it.
    void theConsolesServerHasAKey()
    {
        QTemporaryDir runtime;
        QVERIFY(runtime.isValid());
        ServerProcess &console = m_fleet.add();
        console.runAsConsole(runtime.path());
        QVERIFY2(console.startReady(), qPrintable(console.stderrText()));
        const QString keyFile = console.dataDir() + u"/console.key"_s;
        QVERIFY(QFile::exists(keyFile));
        QCOMPARE(modeOf(keyFile) & 07777, mode_t(0600));
        // With the key (ServerProcess reads it), and without.
        QVERIFY(!console.create(QJsonObject{{u"title"_s, u"keyed"_s}}).isNull());
        console.setHeader("X-Session-API-Key", {});
        const Reply refused = console.get(u"/api/conversations/count"_s);
        QVERIFY2(refused.status == 401, qPrintable(refused.describe()));
        const QString discovery = runtime.filePath(u"agentdeck-console"_s);
        QTRY_VERIFY(QFile::exists(discovery));
        QCOMPARE(modeOf(discovery) & 07777, mode_t(0600));

        // The same key at the next start on the same data dir.
        QFile key(keyFile);
        QVERIFY(key.open(QIODevice::ReadOnly));
        const QByteArray first = key.readAll();
        key.close();
        console.sendSignal(SIGTERM);
        QVERIFY(console.waitForExit(15'000));
        ServerProcess &again = m_fleet.add(console.dataDir());
        again.runAsConsole(runtime.path());
        QVERIFY2(again.startReady(), qPrintable(again.stderrText()));
        QVERIFY(key.open(QIODevice::ReadOnly));
        QCOMPARE(key.readAll(), first);
        QCOMPARE(again.get(u"/api/conversations/count"_s).json.toInteger(), 1);
    }

private:
    ServerFleet m_fleet;
};

QTEST_GUILESS_MAIN(SystemOwnershipTest)
#include "tst_system_ownership.moc"
