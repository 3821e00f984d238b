// What an administrator reads of the server: one shape of log line (ISO time with its zone,
// level, category), plain ids, JSON lines for shippers, and under systemd the journal with
// priorities, against a journal socket of the test's own in a mount namespace of its own.
#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

#include "serverprocess.h"

#include <cerrno>
#include <cstring>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

using namespace Qt::StringLiterals;
using namespace AgentDeck::Testing;

class SystemLogsTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        QString problem;
        QVERIFY2(m_fleet.findBinary(&problem), qPrintable(problem));
    }
    void cleanup() { m_fleet.cleanUp(); }

    // Every line: "2026-12-06T03:37:24.418Z info agentdeck.server: ..." (or +01:00), the
    // listening line and the warnings too; a conversation's id plain, as the API writes it.
    void everyLineHasOneShape()
    {
        ServerProcess &server = m_fleet.add();
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QUuid id = server.create(
            QJsonObject{{u"agent"_s, QJsonObject{{u"kind"_s, u"echo"_s}}}, {u"title"_s, u"l"_s}});
        QVERIFY(!id.isNull());
        QTRY_VERIFY(server.stderrText().contains(wireId(id)));
        // Beyond loopback without a key: the server warns.
        const QString text =
            server.stderrText() + QString::fromUtf8(startedOutput({u"--listen"_s, u"0.0.0.0:0"_s}));
        static const QRegularExpression shape(
            u"^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}(Z|[+-]\\d\\d:\\d\\d) "
            "(debug|info|warning|critical) agentdeck\\.\\w+: \\S"_s);
        int lines = 0;
        for (const QString &line : text.split(u'\n', Qt::SkipEmptyParts)) {
            QVERIFY2(shape.match(line).hasMatch(), qPrintable(line));
            ++lines;
        }
        QVERIFY(lines >= 3);
        QVERIFY2(!text.contains(u"QUuid("_s), qPrintable(text));
        QVERIFY2(text.contains(u" warning agentdeck.server: no session API key is configured"_s),
                 qPrintable(text));
        QVERIFY(text.contains(u" info agentdeck.server: listening on http://0.0.0.0:"_s));
    }

    // --log-format json: one object a line, with the time, the level, the category and the
    // message.
    void jsonLinesForShippers()
    {
        const QByteArray err =
            startedOutput({u"--listen"_s, u"127.0.0.1:0"_s, u"--log-format"_s, u"json"_s});
        bool listening = false;
        for (const QByteArray &line : err.split('\n')) {
            if (line.isEmpty())
                continue;
            QJsonParseError error;
            const QJsonObject object = QJsonDocument::fromJson(line, &error).object();
            QVERIFY2(error.error == QJsonParseError::NoError, line.constData());
            QVERIFY2(QDateTime::fromString(object.value(u"time"_s).toString(), Qt::ISODateWithMs)
                         .isValid(),
                     line.constData());
            QVERIFY(!object.value(u"level"_s).toString().isEmpty());
            QVERIFY(object.value(u"category"_s).toString().startsWith(u"agentdeck."_s));
            listening = listening ||
                        object.value(u"message"_s).toString().startsWith(u"listening on http://"_s);
        }
        QVERIFY2(listening, err.constData());
        QCOMPARE(QProcess::execute(m_fleet.binary(), {u"--log-format"_s, u"xml"_s}), 2);
    }

    // Under systemd (JOURNAL_STREAM names stderr) lines go to the journal, each with the priority
    // of its level: journalctl -p warning finds the warning. The journal here is a socket of the
    // test's, bound where libsystemd looks (/run/systemd/journal/socket) in a mount namespace
    // the server alone runs in.
    void underSystemdLinesGoToTheJournalWithPriorities()
    {
        if (::geteuid() != 0)
            QSKIP("a mount namespace of the test's own takes root");
        QTemporaryDir dir;
        const QString journalDir = dir.filePath(u"journal"_s);
        QVERIFY(QDir().mkpath(journalDir));
        const int journal = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        QVERIFY(journal >= 0);
        const auto closeJournal = qScopeGuard([journal] { ::close(journal); });
        sockaddr_un address{};
        address.sun_family = AF_UNIX;
        const QByteArray path = QFile::encodeName(journalDir + u"/socket"_s);
        QVERIFY(size_t(path.size()) < sizeof address.sun_path);
        std::memcpy(address.sun_path, path.constData(), size_t(path.size()));
        QVERIFY2(::bind(journal, reinterpret_cast<sockaddr *>(&address), sizeof address) == 0,
                 std::strerror(errno));
        ::chmod(path.constData(), 0666);

        // Its stderr is a file: JOURNAL_STREAM names that file, as systemd names its stream.
        const QString stderrFile = dir.filePath(u"stderr"_s);
        QFile(stderrFile).open(QIODevice::WriteOnly);
        struct stat status
        {};
        QVERIFY(::stat(QFile::encodeName(stderrFile).constData(), &status) == 0);
        QProcess process;
        QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
        environment.insert(u"JOURNAL_STREAM"_s,
                           u"%1:%2"_s.arg(quint64(status.st_dev)).arg(quint64(status.st_ino)));
        process.setProcessEnvironment(environment);
        process.setStandardErrorFile(stderrFile, QIODevice::Append);
        process.setProgram(u"unshare"_s);
        process.setArguments({u"--mount"_s, u"--propagation"_s, u"private"_s, u"sh"_s, u"-c"_s,
                              u"mount -t tmpfs tmpfs /run && mkdir -p /run/systemd/journal && "
                              "mount --bind \"$0\" /run/systemd/journal && exec \"$@\""_s,
                              journalDir, m_fleet.binary(), u"--headless"_s, u"--listen"_s,
                              u"0.0.0.0:0"_s, u"--data-dir"_s, dir.filePath(u"data"_s)});
        process.start();
        QVERIFY(process.waitForStarted());
        QList<QByteArray> entries;
        const auto entryWith = [&entries](const QByteArray &text) {
            for (const QByteArray &entry : std::as_const(entries)) {
                if (entry.contains(text))
                    return entry;
            }
            return QByteArray();
        };
        QVERIFY2(QTest::qWaitFor(
                     [&] {
                         char datagram[8192];
                         ssize_t size = 0;
                         while ((size = ::recv(journal, datagram, sizeof datagram, 0)) > 0)
                             entries.append(QByteArray(datagram, int(size)));
                         return !entryWith("MESSAGE=listening on").isEmpty();
                     },
                     StartTimeoutMs),
                 qPrintable(u"nothing reached the journal; stderr: "_s + QString::fromUtf8([&] {
                                QFile file(stderrFile);
                                return file.open(QIODevice::ReadOnly) ? file.readAll()
                                                                      : QByteArray();
                            }())));
        process.terminate();
        QVERIFY(process.waitForFinished(10'000));
        const QByteArray warning = entryWith("MESSAGE=no session API key is configured");
        QVERIFY2(warning.contains("\nPRIORITY=4\n"), warning.constData());
        QVERIFY(warning.contains("\nAGENTDECK_CATEGORY=agentdeck.server\n"));
        QVERIFY(warning.contains("SYSLOG_IDENTIFIER=agentdeck\n"));
        QVERIFY(entryWith("MESSAGE=listening on").contains("\nPRIORITY=6\n"));
        // Nothing of it went to the stream as well.
        QFile written(stderrFile);
        QVERIFY(written.open(QIODevice::ReadOnly));
        QVERIFY2(!written.readAll().contains("listening on"), "a line went to stderr too");
    }

private:
    // What a headless server with `arguments` wrote to stderr until it listened, then stopped.
    QByteArray startedOutput(const QStringList &arguments)
    {
        QTemporaryDir dir;
        QProcess process;
        process.setProgram(m_fleet.binary());
        process.setArguments(
            QStringList{u"--headless"_s, u"--data-dir"_s, dir.filePath(u"data"_s)} + arguments);
        process.start();
        QByteArray err;
        const bool listening =
            process.waitForStarted() && QTest::qWaitFor(
                                            [&] {
                                                err += process.readAllStandardError();
                                                return err.contains("listening on");
                                            },
                                            StartTimeoutMs);
        process.terminate();
        process.waitForFinished(10'000);
        err += process.readAllStandardError();
        if (!listening)
            qWarning("the server did not listen: %s", err.constData());
        return err;
    }

    ServerFleet m_fleet;
};

QTEST_GUILESS_MAIN(SystemLogsTest)
#include "tst_system_logs.moc"
