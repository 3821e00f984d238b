// The docs as a reader meets them: every relative link of README.md and docs/ resolves inside
// the repository, the generated part of docs/API.md is what the server's /openapi.json gives,
// and the README's tour runs as written against the real binary, printing what it shows.
#include "serverprocess.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRandomGenerator>
#include <QRegularExpression>
#include <QScopeGuard>
#include <QTcpServer>
#include <QTemporaryDir>
#include <QTest>

#include <csignal>

using namespace Qt::StringLiterals;
using namespace AgentDeck::Testing;

namespace {

const QString SourceDir = QStringLiteral(AGENTDECK_SOURCE_DIR);

QString readText(const QString &path)
{
    QFile file(path);
    return file.open(QIODevice::ReadOnly) ? QString::fromUtf8(file.readAll()) : QString();
}

// --- docs/API.md's reference, generated from /openapi.json ---------------------------------

const QString ReferenceBegin =
    u"<!-- BEGIN GENERATED from /openapi.json by packaging/api-reference.sh; do not edit -->"_s;
const QString ReferenceEnd = u"<!-- END GENERATED -->"_s;

QString cell(QString text)
{
    return text.replace(u'|', u"\\|"_s).replace(u'\n', u' ');
}

// "#/components/schemas/Recovery" -> a link to that schema's heading below.
QString schemaLink(const QJsonObject &answer)
{
    const QString reference = answer.value(u"content"_s)
                                  .toObject()
                                  .value(u"application/json"_s)
                                  .toObject()
                                  .value(u"schema"_s)
                                  .toObject()
                                  .value(u"$ref"_s)
                                  .toString();
    if (reference.isEmpty())
        return {};
    const QString name = reference.section(u'/', -1);
    return u" ([`%1`](#%2))"_s.arg(name, name.toLower());
}

// The reference part of docs/API.md, markers included: the operations as a table, then the
// schemas. It leaves the version out, so that a release changes nothing here.
QString referenceOf(const QJsonObject &document)
{
    QString out = ReferenceBegin + u"\n\n## Reference\n\n"_s;
    const QJsonObject info = document.value(u"info"_s).toObject();
    out += u"OpenAPI %1. %2\n\n"_s.arg(document.value(u"openapi"_s).toString(),
                                       info.value(u"description"_s).toString());

    const QJsonObject paths = document.value(u"paths"_s).toObject();
    QMap<QString, QString> parameters; // name -> description
    QStringList otherAnswers;
    QString table = u"| method | path | key | answer |\n|---|---|---|---|\n"_s;
    static const QStringList methods{u"get"_s, u"post"_s, u"put"_s, u"patch"_s, u"delete"_s};
    for (auto path = paths.begin(); path != paths.end(); ++path) {
        const QJsonObject operations = path.value().toObject();
        for (const QString &method : methods) {
            if (!operations.contains(method))
                continue;
            const QJsonObject operation = operations.value(method).toObject();
            for (const QJsonValue &parameter : operation.value(u"parameters"_s).toArray())
                parameters.insert(parameter[u"name"_s].toString(),
                                  parameter[u"description"_s].toString());
            const QJsonObject responses = operation.value(u"responses"_s).toObject();
            const QJsonObject ok = responses.value(u"200"_s).toObject();
            const QJsonObject other = responses.value(u"default"_s).toObject();
            const QString otherText = other.value(u"description"_s).toString() + schemaLink(other);
            if (!otherText.isEmpty() && !otherAnswers.contains(otherText))
                otherAnswers.append(otherText);
            table += u"| %1 | `%2` | %3 | %4 |\n"_s.arg(
                method.toUpper(), path.key(),
                operation.contains(u"security"_s) ? u"key"_s : u"open"_s,
                cell(ok.value(u"description"_s).toString() + schemaLink(ok)));
        }
    }
    out += u"Path parameters:\n\n"_s;
    for (auto parameter = parameters.begin(); parameter != parameters.end(); ++parameter)
        out += u"- `{%1}`: %2\n"_s.arg(parameter.key(), parameter.value());
    out += u'\n';
    out +=
        u"A *key* operation needs the `X-Session-API-Key` header when the server has keys; "
        "an *open* one never does. *answer* is the success answer; any other status: %1.\n\n"_s.arg(
            otherAnswers.join(u"; or "_s));
    out += table;

    out += u"\n### Schemas\n"_s;
    const QJsonObject schemas =
        document.value(u"components"_s).toObject().value(u"schemas"_s).toObject();
    for (auto schema = schemas.begin(); schema != schemas.end(); ++schema) {
        out += u"\n#### %1\n\n```json\n%2```\n"_s.arg(
            schema.key(),
            QString::fromUtf8(
                QJsonDocument(schema.value().toObject()).toJson(QJsonDocument::Indented)));
    }
    return out + u'\n' + ReferenceEnd;
}

// --- the README's tour ------------------------------------------------------------------------

struct TourCommand
{
    QString text;     // the command, its lines joined with '\n'
    QString shown;    // what its comment shows after "→" (empty: nothing)
    bool interrupted; // the README stops it with Ctrl-C
};

// Where the comment of a shell line starts (-1: none): a '#' after a blank, outside quotes.
// `quote` carries an open quote from line to line.
qsizetype commentStart(const QString &line, QChar &quote)
{
    for (qsizetype i = 0; i < line.size(); ++i) {
        const QChar c = line[i];
        if (!quote.isNull()) {
            if (c == quote)
                quote = QChar();
        } else if (c == u'\'' || c == u'"') {
            quote = c;
        } else if (c == u'#' && (i == 0 || line[i - 1].isSpace())) {
            return i;
        }
    }
    return -1;
}

// The commands of the "A five-minute tour" section's ```sh blocks, in order. A command goes on
// over lines while a quote is open or a line ends in '\'. A comment's "→ TEXT" shows what the
// command prints; a comment line of its own shows it for the command above.
QList<TourCommand> tourCommands(const QString &readme)
{
    const qsizetype start = readme.indexOf(u"\n## A five-minute tour\n"_s);
    const qsizetype end = readme.indexOf(u"\n## "_s, start + 1);
    if (start < 0)
        return {};
    const QStringList lines = readme.mid(start, end < 0 ? -1 : end - start).split(u'\n');
    QList<TourCommand> commands;
    bool inBlock = false;
    bool continued = false;
    QChar quote;
    for (const QString &line : lines) {
        if (line.startsWith(u"```"_s)) {
            inBlock = !inBlock && line == u"```sh"_s;
            continue;
        }
        if (!inBlock)
            continue;
        const bool quoted = continued && !quote.isNull(); // a line inside a quote stays as it is
        const qsizetype comment = commentStart(line, quote);
        const QString part = comment < 0 ? line : line.left(comment);
        const QString code = quoted ? part : part.trimmed();
        const QString remark = comment < 0 ? QString() : line.mid(comment + 1).trimmed();
        const qsizetype arrow = remark.indexOf(u'→');
        const QString shown = arrow < 0 ? QString() : remark.mid(arrow + 1).trimmed();
        if (continued) {
            commands.last().text += u'\n' + code;
        } else if (!code.isEmpty()) {
            commands.append({code, {}, remark.contains(u"Ctrl-C"_s)});
        }
        if (!shown.isEmpty() && !commands.isEmpty())
            commands.last().shown = shown;
        continued = !quote.isNull() || code.endsWith(u'\\');
    }
    return commands;
}

// What a command shown as `shown` may print: `shown` somewhere in its output, "..." standing for
// any text (lines included) and a run of blanks for any.
QRegularExpression outputPattern(const QString &shown)
{
    QStringList pieces;
    for (const QString &piece : shown.split(u"..."_s)) {
        QStringList words;
        for (const QString &word : piece.split(u' ', Qt::SkipEmptyParts))
            words.append(QRegularExpression::escape(word));
        pieces.append(words.join(u"\\s+"_s));
    }
    return QRegularExpression(pieces.join(u".*?"_s),
                              QRegularExpression::DotMatchesEverythingOption);
}

// The commands whose running again changes nothing: they are repeated until they print what
// the README shows, as its reader would look again (a run finishing, a server starting).
bool isRead(const QString &command)
{
    static const QRegularExpression read(
        u"^(agentdeck ctl (list|show|events)\\b(?!.*--follow)|curl -s \\$B/\\S+$)"_s);
    return read.match(command).hasMatch();
}

// A bash that runs the tour's commands one by one, each with its output in a file of its own,
// keeping the shell's variables (B, ID, SERVER) from one command to the next.
class TourShell
{
public:
    TourShell(const QString &outputDir, const QProcessEnvironment &environment)
        : m_outputDir(outputDir)
    {
        m_bash.setProcessEnvironment(environment);
        m_bash.setProgram(u"bash"_s);
        m_bash.setArguments({u"--noprofile"_s, u"--norc"_s});
        m_bash.setProcessChannelMode(QProcess::ForwardedErrorChannel);
        m_bash.start();
    }
    ~TourShell()
    {
        for (const qint64 pid : std::as_const(m_background))
            ::kill(pid_t(pid), SIGKILL);
        m_bash.kill();
        m_bash.waitForFinished(5'000);
    }

    struct Result
    {
        bool finished = false;
        int status = -1;
        QString output;
    };

    // Runs `command` (in the background when `background`), waits until the shell has run it.
    Result run(const QString &command, bool background)
    {
        const int step = ++m_steps;
        const QString output = QDir(m_outputDir).filePath(QString::number(step));
        // A group, so that what it assigns stays in the shell and what it starts in the
        // background writes to the same file.
        const QString script = u"{ %1%2\n} >'%3' 2>&1 </dev/null\necho \"@@%4 $? $!\"\n"_s.arg(
            command, background ? u" &"_s : QString(), output, QString::number(step));
        m_bash.write(script.toUtf8());
        static const QRegularExpression done(u"@@(\\d+) (\\d+) (\\d*)\n"_s);
        Result result;
        result.finished = QTest::qWaitFor(
            [&] {
                m_stdout += m_bash.readAllStandardOutput();
                for (const auto &match : done.globalMatch(QString::fromUtf8(m_stdout))) {
                    if (match.captured(1).toInt() != step)
                        continue;
                    result.status = match.captured(2).toInt();
                    if (!match.captured(3).isEmpty())
                        m_lastBackground = match.captured(3).toLongLong();
                    return true;
                }
                return false;
            },
            120'000);
        if (background || command.endsWith(u'&') || command.contains(u" & "_s)) {
            m_background.append(m_lastBackground);
            m_backgroundOutputs.append({command, output});
        }
        m_lastOutput = output;
        result.output = readText(output);
        return result;
    }
    QString lastOutput() const { return readText(m_lastOutput); }
    // The end of what each command started in the background printed (the servers' logs).
    QString backgroundOutputs() const
    {
        QString text;
        for (const auto &[command, output] : m_backgroundOutputs)
            text += u"--- %1\n%2\n"_s.arg(command, readText(output).right(3000));
        return text;
    }
    qint64 lastBackground() const { return m_lastBackground; }

private:
    QString m_outputDir;
    QProcess m_bash;
    QByteArray m_stdout;
    int m_steps = 0;
    QString m_lastOutput;
    qint64 m_lastBackground = 0;
    QList<qint64> m_background;
    QList<std::pair<QString, QString>> m_backgroundOutputs; // command, its output file
};

// A free loopback port below the range the kernel gives outgoing connections (0 if none is
// found). The tour's server must come back on its port after a kill, and while it is down the
// console and `ctl events --follow` keep connecting to that port: from a port of that range, a
// connection can meet itself and hold the port.
quint16 freePortBelowEphemeral()
{
    const QStringList range = readText(u"/proc/sys/net/ipv4/ip_local_port_range"_s)
                                  .split(QRegularExpression(u"\\s+"_s), Qt::SkipEmptyParts);
    const int below = range.isEmpty() ? 32768 : std::min(range.first().toInt(), 32768);
    for (int attempt = 0; attempt < 100 && below > 10'000; ++attempt) {
        const auto port = quint16(10'000 + QRandomGenerator::global()->bounded(below - 10'000));
        QTcpServer probe;
        if (probe.listen(QHostAddress::LocalHost, port))
            return port;
    }
    return 0;
}

} // namespace

class SystemDocsTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { QVERIFY2(m_fleet.findBinary(&m_problem), qPrintable(m_problem)); }
    void cleanup() { m_fleet.cleanUp(); }

