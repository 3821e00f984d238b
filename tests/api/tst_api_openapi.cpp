// GET /openapi.json describes exactly the routes the server answers; GET /docs renders it from
// files of the binary alone.
#include "rawhttp.h"
#include "testserver.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QRegularExpression>
#include <QTest>

using namespace Qt::StringLiterals;
using namespace AgentDeck;
using namespace AgentDeck::Testing;

class ApiOpenApiTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        m_server = std::make_unique<TestServer>();
        QVERIFY2(m_server->start(), qPrintable(m_server->errorString()));
        const ApiReply reply = m_server->get(u"/openapi.json"_s);
        QVERIFY(reply.ok());
        m_document = reply.json.toObject();
    }
    void cleanupTestCase() { m_server.reset(); }

    void isOpenApi31()
    {
        QCOMPARE(m_document.value(u"openapi"_s).toString(), u"3.1.0"_s);
        QCOMPARE(m_document.value(u"info"_s).toObject().value(u"version"_s).toString(),
                 QStringLiteral(AGENTDECK_VERSION));
    }

    // Every documented operation is answered by a route (never "no route" 404 nor 405)...
    void everyDocumentedOperationIsServed()
    {
        const QJsonObject paths = m_document.value(u"paths"_s).toObject();
        QVERIFY(paths.size() >= 20);
        const QString id = toWireId(QUuid::createUuid());
        for (auto it = paths.begin(); it != paths.end(); ++it) {
            QString path = it.key();
            path.replace(u"{id}"_s, id).replace(u"{event_id}"_s, id);
            const QJsonObject operations = it.value().toObject();
            for (auto op = operations.begin(); op != operations.end(); ++op) {
                const ApiReply reply = m_server->call(op.key().toUpper().toLatin1(), path);
                const QString what = op.key() + u' ' + it.key();
                QVERIFY2(reply.status != 405, qPrintable(what));
                QVERIFY2(!(reply.status == 404 && reply.detail.startsWith(u"No route"_s)),
                         qPrintable(what));
            }
        }
    }

    // ...and every route of the contract is documented.
    void everyRouteOfTheContractIsDocumented_data()
    {
        QTest::addColumn<QString>("method");
        QTest::addColumn<QString>("path");
        const QString item = u"/api/conversations/{id}"_s;
        for (const auto &[method, path] : std::initializer_list<std::pair<const char *, QString>>{
                 {"get", u"/"_s},
                 {"get", u"/alive"_s},
                 {"get", u"/health"_s},
                 {"get", u"/ready"_s},
                 {"get", u"/server_info"_s},
                 {"get", u"/metrics"_s},
                 {"get", u"/openapi.json"_s},
                 {"get", u"/docs"_s},
                 {"post", u"/api/conversations"_s},
                 {"get", u"/api/conversations"_s},
                 {"get", u"/api/conversations/search"_s},
                 {"get", u"/api/conversations/count"_s},
                 {"get", item},
                 {"patch", item},
                 {"delete", item},
                 {"post", item + u"/run"_s},
                 {"post", item + u"/pause"_s},
                 {"post", item + u"/interrupt"_s},
                 {"post", item + u"/archive"_s},
                 {"post", item + u"/unarchive"_s},
                 {"get", item + u"/runtime"_s},
                 {"post", item + u"/runtime/resume"_s},
                 {"post", item + u"/runtime/reprovision"_s},
                 {"post", item + u"/runtime/start_fresh"_s},
                 {"delete", item + u"/runtime"_s},
                 {"post", item + u"/recover"_s},
                 {"post", item + u"/events"_s},
                 {"get", item + u"/events"_s},
                 {"get", item + u"/events/search"_s},
                 {"get", item + u"/events/count"_s},
                 {"get", item + u"/events/{event_id}"_s},
                 {"post", item + u"/events/respond_to_confirmation"_s},
                 {"get", item + u"/agent_final_response"_s},
             })
            QTest::addRow("%s %s", method, qPrintable(path)) << QString::fromLatin1(method) << path;
    }
    void everyRouteOfTheContractIsDocumented()
    {
        QFETCH(QString, method);
        QFETCH(QString, path);
        const QJsonObject operation =
            m_document.value(u"paths"_s).toObject().value(path).toObject().value(method).toObject();
        QVERIFY(!operation.isEmpty());
        QVERIFY(!operation.value(u"operationId"_s).toString().isEmpty());
    }

    // Recover's answer is described: a conversation with `actions` beside its fields.
    void recoverAnswerIsDescribed()
    {
        const QJsonObject ok = postAnswer(u"/api/conversations/{id}/recover"_s);
        const QString reference = ok.value(u"content"_s)
                                      .toObject()
                                      .value(u"application/json"_s)
                                      .toObject()
                                      .value(u"schema"_s)
                                      .toObject()
                                      .value(u"$ref"_s)
                                      .toString();
        QCOMPARE(reference, u"#/components/schemas/Recovery"_s);
        const QJsonObject schema = m_document.value(u"components"_s)
                                       .toObject()
                                       .value(u"schemas"_s)
                                       .toObject()
                                       .value(u"Recovery"_s)
                                       .toObject();
        QVERIFY(schema.value(u"required"_s).toArray().contains(u"actions"_s));
        const QJsonArray actions = schema.value(u"properties"_s)
                                       .toObject()
                                       .value(u"actions"_s)
                                       .toObject()
                                       .value(u"items"_s)
                                       .toObject()
                                       .value(u"enum"_s)
                                       .toArray();
        QCOMPARE(actions,
                 (QJsonArray{u"resolved_stale_run"_s, u"started_runtime"_s, u"continued_run"_s}));
        // The others stay plain.
        QCOMPARE(postAnswer(u"/api/conversations/{id}/run"_s).value(u"description"_s).toString(),
                 u"Success"_s);
    }

    // The API page and the files it names: served from the binary, with a policy that lets the
    // browser load nothing from elsewhere.
    void docsPageIsSelfContained()
    {
        const auto page = fetch(m_server->url(), "GET", "/docs");
        QVERIFY(page);
        QCOMPARE(page->status, 200);
        QCOMPARE(header(page->head, "Content-Type"), "text/html; charset=utf-8"_ba);
        const QByteArray policy = header(page->head, "Content-Security-Policy");
        QVERIFY2(policy.startsWith("default-src 'none';"), policy.constData());
        QVERIFY(policy.contains("frame-ancestors 'none'"));
        QVERIFY(!policy.contains("http"));
        QCOMPARE(header(page->head, "X-Content-Type-Options"), "nosniff"_ba);

        // Every src and href is a path of this server (no scheme, no //host), and answers 200.
        static const QRegularExpression reference(u"\\b(?:src|href)=\"([^\"]*)\""_s);
        QStringList references;
        for (const auto &match : reference.globalMatch(QString::fromUtf8(page->body)))
            references.append(match.captured(1));
        QVERIFY(references.contains(u"/docs/apidocs.js"_s));
        QVERIFY(references.contains(u"/docs/apidocs.css"_s));
        QVERIFY(references.contains(u"/openapi.json"_s));
        for (const QString &path : std::as_const(references)) {
            QVERIFY2(path.startsWith(u'/') && !path.startsWith(u"//"_s), qPrintable(path));
            const auto file = fetch(m_server->url(), "GET", path.toLatin1());
            QVERIFY2(file && file->status == 200, qPrintable(path));
            QVERIFY2(!file->body.isEmpty(), qPrintable(path));
        }
        // The script reads the document from this server only.
        const auto script = fetch(m_server->url(), "GET", "/docs/apidocs.js");
        QVERIFY(script);
        QCOMPARE(header(script->head, "Content-Type"), "text/javascript; charset=utf-8"_ba);
        QVERIFY(script->body.contains("fetch('/openapi.json'"));
        QVERIFY(!script->body.contains("http:") && !script->body.contains("https:"));
        QVERIFY(!script->body.contains("innerHTML"));
    }

    void docsPageRefusesOtherMethods_data()
    {
        QTest::addColumn<QByteArray>("method");
        QTest::addColumn<QByteArray>("path");
        for (const QByteArray &path : {"/docs"_ba, "/docs/apidocs.js"_ba, "/openapi.json"_ba}) {
            for (const QByteArray &method : {"POST"_ba, "PUT"_ba, "DELETE"_ba})
                QTest::addRow("%s %s", method.constData(), path.constData()) << method << path;
        }
    }
    void docsPageRefusesOtherMethods()
    {
        QFETCH(QByteArray, method);
        QFETCH(QByteArray, path);
        const auto answer = fetch(m_server->url(), method, path);
        QVERIFY(answer);
        QCOMPARE(answer->status, 405);
        QCOMPARE(header(answer->head, "Allow"), "GET, HEAD"_ba);
        QCOMPARE(QJsonDocument::fromJson(answer->body)[u"code"_s].toString(),
                 u"method_not_allowed"_s);
    }

    // The page asks for no more than the document it renders: on a server with a key, both
    // answer without it, and a web page of another site is not refused either (there is
    // nothing to take), while /api still asks for the key.
    void docsPageIsAsOpenAsTheDocument_data()
    {
        QTest::addColumn<QByteArray>("path");
        QTest::addColumn<QByteArray>("extraHeaders");
        QTest::addColumn<int>("status");
        const QByteArray other = "Origin: https://elsewhere.example\r\n";
        const QByteArray key = "X-Session-API-Key: the-key\r\n";
        for (const QByteArray &path : {"/openapi.json"_ba, "/docs"_ba, "/docs/apidocs.js"_ba}) {
            QTest::addRow("%s without key", path.constData()) << path << QByteArray() << 200;
            QTest::addRow("%s with key", path.constData()) << path << key << 200;
            QTest::addRow("%s wrong key", path.constData())
                << path << "X-Session-API-Key: wrong\r\n"_ba << 200;
            QTest::addRow("%s other site", path.constData()) << path << other << 200;
        }
        QTest::addRow("/api without key") << "/api/conversations/count"_ba << QByteArray() << 401;
        QTest::addRow("/api with key") << "/api/conversations/count"_ba << key << 200;
    }
    void docsPageIsAsOpenAsTheDocument()
    {
        QFETCH(QByteArray, path);
        QFETCH(QByteArray, extraHeaders);
        QFETCH(int, status);
        TestServerOptions options;
        options.apiKeys = {u"the-key"_s};
        TestServer server(std::move(options));
        QVERIFY2(server.start(), qPrintable(server.errorString()));
        const auto answer = fetch(server.url(), "GET", path, extraHeaders);
        QVERIFY(answer);
        QCOMPARE(answer->status, status);
    }

