// `agentdeck ctl` against a real `agentdeck --headless` daemon: every command in both output
// modes, the exit codes of each failure, delete's confirmation on a terminal, and
// `events --follow` across a SIGKILL and restart of the server.
#include <QDir>
#include <QEventLoop>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QProcess>
#include <QRegularExpression>
#include <QTcpServer>
#include <QTemporaryDir>
#include <QTest>

#include "fakes.h"
#include "serverprocess.h"
#include "testevents.h"
#include <QUrlQuery>
#include <QUuid>

#include <csignal>
#include <fcntl.h>
#include <memory>
#include <unistd.h>
#include <vector>

using namespace Qt::StringLiterals;
using namespace AgentDeck::Testing;

namespace {

constexpr int CommandTimeoutMs = 30'000;
// The follower's reconnection backoff grows to 10 s; a restart must be seen well within this.
constexpr int FollowTimeoutMs = 45'000;

// Exit codes of `agentdeck ctl`, as documented in app/ctl.h and the README.
constexpr int ExitOk = 0;
constexpr int ExitFailed = 1;
constexpr int ExitUsage = 2;
constexpr int ExitNotFound = 3;
constexpr int ExitConflict = 4;
constexpr int ExitExpired = 5;
constexpr int ExitUnreachable = 6;
constexpr int ExitUnauthorized = 7;

QJsonObject conversationBody(const QString &agent, const QString &title,
                             const QString &command = {})
{
    QJsonObject body{{u"agent"_s, QJsonObject{{u"kind"_s, agent}}}, {u"title"_s, title}};
    if (!command.isEmpty())
        body.insert(u"initial_message"_s, userMessage(command, true));
    return body;
}

// The conversation's messages, oldest first, as "source:text".
QStringList messages(ServerProcess &server, const QUuid &id)
{
    QStringList texts;
    for (const QJsonObject &event : ofKind(server.events(id), u"MessageEvent"_s))
        texts.append(event.value(u"source"_s).toString() + u':' + messageText(event));
    return texts;
}

QStringList agentReplies(ServerProcess &server, const QUuid &id)
{
    QStringList replies;
    for (const QString &message : messages(server, id)) {
        if (message.startsWith(u"agent:"_s))
            replies.append(message.mid(6));
    }
    return replies;
}

// A port that was free a moment ago, for a server that must come back on the same one.
quint16 freePort()
{
    QTcpServer probe;
    if (!probe.listen(QHostAddress::LocalHost, 0))
        return 0;
    return probe.serverPort();
}

// What one `agentdeck ctl` run printed and how it ended.
struct CtlResult
{
    int exitCode = -1;
    bool finished = false;
    QString out;
    QString err;

    QString describe() const
    {
        return u"exit %1%2\nstdout:\n%3\nstderr:\n%4"_s.arg(exitCode).arg(
            finished ? QString() : u" (did not finish)"_s, out, err);
    }
    QStringList outLines() const { return out.split(u'\n', Qt::SkipEmptyParts); }
    // The --json output of list/show/actions.
    QJsonObject json() const { return QJsonDocument::fromJson(out.toUtf8()).object(); }
    // The --json output of events: one event per line.
    QList<QJsonObject> jsonLines() const
    {
        QList<QJsonObject> objects;
        for (const QString &line : outLines())
            objects.append(QJsonDocument::fromJson(line.toUtf8()).object());
        return objects;
    }
};

// A long-running `agentdeck ctl` (events --follow) whose output is collected as it comes.
class CtlProcess
{
public:
    explicit CtlProcess(const QString &binary, const QStringList &arguments)
        : m_process(std::make_unique<QProcess>())
    {
        m_process->setProgram(binary);
        m_process->setArguments(QStringList{u"ctl"_s} + arguments);
        QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
        for (const QString &name :
             {u"AGENTDECK_SESSION_API_KEY"_s, u"AGENTDECK_API_KEY"_s, u"AGENTDECK_SERVER"_s})
            environment.remove(name);
        m_process->setProcessEnvironment(environment);
        QObject::connect(m_process.get(), &QProcess::readyReadStandardOutput, m_process.get(),
                         [this] { m_out += m_process->readAllStandardOutput(); });
        QObject::connect(m_process.get(), &QProcess::readyReadStandardError, m_process.get(),
                         [this] { m_err += m_process->readAllStandardError(); });
    }

    ~CtlProcess() { kill(); }

    QProcess &process() { return *m_process; }

    bool start()
    {
        m_process->start();
        return m_process->waitForStarted(StartTimeoutMs);
    }

    bool isRunning() const { return m_process->state() != QProcess::NotRunning; }

