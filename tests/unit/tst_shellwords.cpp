// The path check that workspace routes and file tools run where the command runs: the same
// answers with GNU's `realpath -m` and with only busybox's tools (images without coreutils).
#include "runtime/shellwords.h"

#include <QDir>
#include <QFile>
#include <QProcess>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

using namespace Qt::StringLiterals;
using namespace AgentDeck;

namespace {
constexpr int Refused = 77;
}

class ShellWordsTest : public QObject
{
    Q_OBJECT

private:
    QTemporaryDir m_dir;
    QTemporaryDir m_busyboxOnly; // realpath and readlink of busybox, first on PATH
    QString m_workspace;

    struct Checked
    {
        int exitCode = -1;
        QString output;
    };
    Checked check(const QString &path, bool busybox)
    {
        QProcess shell;
        QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
        if (busybox)
            environment.insert(u"PATH"_s,
                               m_busyboxOnly.path() + u':' + environment.value(u"PATH"_s));
        shell.setProcessEnvironment(environment);
        shell.start(u"bash"_s,
                    {u"-c"_s, shellPathCheck(path, m_workspace, u"refused %s"_s, Refused) +
                                  u"printf '%s' \"$p\""_s});
        shell.waitForFinished();
        return {shell.exitCode(), QString::fromUtf8(shell.readAllStandardOutput())};
    }

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid() && m_busyboxOnly.isValid());
        const QString busybox = QStandardPaths::findExecutable(u"busybox"_s);
        if (busybox.isEmpty())
            QSKIP("busybox is not installed (packaging/install-deps.sh installs it)");
        for (const QString &tool : {u"realpath"_s, u"readlink"_s})
            QVERIFY(QFile::link(busybox, QDir(m_busyboxOnly.path()).filePath(tool)));
        m_workspace = QDir(m_dir.path()).filePath(u"work space"_s);
        QVERIFY(QDir().mkpath(m_workspace + u"/dir"_s));
        QVERIFY(QFile::link(u"/etc"_s, m_workspace + u"/out"_s));
        QVERIFY(QFile::link(m_workspace + u"/dir"_s, m_workspace + u"/in"_s));
        QVERIFY(QFile::link(u"/nowhere/at/all"_s, m_workspace + u"/dangling"_s));
    }

    void answersAlikeWithEitherTools_data()
    {
        QTest::addColumn<bool>("busybox");
        QTest::addColumn<QString>("path"); // in the workspace
        QTest::addColumn<QString>("real"); // empty: refused
        for (const bool busybox : {false, true}) {
            const char *tools = busybox ? "busybox" : "gnu";
            QTest::addRow("%s: the workspace", tools) << busybox << u""_s << u"."_s;
            QTest::addRow("%s: a dir", tools) << busybox << u"/dir"_s << u"/dir"_s;
            QTest::addRow("%s: new, deep", tools) << busybox << u"/dir/a/b/c"_s << u"/dir/a/b/c"_s;
            QTest::addRow("%s: through a link inside", tools)
                << busybox << u"/in/new"_s << u"/dir/new"_s;
            QTest::addRow("%s: through a link out", tools) << busybox << u"/out/passwd"_s << u""_s;
            QTest::addRow("%s: new under a link out", tools) << busybox << u"/out/a/b"_s << u""_s;
        }
        // Where GNU resolves the rest as written, busybox's check refuses rather than guess.
        QTest::addRow("gnu: a link to nowhere") << false << u"/dangling/x"_s << u""_s;
        QTest::addRow("busybox: a link to nowhere") << true << u"/dangling/x"_s << u""_s;
    }
    void answersAlikeWithEitherTools()
    {
        QFETCH(bool, busybox);
        QFETCH(QString, path);
        QFETCH(QString, real);
        const Checked checked = check(m_workspace + path, busybox);
        if (real.isEmpty()) {
            QVERIFY2(checked.exitCode == Refused || checked.exitCode == 1,
                     qPrintable(checked.output));
            return;
        }
        QCOMPARE(checked.exitCode, 0);
        QCOMPARE(checked.output, real == u"."_s ? m_workspace : m_workspace + real);
    }
};

QTEST_GUILESS_MAIN(ShellWordsTest)
#include "tst_shellwords.moc"