    // Links of the docs point at files of the repository: a clone has nothing beside it.
    void relativeLinksResolve_data()
    {
        QTest::addColumn<QString>("file");
        QStringList files{u"README.md"_s};
        for (const QString &name : QDir(SourceDir + u"/docs"_s).entryList({u"*.md"_s}))
            files.append(u"docs/"_s + name);
        for (const QString &file : std::as_const(files))
            QTest::addRow("%s", qPrintable(file)) << file;
    }
    void relativeLinksResolve()
    {
        QFETCH(QString, file);
        const QString path = SourceDir + u'/' + file;
        const QString text = readText(path);
        QVERIFY(!text.isEmpty());
        const QString root = QDir(SourceDir).canonicalPath() + u'/';
        static const QRegularExpression link(u"\\]\\(([^)\\s]+)\\)"_s);
        static const QRegularExpression scheme(u"^[a-z][a-z0-9+.-]*:"_s);
        for (const auto &match : link.globalMatch(text)) {
            QString target = match.captured(1);
            if (scheme.match(target).hasMatch() || target.startsWith(u'#'))
                continue;
            target = target.section(u'#', 0, 0);
            const QFileInfo resolved(QFileInfo(path).dir().filePath(target));
            QVERIFY2(resolved.exists(), qPrintable(file + u" links "_s + target));
            QVERIFY2(QString(resolved.canonicalFilePath() + u'/').startsWith(root),
                     qPrintable(file + u" links outside the repository: "_s + target));
        }
    }