private:
    static std::optional<RawResponse> fetch(const QUrl &url, const QByteArray &method,
                                            const QByteArray &path,
                                            const QByteArray &extraHeaders = {})
    {
        RawHttp client;
        if (!client.connectTo(url))
            return std::nullopt;
        client.send(method + ' ' + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extraHeaders +
                    "Content-Length: 0\r\n\r\n");
        return client.nextResponse();
    }

    // The value of the header `name` in an answer's head (empty when it has none).
    static QByteArray header(const QByteArray &head, const QByteArray &name)
    {
        for (const QByteArray &line : head.split('\n')) {
            const qsizetype colon = line.indexOf(':');
            if (colon > 0 && line.left(colon).trimmed().compare(name, Qt::CaseInsensitive) == 0)
                return line.mid(colon + 1).trimmed();
        }
        return {};
    }

    // The documented 200 answer of POST `path`.
    QJsonObject postAnswer(const QString &path) const
    {
        return m_document.value(u"paths"_s)
            .toObject()
            .value(path)
            .toObject()
            .value(u"post"_s)
            .toObject()
            .value(u"responses"_s)
            .toObject()
            .value(u"200"_s)
            .toObject();
    }

    std::unique_ptr<TestServer> m_server;
    QJsonObject m_document;
};

QTEST_GUILESS_MAIN(ApiOpenApiTest)
#include "tst_api_openapi.moc"
