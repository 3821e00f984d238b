// GET /openapi.json describes exactly the routes the server answers.
#include "testserver.h"

#include <QJsonArray>
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

private:
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