    void kill()
    {
        if (!isRunning())
            return;
        m_process->kill();
        m_process->waitForFinished(10'000);
    }

    bool waitForFinished(int timeoutMs)
    {
        return QTest::qWaitFor([this] { return !isRunning(); }, timeoutMs);
    }

    CtlResult result()
    {
        m_out += m_process->readAllStandardOutput();
        m_err += m_process->readAllStandardError();
        CtlResult result;
        result.finished = !isRunning() && m_process->exitStatus() == QProcess::NormalExit;
        result.exitCode = result.finished ? m_process->exitCode() : -1;
        result.out = QString::fromUtf8(m_out);
        result.err = QString::fromUtf8(m_err);
        return result;
    }

private:
    std::unique_ptr<QProcess> m_process;
    QByteArray m_out;
    QByteArray m_err;
};

} // namespace

class SystemCtlTest : public QObject
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
        const bool failed = QTest::currentTestFailed();
        for (const auto &ctl : m_ctls) {
            if (failed && ctl->isRunning())
                qWarning().noquote() << "running ctl:" << ctl->result().describe();
            ctl->kill();
        }
        m_ctls.clear();
        m_fleet.cleanUp();
    }

    // Without --server, ctl finds the embedded server of the user's console (its URL changes
    // with each start); with none running, the default address.
    void ctlFindsTheConsolesServer()
    {
        QTemporaryDir runtime;
        QVERIFY(runtime.isValid());
        ServerProcess &console = m_fleet.add();
        console.runAsConsole(runtime.path());
        QVERIFY2(console.startReady(), qPrintable(console.stderrText()));
        const QUuid id = console.create(QJsonObject{{u"title"_s, u"in the console"_s}});
        QVERIFY(!id.isNull());
        const QMap<QString, QString> environment{{u"XDG_RUNTIME_DIR"_s, runtime.path()}};
        QTRY_VERIFY(QFile::exists(runtime.filePath(u"agentdeck-console"_s)));
        CtlResult result = ctl({u"list"_s}, environment);
        QVERIFY2(result.exitCode == 0, qPrintable(result.describe()));
        QVERIFY2(result.out.contains(u"in the console"_s), qPrintable(result.describe()));

        // It says which server it asked, and found the key with it.
        QVERIFY2(result.err.contains(u"asking %1 (the console's server, found in %2)"_s.arg(
                     console.urlText(), runtime.filePath(u"agentdeck-console"_s))),
                 qPrintable(result.describe()));

        // A console killed leaves its file; its pid is no agentdeck's any more. Whether a
        // server listens there or not, ctl says it asks the default address.
        console.kill();
        QVERIFY(QFile::exists(runtime.filePath(u"agentdeck-console"_s)));
        result = ctl({u"list"_s, u"--timeout"_s, u"2s"_s}, environment);
        QVERIFY2(result.err.contains(u"asking http://127.0.0.1:8000 (no console's server runs"_s),
                 qPrintable(result.describe()));
    }

    // Where there is no runtime dir of the session's, the file is in the console's default
    // data dir, which only its user can enter: never in a dir every login of the user shares.
    void ctlFindsTheConsolesServerWithoutARuntimeDir()
    {
        QTemporaryDir home;
        QVERIFY(home.isValid());
        const QString dataDir = home.filePath(u".local/share/agentdeck"_s);
        ServerProcess &console = m_fleet.add(dataDir);
        console.runAsConsole();
        console.setEnvironmentVariable(u"HOME"_s, home.path());
        console.setEnvironmentVariable(u"XDG_RUNTIME_DIR"_s, QString());
        console.setEnvironmentVariable(u"XDG_DATA_HOME"_s, QString());
        QVERIFY2(console.startReady(), qPrintable(console.stderrText()));
        const QString file = dataDir + u"/console-server"_s;
        QTRY_VERIFY(QFile::exists(file));
        QCOMPARE(QFileInfo(file).permissions() &
                     ~(QFile::ReadOwner | QFile::WriteOwner | QFile::ReadUser | QFile::WriteUser),
                 QFileDevice::Permissions());
        const CtlResult result = ctl({u"list"_s}, {{u"HOME"_s, home.path()},
                                                   {u"XDG_RUNTIME_DIR"_s, QString()},
                                                   {u"XDG_DATA_HOME"_s, QString()}});
        QVERIFY2(result.exitCode == 0, qPrintable(result.describe()));
        QVERIFY2(result.err.contains(u"found in "_s + file), qPrintable(result.describe()));
    }

    // Mistakes in the arguments are caught before any request: exit 2 and a sentence.
    void usageErrors_data()
    {
        QTest::addColumn<QStringList>("arguments");
        QTest::addColumn<QString>("message");
        const QString id = wireId(QUuid::createUuid());
        QTest::addRow("no command") << QStringList{} << u"a command is missing"_s;
        QTest::addRow("unknown command") << QStringList{u"frobnicate"_s} << u"unknown command"_s;
        QTest::addRow("missing id") << QStringList{u"show"_s} << u"needs a conversation ID"_s;
        QTest::addRow("bad id") << QStringList{u"show"_s, u"not-a-uuid"_s}
                                << u"is not a conversation ID"_s;
        QTest::addRow("option of another command")
            << QStringList{u"list"_s, u"--follow"_s} << u"list does not take --follow"_s;
        QTest::addRow("unknown option") << QStringList{u"list"_s, u"--colour"_s} << u"colour"_s;
        QTest::addRow("archived and all")
            << QStringList{u"list"_s, u"--archived"_s, u"--all"_s} << u"exclude each other"_s;
        QTest::addRow("bad status")
            << QStringList{u"list"_s, u"--status"_s, u"sleeping"_s} << u"--status takes"_s;
        QTest::addRow("extra argument")
            << QStringList{u"archive"_s, id, u"again"_s} << u"unexpected argument"_s;
        QTest::addRow("send without text") << QStringList{u"send"_s, id} << u"needs the text"_s;
        QTest::addRow("reason for accept") << QStringList{u"accept"_s, id, u"--reason"_s, u"why"_s}
                                           << u"accept does not take --reason"_s;
        QTest::addRow("bad server")
            << QStringList{u"--server"_s, u"ftp://example.org"_s, u"list"_s} << u"--server"_s;
        // It ended the header line and began one of its own making.
        QTest::addRow("key with a line break")
            << QStringList{u"--session-api-key"_s, u"K\r\nX-Injected: yes"_s, u"list"_s}
            << u"cannot contain control characters"_s;
    }

    void usageErrors()
    {
        QFETCH(QStringList, arguments);
        QFETCH(QString, message);
        const CtlResult result = ctl(arguments);
        QVERIFY2(result.exitCode == ExitUsage, qPrintable(result.describe()));
        QVERIFY2(result.err.contains(message), qPrintable(result.describe()));
        QVERIFY2(result.out.isEmpty(), qPrintable(result.describe()));
    }

    // Output that went nowhere (a full disk here) was lost, and the exit was 0.
    void outputThatCannotBeWrittenFails()
    {
        ServerProcess &server = m_fleet.add();
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        QVERIFY(!server.create(conversationBody(u"shell"_s, u"listed"_s, u"echo hi"_s)).isNull());
        QProcess process;
        process.setStandardOutputFile(u"/dev/full"_s);
        process.setStandardInputFile(QProcess::nullDevice());
        process.start(m_fleet.binary(), QStringList{u"ctl"_s} + withServer(server, {u"list"_s}));
        QVERIFY(process.waitForFinished(CommandTimeoutMs));
        const QByteArray err = process.readAllStandardError();
        QCOMPARE(process.exitCode(), ExitFailed);
        QVERIFY2(err.contains("cannot write the output: No space left on device"), err.constData());
    }

    void helpIsPrinted()
    {
        for (const QString &argument : {u"--help"_s, u"-h"_s, u"help"_s}) {
            const CtlResult help = ctl({argument});
            QVERIFY2(help.exitCode == ExitOk, qPrintable(help.describe()));
            QVERIFY(help.out.startsWith(u"Usage: agentdeck ctl"_s));
            QVERIFY(help.out.contains(u"Exit codes"_s));
        }
        // A command's help is its own entry, with the options every command takes.
        for (const QStringList &arguments :
             {QStringList{u"list"_s, u"--help"_s}, QStringList{u"help"_s, u"list"_s}}) {
            const CtlResult help = ctl(arguments);
            QVERIFY2(help.exitCode == ExitOk, qPrintable(help.describe()));
            QVERIFY2(help.out.startsWith(u"Usage: agentdeck ctl [--server URL] [--session-api-key "
                                         "K] [--timeout DURATION] list [--archived|--all] "
                                         "[--status S] [--json]\n"_s),
                     qPrintable(help.out));
            QVERIFY(help.out.contains(u"conversations, newest first"_s));
            QVERIFY(!help.out.contains(u"replicas"_s) && !help.out.contains(u"  show ID"_s));
            QVERIFY(help.out.contains(u"--session-api-key K"_s) &&
                    help.out.contains(u"Exit codes"_s));
        }
        const CtlResult version = ctl({u"--version"_s});
        QVERIFY2(version.exitCode == ExitOk, qPrintable(version.describe()));
        QCOMPARE(version.out, u"agentdeck ctl %1\n"_s.arg(QStringLiteral(AGENTDECK_VERSION)));
    }

    // list: the active partition by default, --archived, --all, --status; table and JSON.
    void listInBothModes()
    {
        ServerProcess &server = m_fleet.add();
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QUuid finished = server.create(conversationBody(u"shell"_s, u"alpha"_s, u"true"_s));
        const QUuid idle = server.create(conversationBody(u"echo"_s, u"beta"_s));
        const QUuid archived = server.create(conversationBody(u"echo"_s, u"gamma"_s));
        QVERIFY(!finished.isNull() && !idle.isNull() && !archived.isNull());
        QVERIFY(server.waitForStatus(finished, u"finished"_s));
        QVERIFY(server.post(conversationPath(archived, u"archive"_s)).ok());

        CtlResult result = ctl(server, {u"list"_s});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QStringList lines = result.outLines();
        QCOMPARE(lines.size(), 3);
        QVERIFY2(QRegularExpression(u"^ID +TITLE +EXECUTION +RUNTIME +ARCHIVED +EVENTS +UPDATED$"_s)
                     .match(lines[0])
                     .hasMatch(),
                 qPrintable(lines[0]));
        // Columns line up: every cell starts where its header does.
        const qsizetype runtimeColumn = lines[0].indexOf(u"RUNTIME"_s);
        const QString alphaLine = lineWith(lines, wireId(finished));
        const QString betaLine = lineWith(lines, wireId(idle));
        QVERIFY2(QRegularExpression(u"^\\S+ +alpha +finished +available +- +\\d+ +\\S+Z$"_s)
                     .match(alphaLine)
                     .hasMatch(),
                 qPrintable(result.out));
        QVERIFY2(QRegularExpression(u"^\\S+ +beta +idle +missing \\(resumable\\) +- +0 +\\S+Z$"_s)
                     .match(betaLine)
                     .hasMatch(),
                 qPrintable(result.out));
        QCOMPARE(alphaLine.indexOf(u"available"_s), runtimeColumn);
        QCOMPARE(betaLine.indexOf(u"missing"_s), runtimeColumn);
        QVERIFY(!result.out.contains(wireId(archived)));

        result = ctl(server, {u"list"_s, u"--archived"_s});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        lines = result.outLines();
        QCOMPARE(lines.size(), 2);
        // Its one event: the archive's.
        QVERIFY2(QRegularExpression(u"^\\S+ +gamma +idle +.+ +archived +1 +\\S+Z$"_s)
                     .match(lineWith(lines, wireId(archived)))
                     .hasMatch(),
                 qPrintable(result.out));

        result = ctl(server, {u"list"_s, u"--all"_s});
        QCOMPARE(result.outLines().size(), 4);

        result = ctl(server, {u"list"_s, u"--all"_s, u"--status"_s, u"finished"_s});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QCOMPARE(result.outLines().size(), 2);
        QVERIFY(result.out.contains(wireId(finished)));

        result = ctl(server, {u"list"_s, u"--archived"_s, u"--status"_s, u"running"_s});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QCOMPARE(result.out, u"No archived conversations match.\n"_s);

        // --json: the API's items, the same objects the search route answers.
        result = ctl(server, {u"list"_s, u"--all"_s, u"--json"_s});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        const QJsonObject listed = result.json();
        QVERIFY(listed.value(u"next_page_id"_s).isNull());
        QUrlQuery query;
        query.addQueryItem(u"archive_filter"_s, u"ALL"_s);
        const QJsonArray expected =
            server.get(u"/api/conversations/search"_s, query).object().value(u"items"_s).toArray();
        QCOMPARE(listed.value(u"items"_s).toArray().size(), 3);
        QCOMPARE(listed.value(u"items"_s).toArray(), expected);
    }

    // A failed command read `finished` like a success, and a run cut short by a SIGKILL of the
    // server like an ordinary pause: list says how the last action ended.
    void listSaysHowTheLastActionEnded()
    {
        ServerProcess *server = &m_fleet.add();
        QVERIFY2(server->startReady(), qPrintable(server->stderrText()));
        const QString dataDir = server->dataDir();
        const QUuid failed = server->create(conversationBody(u"shell"_s, u"fails"_s, u"exit 2"_s));
        const QUuid sleeper =
            server->create(conversationBody(u"shell"_s, u"sleeps"_s, u"sleep 600"_s));
        QVERIFY(server->waitForStatus(failed, u"finished"_s));
        QVERIFY(QTest::qWaitFor(
            [&] { return ofKind(server->events(sleeper), u"ActionEvent"_s).size() == 1; },
            CommandTimeoutMs));
        server->kill();
        server = &m_fleet.add(dataDir);
        QVERIFY2(server->startReady(), qPrintable(server->stderrText()));

        CtlResult result = ctl(*server, {u"list"_s});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        const QStringList lines = result.outLines();
        QVERIFY2(QRegularExpression(u"^\\S+ +fails +finished · exit 2 +"_s)
                     .match(lineWith(lines, wireId(failed)))
                     .hasMatch(),
                 qPrintable(result.out));
        QVERIFY2(QRegularExpression(u"^\\S+ +sleeps +paused · interrupted by a restart +"_s)
                     .match(lineWith(lines, wireId(sleeper)))
                     .hasMatch(),
                 qPrintable(result.out));

        result = ctl(*server, {u"show"_s, wireId(sleeper)});
        QVERIFY2(result.out.contains(u"(needs attention)"_s), qPrintable(result.out));
        QVERIFY2(result.out.contains(u"$ sleep 600"_s), qPrintable(result.out));

        result = ctl(*server, {u"dismiss"_s, wireId(failed)});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        result = ctl(*server, {u"show"_s, wireId(failed)});
        QVERIFY2(result.out.contains(u"failed: The command exited with code 2 (dismissed)"_s),
                 qPrintable(result.out));
    }

    // More conversations than one page holds: list follows next_page_id.
    void listFollowsPages()
    {
        ServerProcess &server = m_fleet.add();
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        constexpr int Count = 130;
        for (int i = 0; i < Count; ++i)
            QVERIFY(!server.create(conversationBody(u"echo"_s, u"bulk %1"_s.arg(i))).isNull());

        CtlResult result = ctl(server, {u"list"_s, u"--json"_s});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QSet<QString> ids;
        for (const QJsonValue &item : result.json().value(u"items"_s).toArray())
            ids.insert(item.toObject().value(u"id"_s).toString());
        QCOMPARE(ids.size(), Count);

        result = ctl(server, {u"list"_s});
        QCOMPARE(result.outLines().size(), Count + 1);
    }

    // A conversation an OpenHands client made (its agent spec) is listed and shown as any
    // llm conversation.
    void showsAConversationOfAnOpenHandsClient()
    {
        ServerProcess &server = m_fleet.add();
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QJsonObject agent{
            {u"kind"_s, u"Agent"_s},
            {u"llm"_s, QJsonObject{{u"model"_s, u"openai/gpt-4o"_s}, {u"api_key"_s, u"k"_s}}},
            {u"tools"_s, QJsonArray{QJsonObject{{u"name"_s, u"terminal"_s}},
                                    QJsonObject{{u"name"_s, u"file_editor"_s}}}}};
        const QUuid id =
            server.create(QJsonObject{{u"agent"_s, agent}, {u"max_iterations"_s, 500}});
        QVERIFY(!id.isNull());

        CtlResult result = ctl(server, {u"list"_s});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QVERIFY2(QRegularExpression(u"^\\S+ +.+ +idle +.+ +- +0 +\\S+Z$"_s)
                     .match(lineWith(result.outLines(), wireId(id)))
                     .hasMatch(),
                 qPrintable(result.out));
        result = ctl(server, {u"show"_s, wireId(id)});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QVERIFY2(QRegularExpression(u"^agent: +llm$"_s, QRegularExpression::MultilineOption)
                     .match(result.out)
                     .hasMatch(),
                 qPrintable(result.out));
    }

    // show: badge words and facts for people, the API's object with --json; IDs dashed or not.
    void showInBothModes()
    {
        ServerProcess &server = m_fleet.add();
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QUuid id = server.create(conversationBody(u"shell"_s, u"show me"_s, u"true"_s));
        QVERIFY(!id.isNull());
        QVERIFY(server.waitForStatus(id, u"finished"_s));

        const QString undashed = id.toString(QUuid::Id128);
        CtlResult result = ctl(server, {u"show"_s, undashed});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        for (const QString &pattern :
             {u"^id: +%1$"_s.arg(wireId(id)), u"^title: +show me$"_s, u"^execution: +finished$"_s,
              u"^runtime: +available$"_s, u"^archived: +-$"_s, u"^agent: +shell$"_s,
              u"^events: +\\d+, last at \\S+Z$"_s}) {
            QVERIFY2(QRegularExpression(pattern, QRegularExpression::MultilineOption)
                         .match(result.out)
                         .hasMatch(),
                     qPrintable(pattern + u" not in:\n"_s + result.out));
        }

        result = ctl(server, {u"show"_s, wireId(id), u"--json"_s});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QCOMPARE(result.json(), server.conversation(id));
    }

    // replicas: this server among the replicas of its catalog, marked as the one answering.
    void replicasInBothModes()
    {
        ServerProcess &server = m_fleet.add({}, {u"--replica-id"_s, u"ctl-replica"_s});
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        CtlResult result = ctl(server, {u"replicas"_s});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QVERIFY2(QRegularExpression(u"^REPLICA +STATE +RUNS +LAST HEARTBEAT +URL$"_s,
                                    QRegularExpression::MultilineOption)
                     .match(result.out)
                     .hasMatch(),
                 qPrintable(result.out));
        QVERIFY2(QRegularExpression(u"^ctl-replica \\* +alive +0 +\\S+ +%1$"_s.arg(
                                        QRegularExpression::escape(server.urlText())),
                                    QRegularExpression::MultilineOption)
                     .match(result.out)
                     .hasMatch(),
                 qPrintable(result.out));

        result = ctl(server, {u"replicas"_s, u"--json"_s});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        const QJsonArray replicas = QJsonDocument::fromJson(result.out.toUtf8()).array();
        QCOMPARE(replicas.size(), 1);
        QCOMPARE(replicas[0].toObject().value(u"id"_s).toString(), u"ctl-replica"_s);
    }

    // events: one line per event for people, the API's event objects (one per line) with --json.
    void eventsInBothModes()
    {
        ServerProcess &server = m_fleet.add();
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QUuid id = server.create(
            conversationBody(u"shell"_s, u"events"_s, u"echo first; echo second; exit 3"_s));
        QVERIFY(!id.isNull());
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        const QList<QJsonObject> expected = server.events(id);
        QVERIFY(expected.size() >= 4);

        CtlResult result = ctl(server, {u"events"_s, wireId(id)});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        const QStringList lines = result.outLines();
        QCOMPARE(lines.size(), expected.size() + 1);
        QVERIFY2(
            QRegularExpression(u"^ +SEQ +TIME +SOURCE +KIND +DETAIL$"_s).match(lines[0]).hasMatch(),
            qPrintable(lines[0]));
        QVERIFY2(
            QRegularExpression(u"^ +1 +\\S+Z +user +message +echo first; echo second; exit 3$"_s)
                .match(lines[1])
                .hasMatch(),
            qPrintable(result.out));
        QVERIFY2(QRegularExpression(
                     u"^ +\\d+ +\\S+Z +agent +action +\\$ echo first; echo second; exit 3$"_s,
                     QRegularExpression::MultilineOption)
                     .match(result.out)
                     .hasMatch(),
                 qPrintable(result.out));
        QVERIFY2(QRegularExpression(
                     u"^ +\\d+ +\\S+Z +environment +observation +exit 3: first\\\\nsecond$"_s,
                     QRegularExpression::MultilineOption)
                     .match(result.out)
                     .hasMatch(),
                 qPrintable(result.out));
        for (qsizetype i = 0; i < expected.size(); ++i) {
            const qint64 seq = expected[i].value(u"seq"_s).toInteger();
            QVERIFY2(lines[i + 1].startsWith(QString::number(seq).rightJustified(5) + u"  "_s),
                     qPrintable(lines[i + 1]));
        }

        result = ctl(server, {u"events"_s, wireId(id), u"--json"_s});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QCOMPARE(result.jsonLines(), expected);
    }

    // Columns line up by terminal width: a wide character takes two columns, so "日本語" pads
    // like "abcdef" (it was padded like "abc"), and a title is cut between characters (an emoji
    // cut in half printed "?").
    void wideCharactersKeepColumnsAligned()
    {
        ServerProcess &server = m_fleet.add();
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QString longTitle = QString(38, u'a') + u"🚀🚀🚀"_s;
        for (const QString &title : {u"日本語"_s, u"abcdef"_s, longTitle})
            QVERIFY(!server.create(conversationBody(u"echo"_s, title)).isNull());
        const CtlResult result = ctl(server, {u"list"_s});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QStringList afterTitle;
        for (const QString &line : result.outLines()) {
            for (const QString &title : {u"日本語"_s, u"abcdef"_s}) {
                const qsizetype at = line.indexOf(title);
                if (at >= 0)
                    afterTitle.append(line.mid(at + title.size()));
            }
        }
        QCOMPARE(afterTitle.size(), 2);
        // Up to the last column, the update time, which differs when the creates fell in two
        // seconds.
        const QRegularExpression updated(u"\\S+$"_s);
        QCOMPARE(afterTitle[0].remove(updated), afterTitle[1].remove(updated));
        QVERIFY2(result.out.contains(QString(38, u'a') + u'…'), qPrintable(result.out));
        QVERIFY(!result.out.contains(QChar::ReplacementCharacter));
    }

    // Titles and outputs come from agents and users: a terminal must not obey what they hold.
    // An output that moved the cursor back and recoloured the line read "exit 0: all tests
    // passed" for a command that exited 3.
    void controlCharactersAreShownNotObeyed()
    {
        ServerProcess &server = m_fleet.add();
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QUuid id = server.create(conversationBody(
            u"shell"_s, u"innocent\u001b[31mFAKE\u0007"_s,
            u"printf 'boom\\033[2K\\033[1Gexit 0: all tests passed\\n'; exit 3"_s));
        QVERIFY(!id.isNull());
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        for (const QStringList &arguments :
             {QStringList{u"list"_s}, QStringList{u"show"_s, wireId(id)},
              QStringList{u"events"_s, wireId(id)}}) {
            const CtlResult result = ctl(server, arguments);
            QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
            QVERIFY2(!result.out.contains(QChar(0x1b)) && !result.out.contains(QChar(0x07)),
                     qPrintable(arguments.first() + u": "_s + result.out));
            if (arguments.first() != u"events"_s)
                QVERIFY2(result.out.contains(u"innocent\\x1b[31mFAKE\\x07"_s),
                         qPrintable(result.out));
            else
                QVERIFY2(
                    result.out.contains(u"exit 3: boom\\x1b[2K\\x1b[1Gexit 0: all tests passed"_s),
                    qPrintable(result.out));
        }
    }

    // A login page, or another web server on that port, answered the search with 200: ctl
    // said "No active conversations." and exited 0, and a script asking for the conversations
    // in error was told there were none.
    void somethingThatIsNotAgentDeckIsNamed_data()
    {
        QTest::addColumn<int>("status");
        QTest::addRow("a login page") << 200;
        // `show` of such a server's 404 exited 3, as for a conversation AgentDeck does not have.
        QTest::addRow("not found") << 404;
    }
    void somethingThatIsNotAgentDeckIsNamed()
    {
        QFETCH(int, status);
        NotAgentDeckServer web(status);
        QVERIFY(web.isListening());
        // Each command: events, replicas, create --json, send and delete printed what they
        // make of nothing (an empty table, "event 0", "Deleted") and exited 0.
        const QString id = wireId(QUuid::createUuid());
        for (const QStringList &arguments :
             {QStringList{u"list"_s},
              QStringList{u"list"_s, u"--status"_s, u"error"_s, u"--json"_s},
              QStringList{u"show"_s, id}, QStringList{u"events"_s, id}, QStringList{u"replicas"_s},
              QStringList{u"create"_s, u"--json"_s}, QStringList{u"send"_s, id, u"hello"_s},
              QStringList{u"delete"_s, id, u"--yes"_s}, QStringList{u"run"_s, id}}) {
            const CtlResult result =
                ctl(QStringList{u"--server"_s, web.url().toString()} + arguments);
            QVERIFY2(result.exitCode == ExitFailed, qPrintable(result.describe()));
            QVERIFY2(result.err.contains(u"is it AgentDeck?"_s) ||
                         result.err.contains(u"is it an AgentDeck server?"_s),
                     qPrintable(result.describe()));
            QVERIFY2(result.out.isEmpty(), qPrintable(result.describe()));
        }
    }

    // `--json` is for scripts: a title holding U+007F was printed as `\x7f`, which is no JSON,
    // and `ctl list --json` failed to parse for the whole catalog. Bidirectional overrides,
    // which make a title read otherwise, are escaped in tables and JSON alike.
    void jsonStaysJsonWhateverTheTitlesHold()
    {
        ServerProcess &server = m_fleet.add();
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QString title = u"build \u007f box \u0085 deploy \u202elive\u202c today"_s;
        const QUuid id = server.create(conversationBody(u"shell"_s, title, u"printf 'a\\177b'"_s));
        QVERIFY(!id.isNull());
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        for (const QStringList &arguments : {QStringList{u"list"_s, u"--json"_s},
                                             QStringList{u"show"_s, wireId(id), u"--json"_s}}) {
            const CtlResult result = ctl(server, arguments);
            QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
            QJsonParseError error;
            const QJsonDocument document = QJsonDocument::fromJson(result.out.toUtf8(), &error);
            QVERIFY2(error.error == QJsonParseError::NoError,
                     qPrintable(error.errorString() + u": "_s + result.out));
            QVERIFY2(result.out.contains(u"\\u007f"_s) && result.out.contains(u"\\u202e"_s),
                     qPrintable(result.out));
        }
        const CtlResult events = ctl(server, {u"events"_s, wireId(id), u"--json"_s});
        QVERIFY2(events.exitCode == ExitOk, qPrintable(events.describe()));
        for (const QString &line : events.outLines()) {
            QJsonParseError error;
            QJsonDocument::fromJson(line.toUtf8(), &error);
            QVERIFY2(error.error == QJsonParseError::NoError, qPrintable(line));
        }
        const CtlResult table = ctl(server, {u"list"_s});
        QVERIFY2(!table.out.contains(QChar(0x202e)) && table.out.contains(u"\\u202elive"_s),
                 qPrintable(table.out));
    }

    // archive, unarchive, recover, reprovision: each answers the conversation as it now is (and
    // recover what it did), and an archived conversation refuses runtime actions with the
    // server's sentence and exit 4.
    void runtimeAndArchiveActions()
    {
        ServerProcess &server = m_fleet.add();
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QUuid id = server.create(conversationBody(u"shell"_s, u"acted on"_s, u"true"_s));
        QVERIFY(!id.isNull());
        QVERIFY(server.waitForStatus(id, u"finished"_s));

        CtlResult result = ctl(server, {u"archive"_s, wireId(id)});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QVERIFY2(result.out.startsWith(u"Archived %1.\n"_s.arg(wireId(id))),
                 qPrintable(result.out));
        QVERIFY2(QRegularExpression(u"acted on +finished +\\S.* +archived +\\d+ +\\S+Z$"_s,
                                    QRegularExpression::MultilineOption)
                     .match(result.out)
                     .hasMatch(),
                 qPrintable(result.out));
        QVERIFY(server.conversation(id).value(u"archived_at"_s).isString());
        // Done already, it is said so: "Archived" and "Unarchived" were said of a conversation
        // that was so before.
        result = ctl(server, {u"archive"_s, wireId(id)});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QVERIFY2(result.out.startsWith(u"%1 is archived already.\n"_s.arg(wireId(id))),
                 qPrintable(result.out));

        // Refusals carry the server's own sentence.
        const Reply refused = server.post(conversationPath(id, u"recover"_s));
        QCOMPARE(refused.status, 409);
        const QString sentence = refused.object().value(u"detail"_s).toString();
        QVERIFY(!sentence.isEmpty());
        for (const QStringList &arguments :
             {QStringList{u"recover"_s, wireId(id)}, QStringList{u"reprovision"_s, wireId(id)},
              QStringList{u"start-fresh"_s, wireId(id)},
              QStringList{u"send"_s, wireId(id), u"true"_s, u"--run"_s}}) {
            result = ctl(server, arguments);
            QVERIFY2(result.exitCode == ExitConflict, qPrintable(result.describe()));
            QCOMPARE(result.err, u"agentdeck ctl: "_s + sentence + u'\n');
            QVERIFY(result.out.isEmpty());
        }

        result = ctl(server, {u"unarchive"_s, wireId(id), u"--json"_s});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QVERIFY(result.json().value(u"archived_at"_s).isNull());
        QCOMPARE(result.json().value(u"id"_s).toString(), wireId(id));
        QVERIFY(server.conversation(id).value(u"archived_at"_s).isNull());
        result = ctl(server, {u"unarchive"_s, wireId(id)});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QVERIFY2(result.out.startsWith(u"%1 is not archived.\n"_s.arg(wireId(id))),
                 qPrintable(result.out));

        result = ctl(server, {u"reprovision"_s, wireId(id)});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QVERIFY2(result.out.startsWith(u"Reprovisioned %1.\n"_s.arg(wireId(id))),
                 qPrintable(result.out));
        QVERIFY2(result.out.contains(u" available "_s), qPrintable(result.out));

        result = ctl(server, {u"recover"_s, wireId(id), u"--json"_s});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QCOMPARE(
            result.json().value(u"runtime_info"_s).toObject().value(u"runtime_status"_s).toString(),
            u"available"_s);
        QCOMPARE(result.json().value(u"actions"_s).toArray(), QJsonArray{});

        // recover says what the server did, or that there was nothing to recover and what there
        // is to do instead; both are done (exit 0).
        result = ctl(server, {u"recover"_s, wireId(id)});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QVERIFY2(result.out.startsWith(
                     u"Nothing to recover: %1 is finished and its runtime available.\n"_s.arg(
                         wireId(id))),
                 qPrintable(result.out));
        QVERIFY2(result.out.contains(u"acted on "_s), qPrintable(result.out)); // the table

        QVERIFY(server.call("DELETE"_ba, conversationPath(id, u"runtime"_s)).ok());
        result = ctl(server, {u"recover"_s, wireId(id)});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QVERIFY2(result.out.startsWith(u"Recovered %1: started the runtime.\n"_s.arg(wireId(id))),
                 qPrintable(result.out));
        QVERIFY2(result.out.contains(u" available "_s), qPrintable(result.out));
        // The history says so too.
        result = ctl(server, {u"events"_s, wireId(id)});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QCOMPARE(result.out.count(u"recovery = "_s), 1);
        QVERIFY2(QRegularExpression(u"^ +\\d+ +\\S+Z +\\S+ +state update +recovery = "
                                    "started_runtime$"_s,
                                    QRegularExpression::MultilineOption)
                     .match(result.out)
                     .hasMatch(),
                 qPrintable(result.out));

        // An interrupted command, its sandbox up: Run again (ctl retry) is what is left.
        const QUuid interrupted =
            server.create(conversationBody(u"shell"_s, u"interrupted"_s, u"sleep 600"_s));
        QVERIFY(!interrupted.isNull());
        QTRY_VERIFY_WITH_TIMEOUT(!ofKind(server.events(interrupted), u"ActionEvent"_s).isEmpty(),
                                 10'000);
        QVERIFY(server.post(conversationPath(interrupted, u"interrupt"_s)).ok());
        QVERIFY(server.waitForStatus(interrupted, u"paused"_s));
        result = ctl(server, {u"recover"_s, wireId(interrupted)});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QVERIFY2(result.out.startsWith(
                     u"Nothing to recover: %1 is paused · interrupted by the operator and its "
                     "runtime available. `agentdeck ctl retry %1` runs the interrupted command "
                     "again.\n"_s.arg(wireId(interrupted))),
                 qPrintable(result.out));
    }

    // create: a conversation from the command line, its first message run at once.
    void createConversations()
    {
        ServerProcess &server = m_fleet.add();
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        CtlResult result =
            ctl(server, {u"create"_s, u"--title"_s, u"made by ctl"_s, u"echo"_s, u"hello"_s});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        const QRegularExpressionMatch created =
            QRegularExpression(u"^Created ([0-9a-f-]{36})\\.\n"_s).match(result.out);
        QVERIFY2(created.hasMatch(), qPrintable(result.out));
        const QUuid id(created.captured(1));
        QVERIFY(result.out.contains(u"made by ctl"_s));
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        QCOMPARE(agentReplies(server, id), QStringList{u"hello\n"_s});

        result = ctl(server, {u"create"_s, u"--agent"_s, u"echo"_s, u"--confirm"_s, u"--json"_s});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QCOMPARE(result.json().value(u"agent"_s).toObject().value(u"kind"_s).toString(), u"echo"_s);
        QCOMPARE(
            result.json().value(u"confirmation_policy"_s).toObject().value(u"kind"_s).toString(),
            u"AlwaysConfirm"_s);
        QCOMPARE(result.json().value(u"execution_status"_s).toString(), u"idle"_s);

        result = ctl(server, {u"create"_s, u"--agent"_s, u"nope"_s});
        QCOMPARE(result.exitCode, ExitFailed);
        QVERIFY2(result.err.contains(u"Unknown agent kind"_s), qPrintable(result.err));
    }

    // run, pause, interrupt, accept and reject: the console's run controls, for a server
    // without a display.
    void runControls()
    {
        ServerProcess &server = m_fleet.add();
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        QJsonObject body = conversationBody(u"shell"_s, u"confirm me"_s, u"echo first"_s);
        body.insert(u"confirmation_policy"_s, QJsonObject{{u"kind"_s, u"AlwaysConfirm"_s}});
        const QUuid id = server.create(body);
        QVERIFY(!id.isNull());
        QVERIFY(server.waitForStatus(id, u"waiting_for_confirmation"_s));

        CtlResult result = ctl(server, {u"reject"_s, wireId(id), u"--reason"_s, u"not today"_s});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QVERIFY2(result.out.startsWith(u"Rejected the pending action of %1.\n"_s.arg(wireId(id))),
                 qPrintable(result.out));
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        QCOMPARE(agentReplies(server, id), QStringList{u"Command rejected: not today"_s});

        // Nothing is waiting any more: the server's refusal, exit 4.
        result = ctl(server, {u"accept"_s, wireId(id)});
        QVERIFY2(result.exitCode == ExitConflict, qPrintable(result.describe()));
        QVERIFY2(result.err.contains(u"not waiting for a confirmation"_s), qPrintable(result.err));

        result = ctl(server, {u"send"_s, wireId(id), u"echo second"_s});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QCOMPARE(server.status(id), u"finished"_s);
        result = ctl(server, {u"run"_s, wireId(id), u"--json"_s});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QCOMPARE(result.json().value(u"id"_s).toString(), wireId(id));
        QVERIFY(server.waitForStatus(id, u"waiting_for_confirmation"_s));
        result = ctl(server, {u"accept"_s, wireId(id)});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QVERIFY2(result.out.startsWith(u"Accepted the pending action of %1.\n"_s.arg(wireId(id))),
                 qPrintable(result.out));
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        QCOMPARE(agentReplies(server, id),
                 (QStringList{u"Command rejected: not today"_s, u"second\n"_s}));

        // A pause waits for the step; an interrupt stops the command in it.
        const QUuid sleeper =
            server.create(conversationBody(u"shell"_s, u"sleeper"_s, u"sleep 60"_s));
        QVERIFY(!sleeper.isNull());
        QVERIFY(server.waitForStatus(sleeper, u"running"_s));
        result = ctl(server, {u"pause"_s, wireId(sleeper)});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QVERIFY2(result.out.startsWith(
                     u"Asked %1 to pause after its current step.\n"_s.arg(wireId(sleeper))),
                 qPrintable(result.out));
        result = ctl(server, {u"interrupt"_s, wireId(sleeper)});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QVERIFY2(result.out.startsWith(
                     u"Asked %1 to stop its command in flight.\n"_s.arg(wireId(sleeper))),
                 qPrintable(result.out));
        QVERIFY(server.waitForStatus(sleeper, u"paused"_s));
        bool interrupted = false;
        for (const QJsonObject &event : server.events(sleeper))
            interrupted = interrupted ||
                          event.value(u"observation"_s).toObject().value(u"interrupted"_s).toBool();
        QVERIFY(interrupted);

        // With no run going there is nothing to ask: it said "Asked ... to pause" all the same.
        result = ctl(server, {u"pause"_s, wireId(id)});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QVERIFY2(result.out.startsWith(u"%1 is finished: no run to pause.\n"_s.arg(wireId(id))),
                 qPrintable(result.out));
        result = ctl(server, {u"pause"_s, wireId(sleeper)});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QVERIFY2(result.out.startsWith(u"%1 is paused.\n"_s.arg(wireId(sleeper))),
                 qPrintable(result.out));
        // A pause of a conversation waiting for confirmation is done at once: it said "no run
        // to pause" of what it had just paused.
        QJsonObject confirming = conversationBody(u"shell"_s, u"waiting"_s, u"echo later"_s);
        confirming.insert(u"confirmation_policy"_s, QJsonObject{{u"kind"_s, u"AlwaysConfirm"_s}});
        const QUuid waiting = server.create(confirming);
        QVERIFY(!waiting.isNull());
        QVERIFY(server.waitForStatus(waiting, u"waiting_for_confirmation"_s));
        result = ctl(server, {u"pause"_s, wireId(waiting)});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QVERIFY2(result.out.startsWith(u"%1 is paused.\n"_s.arg(wireId(waiting))),
                 qPrintable(result.out));
        QCOMPARE(server.conversation(waiting).value(u"execution_status"_s).toString(), u"paused"_s);
        result = ctl(server, {u"interrupt"_s, wireId(id)});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QVERIFY2(
            result.out.startsWith(u"%1 is finished: no command to interrupt.\n"_s.arg(wireId(id))),
            qPrintable(result.out));
    }

    // send: a message without --run waits; with --run the echo agent answers every open one.
    void sendMessages()
    {
        ServerProcess &server = m_fleet.add();
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QUuid id = server.create(conversationBody(u"echo"_s, u"talk"_s));
        QVERIFY(!id.isNull());

        CtlResult result = ctl(server, {u"send"_s, wireId(id), u"just"_s, u"listen"_s});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QCOMPARE(result.out, u"Sent to %1 as event 1.\n"_s.arg(wireId(id)));
        QCOMPARE(server.status(id), u"idle"_s);

        result = ctl(server,
                     {u"send"_s, wireId(id), u"--run"_s, u"--json"_s, u"--"_s, u"-now answer"_s});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QCOMPARE(result.json().value(u"seq"_s).toInteger(), 2);
        QCOMPARE(result.json().value(u"kind"_s).toString(), u"MessageEvent"_s);
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        QCOMPARE(messages(server, id),
                 (QStringList{u"user:just listen"_s, u"user:-now answer"_s, u"agent:just listen"_s,
                              u"agent:-now answer"_s}));
    }

    // archive of a running conversation stops its command: refused without --force when
    // nobody can be asked, asked on a terminal. One that runs nothing is archived at once.
    void archiveOfARunningCommandAsksFirst()
    {
        ServerProcess &server = m_fleet.add();
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QUuid id = server.create(conversationBody(u"shell"_s, u"busy"_s, u"sleep 600"_s));
        QVERIFY(server.waitForStatus(id, u"running"_s));
        const auto archived = [&] {
            return server.conversation(id).value(u"archived_at"_s).isString();
        };

        CtlResult result = ctl(server, {u"archive"_s, wireId(id)});
        QVERIFY2(result.exitCode == ExitUsage, qPrintable(result.describe()));
        QVERIFY2(result.err.contains(u"--force"_s), qPrintable(result.describe()));
        QVERIFY(!archived());
        QCOMPARE(server.status(id), u"running"_s);

        result = ctlOnTerminal(server, {u"archive"_s, wireId(id)}, "n\n");
        QVERIFY2(result.exitCode == ExitFailed, qPrintable(result.describe()));
        QVERIFY2(result.err.contains(u"\"busy\" is running"_s) && result.err.contains(u"[y/N]"_s),
                 qPrintable(result.describe()));
        QVERIFY2(result.err.contains(u"not archived"_s), qPrintable(result.describe()));
        QVERIFY(!archived());

        result = ctlOnTerminal(server, {u"archive"_s, wireId(id)}, "y\n");
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QVERIFY(archived());

        const QUuid second =
            server.create(conversationBody(u"shell"_s, u"busy too"_s, u"sleep 600"_s));
        QVERIFY(server.waitForStatus(second, u"running"_s));
        result = ctl(server, {u"archive"_s, wireId(second), u"--force"_s});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QVERIFY(server.conversation(second).value(u"archived_at"_s).isString());
    }

    // delete: refuses without --yes when nobody can be asked; asks on a terminal.
    void deleteAsksFirst()
    {
        ServerProcess &server = m_fleet.add();
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QUuid id = server.create(conversationBody(u"echo"_s, u"doomed"_s));
        QVERIFY(!id.isNull());

        CtlResult result = ctl(server, {u"delete"_s, wireId(id)});
        QVERIFY2(result.exitCode == ExitUsage, qPrintable(result.describe()));
        QVERIFY2(result.err.contains(u"--yes"_s), qPrintable(result.describe()));
        QCOMPARE(server.get(conversationPath(id)).status, 200);

        result = ctlOnTerminal(server, {u"delete"_s, wireId(id)}, "n\n");
        QVERIFY2(result.exitCode == ExitFailed, qPrintable(result.describe()));
        QVERIFY2(result.err.contains(u"\"doomed\""_s) && result.err.contains(u"[y/N]"_s),
                 qPrintable(result.describe()));
        QVERIFY2(result.err.contains(u"not deleted"_s), qPrintable(result.describe()));
        QCOMPARE(server.get(conversationPath(id)).status, 200);

        result = ctlOnTerminal(server, {u"delete"_s, wireId(id)}, "y\n");
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QCOMPARE(result.out, u"Deleted %1.\n"_s.arg(wireId(id)));
        QCOMPARE(server.get(conversationPath(id)).status, 404);

        const QUuid second = server.create(conversationBody(u"echo"_s, u"also doomed"_s));
        result = ctl(server, {u"delete"_s, wireId(second), u"--yes"_s, u"--json"_s});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QCOMPARE(result.json().value(u"success"_s).toBool(), true);
        QCOMPARE(server.get(conversationPath(second)).status, 404);

        result = ctl(server, {u"delete"_s, wireId(second), u"--yes"_s});
        QVERIFY2(result.exitCode == ExitNotFound, qPrintable(result.describe()));
    }

    // Each kind of failure has its exit code, and the sentence is the server's.
    void notFoundExitCode()
    {
        ServerProcess &server = m_fleet.add();
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QUuid unknown = QUuid::createUuid();
        const QString sentence =
            server.get(conversationPath(unknown)).object().value(u"detail"_s).toString();
        QVERIFY(!sentence.isEmpty());
        for (const QStringList &arguments :
             {QStringList{u"show"_s, wireId(unknown)}, QStringList{u"events"_s, wireId(unknown)},
              QStringList{u"events"_s, wireId(unknown), u"--follow"_s},
              QStringList{u"archive"_s, wireId(unknown)},
              QStringList{u"unarchive"_s, wireId(unknown)},
              QStringList{u"recover"_s, wireId(unknown)},
              QStringList{u"reprovision"_s, wireId(unknown)},
              QStringList{u"send"_s, wireId(unknown), u"hello"_s},
              QStringList{u"delete"_s, wireId(unknown), u"--yes"_s}}) {
            const CtlResult result = ctl(server, arguments);
            QVERIFY2(result.exitCode == ExitNotFound,
                     qPrintable(arguments.join(u' ') + u": "_s + result.describe()));
            QCOMPARE(result.err, u"agentdeck ctl: "_s + sentence + u'\n');
            // Nothing on stdout for an error: `events` printed its header first.
            QVERIFY2(result.out.isEmpty(), qPrintable(arguments.join(u' ') + u": "_s + result.out));
        }
    }

    // A followed conversation deleted meanwhile ends the follow with exit 3 and says only that:
    // it said "connection lost ...; reconnecting" first.
    void followEndsWhenTheConversationIsDeleted()
    {
        ServerProcess &server = m_fleet.add();
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QUuid id = server.create(conversationBody(u"echo"_s, u"deleted while followed"_s));
        QVERIFY(!id.isNull());
        CtlProcess &follower = startCtl(server, {u"events"_s, wireId(id), u"--follow"_s});
        QVERIFY2(QTest::qWaitFor([&] { return !follower.result().outLines().isEmpty(); },
                                 FollowTimeoutMs),
                 qPrintable(follower.result().describe()));
        QVERIFY(server.call("DELETE"_ba, conversationPath(id)).ok());
        QVERIFY2(follower.waitForFinished(FollowTimeoutMs),
                 qPrintable(follower.result().describe()));
        const CtlResult result = follower.result();
        QCOMPARE(result.exitCode, ExitNotFound);
        QVERIFY2(!result.err.contains(u"reconnecting"_s), qPrintable(result.describe()));
    }

    void unreachableExitCode()
    {
        const quint16 port = freePort();
        QVERIFY(port != 0);
        const QString url = u"http://127.0.0.1:%1"_s.arg(port);
        const QString id = wireId(QUuid::createUuid());
        for (const QStringList &arguments :
             {QStringList{u"list"_s}, QStringList{u"show"_s, id},
              QStringList{u"events"_s, id, u"--follow"_s}, QStringList{u"recover"_s, id}}) {
            const CtlResult result = ctl(QStringList{u"--server"_s, url} + arguments);
            QVERIFY2(result.exitCode == ExitUnreachable, qPrintable(result.describe()));
            QVERIFY2(result.err.startsWith(u"agentdeck ctl: The server cannot be reached"_s),
                     qPrintable(result.describe()));
        }
    }

    void unauthorizedExitCodeAndKeySources()
    {
        ServerProcess &server = m_fleet.add({}, {u"--session-api-key"_s, u"sekrit"_s});
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        server.setKey(u"sekrit"_s);
        const QUuid id = server.create(conversationBody(u"echo"_s, u"guarded"_s));
        QVERIFY(!id.isNull());

        CtlResult result = ctl(server, {u"list"_s});
        QVERIFY2(result.exitCode == ExitUnauthorized, qPrintable(result.describe()));
        result = ctl(server, {u"--session-api-key"_s, u"wrong"_s, u"show"_s, wireId(id)});
        QVERIFY2(result.exitCode == ExitUnauthorized, qPrintable(result.describe()));

        result = ctl(server, {u"--session-api-key"_s, u"sekrit"_s, u"list"_s});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QVERIFY(result.out.contains(wireId(id)));
        result = ctl(server, {u"list"_s}, {{u"AGENTDECK_SESSION_API_KEY"_s, u"sekrit"_s}});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QVERIFY(result.out.contains(wireId(id)));
        // The server and the key from the environment alone, as a script sets them once.
        result = ctl({u"list"_s}, {{u"AGENTDECK_SERVER"_s, server.urlText()},
                                   {u"AGENTDECK_API_KEY"_s, u"sekrit"_s}});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        QVERIFY(result.out.contains(wireId(id)));
        QVERIFY2(result.err.contains(u"asking %1 ($AGENTDECK_SERVER)"_s.arg(server.urlText())),
                 qPrintable(result.err));
        // --server wins over it.
        result = ctl(server, {u"list"_s},
                     {{u"AGENTDECK_SERVER"_s, u"http://127.0.0.1:9"_s},
                      {u"AGENTDECK_API_KEY"_s, u"sekrit"_s}});
        QVERIFY2(result.exitCode == ExitOk, qPrintable(result.describe()));
        result = ctl({u"list"_s}, {{u"AGENTDECK_SERVER"_s, u"ftp://nowhere"_s}});
        QCOMPARE(result.exitCode, 2);
        QVERIFY(result.err.contains(u"AGENTDECK_SERVER takes an http:// or https:// URL"_s));

        // The follower authenticates its WebSocket with the same key.
        CtlProcess &follower = startCtl(server, {u"--session-api-key"_s, u"sekrit"_s, u"events"_s,
                                                 wireId(id), u"--follow"_s, u"--json"_s});
        QVERIFY(server.post(conversationPath(id, u"events"_s), userMessage(u"hi"_s, true)).ok());
        QVERIFY2(QTest::qWaitFor([&] { return follower.result().jsonLines().size() >= 4; },
                                 FollowTimeoutMs),
                 qPrintable(follower.result().describe()));
        QVERIFY(follower.isRunning());
    }

    void expiredExitCode()
    {
        ServerProcess &server = m_fleet.add({}, {u"--runtime-retention"_s, u"1s"_s});
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QUuid id = server.create(conversationBody(u"shell"_s, u"short-lived"_s, u"true"_s));
        QVERIFY(!id.isNull());
        QVERIFY(server.waitForStatus(id, u"finished"_s));
        QVERIFY2(QTest::qWaitFor(
                     [&] {
                         return server.conversation(id)
                                    .value(u"runtime_info"_s)
                                    .toObject()
                                    .value(u"runtime_error"_s)
                                    .toObject()
                                    .value(u"code"_s)
                                    .toString() == u"runtime_expired"_s;
                     },
                     CommandTimeoutMs),
                 QJsonDocument(server.conversation(id)).toJson().constData());
        const Reply refused = server.post(conversationPath(id, u"recover"_s));
        QCOMPARE(refused.status, 410);
        const QString sentence = refused.object().value(u"detail"_s).toString();

        for (const QString &command : {u"recover"_s, u"reprovision"_s}) {
            const CtlResult result = ctl(server, {command, wireId(id)});
            QVERIFY2(result.exitCode == ExitExpired, qPrintable(result.describe()));
            QCOMPARE(result.err, u"agentdeck ctl: "_s + sentence + u'\n');
        }
        // The badge word for it, as in the console.
        const CtlResult shown = ctl(server, {u"show"_s, wireId(id)});
        QVERIFY2(QRegularExpression(u"^runtime: +expired$"_s, QRegularExpression::MultilineOption)
                     .match(shown.out)
                     .hasMatch(),
                 qPrintable(shown.describe()));
        QVERIFY2(shown.out.contains(u"runtime_expired"_s), qPrintable(shown.describe()));
    }

    // events --follow prints history, then live events; when the server is SIGKILLed and comes
    // back on the same port it resumes after its last seq, so every event is printed once.
    // A frozen server (SIGSTOP, a paused VM) is given up after --timeout: commands exit 6, and a
    // followed stream says the connection was lost, then resumes when the server thaws. Both
    // used to wait in silence for as long as the freeze lasted.
    void aFrozenServerIsGivenUp()
    {
        ServerProcess &server = m_fleet.add();
        QVERIFY2(server.startReady(), qPrintable(server.stderrText()));
        const QUuid id = server.create(conversationBody(u"echo"_s, u"frozen"_s));
        QVERIFY(!id.isNull());
        CtlProcess &follower =
            startCtl(server, {u"events"_s, wireId(id), u"--follow"_s, u"--timeout"_s, u"1s"_s});
        QVERIFY2(QTest::qWaitFor([&] { return !follower.result().outLines().isEmpty(); },
                                 FollowTimeoutMs),
                 qPrintable(follower.result().describe()));

        server.sendSignal(SIGSTOP);
        const CtlResult listed = ctl(server, {u"list"_s, u"--timeout"_s, u"1s"_s});
        // An action sent to the frozen server is done when it thaws: "cannot be reached" was
        // not true, and Qt's warning about reading the cut reply came with it.
        const CtlResult archived = ctl(server, {u"archive"_s, wireId(id), u"--timeout"_s, u"1s"_s});
        QVERIFY2(
            QTest::qWaitFor([&] { return follower.result().err.contains(u"connection lost"_s); },
                            FollowTimeoutMs),
            qPrintable(follower.result().describe()));
        server.sendSignal(SIGCONT);
        QVERIFY2(listed.exitCode == ExitUnreachable, qPrintable(listed.describe()));
        QVERIFY2(
            listed.err.contains(u"did not answer in time (it did not answer within 1000 ms)"_s),
            qPrintable(listed.describe()));
        QVERIFY2(archived.exitCode == ExitUnreachable, qPrintable(archived.describe()));
        QVERIFY2(archived.err.contains(u"may still take effect"_s) &&
                     !archived.err.contains(u"QIODevice"_s),
                 qPrintable(archived.describe()));
        QVERIFY(QTest::qWaitFor(
            [&] {
                return server.get(conversationPath(id)).object().value(u"archived_at"_s).isString();
            },
            10'000));
        QVERIFY2(QTest::qWaitFor([&] { return follower.result().err.contains(u"reconnected"_s); },
                                 FollowTimeoutMs),
                 qPrintable(follower.result().describe()));
        QVERIFY(follower.isRunning());
        QCOMPARE(ctl(server, {u"list"_s, u"--timeout"_s, u"0"_s}).exitCode, ExitUsage);
        // Past what a timer takes (24 days): the follower's check of the silence never ran.
        const CtlResult tooLong = ctl(server, {u"list"_s, u"--timeout"_s, u"25d"_s});
        QCOMPARE(tooLong.exitCode, ExitUsage);
        QVERIFY2(tooLong.err.contains(u"at most 24d"_s), qPrintable(tooLong.describe()));
        QCOMPARE(ctl(server, {u"list"_s, u"--timeout"_s, u"24d"_s}).exitCode, 0);
        // Past a hundred years: it overflowed into a negative duration, and no timeout at all.
        QCOMPARE(ctl(server, {u"list"_s, u"--timeout"_s, u"106751991167301d"_s}).exitCode,
                 ExitUsage);
    }

    void followSurvivesServerRestart()
    {
        const quint16 port = freePort();
        QVERIFY(port != 0);
        const QString listen = u"127.0.0.1:%1"_s.arg(port);
        const QString dataDir = m_fleet.newDataDir();
        ServerProcess *server = &m_fleet.add(dataDir, {}, listen);
        QVERIFY2(server->startReady(), qPrintable(server->stderrText()));
        const QUuid id = server->create(conversationBody(u"echo"_s, u"followed"_s));
        QVERIFY(!id.isNull());
        QVERIFY(
            server->post(conversationPath(id, u"events"_s), userMessage(u"history"_s, true)).ok());
        QVERIFY(server->waitForStatus(id, u"finished"_s));
        const qsizetype historySize = server->events(id).size();

        CtlProcess &json = startCtl(*server, {u"events"_s, wireId(id), u"--follow"_s, u"--json"_s});
        CtlProcess &human = startCtl(*server, {u"events"_s, wireId(id), u"--follow"_s});
        QVERIFY2(QTest::qWaitFor(
                     [&] {
                         return json.result().jsonLines().size() == historySize &&
                                human.result().outLines().size() == historySize + 1;
                     },
                     FollowTimeoutMs),
                 qPrintable(json.result().describe() + human.result().describe()));

        // Live, before the restart.
        const CtlResult sent = ctl(*server, {u"send"_s, wireId(id), u"--run"_s, u"live before"_s});
        QVERIFY2(sent.exitCode == ExitOk, qPrintable(sent.describe()));
        QVERIFY(server->waitForStatus(id, u"finished"_s));
        const qsizetype beforeSize = server->events(id).size();
        QVERIFY2(QTest::qWaitFor([&] { return json.result().jsonLines().size() == beforeSize; },
                                 FollowTimeoutMs),
                 qPrintable(json.result().describe()));

        server->kill();
        QVERIFY2(QTest::qWaitFor(
                     [&] {
                         return json.result().err.contains(u"connection lost"_s) &&
                                human.result().err.contains(u"connection lost"_s);
                     },
                     FollowTimeoutMs),
                 qPrintable(json.result().describe()));
        QVERIFY(json.isRunning() && human.isRunning());

        server = &m_fleet.add(dataDir, {}, listen);
        QVERIFY2(server->startReady(), qPrintable(server->stderrText()));
        QCOMPARE(server->url().port(), int(port));
        const QString marker = u"after restart "_s + QUuid::createUuid().toString(QUuid::Id128);
        const CtlResult resent = ctl(*server, {u"send"_s, wireId(id), u"--run"_s, marker});
        QVERIFY2(resent.exitCode == ExitOk, qPrintable(resent.describe()));
        QVERIFY(server->waitForStatus(id, u"finished"_s));
        const QList<QJsonObject> all = server->events(id);
        QVERIFY(all.size() > beforeSize);

        QVERIFY2(QTest::qWaitFor(
                     [&] {
                         return json.result().jsonLines().size() >= all.size() &&
                                human.result().outLines().size() >= all.size() + 1;
                     },
                     FollowTimeoutMs),
                 qPrintable(json.result().describe() + human.result().describe()));
        // A replayed duplicate would come before the new events, so this is exactly once.
        QCOMPARE(json.result().jsonLines(), all);

        const QStringList lines = human.result().outLines();
        QCOMPARE(lines.size(), all.size() + 1);
        for (qsizetype i = 0; i < all.size(); ++i) {
            const qint64 seq = all[i].value(u"seq"_s).toInteger();
            QVERIFY2(lines[i + 1].startsWith(QString::number(seq).rightJustified(5) + u"  "_s),
                     qPrintable(lines[i + 1]));
        }
        QCOMPARE(lines.filter(QRegularExpression(u" user +message +"_s + marker + u'$')).size(), 1);
        QCOMPARE(lines.filter(QRegularExpression(u" agent +message +"_s + marker + u'$')).size(),
                 1);
        QVERIFY2(
            human.result().err.contains(u"reconnected; resuming after seq %1"_s.arg(beforeSize)),
            qPrintable(human.result().describe()));
        QVERIFY(json.isRunning() && human.isRunning());
    }

private:
    static QString lineWith(const QStringList &lines, const QString &text)
    {
        for (const QString &line : lines) {
            if (line.contains(text))
                return line;
        }
        return {};
    }

    QStringList withServer(const ServerProcess &server, const QStringList &arguments)
    {
        return QStringList{u"--server"_s, server.urlText()} + arguments;
    }

    CtlProcess &startCtl(const ServerProcess &server, const QStringList &arguments)
    {
        m_ctls.push_back(
            std::make_unique<CtlProcess>(m_fleet.binary(), withServer(server, arguments)));
        CtlProcess &ctl = *m_ctls.back();
        if (!ctl.start())
            qWarning() << "agentdeck ctl did not start";
        return ctl;
    }

    CtlResult ctl(const QStringList &arguments, const QMap<QString, QString> &environment = {})
    {
        CtlProcess process(m_fleet.binary(), arguments);
        QProcessEnvironment env = process.process().processEnvironment();
        for (auto it = environment.cbegin(); it != environment.cend(); ++it)
            env.insert(it.key(), it.value());
        process.process().setProcessEnvironment(env);
        // Not a terminal: delete must not wait for an answer.
        process.process().setStandardInputFile(QProcess::nullDevice());
        if (!process.start())
            return {};
        process.waitForFinished(CommandTimeoutMs);
        return process.result();
    }

    CtlResult ctl(const ServerProcess &server, const QStringList &arguments,
                  const QMap<QString, QString> &environment = {})
    {
        return ctl(withServer(server, arguments), environment);
    }

    // Runs ctl with a pseudo-terminal as stdin and types `input` into it.
    CtlResult ctlOnTerminal(const ServerProcess &server, const QStringList &arguments,
                            const QByteArray &input)
    {
        const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
        if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0) {
            qWarning() << "no pseudo-terminal";
            return {};
        }
        const int slave = ::open(::ptsname(master), O_RDWR | O_NOCTTY);
        CtlProcess process(m_fleet.binary(), withServer(server, arguments));
        process.process().setChildProcessModifier([slave] { ::dup2(slave, STDIN_FILENO); });
        const bool started = process.start();
        ::close(slave);
        if (started) {
            // The answer waits in the terminal's buffer until ctl reads its line.
            if (::write(master, input.constData(), size_t(input.size())) != input.size())
                qWarning() << "could not type into the terminal";
            process.waitForFinished(CommandTimeoutMs);
        }
        ::close(master);
        return process.result();
    }

    ServerFleet m_fleet;
    std::vector<std::unique_ptr<CtlProcess>> m_ctls;
};

QTEST_GUILESS_MAIN(SystemCtlTest)
#include "tst_system_ctl.moc"
