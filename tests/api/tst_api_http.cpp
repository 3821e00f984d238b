// HTTP/1.1 at the edge, over raw sockets: bodies over the limit are refused before they are
// sent, `Expect: 100-continue` is answered, and a request written in pieces by a client with
// Nagle's algorithm on is not held up by delayed ACKs.
#include "fakes.h"
#include "rawhttp.h"
#include "testserver.h"

#include <QElapsedTimer>
#include <QEventLoop>
#include <QJsonDocument>
#include <QRegularExpression>
#include <QTcpSocket>
#include <QTest>
#include <QTimer>

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <optional>
#include <sys/socket.h>
#include <unistd.h>

using namespace Qt::StringLiterals;
using namespace AgentDeck;
using namespace AgentDeck::Testing;

namespace {

constexpr int WaitMs = 10'000;

QByteArray postHead(const QString &path, qint64 length, QByteArrayView extra = {})
{
    return "POST " + path.toUtf8() +
           " HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: " +
           QByteArray::number(length) + "\r\n" + extra.toByteArray() + "\r\n";
}

// A server of its own with short HTTP timeouts; null (with a warning) when it does not start.
std::unique_ptr<TestServer>
serverWithTimeouts(std::chrono::milliseconds request,
                   std::chrono::milliseconds idle = std::chrono::minutes(5))
{
    TestServerOptions options;
    options.httpRequestTimeout = request;
    options.httpIdleTimeout = idle;
    auto server = std::make_unique<TestServer>(std::move(options));
    if (!server->start()) {
        qWarning().noquote() << "the server did not start:" << server->errorString();
        return nullptr;
    }
    return server;
}

// A server of its own whose runtimes do not come up until control.finishProvisioning(), with a
// conversation and a raw client: a run of it then waits in its handler while the requests
// pipelined behind it are handled.
struct HeldRun
{
    FakeRuntimeControl control;
    std::unique_ptr<TestServer> server;
    QUuid id;
    RawHttp client;

    // Starts the server and connects; false, with a warning, when that fails.
    bool start()
    {
        control.holdProvisioning = true;
        TestServerOptions options;
        options.parts.runtimes = std::make_unique<FakeRuntimeProvider>(control);
        server = std::make_unique<TestServer>(std::move(options));
        if (!server->start()) {
            qWarning().noquote() << "the server did not start:" << server->errorString();
            return false;
        }
        id = server->create();
        return !id.isNull() && client.connectTo(server->url());
    }

    // Sends a run and `behind` in one write; true once the run waits for its runtime.
    bool sendBehindARun(const QByteArray &behind)
    {
        client.send(postHead(ServerConnection::conversationPath(id, u"run"_s), 0) + behind);
        return QTest::qWaitFor([this] { return control.acquisitions == 1; }, WaitMs);
    }
};

QByteArray messageBody(qsizetype textBytes)
{
    return R"({"role":"user","content":[{"type":"text","text":")" + QByteArray(textBytes, 'x') +
           R"("}],"run":false})";
}

} // namespace

class ApiHttpTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void init()
    {
        m_server = std::make_unique<TestServer>();
        QVERIFY2(m_server->start(), qPrintable(m_server->errorString()));
        m_id = m_server->create();
        QVERIFY(!m_id.isNull());
        m_events = ServerConnection::conversationPath(m_id, u"events");
    }
    void cleanup() { m_server.reset(); }

    // An encoded slash separates nothing: `ID%2Fevents` was served the events of ID. The path
    // is refused as not in its one spelling (tst_api_pathspellings tries the others).
    void anEncodedSlashDoesNotSeparateSegments_data()
    {
        QTest::addColumn<QByteArray>("path");
        QTest::addColumn<int>("status");
        QTest::addRow("in an id") << "/api/conversations/ID%2Fevents"_ba << 400;
        QTest::addRow("in lower case") << "/api/conversations/ID%2fevents"_ba << 400;
        QTest::addRow("in a route") << "/api/conversations%2Fsearch"_ba << 400;
        QTest::addRow("the control") << "/api/conversations/ID/events"_ba << 200;
    }
    void anEncodedSlashDoesNotSeparateSegments()
    {
        QFETCH(QByteArray, path);
        QFETCH(int, status);
        RawHttp client;
        QVERIFY(client.connectTo(m_server->url()));
        client.send("GET " + path.replace("ID", toWireId(m_id).toLatin1()) +
                    " HTTP/1.1\r\nHost: localhost\r\n\r\n");
        const auto response = client.nextResponse();
        QVERIFY2(response, client.received().constData());
        QCOMPARE(response->status, status);
        if (status == 400)
            QVERIFY2(response->body.contains("non_canonical_path"), response->body.constData());
    }

    // Qt's HTTP server would wait for the whole body, holding it in memory, before the 413.
    void aBodyOverTheLimitIsRefusedBeforeItIsSent()
    {
        RawHttp client;
        QVERIFY(client.connectTo(m_server->url()));
        client.send(postHead(m_events, qint64(1) << 30)); // 1 GiB announced, none sent
        const auto response = client.nextResponse();
        QVERIFY2(response, client.received().constData());
        QCOMPARE(response->status, 413);
        QVERIFY(response->body.contains("\"code\":\"payload_too_large\""));
        QVERIFY(response->head.contains("Connection: close"));
        QVERIFY(client.waitForClose());
        QVERIFY(m_server->get(u"/metrics"_s)
                    .body.contains("agentdeck_http_refused_total{status=\"413\"} 1\n"));
    }

    void aChunkedBodyOverTheLimitIsRefusedWhileItComes()
    {
        RawHttp client;
        QVERIFY(client.connectTo(m_server->url()));
        client.send("POST " + m_events.toUtf8() +
                    " HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n");
        const QByteArray chunk = "100000\r\n" + QByteArray(0x100000, 'x') + "\r\n"; // 1 MiB
        for (int i = 0; i < 5; ++i) // 5 MiB, and never the last chunk
            client.send(chunk);
        const auto response = client.nextResponse();
        QVERIFY2(response, client.received().left(300).constData());
        QCOMPARE(response->status, 413);
        QVERIFY(client.waitForClose());
        // The server is well and serves the next client.
        QVERIFY(m_server->get(u"/alive"_s).ok());
    }

    // Trailer fields after a chunked body belong to its request. Qt's parser ends the request
    // before them, and read them as the next one: the connection closed and the request behind
    // went unanswered; once pipelined requests were taken at once, the create ran twice.
    void trailerFieldsBelongToTheirRequest()
    {
        RawHttp client;
        QVERIFY(client.connectTo(m_server->url()));
        const QByteArray body = R"({"title": "with trailer fields", "agent": {"kind": "shell"}})";
        client.send("POST /api/conversations HTTP/1.1\r\nHost: localhost\r\nContent-Type: "
                    "application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
                    QByteArray::number(body.size(), 16) + "\r\n" + body +
                    "\r\n0\r\nX-Checksum: 1\r\n\r\nGET /alive HTTP/1.1\r\nHost: localhost\r\n\r\n");
        const auto created = client.nextResponse();
        QVERIFY2(created, client.received().constData());
        QCOMPARE(created->status, 201);
        const auto alive = client.nextResponse();
        QVERIFY2(alive, client.received().constData());
        QCOMPARE(alive->body, R"({"status":"ok"})"_ba);
        const ApiReply count = m_server->get(u"/api/conversations/count"_s,
                                             QUrlQuery{{u"q"_s, u"with trailer fields"_s}});
        QCOMPARE(count.json.toInt(-1), 1);
    }

    // Qt's HTTP server buffers a head without end (26 MB of one header line took the server
    // from 35 to 85 MB), and its answer to framing it cannot read is no answer.
    void brokenOrEndlessFramingIsRefused_data()
    {
        QTest::addColumn<QByteArray>("request");
        QTest::addColumn<int>("status");
        QTest::addColumn<QByteArray>("code");
        QTest::addRow("head without end")
            << "GET /alive HTTP/1.1\r\nHost: localhost\r\nX-Big: " + QByteArray(70 * 1024, 'a')
            << 431 << QByteArray("headers_too_large");
        QTest::addRow("unreadable length")
            << QByteArray("POST /api/conversations HTTP/1.1\r\nHost: localhost\r\nContent-Length: "
                          "lots\r\n\r\n")
            << 400 << QByteArray("bad_request");
        QTest::addRow("unreadable chunk size")
            << QByteArray(
                   "POST /api/conversations HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: "
                   "chunked\r\n\r\nzz\r\n")
            << 400 << QByteArray("bad_request");
        // Qt's parser takes a bare LF in chunked framing too, and ended the chunks elsewhere
        // than the listener: the request pipelined behind went unanswered.
        QTest::addRow("chunked framing with bare LFs")
            << QByteArray(
                   "POST /api/conversations HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: "
                   "chunked\r\n\r\n2\r\n{}\r\n0\n\nGET /alive HTTP/1.1\r\nHost: "
                   "localhost\r\n\r\n")
            << 400 << QByteArray("bad_request");
        // Qt's HTTP server closed these without an answer, and waited for the end of a head
        // written with bare LFs until the request timeout (60 s).
        QTest::addRow("no version") << QByteArray("GET /alive\r\nHost: localhost\r\n\r\n") << 400
                                    << QByteArray("bad_request");
        QTest::addRow("no target") << QByteArray("GET  HTTP/1.1\r\nHost: localhost\r\n\r\n") << 400
                                   << QByteArray("bad_request");
        QTest::addRow("tabs") << QByteArray("GET\t/alive\tHTTP/1.1\r\nHost: localhost\r\n\r\n")
                              << 400 << QByteArray("bad_request");
        QTest::addRow("bare LFs") << QByteArray("GET /alive HTTP/1.1\nHost: localhost\n\n") << 400
                                  << QByteArray("bad_request");
        QTest::addRow("a folded header")
            << QByteArray("GET /alive HTTP/1.1\r\nHost: localhost\r\nX: a\r\n b\r\n\r\n") << 400
            << QByteArray("bad_request");
        QTest::addRow("two Host headers")
            << QByteArray("GET /alive HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\n\r\n")
            << 400 << QByteArray("bad_request");
        QTest::addRow("HTTP/2.0") << QByteArray("GET /alive HTTP/2.0\r\nHost: localhost\r\n\r\n")
                                  << 505 << QByteArray("http_version_not_supported");
        // RFC 9112, 3.2: it was answered as if it had one.
        QTest::addRow("HTTP/1.1 without Host")
            << QByteArray("GET /api/conversations/count HTTP/1.1\r\nAccept: */*\r\n\r\n") << 400
            << QByteArray("bad_request");
    }
    void brokenOrEndlessFramingIsRefused()
    {
        QFETCH(QByteArray, request);
        QFETCH(int, status);
        QFETCH(QByteArray, code);
        RawHttp client;
        QVERIFY(client.connectTo(m_server->url()));
        client.send(request);
        const auto response = client.nextResponse();
        QVERIFY2(response, client.received().left(300).constData());
        QCOMPARE(response->status, status);
        const QByteArray codeField = "\"code\":\"" + code + '"';
        QVERIFY2(response->body.contains(codeField), response->body.constData());
        QVERIFY(client.waitForClose());
        QVERIFY(m_server->get(u"/alive"_s).ok());
    }

    // Qt's server reads one request at a time; the refusal of a later one threw away the
    // whole requests before it that the server had not read yet.
    void requestsBeforeARefusedOneAreAnswered_data()
    {
        QTest::addColumn<QByteArray>("refused");
        QTest::addColumn<int>("status");
        QTest::addRow("body over the limit")
            << postHead(u"/api/conversations"_s, qint64(1) << 30) << 413;
        QTest::addRow("malformed request line")
            << QByteArray("GET /alive\r\nHost: localhost\r\n\r\n") << 400;
    }
    void requestsBeforeARefusedOneAreAnswered()
    {
        QFETCH(QByteArray, refused);
        QFETCH(int, status);
        RawHttp client;
        QVERIFY(client.connectTo(m_server->url()));
        client.send(QByteArray("GET /alive HTTP/1.1\r\nHost: localhost\r\n\r\n").repeated(5) +
                    refused);
        for (int i = 0; i < 5; ++i) {
            const auto response = client.nextResponse();
            QVERIFY2(response, client.received().constData());
            QCOMPARE(response->status, 200);
        }
        const auto refusal = client.nextResponse();
        QVERIFY2(refusal, client.received().constData());
        QCOMPARE(refusal->status, status);
        QVERIFY(client.waitForClose());
    }

    // The interim answer was written before the answers to the requests ahead of it, and a
    // client took it for the answer to the first of them.
    void continueComesAfterTheAnswersBeforeIt()
    {
        RawHttp client;
        QVERIFY(client.connectTo(m_server->url()));
        const QByteArray body = messageBody(100);
        client.send("GET /alive HTTP/1.1\r\nHost: localhost\r\n\r\n" +
                    postHead(m_events, body.size(), "Expect: 100-continue\r\n"));
        const auto first = client.nextResponse();
        QVERIFY2(first, client.received().constData());
        QCOMPARE(first->status, 200);
        QCOMPARE(client.nextResponse().value_or(RawResponse()).status, 100);
        client.send(body);
        const auto sent = client.nextResponse();
        QVERIFY2(sent, client.received().constData());
        QVERIFY2(sent->body.contains("\"seq\":1"), sent->body.constData());
    }

    // `printf 'GET ...' | nc -N`: the client shuts down its side after the request. Qt reads
    // that end next and closes the socket with the unsent answer in it: no answer at all. So it
    // was for the listener's refusals, and for the answer before one. After pipelined requests,
    // Qt's server had taken two when it read that end: the others went unanswered.
    void aClientThatShutsDownItsSideGetsTheAnswer_data()
    {
        QTest::addColumn<QByteArray>("request");
        QTest::addColumn<QByteArray>("answerStart");
        QTest::addColumn<QByteArray>("lastAnswer");
        QTest::addColumn<int>("answers");
        const QByteArray alive = "GET /alive HTTP/1.1\r\nHost: localhost\r\n\r\n";
        const QByteArray search =
            "GET /api/conversations/search?limit=1 HTTP/1.1\r\nHost: localhost\r\n\r\n";
        QTest::addRow("answer") << alive << "HTTP/1.1 200"_ba
                                << "HTTP/1.1 200"_ba << 1;
        QTest::addRow("413") << "POST /api/conversations HTTP/1.1\r\nHost: localhost\r\n"
                                "Content-Length: 5000000\r\n\r\n"_ba
                             << "HTTP/1.1 413"_ba
                             << "HTTP/1.1 413"_ba << 1;
        QTest::addRow("431") << "GET /alive HTTP/1.1\r\nHost: localhost\r\nX: "_ba +
                                    QByteArray(70'000, 'a') + "\r\n\r\n"
                             << "HTTP/1.1 431"_ba
                             << "HTTP/1.1 431"_ba << 1;
        QTest::addRow("answer, then 400") << alive + "GARBAGE\r\n\r\n"
                                          << "HTTP/1.1 200"_ba
                                          << "HTTP/1.1 400"_ba << 2;
        QTest::addRow("four pipelined") << alive.repeated(4) << "HTTP/1.1 200"_ba
                                        << "HTTP/1.1 200"_ba << 4;
        QTest::addRow("searches pipelined, then 400") << search.repeated(5) + "GARBAGE\r\n\r\n"
                                                      << "HTTP/1.1 200"_ba
                                                      << "HTTP/1.1 400"_ba << 6;
    }
    void aClientThatShutsDownItsSideGetsTheAnswer()
    {
        QFETCH(QByteArray, request);
        QFETCH(QByteArray, answerStart);
        QFETCH(QByteArray, lastAnswer);
        QFETCH(int, answers);
        const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        QVERIFY(fd >= 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_port = htons(quint16(m_server->url().port()));
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        QCOMPARE(::connect(fd, reinterpret_cast<const sockaddr *>(&address), sizeof address), 0);
        QCOMPARE(::send(fd, request.constData(), std::size_t(request.size()), MSG_NOSIGNAL),
                 request.size());
        ::shutdown(fd, SHUT_WR);
        ::fcntl(fd, F_SETFL, O_NONBLOCK);
        QByteArray received;
        const bool ended = QTest::qWaitFor([&] {
            char buffer[4096];
            const auto got = ::recv(fd, buffer, sizeof buffer, 0);
            if (got > 0)
                received.append(buffer, got);
            return got == 0 || (got < 0 && errno != EAGAIN);
        });
        ::close(fd);
        QVERIFY(ended);
        QVERIFY2(received.startsWith(answerStart), received.constData());
        // Whole: the last answer's body is JSON.
        QVERIFY2(received.sliced(received.lastIndexOf("HTTP/1.1 ")).startsWith(lastAnswer),
                 received.constData());
        QVERIFY2(received.endsWith('}'), received.constData());
        QCOMPARE(received.count("HTTP/1.1 "), answers);
    }

    void expectContinueIsAnswered()
    {
        RawHttp client;
        QVERIFY(client.connectTo(m_server->url()));
        const QByteArray body = messageBody(100);
        for (int round = 0; round < 2; ++round) { // on a fresh connection and on a kept one
            client.send(postHead(m_events, body.size(), "Expect: 100-continue\r\n"));
            const QByteArray interim = "HTTP/1.1 100 Continue\r\n\r\n";
            QVERIFY(client.waitForBytes(interim.size()));
            QVERIFY2(client.received().startsWith(interim), client.received().constData());
            QCOMPARE(client.nextResponse().value_or(RawResponse()).status, 100);
            client.send(body);
            const auto response = client.nextResponse();
            QVERIFY(response);
            QVERIFY2(response->status == 200 || response->status == 201,
                     response->head.constData());
            QVERIFY(
                response->body.contains(QByteArray("\"seq\":" + QByteArray::number(round + 1))));
        }
    }

    // With Nagle's algorithm on, a client sends the body written after the head only once the
    // head is acknowledged, and Linux delays that ACK by up to 40 ms on a connection that has
    // answered before: every such request took 40 ms or more.
    void aRequestWrittenInPiecesIsAcknowledgedAtOnce()
    {
        RawHttp client;
        QVERIFY(client.connectTo(m_server->url()));
        const QByteArray body = messageBody(100);
        QList<qint64> micros;
        for (int round = 0; round < 15; ++round) {
            QElapsedTimer timer;
            timer.start();
            client.send(postHead(m_events, body.size()));
            client.send(body);
            const auto response = client.nextResponse();
            QVERIFY(response);
            QVERIFY2(response->status == 200 || response->status == 201,
                     response->head.constData());
            micros.append(timer.nsecsElapsed() / 1000);
        }
        std::sort(micros.begin(), micros.end());
        const qint64 median = micros[micros.size() / 2];
        QVERIFY2(median < 20'000, qPrintable(u"median %1 us per request"_s.arg(median)));
    }

    void refusedConnectionsDoNotDisturbOthers()
    {
        RawHttp big;
        QVERIFY(big.connectTo(m_server->url()));
        RawHttp small;
        QVERIFY(small.connectTo(m_server->url()));
        const QByteArray body = messageBody(10);
        small.send(postHead(m_events, body.size()) + body.first(5));
        big.send(postHead(m_events, qint64(1) << 32));
        const auto refused = big.nextResponse();
        QVERIFY(refused);
        QCOMPARE(refused->status, 413);
        small.send(body.sliced(5));
        const auto response = small.nextResponse();
        QVERIFY(response);
        QVERIFY2(response->status == 200 || response->status == 201, response->head.constData());
    }

    // Qt's HTTP server waits for the rest of a request forever, and keeps an idle connection
    // open forever: a client that leaves connections behind exhausts the server's descriptors.
    void aRequestThatDoesNotArriveWholeIsAnswered408_data()
    {
        QTest::addColumn<QByteArray>("partial");
        QTest::addRow("half a head") << QByteArray("GET /api/conversations/count HTTP/1.1\r\nHo");
        QTest::addRow("half a body") << postHead(u"/api/conversations"_s, 20) + "{\"title\":";
    }
    void aRequestThatDoesNotArriveWholeIsAnswered408()
    {
        QFETCH(QByteArray, partial);
        const auto server = serverWithTimeouts(std::chrono::milliseconds(300));
        QVERIFY(server);
        RawHttp client;
        QVERIFY(client.connectTo(server->url()));
        // A whole request first: the limit is per request, not per connection.
        client.send("GET /alive HTTP/1.1\r\nHost: localhost\r\n\r\n");
        QCOMPARE(client.nextResponse().value_or(RawResponse()).status, 200);
        QElapsedTimer timer;
        timer.start();
        client.send(partial);
        const auto response = client.nextResponse();
        QVERIFY2(response, client.received().constData());
        QCOMPARE(response->status, 408);
        QVERIFY(response->body.contains("\"code\":\"request_timeout\""));
        // Not at once: after the limit, give or take a coarse timer's 5 %.
        QVERIFY2(timer.elapsed() >= 250, qPrintable(QString::number(timer.elapsed())));
        QVERIFY(client.waitForClose());
    }

    void aSlowBodyThatKeepsComingIsTaken()
    {
        const auto server = serverWithTimeouts(std::chrono::milliseconds(300));
        QVERIFY(server);
        RawHttp client;
        QVERIFY(client.connectTo(server->url()));
        const QByteArray body =
            R"({"title":"a title that comes slowly, a few bytes at a time","agent":{"kind":"shell"}})";
        client.send(postHead(u"/api/conversations"_s, body.size()));
        // The client's pace, not a wait for the server: 8 pieces 100 ms apart, 800 ms in all,
        // which is over the limit for the whole request and under it for every pause.
        const qsizetype piece = body.size() / 8 + 1;
        QElapsedTimer pace;
        pace.start();
        for (qsizetype at = 0; at < body.size(); at += piece) {
            const qint64 due = 100 * (at / piece + 1);
            QVERIFY(QTest::qWaitFor([&] { return pace.elapsed() >= due; }, WaitMs));
            client.send(body.mid(at, piece));
        }
        const auto response = client.nextResponse();
        QVERIFY2(response, client.received().constData());
        QCOMPARE(response->status, 201);
    }

    void anIdleConnectionIsClosedButNotAStream()
    {
        const auto serverOwner =
            serverWithTimeouts(std::chrono::minutes(1), std::chrono::milliseconds(300));
        QVERIFY(serverOwner);
        TestServer &server = *serverOwner;
        const QUuid id = server.create();
        QVERIFY(!id.isNull());
        EventStream *stream = server.client().openEventStream(id, 0, this);
        int drops = 0;
        connect(stream, &EventStream::disconnected, this, [&drops] { ++drops; });
        QVERIFY(QTest::qWaitFor([stream] { return stream->isConnected(); }, WaitMs));

        RawHttp idle;
        QVERIFY(idle.connectTo(server.url()));
        RawHttp used;
        QVERIFY(used.connectTo(server.url()));
        used.send("GET /alive HTTP/1.1\r\nHost: localhost\r\n\r\n");
        QCOMPARE(used.nextResponse().value_or(RawResponse()).status, 200);
        QVERIFY(idle.waitForClose());
        QVERIFY(used.waitForClose());
        QCOMPARE(drops, 0);
        QVERIFY(stream->isConnected());
        // These two, and the test client's own connection when it idled.
        static const QRegularExpression idleCloses(
            uR"(agentdeck_http_connections_closed_total\{reason="idle"\} (\d+))"_s);
        const auto match = idleCloses.match(QString::fromUtf8(server.get(u"/metrics"_s).body));
        QVERIFY(match.hasMatch());
        QVERIFY2(match.captured(1).toInt() >= 2, qPrintable(match.captured(0)));
        delete stream;
    }

    // A client that pipelines requests and never reads the answers: Qt would hold every answer
    // in memory (20 s of pipelined searches took the server to 745 MB).
    void aClientThatDoesNotReadItsAnswersIsDisconnected_data()
    {
        QTest::addColumn<int>("perWrite");
        QTest::addColumn<QString>("why");
        QTest::addRow("all at once") << 2000 << u"more than 64 requests"_s;
        QTest::addRow("16 at a time") << 16 << u"does not read its answers"_s;
    }
    void aClientThatDoesNotReadItsAnswersIsDisconnected()
    {
        QFETCH(int, perWrite);
        QFETCH(QString, why);
        for (int i = 0; i < 100; ++i) // search pages of ~100 kB
            QVERIFY(!m_server->create({{u"title"_s, QString(256, u't')}}).isNull());
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        QVERIFY(fd >= 0);
        const int small = 4096;
        ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_port = htons(quint16(m_server->url().port()));
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ::connect(fd, reinterpret_cast<const sockaddr *>(&address), sizeof address);
        QTest::ignoreMessage(QtInfoMsg, QRegularExpression(why));

        // Up to 2,000 requests, ~200 MB of answers; nothing is ever read here.
        const QByteArray request =
            "GET /api/conversations/search HTTP/1.1\r\nHost: localhost\r\n\r\n";
        const QByteArray requests = request.repeated(perWrite);
        int written = 0;
        QByteArray unsent; // of the last batch: a request cut in two would be a malformed one
        const auto closedByServer = [&] {
            if (unsent.isEmpty() && written < 2000) {
                unsent = requests;
                written += perWrite;
            }
            if (const auto sent =
                    ::send(fd, unsent.constData(), std::size_t(unsent.size()), MSG_NOSIGNAL);
                sent > 0)
                unsent.remove(0, sent);
            tcp_info info{};
            socklen_t size = sizeof info;
            ::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &size);
            return info.tcpi_state == TCP_CLOSE || info.tcpi_state == TCP_CLOSE_WAIT;
        };
        const bool closed = QTest::qWaitFor(closedByServer, 30'000);
        ::close(fd);
        QVERIFY2(closed, qPrintable(u"%1 requests written"_s.arg(written)));
        QVERIFY(m_server->get(u"/metrics"_s)
                    .body.contains(
                        "agentdeck_http_connections_closed_total{reason=\"not_reading\"} 1\n"));
    }

    // Requests that came in one read are all answered: going through them one by one, the
    // server took its own answers to the first for a client not reading, and closed the
    // connection with none of the answers sent (and the requests behind never run).
    void largeAnswersToRequestsOfOneReadAreAllSent()
    {
        const QUuid id = m_server->create();
        for (int i = 0; i < 10; ++i)
            QVERIFY(m_server->send(id, QString(1 << 20, u'm')).ok());
        const QByteArray page =
            "GET " + ServerConnection::conversationPath(id, u"events/search"_s).toUtf8() +
            "?limit=100 HTTP/1.1\r\nHost: localhost\r\n\r\n";
        const QByteArray marker = R"({"role":"user","content":[{"type":"text","text":"marker"}]})";
        RawHttp client;
        QVERIFY(client.connectTo(m_server->url()));
        client.send(page.repeated(3) + "POST " +
                    ServerConnection::conversationPath(id, u"events"_s).toUtf8() +
                    " HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                    "Content-Length: " +
                    QByteArray::number(marker.size()) + "\r\n\r\n" + marker);
        for (int i = 0; i < 3; ++i) {
            const auto answer = client.nextResponse();
            QVERIFY2(answer, qPrintable(u"answer %1 of 4 missing"_s.arg(i + 1)));
            QCOMPARE(answer->status, 200);
            QVERIFY(answer->body.size() > 7'000'000);
        }
        const auto stored = client.nextResponse();
        QVERIFY(stored);
        QCOMPARE(stored->status, 200);
        QCOMPARE(m_server->events(id, QUrlQuery(u"body=marker"_s)).size(), 1);
    }

    // HEAD is GET without the body (RFC 9110); it was 405 everywhere, health routes included.
    void headIsAnsweredLikeGetWithoutTheBody()
    {
        RawHttp client;
        QVERIFY(client.connectTo(m_server->url()));
        client.send("HEAD /alive HTTP/1.1\r\nHost: localhost\r\n\r\n"
                    "HEAD /api/conversations/search HTTP/1.1\r\nHost: localhost\r\n\r\n"
                    "GET /alive HTTP/1.1\r\nHost: localhost\r\n\r\n");
        for (int i = 0; i < 2; ++i) {
            const auto head = client.nextHead();
            QVERIFY2(head, client.received().constData());
            QVERIFY2(head->startsWith("HTTP/1.1 200"), head->constData()); // no body before it
            QVERIFY(head->contains("Content-Length: "));
        }
        const auto get = client.nextResponse();
        QVERIFY2(get, client.received().constData());
        QCOMPARE(get->body, R"({"status":"ok"})"_ba);
    }

    // HTTP/1.1 answers pipelined requests in their order. Every whole request of a read is taken
    // at once, and an answer from a handler that waits (here: a runtime being provisioned) went
    // out after the answers to the requests behind it.
    void pipelinedRequestsAreAnsweredInOrder()
    {
        HeldRun held;
        QVERIFY(held.start());
        RawHttp &client = held.client;
        QVERIFY(held.sendBehindARun("GET /alive HTTP/1.1\r\nHost: localhost\r\n\r\n"
                                    "GET /api/nowhere HTTP/1.1\r\nHost: localhost\r\n\r\n"
                                    "GET " +
                                    ServerConnection::conversationPath(held.id, {}).toUtf8() +
                                    " HTTP/1.1\r\nHost: localhost\r\n\r\n"));
        held.control.finishProvisioning();

        const auto run = client.nextResponse();
        QVERIFY2(run, client.received().constData());
        QCOMPARE(run->status, 200);
        QVERIFY2(run->body.contains("\"execution_status\""), run->body.constData());
        const auto alive = client.nextResponse();
        QVERIFY(alive);
        QCOMPARE(alive->body, R"({"status":"ok"})"_ba);
        const auto nowhere = client.nextResponse();
        QVERIFY(nowhere);
        QCOMPARE(nowhere->status, 404);
        const auto conversation = client.nextResponse();
        QVERIFY(conversation);
        QCOMPARE(conversation->status, 200);
        QVERIFY(conversation->body.contains(held.id.toString(QUuid::WithoutBraces).toUtf8()));
    }

    // The listener's own answers wait their turn too: a 413 for a request pipelined behind one
    // still in its handler was written first, and taken for the earlier request's answer.
    void aRefusalWaitsForTheAnswersBeforeIt()
    {
        HeldRun held;
        QVERIFY(held.start());
        RawHttp &client = held.client;
        QVERIFY(held.sendBehindARun(
            postHead(ServerConnection::conversationPath(held.id, u"events"_s), qint64(1) << 30)));
        QVERIFY(QTest::qWaitFor(
            [&] {
                return held.server->get(u"/metrics"_s)
                    .body.contains("agentdeck_http_refused_total{status=\"413\"} 1\n");
            },
            WaitMs));
        held.control.finishProvisioning();

        const auto run = client.nextResponse();
        QVERIFY2(run, client.received().constData());
        QCOMPARE(run->status, 200);
        const auto refused = client.nextResponse();
        QVERIFY2(refused, client.received().constData());
        QCOMPARE(refused->status, 413);
        QVERIFY(client.waitForClose());
    }

    // Qt 6.4 ignores `Connection: close`: a client that reads to the end of the connection (an
    // HTTP/1.0 one, a shell script) waited for the idle timeout, five minutes.
    void aRequestThatAsksToCloseIsAnsweredAndClosed_data()
    {
        QTest::addColumn<QByteArray>("requests");
        QTest::addColumn<int>("answers");
        const QByteArray get = "GET /alive HTTP/1.1\r\nHost: localhost\r\n\r\n";
        const QByteArray closing =
            "GET /alive HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
        QTest::addRow("Connection: close") << closing << 1;
        QTest::addRow("HTTP/1.0") << "GET /alive HTTP/1.0\r\n\r\n"_ba << 1;
        QTest::addRow("behind another, with one after") << get + closing + get << 2;
        QTest::addRow("with a chunked body")
            << "POST /api/conversations HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
               "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"_ba
            << 1;
    }
    void aRequestThatAsksToCloseIsAnsweredAndClosed()
    {
        QFETCH(QByteArray, requests);
        QFETCH(int, answers);
        RawHttp client;
        QVERIFY(client.connectTo(m_server->url()));
        client.send(requests);
        QVERIFY2(client.waitForClose(), client.received().constData());
        QCOMPARE(client.received().count("HTTP/1.1 "), answers);
        QVERIFY(client.received().endsWith("}"));
    }

    // The streams take a connection whose first request asks for the upgrade; one asked later
    // went unanswered, and its client waited without end.
    void anUpgradeAfterTheFirstRequestIsRefused()
    {
        RawHttp client;
        QVERIFY(client.connectTo(m_server->url()));
        client.send("GET /alive HTTP/1.1\r\nHost: localhost\r\n\r\n"
                    "GET /sockets/events/x HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
                    "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
                    "GET /alive HTTP/1.1\r\nHost: localhost\r\n\r\n");
        const auto alive = client.nextResponse();
        QVERIFY2(alive, client.received().constData());
        QCOMPARE(alive->status, 200);
        const auto refused = client.nextResponse();
        QVERIFY2(refused, client.received().constData());
        QCOMPARE(refused->status, 400);
        QVERIFY2(refused->body.contains("first request"), refused->body.constData());
        QVERIFY2(client.waitForClose(), client.received().constData());
        QVERIFY2(client.received().isEmpty(), client.received().constData()); // nothing after
    }

    void anHttp10ClientMayKeepItsConnection()
    {
        RawHttp client;
        QVERIFY(client.connectTo(m_server->url()));
        for (int i = 0; i < 2; ++i) {
            client.send("GET /alive HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
            const auto answer = client.nextResponse();
            QVERIFY2(answer, client.received().constData());
            QCOMPARE(answer->status, 200);
        }
    }

    // The close waits for an answer still in its handler.
    void aClosingRequestStillInItsHandlerIsAnsweredFirst()
    {
        HeldRun held;
        QVERIFY(held.start());
        held.client.send(postHead(ServerConnection::conversationPath(held.id, u"run"_s), 0,
                                  "Connection: close\r\n"));
        QVERIFY(QTest::qWaitFor([&] { return held.control.acquisitions == 1; }, WaitMs));
        held.control.finishProvisioning();
        const auto run = held.client.nextResponse();
        QVERIFY2(run, held.client.received().constData());
        QCOMPARE(run->status, 200);
        QVERIFY(held.client.waitForClose());
    }

    // A browser sends what any page asks it to. A form's POST (text/plain, no preflight) to a
    // loopback server without a key created a conversation and ran its command for whatever
    // site the operator had open; a page whose name it made resolve to 127.0.0.1 (DNS
    // rebinding) could read the answers too.
    void webPagesOfOtherSitesAreRefused_data()
    {
        QTest::addColumn<QByteArray>("host");
        QTest::addColumn<QByteArray>("origin"); // empty: none sent
        QTest::addColumn<bool>("withKey");
        QTest::addColumn<int>("status");
        QTest::addColumn<QString>("code");
        const auto refused = [](const char *name, QByteArray host, QByteArray origin, bool withKey,
                                const QString &code) {
            QTest::addRow("%s", name) << host << origin << withKey << 403 << code;
        };
        const auto taken = [](const char *name, QByteArray host, QByteArray origin, bool withKey) {
            QTest::addRow("%s", name) << host << origin << withKey << 201 << QString();
        };
        refused("a page of another site", "127.0.0.1:8000", "https://evil.example", false,
                u"origin_not_allowed"_s);
        refused("an opaque origin", "localhost:8000", "null", false, u"origin_not_allowed"_s);
        refused("a page that rebinds its name", "evil.example:8000", "http://evil.example:8000",
                false, u"host_not_allowed"_s);
        refused("a rebound name without an origin", "evil.example:8000", {}, false,
                u"host_not_allowed"_s);
        refused("a page of another site, with a key", "127.0.0.1:8000", "https://evil.example",
                true, u"origin_not_allowed"_s);
        taken("no browser", "127.0.0.1:8000", {}, false);
        taken("a page of this server", "127.0.0.1:8000", "http://127.0.0.1:8000", false);
        taken("localhost", "localhost:8000", {}, false);
        taken("a name under .localhost", "agentdeck.localhost:8000", {}, false);
        taken("IPv6 loopback", "[::1]:8000", {}, false);
        taken("any name, with a key", "agentdeck.example:8000", {}, true);
    }
    void webPagesOfOtherSitesAreRefused()
    {
        QFETCH(QByteArray, host);
        QFETCH(QByteArray, origin);
        QFETCH(bool, withKey);
        QFETCH(int, status);
        QFETCH(QString, code);
        TestServerOptions options;
        if (withKey)
            options.apiKeys = {u"the-key"_s};
        TestServer server(std::move(options));
        QVERIFY2(server.start(), qPrintable(server.errorString()));

        RawHttp client;
        QVERIFY(client.connectTo(server.url()));
        const QByteArray body = R"({"agent":{"kind":"shell"}})";
        client.send("POST /api/conversations HTTP/1.1\r\nHost: " + host +
                    (origin.isEmpty() ? QByteArray() : "\r\nOrigin: " + origin) +
                    (withKey ? "\r\nX-Session-API-Key: the-key"_ba : QByteArray()) +
                    "\r\nContent-Type: text/plain\r\nContent-Length: " +
                    QByteArray::number(body.size()) + "\r\n\r\n" + body);
        const auto answer = client.nextResponse();
        QVERIFY2(answer, client.received().constData());
        QCOMPARE(answer->status, status);
        const ApiReply count = server.get(u"/api/conversations/count"_s);
        QVERIFY(count.ok());
        QCOMPARE(count.body.trimmed(), status == 201 ? "1"_ba : "0"_ba);
        if (!code.isEmpty())
            QCOMPARE(QJsonDocument::fromJson(answer->body)[u"code"_s].toString(), code);
    }

private:
    std::unique_ptr<TestServer> m_server;
    QUuid m_id;
    QString m_events;
};

QTEST_GUILESS_MAIN(ApiHttpTest)
#include "tst_api_http.moc"