    // docs/API.md's reference is what a server of this build describes at /openapi.json.
    // AGENTDECK_WRITE_API_REFERENCE=1 writes it instead (packaging/api-reference.sh).
    void apiReferenceIsCurrent()
    {
        ServerProcess &server = m_fleet.add();
        QVERIFY(server.start());
        const Reply reply = server.get(u"/openapi.json"_s);
        QVERIFY2(reply.ok(), qPrintable(reply.describe()));
        const QString reference = referenceOf(reply.object());

        const QString path = SourceDir + u"/docs/API.md"_s;
        const QString text = readText(path);
        const qsizetype begin = text.indexOf(ReferenceBegin);
        const qsizetype end = text.indexOf(ReferenceEnd);
        QVERIFY2(begin >= 0 && end > begin, "docs/API.md lacks the generated part's marks");
        const QString current = text.mid(begin, end + ReferenceEnd.size() - begin);
        if (qEnvironmentVariableIntValue("AGENTDECK_WRITE_API_REFERENCE") == 1) {
            QFile file(path);
            QVERIFY(file.open(QIODevice::WriteOnly | QIODevice::Truncate));
            file.write(QString(text).replace(begin, current.size(), reference).toUtf8());
            return;
        }
        const QStringList want = reference.split(u'\n');
        const QStringList have = current.split(u'\n');
        for (qsizetype i = 0; i < std::max(want.size(), have.size()); ++i) {
            QVERIFY2(want.value(i) == have.value(i),
                     qPrintable(u"docs/API.md differs from /openapi.json at line %1 of its "
                                "reference: has \"%2\", /openapi.json gives \"%3\"; run "
                                "packaging/api-reference.sh"_s.arg(i + 1)
                                    .arg(have.value(i), want.value(i))));
        }
    }

