#pragma once

// The real `agentdeck --headless` binary as a subprocess, with a plain HTTP client for it, for
// system tests: start and wait for the listening line, signal it, call its API; and the fleet
// of them a test starts, cleaned up after each test function.
#include <QDir>
#include <QEventLoop>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMap>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>
#include <QUrlQuery>
#include <QUuid>

#include <csignal>
#include <functional>
#include <grp.h>
#include <memory>
#include <optional>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>
#include <vector>

namespace AgentDeck::Testing {

using namespace Qt::StringLiterals;

inline constexpr int StartTimeoutMs = 15'000;
inline constexpr int RequestTimeoutMs = 20'000;
// How long a test waits for what the server does on its own (a policy, a sweep, a stop): a bound
// on failure, not an expected time. CI runs the suite two at a time beside a VM on two cores,
// where a few seconds' wait ran out.
inline constexpr int SettleTimeoutMs = 30'000;

struct Reply
{
    int status = 0;
    QByteArray body;
    QJsonValue json;
    QString error;

    bool ok() const { return status >= 200 && status < 300; }
    QJsonObject object() const { return json.toObject(); }
    QString describe() const
    {
        return u"status %1, body %2%3"_s.arg(status).arg(
            QString::fromUtf8(body.left(300)), error.isEmpty() ? QString() : u", "_s + error);
    }
};

// The agentdeck binary ctest names in AGENTDECK_BINARY; empty, with `problem` saying why, when
// there is none to run.
inline QString agentdeckBinary(QString *problem)
{
    const QString binary = qEnvironmentVariable("AGENTDECK_BINARY");
    if (binary.isEmpty())
        *problem = u"AGENTDECK_BINARY must name the agentdeck binary"_s;
    else if (!QFileInfo(binary).isExecutable())
        *problem = binary + u" is not executable"_s;
    else
        return binary;
    return {};
}

inline QString wireId(const QUuid &id)
{
    return id.toString(QUuid::WithoutBraces);
}

inline QString conversationPath(const QUuid &id, const QString &suffix = {})
{
    return u"/api/conversations/"_s + wireId(id) + (suffix.isEmpty() ? QString() : u'/' + suffix);
}

inline QJsonObject userMessage(const QString &text, bool run)
{
    return QJsonObject{
        {u"role"_s, u"user"_s},
        {u"content"_s, QJsonArray{QJsonObject{{u"type"_s, u"text"_s}, {u"text"_s, text}}}},
        {u"run"_s, run}};
}

// A create body for a shell conversation whose first message is `command`, run at once.
inline QJsonObject shellCreate(const QString &command, const QJsonObject &extra = {})
{
    QJsonObject body = extra;
    body.insert(u"agent"_s, QJsonObject{{u"kind"_s, u"shell"_s}});
    body.insert(u"initial_message"_s, userMessage(command, true));
    return body;
}

// The uid and gid of "nobody" on Debian, for the unprivileged server of a root test.
constexpr uid_t Nobody = 65534;
constexpr gid_t NoGroup = 65534;

inline QList<pid_t> processesWith(const QByteArray &marker)
{
    QList<pid_t> pids;
    const QDir proc(u"/proc"_s);
    for (const QString &entry : proc.entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
        bool isPid = false;
        const pid_t pid = entry.toInt(&isPid);
        if (!isPid)
            continue;
        QFile cmdline(proc.filePath(entry + u"/cmdline"_s));
        if (cmdline.open(QIODevice::ReadOnly) && cmdline.readAll().contains(marker))
            pids.append(pid);
    }
    return pids;
}

inline void killProcessesWith(const QByteArray &marker)
{
    for (const pid_t pid : processesWith(marker)) {
        ::kill(-pid, SIGKILL); // commands run in a session (and process group) of their own
        ::kill(pid, SIGKILL);
    }
}

// The observation's output of a conversation's last command (empty when there is none).
inline QString lastCommandOutput(const QList<QJsonObject> &events)
{
    QString output;
    for (const QJsonObject &event : events) {
        if (event.value(u"kind"_s) == u"ObservationEvent"_s)
            output = event.value(u"observation"_s).toObject().value(u"output"_s).toString();
    }
    return output;
}

// A data dir as one usually is: outside /tmp (every command has a /tmp of its own), in a parent
// of its own that goes with the test.
struct TestDataDir
{
    QTemporaryDir parent{QDir::currentPath() + u"/data-XXXXXX"_s};
    QString path = parent.filePath(u"data"_s);

