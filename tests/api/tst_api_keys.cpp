// Named keys (--api-key-file): keys by name or by SHA-256, the unnamed session key beside them,
// a file read again when it changes (a key revoked without a restart, a bad edit kept out), a
// bad file refused at startup, and a wrong key that never learns, nor logs, a key's name.
#include "http/actor.h"
#include "testserver.h"

#include <QCoroFuture>
#include <QCryptographicHash>
#include <QFile>
#include <QMutex>
#include <QProcess>
#include <QSaveFile>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QWebSocket>

#include <qcorotask.h>

using namespace Qt::StringLiterals;
using namespace AgentDeck;
using namespace AgentDeck::Testing;

namespace {

constexpr int WaitMs = 10'000;

QMutex g_messagesMutex;
QStringList g_messages;
QtMessageHandler g_previousHandler = nullptr;

void captureMessages(QtMsgType type, const QMessageLogContext &context, const QString &message)
{
    {
        const QMutexLocker lock(&g_messagesMutex);
        g_messages.append(message);
    }
    g_previousHandler(type, context, message);
}

QStringList capturedMessages()
{
    const QMutexLocker lock(&g_messagesMutex);
    return g_messages;
}

QString sha256(const QByteArray &key)
{
    return QString::fromLatin1(QCryptographicHash::hash(key, QCryptographicHash::Sha256).toHex());
}

bool writeFile(const QString &path, const QByteArray &content)
{
    QFile file(path);
    return file.open(QIODevice::WriteOnly | QIODevice::Truncate) &&
           file.write(content) == content.size();
}

// As editors save: a new file renamed over the old one.
bool replaceFile(const QString &path, const QByteArray &content)
{
    QSaveFile file(path);
    return file.open(QIODevice::WriteOnly) && file.write(content) == content.size() &&
           file.commit();
}

} // namespace

class TestApiKeys : public QObject
{
    Q_OBJECT

    QTemporaryDir m_dir;
    std::unique_ptr<TestServer> m_server;

    QString keyFile() const { return m_dir.filePath(u"keys"_s); }

    // The status of a search sent with `key` (none: no header).
    int statusWith(const QString &key)
    {
        ServerConnection client(m_server->url());
        client.setApiKey(key);
        return QCoro::waitFor(client.get(u"/api/conversations/search"_s)).status;
    }

