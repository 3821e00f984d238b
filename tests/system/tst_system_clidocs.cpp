// The man pages and shell completions the build makes from --help (packaging/cli/clidocs.sh):
// each lists every option and command that --help lists, the man pages format without a warning,
// and the bash completion offers what a user at a prompt expects. And --version in every mode.
#include "serverprocess.h"

#include <QDir>
#include <QFile>
#include <QProcess>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

using namespace Qt::StringLiterals;
using namespace AgentDeck::Testing;

namespace {

constexpr int ProcessTimeoutMs = 30'000;

struct Output
{
    int exitCode = -1;
    QString out;
    QString err;
};

Output run(const QString &program, const QStringList &arguments,
           const QProcessEnvironment &environment = QProcessEnvironment::systemEnvironment())
{
    QProcess process;
    process.setProcessEnvironment(environment);
    process.start(program, arguments);
    if (!process.waitForStarted() || !process.waitForFinished(ProcessTimeoutMs)) {
        process.kill();
        process.waitForFinished();
        return {-1, {}, program + u" did not run: "_s + process.errorString()};
    }
    return {process.exitStatus() == QProcess::NormalExit ? process.exitCode() : -1,
            QString::fromUtf8(process.readAllStandardOutput()),
            QString::fromUtf8(process.readAllStandardError())};
}

QString readFile(const QString &path)
{
    QFile file(path);
    return file.open(QIODevice::ReadOnly) ? QString::fromUtf8(file.readAll()) : QString();
}

QString generated(const QString &name)
{
    return QStringLiteral(AGENTDECK_CLIDOCS_DIR) + u'/' + name;
}

// What --help lists: the options of its option lines and of ctl's command lines, and ctl's
// commands. Read with patterns of their own, not with the generator's parser.
struct Listed
{
    QStringList options;
    QStringList commands;
};

Listed listed(const QString &help)
{
    static const QRegularExpression optionLine(u"^  (?:(-\\w), )?(--[a-z][a-z0-9-]*)"_s);
    static const QRegularExpression commandLine(u"^  ([a-z][a-z-]*)(?: (.*?))?(?:  |$)"_s);
    static const QRegularExpression option(u"--[a-z][a-z0-9-]*"_s);
    Listed result;
    bool inCommands = false;
    for (const QString &line : help.split(u'\n')) {
        if (!line.startsWith(u' '))
            inCommands = line == u"Commands:"_s;
        if (const auto match = optionLine.match(line); match.hasMatch()) {
            for (const QString &name : {match.captured(1), match.captured(2)})
                if (!name.isEmpty() && !result.options.contains(name))
                    result.options.append(name);
        } else if (const auto match = commandLine.match(line); inCommands && match.hasMatch()) {
            result.commands.append(match.captured(1));
            for (auto it = option.globalMatch(match.captured(2)); it.hasNext();) {
                const QString name = it.next().captured();
                if (!result.options.contains(name))
                    result.options.append(name);
            }
        }
    }
    return result;
}

// A man page's text as a reader sees the words: without font changes, with plain dashes.
QString manWords(const QString &roff)
{
    QString text = roff;
    text.remove(QRegularExpression(u"\\\\f[BIRP]"_s));
    text.replace(u"\\-"_s, u"-"_s);
    text.replace(u"\\e"_s, u"\\"_s);
    return text;
}

bool containsWord(const QString &text, const QString &word)
{
    return QRegularExpression(u"(?<![\\w-])"_s + QRegularExpression::escape(word) + u"(?![\\w-])"_s)
        .match(text)
        .hasMatch();
}

} // namespace

class ClidocsTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void listsEveryOption_data();
    void listsEveryOption();
    void manPageFormatsCleanly_data();
    void manPageFormatsCleanly();
    void zshCompletionParses();
    void bashCompletes_data();
    void bashCompletes();
    void versionInEveryMode_data();
    void versionInEveryMode();

private:
    QString m_binary;
    QTemporaryDir m_work;
};

void ClidocsTest::initTestCase()
{
    QString problem;
    m_binary = agentdeckBinary(&problem);
    QVERIFY2(!m_binary.isEmpty(), qPrintable(problem));
    QVERIFY(m_work.isValid());
}

