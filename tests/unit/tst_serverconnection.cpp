// The client's reading of a server address (ctl's --server, the console's --connect), and the
// paths its requests and streams take under a reverse proxy's prefix.
#include "fakes.h"
#include "serverconnection.h"

#include <QCryptographicHash>
#include <QSignalSpy>
#include <QTcpServer>
#include <QTest>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

using namespace Qt::StringLiterals;
using namespace AgentDeck;
using namespace AgentDeck::Testing;

namespace {
// Answers one request with `totalBytes` of body, from a thread of its own and as fast as the
// client takes it: announced by Content-Length, in chunks with no length said up front, or as
// one WebSocket message.
class LargeAnswerServer
{
public:
    enum Framing
    {
        ContentLength,
        Chunked,
        WebSocketMessage
    };
    LargeAnswerServer(qint64 totalBytes, Framing framing)
    {
        m_listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t length = sizeof address;
        if (::bind(m_listener, reinterpret_cast<sockaddr *>(&address), length) != 0 ||
            ::listen(m_listener, 1) != 0 ||
            ::getsockname(m_listener, reinterpret_cast<sockaddr *>(&address), &length) != 0)
            return;
        m_port = ntohs(address.sin_port);
        m_thread = std::thread([this, totalBytes, framing] { serve(totalBytes, framing); });
    }
    ~LargeAnswerServer()
    {
        ::shutdown(m_listener, SHUT_RDWR); // ends an accept() still waiting
        if (m_thread.joinable())
            m_thread.join();
        ::close(m_listener);
    }
    bool isListening() const { return m_port != 0; }
    QUrl url() const { return QUrl(u"http://127.0.0.1:%1"_s.arg(m_port)); }
    qint64 written() const { return m_written; }

private:
    void serve(qint64 totalBytes, Framing framing)
    {
        const int connection = ::accept4(m_listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (connection < 0)
            return;
        QByteArray head;
        char buffer[4096];
        while (!head.contains("\r\n\r\n")) {
            const ssize_t got = ::read(connection, buffer, sizeof buffer);
            if (got <= 0)
                break;
            head.append(buffer, got);
        }
        // Until all is sent, or the client closes the connection.
        const auto sendAll = [this, connection](const QByteArray &bytes) {
            for (qsizetype at = 0; at < bytes.size();) {
                const ssize_t sent =
                    ::send(connection, bytes.constData() + at, bytes.size() - at, MSG_NOSIGNAL);
                if (sent <= 0)
                    return false;
                at += sent;
                m_written += sent;
            }
            return true;
        };
        const QByteArray piece(1024 * 1024, 'x');
        const bool chunked = framing == Chunked;
        bool open = sendAll(headFor(head, totalBytes, framing));
        for (qint64 body = 0; open && body < totalBytes; body += piece.size())
            open = sendAll(chunked ? QByteArray::number(piece.size(), 16) + "\r\n" + piece + "\r\n"
                                   : piece);
        if (open && chunked)
            sendAll("0\r\n\r\n");
        ::close(connection);
    }

    // The answer's head, and for a WebSocket the head of its one frame.
    static QByteArray headFor(const QByteArray &request, qint64 totalBytes, Framing framing)
    {
        switch (framing) {
        case ContentLength:
            return "HTTP/1.1 200 OK\r\nContent-Length: " + QByteArray::number(totalBytes) +
                   "\r\n\r\n";
        case Chunked:
            return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"_ba;
        case WebSocketMessage:
            break;
        }
        const qsizetype keyAt = request.indexOf("Sec-WebSocket-Key: ") + 19;
        const QByteArray key = request.mid(keyAt, request.indexOf("\r\n", keyAt) - keyAt);
        const QByteArray accept =
            QCryptographicHash::hash(QByteArray(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"),
                                     QCryptographicHash::Sha1)
                .toBase64();
        QByteArray head = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                          "Connection: Upgrade\r\nSec-WebSocket-Accept: " +
                          accept + "\r\n\r\n";
        head += char(0x81); // a text frame, the message's last
        head += char(127);  // its length in the next 8 bytes
        for (int shift = 56; shift >= 0; shift -= 8)
            head += char((totalBytes >> shift) & 0xff);
        return head;
    }

    int m_listener = -1;
    quint16 m_port = 0;
    std::atomic<qint64> m_written{0};
    std::thread m_thread;
};
} // namespace

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
    // What the server sent of a running command's output when the stream went live is not
    // shown twice when a piece sent before that comes after it; a new action starts over.
    void commandOutputIsTakenOnce()
    {
        const QString action = toWireId(QUuid::createUuid());
        const auto frame = [](const QString &action, qint64 offset, const QString &text) {
            return QJsonObject{{u"type"_s, u"transient"_s},
                               {u"kind"_s, u"CommandOutput"_s},
                               {u"action_id"_s, action},
                               {u"offset"_s, offset},
                               {u"text"_s, text}};
        };
        CommandOutputFollower output;
        QCOMPARE(output.take(frame(action, 0, u"a\nb\n"_s)).text, u"a\nb\n"_s); // so far
        QCOMPARE(output.take(frame(action, 2, u"b\n"_s)).text, QString());      // repeated
        QCOMPARE(output.take(frame(action, 2, u"b\nc\n"_s)).text, u"c\n"_s);    // partly new
        QCOMPARE(output.take(frame(action, 6, u"d\n"_s)).text, u"d\n"_s);
        const QString next = toWireId(QUuid::createUuid());
        const CommandOutputFollower::Piece piece = output.take(frame(next, 0, u"e\n"_s));
        QCOMPARE(piece.text, u"e\n"_s);
        QCOMPARE(toWireId(piece.actionId), next);
        QCOMPARE(output.take(QJsonObject{{u"kind"_s, u"MessageDelta"_s}}).text, QString());
    }

