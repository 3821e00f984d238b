// One path, checked once: every route and every socket, under many spellings of its path, is
// refused to a client without the key, with a wrong key, from a web page of another site and
// through a rebinding host name. A spelling that is not the path's one form is refused (400)
// before routing; the others reach the checks every route passes.
#include "rawhttp.h"
#include "testserver.h"

#include <QJsonArray>
#include <QTest>

using namespace Qt::StringLiterals;
using namespace AgentDeck;
using namespace AgentDeck::Testing;

namespace {

const QString Key = u"path-spellings-key"_s;

struct Spelling
{
    QString name;
    QByteArray target;
    bool canonical; // decodes to the path's one form (then the credentials decide)
};

// Ways to write `path` (e.g. /api/conversations/ID/run) that a client might try.
QList<Spelling> spellingsOf(const QString &path, const QUrl &server)
{
    const QByteArray p = path.toUtf8();
    const qsizetype second = p.indexOf('/', 1); // after the first segment; -1 for one segment
    const QByteArray first = second < 0 ? p.mid(1) : p.mid(1, second - 1);
    const QByteArray rest = second < 0 ? QByteArray() : p.mid(second);
    const QByteArray origin = server.toString(QUrl::RemovePath).toUtf8();
    QList<Spelling> spellings{
        {u"as it is"_s, p, true},
        {u"trailing /"_s, p + '/', true},
        {u"first letter encoded"_s,
         "/%" + QByteArray::number(int(first[0]), 16) + first.mid(1) + rest, true},
        {u"leading //"_s, '/' + p, false},
        {u"leading ///"_s, "//" + p, false},
        {u"// after the first segment"_s, '/' + first + '/' + rest, false},
        {u"trailing //"_s, p + "//", false},
        {u"/./ in front"_s, "/." + p, false},
        {u"/./ after the first segment"_s, '/' + first + "/." + rest, false},
        {u"/x/../ in front"_s, "/x/.." + p, false},
        {u"/../ after the first segment"_s, '/' + first + "/../" + first + rest, false},
        {u"encoded dot segment"_s, "/%2E" + p, false},
        {u"encoded dot-dot segment"_s, "/x/%2e%2E" + p, false},
        {u"absolute form with //"_s, origin + '/' + p, false},
        {u"malformed escape"_s, p + "%zz", false},
        {u"encoded NUL"_s, p + "%00", false},
    };
    if (second >= 0)
        spellings.append(
            {u"encoded / after the first segment"_s, '/' + first + "%2F" + rest.mid(1), false});
    return spellings;
}

struct Credentials
{
    QString name;
    bool keyedServer;
    QByteArray headers; // beside Host, when Host is not among them
};

const QList<Credentials> &credentials()
{
    static const QList<Credentials> all{
        {u"no key"_s, true, {}},
        {u"a wrong key"_s, true, "X-Session-API-Key: not-" + Key.toUtf8() + "\r\n"},
        {u"the key, from a page of another site"_s, true,
         "X-Session-API-Key: " + Key.toUtf8() + "\r\nOrigin: http://evil.example\r\n"},
        {u"no key needed, from a page of another site"_s, false, "Origin: http://evil.example\r\n"},
        {u"no key needed, through a rebinding host"_s, false, "Host: evil.example:80\r\n"},
    };
    return all;
}

QByteArray request(const QByteArray &method, const QByteArray &target, const Credentials &who)
{
    QByteArray head = method + ' ' + target + " HTTP/1.1\r\n";
    if (!who.headers.contains("Host:"))
        head += "Host: 127.0.0.1\r\n";
    const QByteArray body = "{}";
    return head + who.headers +
           "Content-Type: text/plain\r\nContent-Length: " + QByteArray::number(body.size()) +
           "\r\n\r\n" + body;
}

QByteArray upgrade(const QByteArray &target, const Credentials &who)
{
    QByteArray head = "GET " + target + " HTTP/1.1\r\n";
    if (!who.headers.contains("Host:"))
        head += "Host: 127.0.0.1\r\n";
    return head + who.headers +
           "Upgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
}

} // namespace

class ApiPathSpellingsTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        TestServerOptions keyed;
        keyed.apiKeys = {Key};
        keyed.inProcessRuntime = true;
        m_keyed = std::make_unique<TestServer>(std::move(keyed));
        QVERIFY2(m_keyed->start(), qPrintable(m_keyed->errorString()));
        TestServerOptions keyless;
        keyless.inProcessRuntime = true;
        m_keyless = std::make_unique<TestServer>(std::move(keyless));
        QVERIFY2(m_keyless->start(), qPrintable(m_keyless->errorString()));
        // The same id on both: every {id} names a conversation that exists.
        m_id = QUuid::createUuid();
        for (TestServer *server : {m_keyed.get(), m_keyless.get()})
            QVERIFY(!server->create({{u"conversation_id"_s, toWireId(m_id)}}).isNull());
        const ApiReply document = m_keyed->get(u"/openapi.json"_s);
        QVERIFY(document.ok());
        m_paths = document.json.toObject().value(u"paths"_s).toObject();
        QVERIFY(m_paths.size() >= 20);
    }

    void cleanupTestCase()
    {
        m_keyed.reset();
        m_keyless.reset();
    }

    // Every route that asks for the key (all but the few open ones, which say whether the
    // server is alive and what it is), every spelling, every credential that is not enough.
    void noSpellingOfARouteGetsPastItsChecks()
    {
        const QString id = toWireId(m_id);
        QStringList failures;
        int tried = 0, refused = 0;
        for (auto it = m_paths.begin(); it != m_paths.end(); ++it) {
            const QJsonObject operations = it.value().toObject();
            QString path = it.key();
            path.replace(u"{id}"_s, id).replace(u"{event_id}"_s, id);
            if (path.size() > 1 && path.endsWith(u'/'))
                path.chop(1); // a pattern with a trailing / names the path without it
            for (auto op = operations.begin(); op != operations.end(); ++op) {
                if (!op.value().toObject().contains(u"security"_s))
                    continue; // an open route
                const QByteArray method = op.key().toUpper().toLatin1();
                for (const Credentials &who : credentials()) {
                    TestServer &server = who.keyedServer ? *m_keyed : *m_keyless;
                    RawHttp client;
                    for (const Spelling &spelling : spellingsOf(path, server.url())) {
                        if (!client.isConnected())
                            QVERIFY(client.connectTo(server.url()));
                        client.send(request(method, spelling.target, who));
                        const std::optional<RawResponse> answer = client.nextResponse();
                        ++tried;
                        const int status = answer ? answer->status : 0;
                        const bool expected =
                            spelling.canonical ? (status == 401 || status == 403) : status == 400;
                        refused += expected ? 1 : 0;
                        if (!expected)
                            failures.append(u"%1 %2 (%3), %4: %5"_s.arg(
                                QString::fromLatin1(method), QString::fromLatin1(spelling.target),
                                spelling.name, who.name, QString::number(status)));
                    }
                }
            }
        }
        qInfo("%d route x spelling x credential cases tried, %d refused", tried, refused);
        QVERIFY(tried > 1000);
        QVERIFY2(failures.isEmpty(), qPrintable(failures.mid(0, 20).join(u'\n')));
    }

    // The sockets: a spelling that is not the one form is refused before the upgrade, and so
    // is a page of another site or a rebinding host. Without a key the socket opens only to
    // wait for its auth frame (the protocol's), and says nothing before it.
    void noSpellingOfASocketUpgradesPastItsChecks()
    {
        const QStringList sockets{u"/sockets/events/"_s + toWireId(m_id),
                                  u"/sockets/bash-events"_s};
        QStringList failures;
        int tried = 0;
        for (const QString &path : sockets) {
            for (const Credentials &who : credentials()) {
                TestServer &server = who.keyedServer ? *m_keyed : *m_keyless;
                for (const Spelling &spelling : spellingsOf(path, server.url())) {
                    RawHttp client;
                    QVERIFY(client.connectTo(server.url()));
                    client.send(upgrade(spelling.target, who));
                    const std::optional<QByteArray> head = client.nextHead();
                    ++tried;
                    const int status = head ? head->mid(9, 3).toInt() : 0;
                    // Upgraded only to wait for the key, from no page and by a local name.
                    const bool mayWaitForAuth =
                        spelling.canonical && who.keyedServer && !who.headers.contains("Origin:");
                    bool expected = status == (mayWaitForAuth       ? 101
                                               : spelling.canonical ? 403
                                                                    : 400);
                    if (status == 101) {
                        // Nothing but the close (4001) comes before an auth frame: the
                        // server sends it at once for a wrong key, after its wait otherwise.
                        client.send(QByteArray::fromHex("8880") + QByteArray(4, '\0'));
                        client.waitForClose();
                        const QByteArray frames = client.received();
                        expected = expected && !frames.isEmpty() && quint8(frames[0]) == 0x88;
                    }
                    if (!expected)
                        failures.append(u"%1 (%2), %3: %4"_s.arg(
                            QString::fromLatin1(spelling.target), spelling.name, who.name,
                            QString::number(status)));
                }
            }
        }
        qInfo("%d socket x spelling x credential cases tried", tried);
        QVERIFY2(failures.isEmpty(), qPrintable(failures.mid(0, 20).join(u'\n')));
    }

    // With the key, the one form still works and the other spellings say what is wrong.
    void theKeyOpensOnlyTheOneForm()
    {
        RawHttp client;
        QVERIFY(client.connectTo(m_keyed->url()));
        const Credentials keyed{u"the key"_s, true, "X-Session-API-Key: " + Key.toUtf8() + "\r\n"};
        const QByteArray path = "/api/conversations/count";
        client.send(request("GET", path, keyed));
        std::optional<RawResponse> answer = client.nextResponse();
        QVERIFY(answer);
        QCOMPARE(answer->status, 200);
        client.send(request("GET", path + '/', keyed));
        answer = client.nextResponse();
        QVERIFY(answer);
        QCOMPARE(answer->status, 200);
        client.send(request("GET", "/api//conversations/count", keyed));
        answer = client.nextResponse();
        QVERIFY(answer);
        QCOMPARE(answer->status, 400);
        QVERIFY2(answer->body.contains("non_canonical_path"), answer->body.constData());
        QVERIFY2(answer->body.contains("empty segment"), answer->body.constData());
    }

private:
    std::unique_ptr<TestServer> m_keyed;
    std::unique_ptr<TestServer> m_keyless;
    QUuid m_id;
    QJsonObject m_paths;
};

QTEST_GUILESS_MAIN(ApiPathSpellingsTest)
#include "tst_api_pathspellings.moc"