void ClidocsTest::listsEveryOption_data()
{
    QTest::addColumn<QStringList>("arguments");
    QTest::addColumn<QString>("file");
    QTest::addColumn<bool>("roff");
    for (const auto &[name, arguments, manPage] :
         {std::tuple{"agentdeck", QStringList{u"--help"_s}, u"agentdeck.1"_s},
          std::tuple{"agentdeck ctl", QStringList{u"ctl"_s, u"--help"_s}, u"agentdeck-ctl.1"_s}}) {
        QTest::addRow("%s: man page", name) << arguments << manPage << true;
        QTest::addRow("%s: bash", name) << arguments << u"agentdeck.bash"_s << false;
        QTest::addRow("%s: zsh", name) << arguments << u"_agentdeck"_s << false;
    }
}

void ClidocsTest::listsEveryOption()
{
    QFETCH(QStringList, arguments);
    QFETCH(QString, file);
    QFETCH(bool, roff);
    const Output help = run(m_binary, arguments);
    QCOMPARE(help.exitCode, 0);
    const Listed wanted = listed(help.out);
    QVERIFY2(wanted.options.size() >= 6, qPrintable(wanted.options.join(u' ')));
    const QString text = roff ? manWords(readFile(generated(file))) : readFile(generated(file));
    QVERIFY2(!text.isEmpty(), qPrintable(generated(file) + u" is missing or empty"_s));
    QStringList missing;
    for (const QString &word : wanted.options + wanted.commands)
        if (!containsWord(text, word))
            missing.append(word);
    QVERIFY2(missing.isEmpty(), qPrintable(file + u" lacks "_s + missing.join(u", "_s)));
}

void ClidocsTest::manPageFormatsCleanly_data()
{
    QTest::addColumn<QString>("page");
    QTest::addColumn<QString>("name");
    QTest::addRow("agentdeck(1)") << u"agentdeck.1"_s << u"agentdeck\\s+- an agent server"_s;
    QTest::addRow("agentdeck-ctl(1)")
        << u"agentdeck-ctl.1"_s << u"agentdeck-ctl\\s+- the command-line client"_s;
}

void ClidocsTest::manPageFormatsCleanly()
{
    QFETCH(QString, page);
    QFETCH(QString, name);
    const QString man = QStandardPaths::findExecutable(u"man"_s);
    if (man.isEmpty())
        QSKIP("man is not installed (man-db)");
    QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
    environment.insert(u"MANWIDTH"_s, u"80"_s);
    environment.insert(u"LC_ALL"_s, u"C.UTF-8"_s);
    const Output formatted = run(man, {u"--warnings"_s, u"-l"_s, generated(page)}, environment);
    QVERIFY2(formatted.exitCode == 0 && formatted.err.isEmpty(), qPrintable(formatted.err));
    QVERIFY2(formatted.out.contains(QRegularExpression(u"\\nNAME\\n\\s+"_s + name)),
             qPrintable(formatted.out));
    // The gzipped page is the same page.
    const Output unzipped = run(u"gzip"_s, {u"-dc"_s, generated(page + u".gz"_s)});
    QCOMPARE(unzipped.exitCode, 0);
    QCOMPARE(unzipped.out, readFile(generated(page)));
}

void ClidocsTest::zshCompletionParses()
{
    const QString zsh = QStandardPaths::findExecutable(u"zsh"_s);
    if (zsh.isEmpty())
        QSKIP("zsh is not installed");
    const Output parsed = run(zsh, {u"-n"_s, generated(u"_agentdeck"_s)});
    QVERIFY2(parsed.exitCode == 0, qPrintable(parsed.err));
}