    void anErrorSentenceIsSetApartFromItsRetryHint()
    {
        ApiReply reply;
        reply.status = 503;
        reply.detail = u"Cannot start the runtime: every sandbox is held"_s;
        reply.retryAfter = "5";
        QCOMPARE(reply.errorSentence(),
                 u"Cannot start the runtime: every sandbox is held; retry in 5 s"_s);
    }

    // A request the server did not answer in time may still take effect, unless it was a read:
    // a list that timed out said so too.
    void aReadWithoutAnswerIsNotSaidToTakeEffect()
    {
        QTcpServer silent; // takes connections, never answers
        QVERIFY(silent.listen(QHostAddress::LocalHost));
        ServerConnection connection(QUrl(u"http://127.0.0.1:%1"_s.arg(silent.serverPort())));
        connection.setSilenceTimeout(std::chrono::milliseconds(200));
        const ApiReply read = QCoro::waitFor(connection.get(u"/api/conversations/search"_s));
        QVERIFY(read.timedOut);
        QCOMPARE(read.errorSentence(), u"The server did not answer in time (it did not answer "
                                       "within 200 ms)."_s);
        const ApiReply write = QCoro::waitFor(connection.post(u"/api/conversations"_s));
        QVERIFY(write.timedOut);
        QVERIFY2(write.errorSentence().contains(u"may still take effect"_s),
                 qPrintable(write.errorSentence()));
    }

    // Qt keeps an answer whole in memory: a server that did not end its answer grew ctl to
    // 2.4 GB. Past MaxAnswerBytes the request is given up, and the answer named as not
    // AgentDeck's, whether its size was announced or not. Qt holds back what it reads for a GET
    // (the server could not send it all), not for a POST (see send() in serverconnection.cpp).
    void anAnswerTooLargeForAgentDeckIsGivenUp_data()
    {
        QTest::addColumn<QByteArray>("method");
        QTest::addColumn<int>("framing");
        QTest::addRow("GET, Content-Length") << "GET"_ba << int(LargeAnswerServer::ContentLength);
        QTest::addRow("GET, chunked") << "GET"_ba << int(LargeAnswerServer::Chunked);
        QTest::addRow("POST, chunked") << "POST"_ba << int(LargeAnswerServer::Chunked);
    }

    void anAnswerTooLargeForAgentDeckIsGivenUp()
    {
        QFETCH(QByteArray, method);
        QFETCH(int, framing);
        const qint64 total = (method == "GET" ? 8 : 2) * ServerConnection::MaxAnswerBytes;
        LargeAnswerServer server(total, LargeAnswerServer::Framing(framing));
        QVERIFY(server.isListening());
        ServerConnection connection(server.url());
        const ApiReply reply = QCoro::waitFor(connection.request(
            method, u"/api/conversations/search"_s, {}, method == "POST" ? "{}"_ba : QByteArray()));
        QCOMPARE(reply.status, ApiReply::UnexpectedAnswer);
        QCOMPARE(reply.errorCode, u"unexpected_answer"_s);
        QVERIFY2(reply.errorSentence().contains(u"larger than 64 MiB"_s),
                 qPrintable(reply.errorSentence()));
        QVERIFY(reply.body.isEmpty());
        // What the server could write past the bound sat in socket buffers, and in Qt's HTTP
        // thread until the abort reached it: up to 84 MiB in all was seen (a bound of 80 MiB
        // failed one run in 30). Unbounded, Qt read all 512 MiB.
        if (method == "GET")
            QVERIFY2(server.written() < 2 * ServerConnection::MaxAnswerBytes,
                     qPrintable(QString::number(server.written())));
    }

    // The same bound holds for a stream's messages; Qt's own is 2 GiB. The stream drops the
    // connection at the frame's head.
    void aStreamMessageTooLargeForAgentDeckEndsItsConnection()
    {
        const qint64 total = 8 * ServerConnection::MaxAnswerBytes;
        LargeAnswerServer server(total, LargeAnswerServer::WebSocketMessage);
        QVERIFY(server.isListening());
        ServerConnection connection(server.url());
        EventStream *stream = connection.openEventStream(QUuid::createUuid(), 0, &connection);
        QSignalSpy dropped(stream, &EventStream::disconnected);
        QSignalSpy received(stream, &EventStream::eventReceived);
        QVERIFY(dropped.wait(10'000));
        stream->close();
        QVERIFY(received.isEmpty());
        QVERIFY2(server.written() < ServerConnection::MaxAnswerBytes + 16 * 1024 * 1024,
                 qPrintable(QString::number(server.written())));
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