    // Makes it; with an owner, gives it and its parent to that user (a root test's
    // unprivileged server).
    bool make(std::optional<std::pair<uid_t, gid_t>> owner = std::nullopt) const
    {
        if (!parent.isValid() || !QDir().mkpath(path))
            return false;
        for (const QString &dir : {parent.path(), path}) {
            if (owner &&
                ::chown(QFile::encodeName(dir).constData(), owner->first, owner->second) != 0)
                return false;
        }
        return true;
    }
};

class ServerProcess
{
public:
    ServerProcess(const QString &binary, const QString &dataDir, const QStringList &extraArguments,
                  const QString &listen = u"127.0.0.1:0"_s)
        : m_process(std::make_unique<QProcess>())
    {
        m_process->setProgram(binary);
        m_process->setArguments(
            QStringList{u"--headless"_s, u"--listen"_s, listen, u"--data-dir"_s, dataDir} +
            extraArguments);
        m_process->setStandardOutputFile(QProcess::nullDevice());
        QObject::connect(m_process.get(), &QProcess::readyReadStandardError, m_process.get(),
                         [this] { m_stderr += m_process->readAllStandardError(); });
    }

    ~ServerProcess() { kill(); }

    // Before start(): the desktop console with its embedded server instead of --headless,
    // offscreen, with `runtimeDir` as its session's runtime dir when given. Calls carry the key
    // the console made for its server (DATA/console.key).
    void runAsConsole(const QString &runtimeDir = {})
    {
        m_process->setArguments(m_process->arguments().mid(1));
        m_console = true;
        setEnvironmentVariable(u"QT_QPA_PLATFORM"_s, u"offscreen"_s);
        if (!runtimeDir.isEmpty())
            setEnvironmentVariable(u"XDG_RUNTIME_DIR"_s, runtimeDir);
    }

    // Before start(): a variable of the server's environment, on top of this process's.
    void setEnvironmentVariable(const QString &name, const QString &value)
    {
        QProcessEnvironment environment = m_process->processEnvironment();
        if (environment.isEmpty())
            environment = QProcessEnvironment::systemEnvironment();
        environment.insert(name, value);
        m_process->setProcessEnvironment(environment);
    }

    // Before start(): the server's limit of open files, soft and hard (the same unless given).
    void setOpenFileLimit(rlim_t soft, rlim_t hard = 0)
    {
        m_childSetup = [soft, hard] {
            const rlimit limit{soft, hard ? hard : soft};
            ::setrlimit(RLIMIT_NOFILE, &limit);
        };
    }

    // Before start(): what the server's process does before it runs the binary (in the child,
    // after fork: system calls only). Takes the place of runAsUser() and setOpenFileLimit().
    void setChildSetup(std::function<void()> setup) { m_childSetup = std::move(setup); }

    // Before start(): the server runs as this user (a root test's unprivileged server), with
    // its data dir given to it.
    void runAsUser(uid_t uid, gid_t gid)
    {
        const QByteArray dir = QFile::encodeName(dataDir());
        if (::chown(dir.constData(), uid, gid) != 0)
            qWarning() << "cannot give" << dir << "to uid" << uid;
        m_childSetup = [uid, gid] {
            if (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0)
                ::_exit(126);
        };
    }

    // Starts the process and waits for its listening line; false when it exits first.
    bool start()
    {
        // The server goes with the test: a test that crashed left its servers running, as
        // orphans, on the machine (set last: a change of user clears it).
        m_process->setChildProcessModifier([setup = m_childSetup] {
            if (setup)
                setup();
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        });
        m_process->start();
        if (!m_process->waitForStarted(StartTimeoutMs))
            return false;
        const bool listening = QTest::qWaitFor(
            [this] { return !listeningUrl().isEmpty() || !isRunning(); }, StartTimeoutMs);
        m_url = QUrl(listeningUrl());
        if (m_console && !m_headers.contains("X-Session-API-Key")) {
            QFile key(dataDir() + u"/console.key"_s);
            if (key.open(QIODevice::ReadOnly))
                setKey(QString::fromLatin1(key.readAll().trimmed()));
        }
        return listening && !m_url.isEmpty();
    }

    // Starts and waits until /ready answers 200.
    bool startReady()
    {
        if (!start())
            return false;
        return QTest::qWaitFor([this] { return get(u"/ready"_s).status == 200; }, StartTimeoutMs);
    }

    bool isRunning() const { return m_process->state() != QProcess::NotRunning; }
    qint64 pid() const { return m_process->processId(); }

    void sendSignal(int signal)
    {
        if (isRunning())
            ::kill(static_cast<pid_t>(m_process->processId()), signal);
    }

    bool waitForExit(int timeoutMs)
    {
        return QTest::qWaitFor([this] { return !isRunning(); }, timeoutMs);
    }