    // The tour, every command after the first (which builds the binary) in order, against the
    // binary of this build. What it changes of the commands, and nothing else:
    // - `$PWD/build/app` in PATH=... is this build's app directory;
    // - 127.0.0.1:8000 is a free port of this machine, given to ctl as AGENTDECK_SERVER (its
    //   default is port 8000);
    // - /tmp/agentdeck-tour is a temporary dir; HOME and the XDG dirs are temporary too, and
    //   the console runs offscreen;
    // - a command the README stops with Ctrl-C runs in the background and gets SIGTERM once it
    //   printed what the README shows.
    // A command that only reads (ctl list/show/events, a curl GET) runs again until it prints
    // what the README shows, within a minute: a reader who types the next command while a
    // run or a server is still starting looks again the same way.
    void readmeTourRuns()
    {
        QList<TourCommand> commands = tourCommands(readText(SourceDir + u"/README.md"_s));
        QVERIFY2(commands.size() > 10, "README.md has no tour of ```sh blocks");
        QVERIFY(commands.first().text.startsWith(u"packaging/run.sh"_s));
        commands.removeFirst();

        QTemporaryDir home;
        QTemporaryDir outputs;
        QVERIFY(home.isValid() && outputs.isValid());
        const QString dataDir = home.filePath(u"agentdeck-tour"_s);
        const QString binDir = QFileInfo(m_fleet.binary()).absolutePath();
        const quint16 port = freePortBelowEphemeral();
        QVERIFY(port != 0);
        const QString address = u"127.0.0.1:%1"_s.arg(port);
        const auto cleanUp = qScopeGuard([&] { killProcessesWith(dataDir.toUtf8()); });

        QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
        for (const QString &name : environment.keys()) {
            if (name.startsWith(u"AGENTDECK_"_s))
                environment.remove(name);
        }
        environment.insert(u"AGENTDECK_SERVER"_s, u"http://"_s + address);
        environment.insert(u"HOME"_s, home.path());
        for (const char *name : {"XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
                                 "XDG_CACHE_HOME", "XDG_STATE_HOME"}) {
            const QString dir = home.filePath(QString::fromLatin1(name).toLower());
            QVERIFY(QDir().mkpath(dir));
            QFile::setPermissions(dir, QFileDevice::ReadOwner | QFileDevice::WriteOwner |
                                           QFileDevice::ExeOwner);
            environment.insert(QString::fromLatin1(name), dir);
        }
        environment.insert(u"QT_QPA_PLATFORM"_s, u"offscreen"_s);
        environment.insert(u"QT_QUICK_BACKEND"_s, u"software"_s);

        const auto substituted = [&](QString text) {
            return text.replace(u"$PWD/build/app"_s, binDir)
                .replace(u"127.0.0.1:8000"_s, address)
                .replace(u"/tmp/agentdeck-tour"_s, dataDir);
        };
        QVERIFY2(commands.first().text.contains(u"$PWD/build/app"_s),
                 "the tour's PATH line changed: update the substitution above");

        TourShell shell(outputs.path(), environment);
        const auto explain = qScopeGuard([&] {
            if (QTest::currentTestFailed())
                qWarning().noquote() << "what the tour started printed:\n"
                                     << shell.backgroundOutputs();
        });
        for (const TourCommand &command : std::as_const(commands)) {
            qInfo().noquote() << "$" << command.text;
            const QString text = substituted(command.text);
            TourShell::Result result = shell.run(text, command.interrupted);
            QVERIFY2(result.finished, qPrintable(command.text));
            if (!command.shown.isEmpty()) {
                const QRegularExpression pattern = outputPattern(substituted(command.shown));
                QElapsedTimer waited;
                waited.start();
                while (!pattern.match(result.output).hasMatch() && waited.elapsed() < 60'000) {
                    QTest::qWait(200);
                    if (isRead(command.text))
                        result = shell.run(text, false);
                    else
                        result.output = shell.lastOutput();
                }
                QVERIFY2(pattern.match(result.output).hasMatch(),
                         qPrintable(u"`%1` printed:\n%2\nnot what the README shows: %3"_s.arg(
                             command.text, result.output, command.shown)));
            }
            QVERIFY2(result.status == 0, qPrintable(u"`%1` exited with %2:\n%3"_s.arg(command.text)
                                                        .arg(result.status)
                                                        .arg(result.output)));
            if (command.interrupted)
                ::kill(pid_t(shell.lastBackground()), SIGTERM);
        }
        // The tour's last command stops its server and removes the data dir.
        QTRY_VERIFY_WITH_TIMEOUT(processesWith(dataDir.toUtf8()).isEmpty(), 10'000);
    }

private:
    ServerFleet m_fleet;
    QString m_problem;
};

QTEST_GUILESS_MAIN(SystemDocsTest)
#include "tst_system_docs.moc"
