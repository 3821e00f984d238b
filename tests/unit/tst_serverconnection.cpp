// The client's reading of a server address (ctl's --server, the console's --connect), and the
// paths its requests and streams take under a reverse proxy's prefix.
#include "fakes.h"
#include "serverconnection.h"

#include <QTest>

using namespace Qt::StringLiterals;
using namespace AgentDeck;
using namespace AgentDeck::Testing;

class ServerConnectionTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void addressesAsOperatorsTypeThem_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<QString>("url"); // empty: refused
        QTest::addRow("host:port") << u"127.0.0.1:8000"_s << u"http://127.0.0.1:8000"_s;
        QTest::addRow("name") << u"deck.example.org"_s << u"http://deck.example.org"_s;
        QTest::addRow("http") << u"http://127.0.0.1:8000"_s << u"http://127.0.0.1:8000"_s;
        QTest::addRow("https") << u"https://deck.example.org"_s << u"https://deck.example.org"_s;
        QTest::addRow("prefix") << u"https://example.org/deck/"_s << u"https://example.org/deck/"_s;
        QTest::addRow("ftp") << u"ftp://127.0.0.1:8000"_s << QString();
        QTest::addRow("websocket") << u"ws://127.0.0.1:8000"_s << QString();
        QTest::addRow("no host") << u"http://:8000"_s << QString();
        QTest::addRow("query") << u"http://127.0.0.1:8000/?x=1"_s << QString();
        QTest::addRow("fragment") << u"http://127.0.0.1:8000/#top"_s << QString();
        QTest::addRow("port out of range") << u"127.0.0.1:99999"_s << QString();
        QTest::addRow("empty") << QString() << QString();
        QTest::addRow("a slash missing") << u"http:/127.0.0.1:8000"_s << QString();
    }

    void addressesAsOperatorsTypeThem()
    {
        QFETCH(QString, text);
        QFETCH(QString, url);
        const auto parsed = ServerConnection::baseUrlFrom(text);
        QCOMPARE(parsed.has_value(), !url.isEmpty());
        if (parsed)
            QCOMPARE(parsed->toString(), url);
    }

    // The server's details are sentences without their full stop: "... when one of them ends
    // Retry in 5 s." ran the two together.
    void anErrorSentenceIsSetApartFromItsRetryHint()
    {
        ApiReply reply;
        reply.status = 503;
        reply.detail = u"Cannot start the runtime: every sandbox is held"_s;
        reply.retryAfter = "5";
        QCOMPARE(reply.errorSentence(),
                 u"Cannot start the runtime: every sandbox is held; retry in 5 s"_s);
    }

    // Behind a reverse proxy that serves AgentDeck under a path, the path stays in front of
    // every request and stream; it was dropped.
    void aPathPrefixIsKept()
    {
        for (const QString &prefix : {u"/deck"_s, u"/deck/"_s}) {
            NotAgentDeckServer web;
            QVERIFY(web.isListening());
            const auto base = ServerConnection::baseUrlFrom(web.url().toString() + prefix);
            QVERIFY(base);
            ServerConnection connection(*base);
            QUrlQuery query;
            query.addQueryItem(u"limit"_s, u"1"_s);
            const ApiReply reply =
                QCoro::waitFor(connection.get(u"/api/conversations/search"_s, query));
            QCOMPARE(reply.status, 200); // the fake's page
            QCOMPARE(web.requestLines().value(0),
                     QByteArray("GET /deck/api/conversations/search?limit=1 HTTP/1.1"));

            const QUuid id = QUuid::createUuid();
            EventStream *stream = connection.openEventStream(id, 7, &connection);
            QVERIFY(QTest::qWaitFor([&web] { return web.requestLines().size() == 2; }));
            QCOMPARE(web.requestLines().value(1), "GET /deck/sockets/events/" +
                                                      toWireId(id).toLatin1() +
                                                      "?after_seq=7 HTTP/1.1");
            stream->close();
        }
    }
};

QTEST_GUILESS_MAIN(ServerConnectionTest)
#include "tst_serverconnection.moc"
