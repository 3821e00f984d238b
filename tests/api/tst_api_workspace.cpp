// The remote workspace of OpenHands' clients (/api/bash/execute_bash_command, /api/file/upload,
// /api/file/download) over real HTTP, with the server workspace's real sandbox.
#include "storage/leasestore.h"
#include "testserver.h"

#include <QCryptographicHash>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QHttpMultiPart>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QProcess>
#include <QRandomGenerator>
#include <QSignalSpy>
#include <QTcpSocket>
#include <QTemporaryDir>
#include <QTest>
#include <QWebSocket>

using namespace Qt::StringLiterals;
using namespace AgentDeck;
using namespace AgentDeck::Testing;

namespace {

struct RawReply
{
    int status = 0;
    QByteArray body;
    QByteArray retryAfter;
    QJsonObject json() const { return QJsonDocument::fromJson(body).object(); }
};

} // namespace

class ApiWorkspaceTest : public QObject
{
    Q_OBJECT

private:
    std::unique_ptr<TestServer> m_server;
    QNetworkAccessManager m_network;
    QString m_key; // sent as X-Session-API-Key when set

    QString workspace() const { return QDir(m_server->dataDir()).filePath(u"workspace"_s); }

    QNetworkRequest request(const QString &path, const QUrlQuery &query) const
    {
        QUrl url = m_server->url();
        url.setPath(path);
        url.setQuery(query);
        QNetworkRequest request(url);
        if (!m_key.isEmpty())
            request.setRawHeader("X-Session-API-Key", m_key.toUtf8());
        return request;
    }