    void kill()
    {
        if (!isRunning())
            return;
        sendSignal(SIGKILL);
        m_process->waitForFinished(10'000);
    }

    int exitCode() const { return m_process->exitCode(); }
    QProcess::ExitStatus exitStatus() const { return m_process->exitStatus(); }

    QString stderrText()
    {
        m_stderr += m_process->readAllStandardError();
        return QString::fromLocal8Bit(m_stderr);
    }

    QStringList listeningLines()
    {
        QStringList lines;
        for (const QString &line : stderrText().split(u'\n')) {
            if (line.contains(u"agentdeck.server: listening on "_s))
                lines.append(line);
        }
        return lines;
    }

    QString listeningUrl()
    {
        static const QRegularExpression pattern(
            u"agentdeck\\.server: listening on (http://127\\.0\\.0\\.1:\\d+)$"_s,
            QRegularExpression::MultilineOption);
        const auto match = pattern.match(stderrText());
        return match.hasMatch() ? match.captured(1) : QString();
    }

    QUrl url() const { return m_url; }
    QString dataDir() const
    {
        const QStringList arguments = m_process->arguments();
        return arguments.value(arguments.indexOf(u"--data-dir"_s) + 1);
    }
    QString urlText() const { return m_url.toString(); }
    // Sent as X-Session-API-Key on every call from now on.
    void setKey(const QString &key) { setHeader("X-Session-API-Key", key.toUtf8()); }
    // Sent on every call from now on; an empty value stops sending it.
    void setHeader(const QByteArray &name, const QByteArray &value) { m_headers[name] = value; }

    Reply call(const QByteArray &method, const QString &path, const QByteArray &body = {},
               const QUrlQuery &query = {}, const QByteArray &contentType = "application/json"_ba)
    {
        QUrl url = m_url;
        url.setPath(path);
        if (!query.isEmpty())
            url.setQuery(query);
        QNetworkRequest request(url);
        request.setAttribute(QNetworkRequest::Http2AllowedAttribute, false);
        request.setTransferTimeout(RequestTimeoutMs);
        for (auto header = m_headers.cbegin(); header != m_headers.cend(); ++header) {
            if (!header.value().isEmpty())
                request.setRawHeader(header.key(), header.value());
        }
        if (!body.isEmpty())
            request.setHeader(QNetworkRequest::ContentTypeHeader, contentType);
        QNetworkReply *reply = m_network.sendCustomRequest(request, method, body);
        if (!reply->isFinished()) {
            QEventLoop loop;
            QObject::connect(reply, &QNetworkReply::finished, &loop, &QEventLoop::quit);
            loop.exec();
        }
        Reply result;
        result.status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
        result.body = reply->readAll();
        if (reply->error() != QNetworkReply::NoError)
            result.error = reply->errorString();
        reply->deleteLater();
        QJsonParseError parseError;
        const QJsonDocument document = QJsonDocument::fromJson(result.body, &parseError);
        if (parseError.error == QJsonParseError::NoError) {
            result.json =
                document.isArray() ? QJsonValue(document.array()) : QJsonValue(document.object());
        } else {
            // The count route answers a bare integer, which is not a JSON document for Qt.
            bool isNumber = false;
            const qint64 number = result.body.trimmed().toLongLong(&isNumber);
            if (isNumber)
                result.json = number;
        }
        return result;
    }

    Reply get(const QString &path, const QUrlQuery &query = {})
    {
        return call("GET"_ba, path, {}, query);
    }

    // POST /api/file/upload of `content` to `path`, as OpenHands' clients send it.
    Reply upload(const QString &path, const QByteArray &content)
    {
        const QByteArray boundary = "agentdeck-test-boundary";
        const QByteArray body = "--" + boundary +
                                "\r\nContent-Disposition: form-data; name=\"file\"; "
                                "filename=\"f\"\r\nContent-Type: application/octet-stream\r\n\r\n" +
                                content + "\r\n--" + boundary + "--\r\n";
        return call("POST"_ba, u"/api/file/upload"_s, body, QUrlQuery{{u"path"_s, path}},
                    "multipart/form-data; boundary=" + boundary);
    }

    Reply post(const QString &path, const QJsonObject &body = {})
    {
        return call("POST"_ba, path, QJsonDocument(body).toJson(QJsonDocument::Compact));
    }

    // Without an agent in `body`, a shell conversation (a create needs one).
    QUuid create(QJsonObject body, Reply *reply = nullptr)
    {
        if (!body.contains(u"agent"_s))
            body.insert(u"agent"_s, QJsonObject{{u"kind"_s, u"shell"_s}});
        const Reply created = post(u"/api/conversations"_s, body);
        if (reply)
            *reply = created;
        if (created.status != 201) {
            if (!reply)
                qWarning().noquote() << "create failed:" << created.describe();
            return {};
        }
        return QUuid::fromString(created.object().value(u"id"_s).toString());
    }

    QJsonObject conversation(const QUuid &id) { return get(conversationPath(id)).object(); }

    QString status(const QUuid &id)
    {
        return conversation(id).value(u"execution_status"_s).toString();
    }

    bool waitForStatus(const QUuid &id, const QString &wanted, int timeoutMs = 30'000)
    {
        return QTest::qWaitFor([&] { return status(id) == wanted; }, timeoutMs);
    }

    // All events of a conversation, following next_page_id.
    QList<QJsonObject> events(const QUuid &id)
    {
        QList<QJsonObject> events;
        QUrlQuery query;
        for (int page = 0; page < 1000; ++page) {
            const Reply reply = get(conversationPath(id, u"events/search"_s), query);
            if (!reply.ok())
                return events;
            for (const QJsonValue &item : reply.object().value(u"items"_s).toArray())
                events.append(item.toObject());
            const QString next = reply.object().value(u"next_page_id"_s).toString();
            if (next.isEmpty())
                break;
            query.removeAllQueryItems(u"page_id"_s);
            query.addQueryItem(u"page_id"_s, next);
        }
        return events;
    }

private:
    std::unique_ptr<QProcess> m_process;
    std::function<void()> m_childSetup; // setChildSetup(), runAsUser(), setOpenFileLimit()
    QByteArray m_stderr;
    QUrl m_url;
    bool m_console = false;
    QMap<QByteArray, QByteArray> m_headers;
    QNetworkAccessManager m_network;
};

// The outputs of a conversation's observations, oldest first.
inline QStringList observations(ServerProcess &server, const QUuid &id)
{
    QStringList outputs;
    for (const QJsonObject &event : server.events(id)) {
        if (event.value(u"kind"_s) == u"ObservationEvent"_s)
            outputs << event.value(u"observation"_s).toObject().value(u"output"_s).toString();
    }
    return outputs;
}

// Runs `command` as the conversation's next message and waits for its observation and the end
// of the run; its output (empty when it did not end within a minute).
inline QString runNext(ServerProcess &server, const QUuid &id, const QString &command)
{
    const qsizetype before = observations(server, id).size();
    if (!server.post(conversationPath(id, u"events"_s), userMessage(command, true)).ok())
        return {};
    QStringList outputs;
    const bool ended = QTest::qWaitFor(
        [&] {
            outputs = observations(server, id);
            return outputs.size() > before && server.status(id) != u"running"_s;
        },
        60'000);
    return ended ? outputs.last() : QString();
}

// The servers and data dirs of a system test. cleanUp(), after each test function, kills every
// server (showing the end of its stderr when the test failed) and every process whose command
// line names one of the data dirs: sandbox hosts outlive their server by design.
class ServerFleet
{
public:
    // False, with `problem` saying why, when ctest named no binary to run.
    bool findBinary(QString *problem)
    {
        m_binary = agentdeckBinary(problem);
        return !m_binary.isEmpty();
    }

    QString newDataDir()
    {
        m_dirs.push_back(std::make_unique<QTemporaryDir>());
        return m_dirs.back()->path();
    }

    // A server, not started yet, on `dataDir` (a new one when empty).
    ServerProcess &add(const QString &dataDir = {}, const QStringList &arguments = {},
                       const QString &listen = u"127.0.0.1:0"_s)
    {
        m_servers.push_back(std::make_unique<ServerProcess>(
            m_binary, dataDir.isEmpty() ? newDataDir() : dataDir, arguments, listen));
        return *m_servers.back();
    }

    const std::vector<std::unique_ptr<ServerProcess>> &servers() const { return m_servers; }
    QString binary() const { return m_binary; }

    void cleanUp()
    {
        const bool failed = QTest::currentTestFailed();
        for (const auto &server : m_servers) {
            if (failed)
                qWarning().noquote() << "stderr of" << server->urlText() << ":\n"
                                     << server->stderrText().right(4000);
            server->sendSignal(SIGCONT); // a test may have frozen it
            server->kill();
        }
        m_servers.clear();
        for (const auto &dir : m_dirs)
            killProcessesWith(dir->path().toUtf8());
        m_dirs.clear();
    }

private:
    QString m_binary;
    std::vector<std::unique_ptr<QTemporaryDir>> m_dirs;
    std::vector<std::unique_ptr<ServerProcess>> m_servers;
};

} // namespace AgentDeck::Testing