void ClidocsTest::bashCompletes_data()
{
    QTest::addColumn<QStringList>("words"); // the last one is the word being completed
    QTest::addColumn<QStringList>("expected");
    QTest::addColumn<bool>("exact"); // else expected is a part of the candidates
    QTest::addRow("first word: modes and options")
        << QStringList{u""_s} << QStringList{u"ctl"_s, u"--headless"_s, u"--help"_s} << false;
    QTest::addRow("option") << QStringList{u"--li"_s} << QStringList{u"--listen"_s} << true;
    QTest::addRow("option after an option")
        << QStringList{u"--headless"_s, u"--data-"_s} << QStringList{u"--data-dir"_s} << true;
    QTest::addRow("ctl is the first word only")
        << QStringList{u"--headless"_s, u"c"_s} << QStringList{} << true;
    QTest::addRow("a value is not an option")
        << QStringList{u"--listen"_s, u""_s} << QStringList{} << true;
    QTest::addRow("directory") << QStringList{u"--data-dir"_s, u"@WORK@/"_s}
                               << QStringList{u"@WORK@/subdir"_s} << true;
    QTest::addRow("ctl command") << QStringList{u"ctl"_s, u"re"_s}
                                 << QStringList{u"recover"_s, u"reject"_s, u"replicas"_s,
                                                u"reprovision"_s, u"retry"_s}
                                 << true;
    QTest::addRow("ctl command after --server URL")
        << QStringList{u"ctl"_s,         u"--server"_s, u"http"_s, u":"_s,
                       u"//127.0.0.1"_s, u":"_s,        u"8000"_s, u"sh"_s}
        << QStringList{u"show"_s} << true;
    QTest::addRow("ctl option") << QStringList{u"ctl"_s, u"--t"_s} << QStringList{u"--timeout"_s}
                                << true;
    QTest::addRow("ctl command's options") << QStringList{u"ctl"_s, u"list"_s, u"--a"_s}
                                           << QStringList{u"--all"_s, u"--archived"_s} << true;
    QTest::addRow("ctl command's option and global ones")
        << QStringList{u"ctl"_s, u"events"_s, u"ID"_s, u"--"_s}
        << QStringList{u"--follow"_s, u"--json"_s, u"--server"_s} << false;
    QTest::addRow("ctl choices") << QStringList{u"ctl"_s, u"create"_s, u"--agent"_s, u""_s}
                                 << QStringList{u"echo"_s, u"llm"_s, u"shell"_s} << true;
    QTest::addRow("ctl: another command's option is not offered")
        << QStringList{u"ctl"_s, u"show"_s, u"ID"_s, u"--fo"_s} << QStringList{} << true;
}

void ClidocsTest::bashCompletes()
{
    QFETCH(QStringList, words);
    QFETCH(QStringList, expected);
    QFETCH(bool, exact);
    const QString bash = QStandardPaths::findExecutable(u"bash"_s);
    QVERIFY(!bash.isEmpty());
    QVERIFY(QDir(m_work.path()).mkpath(u"subdir"_s));
    QFile file(m_work.filePath(u"file"_s));
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.close();
    for (QString &word : words)
        word.replace(u"@WORK@"_s, m_work.path());
    for (QString &word : expected)
        word.replace(u"@WORK@"_s, m_work.path());

    // As bash calls a completion function: the words of the line, the index of the one under the
    // cursor; the candidates come back in COMPREPLY.
    const QString script = uR"(source "$1" || exit 3
shift
COMP_WORDS=(agentdeck "$@")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
_agentdeck || exit 4
printf '%s\n' "${COMPREPLY[@]}")"_s;
    const Output completed =
        run(bash, QStringList{u"-c"_s, script, u"bash"_s, generated(u"agentdeck.bash"_s)} + words);
    QVERIFY2(completed.exitCode == 0 && completed.err.isEmpty(), qPrintable(completed.err));
    QStringList candidates = completed.out.split(u'\n', Qt::SkipEmptyParts);
    candidates.sort();
    if (exact) {
        QCOMPARE(candidates, expected);
    } else {
        for (const QString &word : expected)
            QVERIFY2(candidates.contains(word), qPrintable(candidates.join(u' ')));
    }
}

void ClidocsTest::versionInEveryMode_data()
{
    QTest::addColumn<QStringList>("arguments");
    QTest::addColumn<QString>("expected");
    const QString version = QStringLiteral(AGENTDECK_VERSION);
    QTest::addRow("agentdeck") << QStringList{u"--version"_s} << u"agentdeck "_s + version;
    QTest::addRow("ctl") << QStringList{u"ctl"_s, u"--version"_s} << u"agentdeck ctl "_s + version;
    QTest::addRow("ctl list") << QStringList{u"ctl"_s, u"list"_s, u"--version"_s}
                              << u"agentdeck ctl "_s + version;
    QTest::addRow("sandbox-host") << QStringList{u"sandbox-host"_s, u"--version"_s}
                                  << u"agentdeck sandbox-host "_s + version;
    QTest::addRow("command-leader") << QStringList{u"command-leader"_s, u"--version"_s}
                                    << u"agentdeck command-leader "_s + version;
}

void ClidocsTest::versionInEveryMode()
{
    QFETCH(QStringList, arguments);
    QFETCH(QString, expected);
    const Output version = run(m_binary, arguments);
    QVERIFY2(version.exitCode == 0, qPrintable(version.err));
    QCOMPARE(version.out, expected + u'\n');
}

QTEST_GUILESS_MAIN(ClidocsTest)
#include "tst_system_clidocs.moc"