    void startWith(const QByteArray &keys, const QStringList &sessionKeys = {})
    {
        QVERIFY(writeFile(keyFile(), keys));
        TestServerOptions options;
        options.apiKeyFile = keyFile();
        options.apiKeys = sessionKeys;
        m_server = std::make_unique<TestServer>(std::move(options));
        QVERIFY2(m_server->start(), qPrintable(m_server->errorString()));
    }

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        g_previousHandler = qInstallMessageHandler(captureMessages);
    }
    void cleanupTestCase() { qInstallMessageHandler(g_previousHandler); }
    void cleanup()
    {
        if (m_server)
            m_server->stop();
        m_server.reset();
    }

    void actorOfUserAgent_data()
    {
        QTest::addColumn<QByteArray>("userAgent");
        QTest::addColumn<QString>("client");
        QTest::addRow("console") << "agentdeck-console/0.9.0"_ba << u"console"_s;
        QTest::addRow("ctl") << "agentdeck-ctl/0.9.0"_ba << u"ctl"_s;
        QTest::addRow("curl") << "curl/8.1.2"_ba << u"curl"_s;
        QTest::addRow("browser") << "Mozilla/5.0 (X11; Linux x86_64)"_ba << u"Mozilla"_s;
        QTest::addRow("control characters") << "evil\x1b[31m\r\nX: y"_ba << u"evil[31mX:"_s;
        QTest::addRow("long") << QByteArray(500, 'a') << QString(40, u'a');
        QTest::addRow("none") << QByteArray() << QString();
    }
    void actorOfUserAgent()
    {
        QFETCH(QByteArray, userAgent);
        QFETCH(QString, client);
        QCOMPARE(Actor::clientFrom(userAgent), client);
        QCOMPARE((Actor{u"ops-alice"_s, u"console"_s}.display()), u"ops-alice via console"_s);
        QCOMPARE(Actor::server(u"idle"_s).display(), u"server (idle)"_s);
        QCOMPARE((Actor{QString(), u"curl"_s}.display()), u"anonymous via curl"_s);
    }

    // Each key by its name, whether the file holds it or its SHA-256; the session key beside.
    void keysAreAccepted_data()
    {
        QTest::addColumn<QString>("key");
        QTest::addColumn<int>("status");
        QTest::addRow("named key") << u"alice-secret"_s << 200;
        QTest::addRow("key given by its sha256") << u"ci-secret"_s << 200;
        QTest::addRow("session key") << u"session-secret"_s << 200;
        QTest::addRow("a hash is no key") << sha256("ci-secret") << 401;
        QTest::addRow("sha256: and the hash is no key")
            << u"sha256:"_s + sha256("ci-secret") << 401;
        QTest::addRow("wrong key") << u"alice-secreT"_s << 401;
        QTest::addRow("no key") << QString() << 401;
    }
    void keysAreAccepted()
    {
        QFETCH(QString, key);
        QFETCH(int, status);
        startWith("# operators\n\nops-alice alice-secret\n  ci   sha256:" +
                      sha256("ci-secret").toUpper().toLatin1() + "  \n",
                  {u"session-secret"_s});
        QCOMPARE(statusWith(key), status);
    }

    // A key taken out of the file is refused without a restart, however the file was changed;
    // one put in is accepted.
    void revokedWithoutRestart_data()
    {
        QTest::addColumn<bool>("replaced");
        QTest::addRow("file replaced, as editors save") << true;
        QTest::addRow("file rewritten in place") << false;
    }
    void revokedWithoutRestart()
    {
        QFETCH(bool, replaced);
        startWith("ops-alice alice-secret\nops-bob bob-secret\n");
        QCOMPARE(statusWith(u"alice-secret"_s), 200);
        QCOMPARE(statusWith(u"bob-secret"_s), 200);
        const QByteArray edited = "ops-bob bob-secret\nops-carol carol-secret\n";
        QVERIFY(replaced ? replaceFile(keyFile(), edited) : writeFile(keyFile(), edited));
        QTRY_COMPARE_WITH_TIMEOUT(statusWith(u"alice-secret"_s), 401, WaitMs);
        QCOMPARE(statusWith(u"bob-secret"_s), 200);
        QCOMPARE(statusWith(u"carol-secret"_s), 200);
        // And again: a replaced file is watched as the one before it was.
        QVERIFY(replaceFile(keyFile(), "ops-carol carol-secret\n"));
        QTRY_COMPARE_WITH_TIMEOUT(statusWith(u"bob-secret"_s), 401, WaitMs);
        QCOMPARE(statusWith(u"carol-secret"_s), 200);
    }

    // The event socket takes the named keys as /api does, and refuses a revoked one.
    void socketTakesNamedKeys()
    {
        startWith("ops-alice alice-secret\n", {u"session-secret"_s});
        const QUuid id = m_server->create(TestServer::shellConversation(u"echo hi"_s));
        QVERIFY(!id.isNull());
        const auto open = [&](const QString &key) {
            QUrl url = m_server->url();
            url.setScheme(u"ws"_s);
            url.setPath(u"/sockets/events/"_s + id.toString(QUuid::WithoutBraces));
            url.setQuery(QUrlQuery{{u"after_seq"_s, u"0"_s}, {u"session_api_key"_s, key}});
            auto socket = std::make_unique<QWebSocket>();
            socket->open(url);
            return socket;
        };
        auto named = open(u"alice-secret"_s);
        QSignalSpy frames(named.get(), &QWebSocket::textMessageReceived);
        QVERIFY(frames.wait(WaitMs));
        QVERIFY(replaceFile(keyFile(), "ops-bob bob-secret\n"));
        QTRY_COMPARE_WITH_TIMEOUT(statusWith(u"alice-secret"_s), 401, WaitMs);
        auto revoked = open(u"alice-secret"_s);
        QSignalSpy closed(revoked.get(), &QWebSocket::disconnected);
        QVERIFY(closed.wait(WaitMs));
        QCOMPARE(int(revoked->closeCode()), 4001);
    }

    // A bad edit keeps the keys there were, with a warning naming the line; once it is mended,
    // it is read.
    void badEditKeepsTheKeys()
    {
        startWith("ops-alice alice-secret\n");
        QVERIFY(replaceFile(keyFile(), "ops-alice alice-secret\nops-bob\n"));
        const QString warning = keyFile() + u":2: "_s;
        QTRY_VERIFY_WITH_TIMEOUT(capturedMessages().filter(warning).size() > 0, WaitMs);
        QCOMPARE(statusWith(u"alice-secret"_s), 200);
        QVERIFY(replaceFile(keyFile(), "ops-bob bob-secret\n"));
        QTRY_COMPARE_WITH_TIMEOUT(statusWith(u"alice-secret"_s), 401, WaitMs);
        QCOMPARE(statusWith(u"bob-secret"_s), 200);
    }

    // A wrong key is told nothing of the keys there are, and no log line names one.
    void wrongKeyNamesNoKey()
    {
        const QStringList names{u"ops-alice-7f3a"_s, u"ci-runner-19bc"_s};
        startWith(names[0].toUtf8() + " alice-secret\n" + names[1].toUtf8() +
                  " sha256:" + sha256("ci-secret").toLatin1() + "\n");
        for (const QString &key :
             {u"alice-secre"_s, u"alice-secret2"_s, u"ci-secretx"_s, u"ops-alice-7f3a"_s,
              sha256("ci-secret"), u"x"_s.repeated(5000)}) {
            ServerConnection client(m_server->url());
            client.setApiKey(key);
            for (const QString &path :
                 {u"/api/conversations/search"_s, u"/api/conversations"_s, u"/api/nothing"_s}) {
                const ApiReply reply = QCoro::waitFor(client.get(path));
                QCOMPARE(reply.status, 401);
                for (const QString &name : names)
                    QVERIFY2(!reply.body.contains(name.toUtf8()), reply.body.constData());
            }
        }
        // The stop is logged after every request's own lines.
        m_server->stop();
        for (const QString &message : capturedMessages()) {
            for (const QString &name : names)
                QVERIFY2(!message.contains(name), qPrintable(message));
        }
    }

    // A bad key file stops the binary at startup (exit 2), naming the file and line, never the
    // key on it.
    void badFileAtStartup_data()
    {
        QTest::addColumn<QByteArray>("content");
        QTest::addColumn<QString>("where");
        QTest::addRow("one field") << "ops-alice a-key\nops-bob\n"_ba << u":2: "_s;
        QTest::addRow("three fields") << "# x\nops-alice a-key more-key\n"_ba << u":2: "_s;
        QTest::addRow("short hash") << "ci sha256:abcd-key\n"_ba << u":1: "_s;
        QTest::addRow("bad name") << "ops/alice a-key\n"_ba << u":1: "_s;
        QTest::addRow("reserved name") << "server a-key\n"_ba << u":1: "_s;
        QTest::addRow("same key twice") << "a a-key\nb a-key\n"_ba << u":2: "_s;
        QTest::addRow("missing") << QByteArray() << QString();
    }
    void badFileAtStartup()
    {
        QFETCH(QByteArray, content);
        QFETCH(QString, where);
        const QString binary = qEnvironmentVariable("AGENTDECK_BINARY");
        if (binary.isEmpty())
            QSKIP("AGENTDECK_BINARY names no binary");
        QTemporaryDir dir;
        const QString file = dir.filePath(u"keys"_s);
        if (!content.isNull())
            QVERIFY(writeFile(file, content));
        QProcess server;
        server.start(binary, {u"--headless"_s, u"--listen"_s, u"127.0.0.1:0"_s, u"--data-dir"_s,
                              dir.filePath(u"data"_s), u"--api-key-file"_s, file});
        QVERIFY(server.waitForFinished(WaitMs));
        QCOMPARE(server.exitCode(), 2);
        const QString error = QString::fromUtf8(server.readAllStandardError());
        QVERIFY2(error.contains(file + where), qPrintable(error));
        QVERIFY2(!error.contains(u"a-key"_s), qPrintable(error));
    }
};

QTEST_GUILESS_MAIN(TestApiKeys)
#include "tst_api_keys.moc"