    static RawReply finish(QNetworkReply *reply)
    {
        QSignalSpy finished(reply, &QNetworkReply::finished);
        if (!reply->isFinished())
            finished.wait(60'000);
        RawReply result{reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt(),
                        reply->readAll(), reply->rawHeader("Retry-After")};
        reply->deleteLater();
        return result;
    }

    RawReply execute(const QJsonObject &body)
    {
        QNetworkRequest r = request(u"/api/bash/execute_bash_command"_s, {});
        r.setHeader(QNetworkRequest::ContentTypeHeader, u"application/json"_s);
        return finish(m_network.post(r, QJsonDocument(body).toJson()));
    }

    RawReply upload(const QString &path, const QByteArray &content)
    {
        auto *multipart = new QHttpMultiPart(QHttpMultiPart::FormDataType);
        QHttpPart part;
        part.setHeader(QNetworkRequest::ContentDispositionHeader,
                       u"form-data; name=\"file\"; filename=\"upload.bin\""_s);
        part.setHeader(QNetworkRequest::ContentTypeHeader, u"application/octet-stream"_s);
        part.setBody(content);
        multipart->append(part);
        QNetworkReply *reply =
            m_network.post(request(u"/api/file/upload"_s, QUrlQuery{{u"path"_s, path}}), multipart);
        multipart->setParent(reply);
        return finish(reply);
    }

    RawReply download(const QString &path)
    {
        return finish(
            m_network.get(request(u"/api/file/download"_s, QUrlQuery{{u"path"_s, path}})));
    }

    QUrl bashSocketUrl(const QString &query) const
    {
        QUrl url = m_server->url();
        url.setScheme(u"ws"_s);
        url.setPath(u"/sockets/bash-events"_s);
        url.setQuery(query);
        return url;
    }

    // A client of /sockets/bash-events that keeps every event it gets.
    class BashSocket
    {
    public:
        explicit BashSocket(const QUrl &url, const QByteArray &headerKey = {})
        {
            QObject::connect(&m_socket, &QWebSocket::textMessageReceived, &m_socket,
                             [this](const QString &text) {
                                 events.append(QJsonDocument::fromJson(text.toUtf8()).object());
                             });
            QObject::connect(&m_socket, &QWebSocket::disconnected, &m_socket,
                             [this] { closeCode = m_socket.closeCode(); });
            QNetworkRequest request(url);
            if (!headerKey.isEmpty())
                request.setRawHeader("X-Session-API-Key", headerKey);
            m_socket.open(request);
        }
        bool isOpen() const { return m_socket.state() == QAbstractSocket::ConnectedState; }
        void send(const QByteArray &frame) { m_socket.sendTextMessage(QString::fromUtf8(frame)); }
        QList<QJsonObject> ofKind(const QString &kind) const
        {
            QList<QJsonObject> found;
            for (const QJsonObject &event : events) {
                if (event[u"kind"_s].toString() == kind)
                    found.append(event);
            }
            return found;
        }
        bool hasOutput(const QString &stdoutText) const
        {
            const QList<QJsonObject> outputs = ofKind(u"BashOutput"_s);
            return std::any_of(outputs.cbegin(), outputs.cend(), [&](const QJsonObject &output) {
                return output[u"stdout"_s].toString() == stdoutText;
            });
        }
        qsizetype count(const QString &kind, const QString &command) const
        {
            const QList<QJsonObject> found = ofKind(kind);
            return std::count_if(found.cbegin(), found.cend(), [&](const QJsonObject &event) {
                return event[u"command"_s].toString() == command;
            });
        }

        QList<QJsonObject> events;
        int closeCode = 0;

    private:
        QWebSocket m_socket;
    };

    void startServer(TestServerOptions options = {})
    {
        m_server = std::make_unique<TestServer>(std::move(options));
        QVERIFY2(m_server->start(), qPrintable(m_server->errorString()));
        QVERIFY(m_server->usesSandboxes());
    }

private Q_SLOTS:
    void initTestCase()
    {
        if (qEnvironmentVariableIsEmpty("AGENTDECK_BINARY"))
            QSKIP(
                "needs AGENTDECK_BINARY (the agentdeck binary) for real sandboxes; run via ctest");
    }
    void init()
    {
        m_key.clear();
        startServer();
    }
    void cleanup() { m_server.reset(); }

    void serverInfoShowsTheWorkspace()
    {
        const ApiReply reply = m_server->get(u"/server_info"_s);
        QCOMPARE(reply.status, 200);
        QCOMPARE(reply.json[u"workspace_dir"_s].toString(),
                 QFileInfo(workspace()).canonicalFilePath());
    }

    void executeAnswersAsOpenHands()
    {
        const RawReply reply = execute({{u"command"_s, u"echo out; echo err >&2; exit 3"_s}});
        QCOMPARE(reply.status, 200);
        const QJsonObject output = reply.json();
        QCOMPARE(output[u"kind"_s].toString(), u"BashOutput"_s);
        QCOMPARE(output[u"exit_code"_s].toInt(), 3);
        QCOMPARE(output[u"stdout"_s].toString(), u"out\n"_s);
        QCOMPARE(output[u"stderr"_s].toString(), u"err\n"_s);
        QCOMPARE(output[u"order"_s].toInt(), 0);
        QCOMPARE(output[u"timeout_occurred"_s].toBool(), false);
        QVERIFY(!output[u"command_id"_s].toString().isEmpty());
        QVERIFY(!output[u"id"_s].toString().isEmpty());
        QVERIFY(!output[u"timestamp"_s].toString().isEmpty());
    }

    void executeRunsInTheWorkspaceOrTheGivenCwd()
    {
        const QString real = QFileInfo(workspace()).canonicalFilePath();
        RawReply reply = execute({{u"command"_s, u"pwd; touch made-here"_s}});
        QCOMPARE(reply.status, 200);
        QCOMPARE(reply.json()[u"stdout"_s].toString(), real + u'\n');
        QVERIFY(QFile::exists(real + u"/made-here"_s));

        QVERIFY(QDir(real).mkpath(u"sub/dir"_s));
        reply = execute(
            QJsonObject{{u"command"_s, u"pwd"_s}, {u"cwd"_s, QString(real + u"/sub/dir"_s)}});
        QCOMPARE(reply.status, 200);
        QCOMPARE(reply.json()[u"stdout"_s].toString(), real + u"/sub/dir\n"_s);
    }

    void executeStopsAtItsTimeout()
    {
        QElapsedTimer timer;
        timer.start();
        const RawReply reply = execute({{u"command"_s, u"sleep 60"_s}, {u"timeout"_s, 1}});
        QCOMPARE(reply.status, 200);
        QCOMPARE(reply.json()[u"exit_code"_s].toInt(), -1);
        QCOMPARE(reply.json()[u"timeout_occurred"_s].toBool(), true);
        QVERIFY2(timer.elapsed() < 20'000, qPrintable(QString::number(timer.elapsed())));
    }

    void executeRefusesBadInput_data()
    {
        QTest::addColumn<QJsonObject>("body");
        QTest::addColumn<int>("status");
        QTest::addRow("no command") << QJsonObject{} << 422;
        QTest::addRow("command not a string") << QJsonObject{{u"command"_s, 1}} << 422;
        QTest::addRow("timeout 0")
            << QJsonObject{{u"command"_s, u"true"_s}, {u"timeout"_s, 0}} << 422;
        QTest::addRow("relative cwd")
            << QJsonObject{{u"command"_s, u"true"_s}, {u"cwd"_s, u"sub"_s}} << 400;
        QTest::addRow("cwd outside")
            << QJsonObject{{u"command"_s, u"true"_s}, {u"cwd"_s, u"/etc"_s}} << 422;
    }
    void executeRefusesBadInput()
    {
        QFETCH(QJsonObject, body);
        QFETCH(int, status);
        const RawReply reply = execute(body);
        QCOMPARE(reply.status, status);
        QVERIFY(!reply.json()[u"detail"_s].toString().isEmpty());
    }

    void executeRefusesACwdOutOfTheWorkspace()
    {
        const QString real = QFileInfo(workspace()).canonicalFilePath();
        QVERIFY(QFile::link(u"/etc"_s, real + u"/etc-link"_s));
        const QStringList cwds{real + u"/../"_s, real + u"/etc-link"_s, m_server->dataDir(),
                               QDir(m_server->dataDir()).filePath(u"workspaces"_s)};
        for (const QString &cwd : cwds) {
            const RawReply reply = execute({{u"command"_s, u"true"_s}, {u"cwd"_s, cwd}});
            QVERIFY2(reply.status == 403,
                     qPrintable(cwd + u": "_s + QString::number(reply.status)));
            QVERIFY(reply.json()[u"detail"_s].toString().contains(cwd));
        }
    }

    void uploadThenDownload()
    {
        QByteArray content(300 * 1024 + 17, Qt::Uninitialized);
        QRandomGenerator generator(7);
        for (char &byte : content)
            byte = char(generator.bounded(256));
        const QString target = QFileInfo(workspace()).canonicalFilePath() + u"/new/dir/blob.bin"_s;
        const RawReply uploaded = upload(target, content);
        QCOMPARE(uploaded.status, 200);
        QCOMPARE(uploaded.json()[u"success"_s].toBool(), true);
        QFile file(target);
        QVERIFY(file.open(QIODevice::ReadOnly));
        QVERIFY(file.readAll() == content);

        const RawReply downloaded = download(target);
        QCOMPARE(downloaded.status, 200);
        QCOMPARE(downloaded.body.size(), content.size());
        QVERIFY(downloaded.body == content);

        QCOMPARE(upload(target, "small").status, 200);
        QCOMPARE(download(target).body, QByteArray("small"));
        QCOMPARE(upload(target, {}).status, 200);
        QCOMPARE(download(target).body, QByteArray());
    }

    // A download is sent as the client reads it, a part at a time: the server's memory grows by
    // a fraction of the file, not by the file (and its base64) as when it was made whole
    // first. A request pipelined behind it is answered after its last byte, and HEAD tells the
    // length without a body.
    void aDownloadStreamsAsTheClientReads()
    {
        constexpr qint64 Size = 64 * 1024 * 1024;
        const QString target = QFileInfo(workspace()).canonicalFilePath() + u"/large.bin"_s;
        QCryptographicHash written(QCryptographicHash::Sha256);
        {
            QFile file(target);
            QVERIFY(file.open(QIODevice::WriteOnly));
            QByteArray block(1024 * 1024, Qt::Uninitialized);
            QRandomGenerator generator(11);
            for (qint64 at = 0; at < Size; at += block.size()) {
                generator.fillRange(reinterpret_cast<quint32 *>(block.data()),
                                    block.size() / sizeof(quint32));
                written.addData(block);
                QCOMPARE(file.write(block), block.size());
            }
        }
        const auto rssKiB = [](QByteArrayView field) {
            QFile status(u"/proc/self/status"_s);
            if (!status.open(QIODevice::ReadOnly))
                return qint64(-1);
            for (const QByteArray &line : status.readAll().split('\n')) {
                if (line.startsWith(field))
                    return line.mid(field.size()).trimmed().split(' ').first().toLongLong();
            }
            return qint64(-1);
        };
        // The peak is counted from here (clear_refs 5 resets VmHWM to the present size).
        QFile clearRefs(u"/proc/self/clear_refs"_s);
        QVERIFY(clearRefs.open(QIODevice::WriteOnly) && clearRefs.write("5") == 1);
        clearRefs.close();
        const qint64 before = rssKiB("VmRSS:");
        QVERIFY(before > 0);

        QTcpSocket socket;
        socket.connectToHost(m_server->url().host(), quint16(m_server->url().port()));
        QVERIFY(socket.waitForConnected(5000));
        const QByteArray path = QUrl::toPercentEncoding(target, "/");
        const QByteArray key =
            m_key.isEmpty() ? QByteArray() : "X-Session-API-Key: " + m_key.toUtf8() + "\r\n";
        const QByteArray host = "Host: " + m_server->url().authority().toUtf8() + "\r\n";
        socket.write("GET /api/file/download?path=" + path + " HTTP/1.1\r\n" + host + key +
                     "\r\nGET /alive HTTP/1.1\r\n" + host + "\r\n");
        QByteArray head;
        QByteArray rest;
        qint64 bodyRead = 0;
        QCryptographicHash received(QCryptographicHash::Sha256);
        const auto readSome = [&] {
            QByteArray bytes = socket.readAll();
            if (head.isEmpty()) {
                rest += bytes;
                const qsizetype end = rest.indexOf("\r\n\r\n");
                if (end < 0)
                    return;
                head = rest.first(end + 4);
                bytes = rest.mid(end + 4);
                rest.clear();
            }
            const qint64 body = std::min<qint64>(bytes.size(), Size - bodyRead);
            received.addData(QByteArrayView(bytes).first(body));
            bodyRead += body;
            rest += bytes.mid(body);
        };
        QTRY_VERIFY_WITH_TIMEOUT((readSome(), bodyRead == Size && rest.contains("\r\n\r\n")) ||
                                     head.contains(" 4"),
                                 120'000);
        QVERIFY2(head.startsWith("HTTP/1.1 200 "), QByteArray(head + rest.left(300)).constData());
        QVERIFY2(head.contains(QByteArray("Content-Length: " + QByteArray::number(Size) + "\r\n")),
                 head.constData());
        QCOMPARE(received.result(), written.result());
        QVERIFY2(rest.startsWith("HTTP/1.1 200 "), rest.left(200).constData());
        const qint64 peakGrowth = rssKiB("VmHWM:") - before;
        QVERIFY2(peakGrowth < Size / 1024 / 4,
                 qPrintable(u"the peak grew by %1 KiB for a file of %2 KiB"_s.arg(peakGrowth)
                                .arg(Size / 1024)));

        QNetworkRequest headRequest =
            request(u"/api/file/download"_s, QUrlQuery{{u"path"_s, target}});
        const RawReply headOnly = finish(m_network.head(headRequest));
        QCOMPARE(headOnly.status, 200);
        QVERIFY(headOnly.body.isEmpty());
    }

    void uploadRefusesPathsOutOfTheWorkspace()
    {
        QTemporaryDir outside;
        QVERIFY(outside.isValid());
        const QString real = QFileInfo(workspace()).canonicalFilePath();
        QVERIFY(QFile::link(outside.path(), real + u"/out"_s));
        const QStringList refusedPaths{outside.filePath(u"a"_s), real + u"/../a"_s,
                                       real + u"/out/a"_s,
                                       QDir(m_server->dataDir()).filePath(u"agentdeck.db"_s)};
        for (const QString &path : refusedPaths) {
            const RawReply reply = upload(path, "x");
            QVERIFY2(reply.status == 403,
                     qPrintable(path + u": "_s + QString::number(reply.status)));
        }
        QVERIFY(!QFile::exists(outside.filePath(u"a"_s)));
        QCOMPARE(upload(u"relative/a"_s, "x").status, 400);
        QCOMPARE(upload(real, "x").status, 400); // a directory
    }

    void uploadIsBoundedByTheBodyLimit()
    {
        const QString target = QFileInfo(workspace()).canonicalFilePath() + u"/big"_s;
        const RawReply reply = upload(target, QByteArray(4 * 1024 * 1024 + 1, 'x'));
        QCOMPARE(reply.status, 413);
        QVERIFY(!QFile::exists(target));
    }

    void uploadNeedsAMultipartBody()
    {
        QNetworkRequest r =
            request(u"/api/file/upload"_s,
                    QUrlQuery{{u"path"_s, QFileInfo(workspace()).canonicalFilePath() + u"/f"_s}});
        r.setHeader(QNetworkRequest::ContentTypeHeader, u"application/octet-stream"_s);
        QCOMPARE(finish(m_network.post(r, QByteArray("raw"))).status, 400);
    }

    void downloadRefusesBadPaths()
    {
        const QString real = QFileInfo(workspace()).canonicalFilePath();
        QVERIFY(QFile::link(u"/etc/passwd"_s, real + u"/passwd"_s));
        QCOMPARE(download(real + u"/missing"_s).status, 404);
        QCOMPARE(download(real).status, 400);
        QCOMPARE(download(u"/etc/passwd"_s).status, 422); // outside every workspace root
        QCOMPARE(download(real + u"/passwd"_s).status, 403);
        QCOMPARE(download(real + u"/../agentdeck.db"_s).status, 403);
        QCOMPARE(download(QDir(m_server->dataDir()).filePath(u"agentdeck.db"_s)).status, 403);
        QCOMPARE(download({}).status, 422);
    }

    // A path in a conversation's workspace goes through that conversation's sandbox: its home
    // is the conversation's.
    void aConversationsWorkspaceUsesItsSandbox()
    {
        const QUuid id = m_server->create();
        QVERIFY(!id.isNull());
        const QString dir = m_server->workingDir(id);
        QVERIFY(QDir().mkpath(dir));
        const QString real = QFileInfo(dir).canonicalFilePath();
        const RawReply reply =
            execute({{u"command"_s, u"pwd; echo \"$HOME\"; echo hi > made"_s}, {u"cwd"_s, real}});
        QCOMPARE(reply.status, 200);
        const QString home = QDir(m_server->dataDir()).filePath(u"runtimes/"_s + toWireId(id));
        QCOMPARE(reply.json()[u"stdout"_s].toString(),
                 real + u'\n' + QFileInfo(home).canonicalFilePath() + u"/home\n"_s);
        QVERIFY(QFile::exists(real + u"/made"_s));

        QCOMPARE(upload(real + u"/up.txt"_s, "uploaded").status, 200);
        QCOMPARE(download(real + u"/up.txt"_s).body, QByteArray("uploaded"));

        const QString unknown =
            QDir(m_server->dataDir()).filePath(u"workspaces/"_s + toWireId(QUuid::createUuid()));
        QCOMPARE(upload(unknown + u"/x"_s, "x").status, 403);
        QCOMPARE(download(unknown + u"/x"_s).status, 403);
    }

    // A workspace given at create is the conversation's too, wherever it is.
    void aCallersWorkspaceUsesTheConversationsSandbox()
    {
        QTemporaryDir given;
        QVERIFY(given.isValid());
        const QString dir = QFileInfo(given.path()).canonicalFilePath();
        QVERIFY(TestServer::ownAsUser(dir));
        const QUuid id =
            m_server->create(QJsonObject{{u"workspace"_s, QJsonObject{{u"working_dir"_s, dir}}}});
        QVERIFY(!id.isNull());
        const RawReply reply = execute({{u"command"_s, u"pwd; echo \"$HOME\""_s}, {u"cwd"_s, dir}});
        QCOMPARE(reply.status, 200);
        const QString home = QDir(m_server->dataDir()).filePath(u"runtimes/"_s + toWireId(id));
        QCOMPARE(reply.json()[u"stdout"_s].toString(),
                 dir + u'\n' + QFileInfo(home).canonicalFilePath() + u"/home\n"_s);
        QCOMPARE(upload(dir + u"/sub/up.txt"_s, "given").status, 200);
        QCOMPARE(download(dir + u"/sub/up.txt"_s).body, QByteArray("given"));
        QCOMPARE(download(QFileInfo(dir).path()).status, 403); // its parent is nobody's

        QVERIFY(m_server->post(u"/api/conversations/"_s + toWireId(id) + u"/archive"_s).ok());
        QCOMPARE(download(dir + u"/sub/up.txt"_s).status, 409);
    }

    // A conversation another replica holds has its sandbox there: a workspace command at its
    // path is refused here, with who holds it, rather than run in a second sandbox on the same
    // workspace.
    void aConversationHeldElsewhereIsNotRunHere()
    {
        const QUuid id = m_server->create();
        const QString dir = m_server->workingDir(id);
        QVERIFY(QDir().mkpath(dir));
        const QString real = QFileInfo(dir).canonicalFilePath();
        LeaseStore leases(m_server->server().database(), std::chrono::seconds(30));
        const auto held = leases.claim(id, u"other-replica-instance"_s);
        QVERIFY(held);
        const RawReply refused = execute({{u"command"_s, u"echo ran > ran"_s}, {u"cwd"_s, real}});
        QCOMPARE(refused.status, 409);
        QCOMPARE(refused.json()[u"code"_s].toString(), u"held_by_other_replica"_s);
        QVERIFY(!QFile::exists(real + u"/ran"_s));
        QCOMPARE(upload(real + u"/up.txt"_s, "x").status, 409);
        QCOMPARE(download(real + u"/ran"_s).status, 409);
        QVERIFY(!QDir(QDir(m_server->dataDir()).filePath(u"runtimes/"_s + toWireId(id)))
                     .exists(u"sandbox.pid"_s));

        leases.release(id, *held);
        QCOMPARE(execute({{u"command"_s, u"echo ran > ran"_s}, {u"cwd"_s, real}}).status, 200);
        QVERIFY(QFile::exists(real + u"/ran"_s));
    }

    // A conversation's run and a workspace command share its sandbox one after the other.
    void aWorkspaceCommandWaitsForTheRunsCommand()
    {
        const QUuid id = m_server->create();
        const QString dir = m_server->workingDir(id);
        QVERIFY(QDir().mkpath(dir));
        QVERIFY(m_server->send(id, u"sleep 1; echo run-done"_s, true).ok());
        QVERIFY(m_server->waitForStatus(id, u"running"_s));
        const RawReply reply = execute({{u"command"_s, u"echo workspace-done"_s},
                                        {u"cwd"_s, QFileInfo(dir).canonicalFilePath()}});
        QCOMPARE(reply.status, 200);
        QCOMPARE(reply.json()[u"stdout"_s].toString(), u"workspace-done\n"_s);
        QVERIFY(m_server->waitForStatus(id, u"finished"_s));
        bool observed = false;
        for (const QJsonObject &event : m_server->events(id)) {
            if (event.value(u"kind"_s) == u"ObservationEvent"_s)
                observed = event[u"observation"_s][u"output"_s].toString().contains(u"run-done"_s);
        }
        QVERIFY(observed);
    }

    void gitChangesAndDiff()
    {
        const QString repo = QFileInfo(workspace()).canonicalFilePath() + u"/repo"_s;
        QVERIFY(QDir().mkpath(repo));
        const auto git = [&repo](const QStringList &arguments) {
            QProcess process;
            process.setWorkingDirectory(repo);
            process.start(u"git"_s, QStringList{u"-c"_s, u"user.name=t"_s, u"-c"_s,
                                                u"user.email=t@example.com"_s} +
                                        arguments);
            return process.waitForFinished(10'000) && process.exitCode() == 0;
        };
        const auto write = [&repo](const QString &name, const QByteArray &content) {
            QFile file(repo + u'/' + name);
            return file.open(QIODevice::WriteOnly) && file.write(content) == content.size();
        };
        QVERIFY(git({u"init"_s, u"-q"_s}));
        QVERIFY(write(u"kept.txt"_s, "one\n"));
        QVERIFY(write(u"gone.txt"_s, "bye\n"));
        QVERIFY(git({u"add"_s, u"."_s}));
        QVERIFY(git({u"commit"_s, u"-qm"_s, u"first"_s}));
        QVERIFY(write(u"kept.txt"_s, "two\n"));
        QVERIFY(QFile::remove(repo + u"/gone.txt"_s));
        QVERIFY(write(u"new.txt"_s, "new\n"));

        const RawReply changes =
            finish(m_network.get(request(u"/api/git/changes"_s, QUrlQuery{{u"path"_s, repo}})));
        if (TestServer::usesDocker()) {
            // The test's image has bash and busybox, no git: said so, not "no changes".
            QCOMPARE(changes.status, 404);
            QVERIFY2(changes.body.contains("git is not installed"), changes.body.constData());
            QSKIP("the image of the test's containers has no git (the refusal is checked)");
        }
        QCOMPARE(changes.status, 200);
        const QJsonArray expected{
            QJsonObject{{u"status"_s, u"DELETED"_s}, {u"path"_s, u"gone.txt"_s}},
            QJsonObject{{u"status"_s, u"UPDATED"_s}, {u"path"_s, u"kept.txt"_s}},
            QJsonObject{{u"status"_s, u"ADDED"_s}, {u"path"_s, u"new.txt"_s}}};
        QCOMPARE(QJsonDocument::fromJson(changes.body).array(), expected);

        RawReply diff = finish(m_network.get(
            request(u"/api/git/diff"_s, QUrlQuery{{u"path"_s, repo + u"/kept.txt"_s}})));
        QCOMPARE(diff.status, 200);
        QCOMPARE(diff.json()[u"modified"_s].toString(), u"two\n"_s);
        QCOMPARE(diff.json()[u"original"_s].toString(), u"one\n"_s);
        diff = finish(m_network.get(
            request(u"/api/git/diff"_s, QUrlQuery{{u"path"_s, repo + u"/gone.txt"_s}})));
        QVERIFY(diff.json()[u"modified"_s].isNull());
        QCOMPARE(diff.json()[u"original"_s].toString(), u"bye\n"_s);

        // Not a repository: nothing changed; outside the workspaces: refused.
        const QString plain = QFileInfo(workspace()).canonicalFilePath() + u"/plain"_s;
        QVERIFY(QDir().mkpath(plain));
        const RawReply none =
            finish(m_network.get(request(u"/api/git/changes"_s, QUrlQuery{{u"path"_s, plain}})));
        QCOMPARE(none.status, 200);
        QCOMPARE(QJsonDocument::fromJson(none.body).array(), QJsonArray());
        QCOMPARE(
            finish(m_network.get(request(u"/api/git/changes"_s, QUrlQuery{{u"path"_s, u"/etc"_s}})))
                .status,
            422);
        QCOMPARE(finish(m_network.get(
                            request(u"/api/git/diff"_s, QUrlQuery{{u"path"_s, u"/etc/passwd"_s}})))
                     .status,
                 422);
        QCOMPARE(finish(m_network.get(request(u"/api/git/changes"_s,
                                              QUrlQuery{{u"path"_s, plain + u"/missing"_s}})))
                     .status,
                 404);
    }

    // OpenHands' bash-events socket: what was there when it connected (resend_mode=all), then
    // each event as it comes, each once; a frame it sends starts a command.
    void theBashEventsSocketStreamsAndStartsCommands()
    {
        QNetworkRequest r = request(u"/api/bash/start_bash_command"_s, {});
        r.setHeader(QNetworkRequest::ContentTypeHeader, u"application/json"_s);
        QCOMPARE(finish(m_network.post(
                            r, QJsonDocument(QJsonObject{{u"command"_s, u"echo before-socket"_s}})
                                   .toJson()))
                     .status,
                 200);
        BashSocket socket(bashSocketUrl(u"resend_mode=all"_s));
        QTRY_VERIFY_WITH_TIMEOUT(socket.hasOutput(u"before-socket\n"_s), 20'000);
        socket.send(R"({"command": "echo over-socket"})");
        QTRY_VERIFY_WITH_TIMEOUT(socket.hasOutput(u"over-socket\n"_s), 20'000);
        QCOMPARE(socket.count(u"BashCommand"_s, u"echo before-socket"_s), 1);
        QCOMPARE(socket.count(u"BashCommand"_s, u"echo over-socket"_s), 1);

        // A request it cannot start, or a frame that is none, is a BashError on the socket.
        socket.send(R"({"command": ""})");
        socket.send("not json");
        QTRY_COMPARE_WITH_TIMEOUT(socket.ofKind(u"BashError"_s).size(), 2, 5'000);
        QStringList codes; // the refusal comes from the main thread, the other at once
        for (const QJsonObject &error : socket.ofKind(u"BashError"_s))
            codes.append(error[u"code"_s].toString());
        codes.sort();
        QCOMPARE(codes, (QStringList{u"invalid_parameter"_s, u"malformed_json"_s}));

        // Without resend_mode it starts with what comes next.
        BashSocket live(bashSocketUrl({}));
        QTRY_VERIFY(live.isOpen());
        live.send(R"({"command": "echo live-only"})");
        QTRY_VERIFY_WITH_TIMEOUT(live.hasOutput(u"live-only\n"_s), 20'000);
        QVERIFY(!live.hasOutput(u"before-socket\n"_s));
        QTRY_VERIFY_WITH_TIMEOUT(socket.hasOutput(u"live-only\n"_s), 5'000);
    }

    // Started commands wait for the sandbox one after another: past 64 not ended, a start is
    // refused (429) rather than queued, from the route and from the socket alike.
    void startedCommandsAreBounded()
    {
        QNetworkRequest r = request(u"/api/bash/start_bash_command"_s, {});
        r.setHeader(QNetworkRequest::ContentTypeHeader, u"application/json"_s);
        const QByteArray waiting =
            QJsonDocument(QJsonObject{{u"command"_s, u"sleep 60"_s}, {u"timeout"_s, 60}}).toJson();
        for (int i = 0; i < 64; ++i)
            QCOMPARE(finish(m_network.post(r, waiting)).status, 200);
        const RawReply refused = finish(m_network.post(r, waiting));
        QCOMPARE(refused.status, 429);
        QCOMPARE(refused.json()[u"code"_s].toString(), u"too_many_commands"_s);
        QCOMPARE(refused.retryAfter, "1"_ba);
        BashSocket socket(bashSocketUrl({}));
        QTRY_VERIFY(socket.isOpen());
        socket.send(R"({"command": "echo one-too-many"})");
        QTRY_COMPARE_WITH_TIMEOUT(socket.ofKind(u"BashError"_s).size(), 1, 5'000);
        QCOMPARE(socket.ofKind(u"BashError"_s).first()[u"code"_s].toString(),
                 u"too_many_commands"_s);
        QCOMPARE(socket.count(u"BashCommand"_s, u"echo one-too-many"_s), 0);
    }

    // A command's timeout counts from its request, its wait for the sandbox included: behind a
    // long command, one with "timeout": 2 answers timed out about 2 s later, without running.
    // It answered once the long one had ended, and 2 s more (behind 64, after 300 s, empty).
    void aQueuedCommandTimesOutFromItsRequest()
    {
        QNetworkRequest r = request(u"/api/bash/start_bash_command"_s, {});
        r.setHeader(QNetworkRequest::ContentTypeHeader, u"application/json"_s);
        const QByteArray first =
            QJsonDocument(QJsonObject{{u"command"_s, u"sleep 40"_s}, {u"timeout"_s, 60}}).toJson();
        QCOMPARE(finish(m_network.post(r, first)).status, 200);
        QElapsedTimer timer;
        timer.start();
        const RawReply reply = execute({{u"command"_s, u"echo ran"_s}, {u"timeout"_s, 2}});
        const qint64 elapsed = timer.elapsed();
        QCOMPARE(reply.status, 200);
        QCOMPARE(reply.json()[u"timeout_occurred"_s].toBool(), true);
        QCOMPARE(reply.json()[u"exit_code"_s].toInt(), -1);
        QVERIFY2(!reply.json()[u"stdout"_s].toString().contains(u"ran"_s), reply.body.constData());
        QVERIFY2(elapsed >= 1'900 && elapsed < 10'000, qPrintable(QString::number(elapsed)));
    }

    void theBashEventsSocketNeedsTheKey()
    {
        TestServerOptions options;
        options.apiKeys = {u"bash-key"_s};
        options.streamAuthTimeoutMs = 1'000;
        startServer(std::move(options));
        BashSocket wrong(bashSocketUrl(u"session_api_key=other"_s));
        QTRY_VERIFY_WITH_TIMEOUT(wrong.closeCode != 0, 5'000);
        QCOMPARE(wrong.closeCode, 4001);
        BashSocket silent(bashSocketUrl({}));
        QTRY_VERIFY_WITH_TIMEOUT(silent.closeCode != 0, 5'000);
        QCOMPARE(silent.closeCode, 4001);

        BashSocket header(bashSocketUrl({}), "bash-key");
        BashSocket frame(bashSocketUrl({}));
        QTRY_VERIFY(frame.isOpen());
        frame.send(R"({"type": "auth", "session_api_key": "bash-key"})");
        // Authenticated once, an auth frame again is no command.
        frame.send(R"({"type": "auth", "session_api_key": "bash-key"})");
        QTRY_VERIFY(header.isOpen());
        header.send(R"({"command": "echo with-the-key"})");
        QTRY_VERIFY_WITH_TIMEOUT(header.hasOutput(u"with-the-key\n"_s), 20'000);
        QTRY_VERIFY_WITH_TIMEOUT(frame.hasOutput(u"with-the-key\n"_s), 5'000);
        QVERIFY(frame.ofKind(u"BashError"_s).isEmpty());
        QCOMPARE(header.closeCode, 0);
    }

    // Bash events are stored in the catalog: a restarted server finds, searches and streams
    // the ones recorded before it, and a clear is for good. They were in memory only, and a
    // restart lost every one.
    void bashEventsOutliveARestart()
    {
        const RawReply ran = execute({{u"command"_s, u"echo kept"_s}});
        QCOMPARE(ran.status, 200);
        const QString commandId = ran.json()[u"command_id"_s].toString();
        QVERIFY(!commandId.isEmpty());
        const QString dataDir = m_server->dataDir();
        // The first server owns the data dir: kept (stopped) while the others use it.
        const std::unique_ptr<TestServer> first = std::move(m_server);
        first->stop();
        TestServerOptions options;
        options.dataDir = dataDir;
        startServer(std::move(options));

        const auto search = [this](const QUrlQuery &query) {
            return finish(m_network.get(request(u"/api/bash/bash_events/search"_s, query))).json();
        };
        const QJsonArray items = search({{u"command_id__eq"_s, commandId}})[u"items"_s].toArray();
        QCOMPARE(items.size(), 2);
        QCOMPARE(items[0].toObject()[u"kind"_s].toString(), u"BashCommand"_s);
        QCOMPARE(items[1].toObject()[u"stdout"_s].toString(), u"kept\n"_s);
        QCOMPARE(finish(m_network.get(request(u"/api/bash/bash_events/"_s + commandId, {})))
                     .json()[u"command"_s]
                     .toString(),
                 u"echo kept"_s);
        BashSocket socket(bashSocketUrl(u"resend_mode=all"_s));
        QTRY_COMPARE_WITH_TIMEOUT(socket.events.size(), 2, 10'000);
        QCOMPARE(socket.events[0][u"id"_s].toString(), commandId);

        QCOMPARE(finish(m_network.deleteResource(request(u"/api/bash/bash_events"_s, {})))
                     .json()[u"cleared_count"_s]
                     .toInt(),
                 2);
        m_server->stop();
        options = {};
        options.dataDir = dataDir;
        startServer(std::move(options));
        QVERIFY(search({})[u"items"_s].toArray().isEmpty());
        m_server.reset(); // before the data dir goes with `first`
    }

    void startedCommandsAreBashEvents()
    {
        QNetworkRequest r = request(u"/api/bash/start_bash_command"_s, {});
        r.setHeader(QNetworkRequest::ContentTypeHeader, u"application/json"_s);
        const RawReply started = finish(m_network.post(
            r, QJsonDocument(QJsonObject{{u"command"_s, u"echo started; echo e >&2"_s}}).toJson()));
        QCOMPARE(started.status, 200);
        const QJsonObject command = started.json();
        QCOMPARE(command[u"kind"_s].toString(), u"BashCommand"_s);
        QCOMPARE(command[u"command"_s].toString(), u"echo started; echo e >&2"_s);
        QCOMPARE(command[u"timeout"_s].toInt(), 300);
        const QString id = command[u"id"_s].toString();

        const auto search = [this](const QUrlQuery &query) {
            return finish(m_network.get(request(u"/api/bash/bash_events/search"_s, query))).json();
        };
        const QUrlQuery outputs{{u"command_id__eq"_s, id}, {u"kind__eq"_s, u"BashOutput"_s}};
        QTRY_VERIFY_WITH_TIMEOUT(search(outputs)[u"items"_s].toArray().size() == 1, 20'000);
        const QJsonObject output = search(outputs)[u"items"_s].toArray().first().toObject();
        QCOMPARE(output[u"stdout"_s].toString(), u"started\n"_s);
        QCOMPARE(output[u"stderr"_s].toString(), u"e\n"_s);
        QCOMPARE(output[u"exit_code"_s].toInt(), 0);

        QCOMPARE(search({{u"command_id__eq"_s, id}})[u"items"_s].toArray().size(), 2);
        const QJsonObject page = search({{u"limit"_s, u"1"_s}});
        QCOMPARE(page[u"items"_s].toArray().size(), 1);
        QCOMPARE(page[u"next_page_id"_s].toString(), u"1"_s);
        QCOMPARE(search({{u"sort_order"_s, u"TIMESTAMP_DESC"_s}})[u"items"_s]
                     .toArray()
                     .first()
                     .toObject()[u"kind"_s]
                     .toString(),
                 u"BashOutput"_s);

        RawReply one = finish(m_network.get(request(u"/api/bash/bash_events/"_s + id, {})));
        QCOMPARE(one.status, 200);
        QCOMPARE(one.json(), command);
        QCOMPARE(
            finish(m_network.get(request(u"/api/bash/bash_events/"_s +
                                             QUuid::createUuid().toString(QUuid::WithoutBraces),
                                         {})))
                .status,
            404);
        QCOMPARE(finish(m_network.get(request(u"/api/bash/bash_events/search"_s,
                                              QUrlQuery{{u"kind__eq"_s, u"Other"_s}})))
                     .status,
                 422);

        // Polling past the part read: each command's one output has order 0.
        QCOMPARE(search({{u"order__gt"_s, u"-1"_s}})[u"items"_s].toArray().size(), 1);
        QCOMPARE(search({{u"order__gt"_s, u"0"_s}})[u"items"_s].toArray().size(), 0);

        // The batch get: ids in a GET's body, null for one not kept.
        const auto batch = [this](const QByteArray &body) {
            return finish(
                m_network.sendCustomRequest(request(u"/api/bash/bash_events/"_s, {}), "GET", body));
        };
        const QString missing = QUuid::createUuid().toString(QUuid::WithoutBraces);
        const RawReply batched = batch(QJsonDocument(QJsonArray{id, missing, u"x"_s}).toJson());
        QCOMPARE(batched.status, 200);
        const QJsonArray items = QJsonDocument::fromJson(batched.body).array();
        QCOMPARE(items.size(), 3);
        QCOMPARE(items.at(0).toObject(), command);
        QVERIFY(items.at(1).isNull() && items.at(2).isNull());
        QCOMPARE(batch("{}").status, 422);
        QCOMPARE(batch("[1]").status, 422);

        const RawReply cleared =
            finish(m_network.deleteResource(request(u"/api/bash/bash_events"_s, {})));
        QCOMPARE(cleared.status, 200);
        QCOMPARE(cleared.json()[u"cleared_count"_s].toInt(), 2);
        QCOMPARE(search({})[u"items"_s].toArray().size(), 0);

        // Refused before it starts.
        QCOMPARE(finish(m_network.post(r, QJsonDocument(QJsonObject{{u"command"_s, u"true"_s},
                                                                    {u"cwd"_s, u"/etc"_s}})
                                              .toJson()))
                     .status,
                 422);
    }

    // A link planted in a workspace cannot lead a transfer out of it, down- or upload: into
    // another conversation's workspace, the server workspace, the catalog or the host. The
    // transfer went through the sandbox of the workspace the link led to.
    void aLinkCannotLeadOut_data()
    {
        QTest::addColumn<bool>("fromServer"); // planted in the server workspace, else in a
                                              // conversation's
        QTest::addColumn<QString>("target");  // {other}: another conversation's workspace,
                                              // {server}: the server workspace, {data}
        QTest::addColumn<QString>("through"); // after the link
        QTest::addRow("to another conversation's file")
            << false << u"{other}/secret.txt"_s << u""_s;
        QTest::addRow("to another conversation's workspace")
            << false << u"{other}"_s << u"/secret.txt"_s;
        QTest::addRow("up and into another conversation's workspace")
            << false << u"../{otherName}"_s << u"/secret.txt"_s;
        QTest::addRow("to the server workspace's file")
            << false << u"{server}/secret.txt"_s << u""_s;
        QTest::addRow("to the server workspace") << false << u"{server}"_s << u"/secret.txt"_s;
        QTest::addRow("to the catalog") << false << u"{data}/agentdeck.db"_s << u""_s;
        QTest::addRow("to a host file") << false << u"/etc/passwd"_s << u""_s;
        QTest::addRow("to a host dir") << false << u"/etc"_s << u"/passwd"_s;
        QTest::addRow("from the server workspace to a conversation's file")
            << true << u"{other}/secret.txt"_s << u""_s;
        QTest::addRow("from the server workspace to a conversation's workspace")
            << true << u"{other}"_s << u"/secret.txt"_s;
    }
    void aLinkCannotLeadOut()
    {
        QFETCH(bool, fromServer);
        QFETCH(QString, target);
        QFETCH(QString, through);
        const QString server = QFileInfo(workspace()).canonicalFilePath();
        const QUuid planter = m_server->create();
        const QUuid other = m_server->create();
        QVERIFY(!planter.isNull() && !other.isNull());
        const QString planterDir = m_server->workingDir(planter);
        const QString otherDir = m_server->workingDir(other);
        QVERIFY(QDir().mkpath(planterDir) && QDir().mkpath(otherDir));
        const QString from = fromServer ? server : QFileInfo(planterDir).canonicalFilePath();
        const QString victim = QFileInfo(otherDir).canonicalFilePath();
        for (const QString &dir : {victim, server}) {
            QFile secret(dir + u"/secret.txt"_s);
            QVERIFY(secret.open(QIODevice::WriteOnly));
            secret.write("secret of " + QFile::encodeName(dir));
        }
        target.replace(u"{otherName}"_s, QFileInfo(victim).fileName())
            .replace(u"{other}"_s, victim)
            .replace(u"{server}"_s, server)
            .replace(u"{data}"_s, QFileInfo(m_server->dataDir()).canonicalFilePath());
        // Planted by a command of the workspace, as an attacker's would be.
        const RawReply planted =
            execute({{u"command"_s, u"ln -s -- '%1' l"_s.arg(target)}, {u"cwd"_s, from}});
        QCOMPARE(planted.status, 200);
        QVERIFY(QFileInfo(from + u"/l"_s).isSymLink());
        const QString path = from + u"/l"_s + through;
        const QString reached = QFileInfo(path).canonicalFilePath();
        QByteArray original;
        if (QFile file(reached); !reached.isEmpty() && file.open(QIODevice::ReadOnly))
            original = file.readAll();

        const RawReply downloaded = download(path);
        QVERIFY2(downloaded.status == 403,
                 qPrintable(QString::number(downloaded.status) + u' ' +
                            QString::fromUtf8(downloaded.body.left(200))));
        QCOMPARE(downloaded.json()[u"code"_s].toString(), u"path_outside_workspace"_s);
        const RawReply uploaded = upload(path, "overwritten");
        QCOMPARE(uploaded.status, 403);
        QCOMPARE(uploaded.json()[u"code"_s].toString(), u"path_outside_workspace"_s);
        if (!reached.isEmpty()) {
            QFile file(reached);
            QVERIFY(file.open(QIODevice::ReadOnly));
            QCOMPARE(file.readAll(), original);
        }
        // Nor is anything made beyond it, nor a command run there.
        QCOMPARE(upload(from + u"/l/made"_s, "made").status, 403);
        if (QFileInfo(from + u"/l"_s).isDir())
            QVERIFY(!QFile::exists(QFileInfo(from + u"/l"_s).canonicalFilePath() + u"/made"_s));
        QCOMPARE(
            execute({{u"command"_s, u"touch made"_s}, {u"cwd"_s, QString(from + u"/l"_s)}}).status,
            403);
    }

    // Links that stay inside the workspace lead where they point, relative or absolute.
    void aLinkInsideTheWorkspaceWorks()
    {
        const QUuid id = m_server->create();
        const QString dir = m_server->workingDir(id);
        QVERIFY(QDir().mkpath(dir));
        const QString real = QFileInfo(dir).canonicalFilePath();
        const RawReply planted = execute(
            {{u"command"_s,
              u"mkdir -p sub/deeper && echo inside > sub/file.txt && ln -s sub/file.txt rel && "
              "ln -s \"$PWD/sub\" abs && ln -s ../file.txt sub/deeper/up"_s},
             {u"cwd"_s, real}});
        QCOMPARE(planted.status, 200);
        QCOMPARE(planted.json()[u"exit_code"_s].toInt(), 0);
        QCOMPARE(download(real + u"/rel"_s).body, QByteArray("inside\n"));
        QCOMPARE(download(real + u"/abs/file.txt"_s).body, QByteArray("inside\n"));
        QCOMPARE(download(real + u"/abs/deeper/up"_s).body, QByteArray("inside\n"));
        QCOMPARE(upload(real + u"/abs/new.txt"_s, "new").status, 200);
        QFile made(real + u"/sub/new.txt"_s);
        QVERIFY(made.open(QIODevice::ReadOnly));
        QCOMPARE(made.readAll(), QByteArray("new"));
        const RawReply ran =
            execute({{u"command"_s, u"pwd -P"_s}, {u"cwd"_s, QString(real + u"/abs"_s)}});
        QCOMPARE(ran.status, 200);
        QCOMPARE(ran.json()[u"stdout"_s].toString(), real + u"/sub\n"_s);
    }

    // Paths outside every workspace root are 422, naming the roots, on every route.
    void aPathOutsideTheRootsIs422_data()
    {
        QTest::addColumn<QString>("route");
        QTest::addRow("download") << u"download"_s;
        QTest::addRow("upload") << u"upload"_s;
        QTest::addRow("bash cwd") << u"bash"_s;
        QTest::addRow("git changes") << u"changes"_s;
        QTest::addRow("git diff") << u"diff"_s;
    }
    void aPathOutsideTheRootsIs422()
    {
        QFETCH(QString, route);
        QTemporaryDir outside;
        QVERIFY(outside.isValid());
        m_server.reset();
        TestServerOptions options;
        options.workspaceRoots = {};
        startServer(std::move(options));
        const QString path = outside.filePath(u"f"_s);
        QFile file(path);
        QVERIFY(file.open(QIODevice::WriteOnly));
        file.write("outside\n");
        file.close();
        RawReply reply;
        if (route == u"download"_s)
            reply = download(path);
        else if (route == u"upload"_s)
            reply = upload(outside.filePath(u"g"_s), "x");
        else if (route == u"bash"_s)
            reply = execute({{u"command"_s, u"touch g"_s}, {u"cwd"_s, outside.path()}});
        else
            reply = finish(m_network.get(
                request(u"/api/git/"_s + route,
                        QUrlQuery{{u"path"_s, route == u"diff"_s ? path : outside.path()}})));
        QVERIFY2(reply.status == 422, qPrintable(QString::number(reply.status)));
        QCOMPARE(reply.json()[u"code"_s].toString(), u"workspace_outside_roots"_s);
        QVERIFY(reply.json()[u"detail"_s].toString().contains(
            QFileInfo(workspace()).canonicalFilePath()));
        QVERIFY(!QFile::exists(outside.filePath(u"g"_s)));
    }

    // A server workspace named through a link is where its commands' files are, for the
    // routes too (it was hidden behind the per-command /tmp).
    void aLinkedServerWorkspaceIsVisibleToItsCommands()
    {
        QTemporaryDir links;
        QTemporaryDir real;
        QVERIFY(links.isValid() && real.isValid());
        QVERIFY(TestServer::ownAsUser(real.path())); // the operator's: not given away
        const QString linked = links.filePath(u"ws"_s);
        QVERIFY(QFile::link(real.path(), linked));
        m_server.reset();
        TestServerOptions options;
        options.workspaceDir = linked;
        startServer(std::move(options));
        // Made by the name the operator gave it.
        const RawReply made = execute({{u"command"_s, u"echo made > '%1/made.txt'"_s.arg(linked)}});
        QCOMPARE(made.status, 200);
        QVERIFY2(made.json()[u"exit_code"_s].toInt() == 0, made.body.constData());
        QVERIFY(QFile::exists(real.filePath(u"made.txt"_s)));
        QCOMPARE(download(linked + u"/made.txt"_s).body, QByteArray("made\n"));
        QCOMPARE(download(real.filePath(u"made.txt"_s)).body, QByteArray("made\n"));
        QCOMPARE(upload(linked + u"/up.txt"_s, "up").status, 200);
        const RawReply read = execute({{u"command"_s, u"cat up.txt"_s}});
        QCOMPARE(read.json()[u"stdout"_s].toString(), u"up"_s);
    }

    void aWrongMethodIs405()
    {
        QCOMPARE(finish(m_network.get(request(u"/api/bash/execute_bash_command"_s, {}))).status,
                 405);
        QCOMPARE(finish(m_network.get(request(u"/api/file/upload"_s, {}))).status, 405);
        QCOMPARE(finish(m_network.deleteResource(request(u"/api/file/download"_s, {}))).status,
                 405);
    }

    void everyRouteNeedsTheKey()
    {
        m_server.reset();
        TestServerOptions options;
        options.apiKeys = {u"the-key"_s};
        startServer(std::move(options));
        const QString target = QFileInfo(workspace()).canonicalFilePath() + u"/keyed"_s;
        QCOMPARE(execute({{u"command"_s, u"true"_s}}).status, 401);
        QCOMPARE(upload(target, "x").status, 401);
        QVERIFY(!QFile::exists(target));
        QCOMPARE(download(target).status, 401);
        QCOMPARE(finish(m_network.get(
                            request(u"/api/git/changes"_s, QUrlQuery{{u"path"_s, workspace()}})))
                     .status,
                 401);
        m_key = u"the-key"_s;
        QCOMPARE(execute({{u"command"_s, u"true"_s}}).status, 200);
        QCOMPARE(upload(target, "x").status, 200);
        QCOMPARE(download(target).body, QByteArray("x"));
    }
};

QTEST_GUILESS_MAIN(ApiWorkspaceTest)
#include "tst_api_workspace.moc"
