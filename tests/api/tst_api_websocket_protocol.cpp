// The server's own RFC 6455 implementation at the frame level, with a raw TCP client: the
// handshake and its refusals, fragmented messages, ping/pong, the close handshake, and the frames
// a server must refuse (unmasked, oversized, unknown opcodes, invalid UTF-8).
#include "testevents.h"
#include "testserver.h"

#include <QCryptographicHash>
#include <QDeadlineTimer>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QTcpSocket>
#include <QTest>
#include <QtEndian>

#include <sys/socket.h>

#include <functional>

using namespace Qt::StringLiterals;
using namespace AgentDeck;
using namespace AgentDeck::Testing;

namespace {

bool waitUntil(const std::function<bool()> &done, int timeoutMs = 10'000)
{
    const QDeadlineTimer deadline(timeoutMs);
    while (!done()) {
        if (deadline.hasExpired())
            return done();
        QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
        QTest::qWait(1);
    }
    return true;
}

struct Frame
{
    bool fin = true;
    quint8 opcode = 0;
    QByteArray payload;
};

// A client that writes frames byte by byte as the test says, masked unless told otherwise.
class RawClient
{
public:
    // Returns the status line of the server's answer to the upgrade request.
    QByteArray open(const QUrl &server, const QByteArray &path, const QByteArray &extraHeaders = {},
                    const QByteArray &key = "dGhlIHNhbXBsZSBub25jZQ==",
                    const QByteArray &version = "13")
    {
        m_socket.connectToHost(server.host(), quint16(server.port()));
        if (!m_socket.waitForConnected(5'000))
            return {};
        QByteArray request = "GET " + path + " " + httpVersion +
                             "\r\nHost: " + server.authority().toUtf8() +
                             "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n";
        if (!key.isEmpty())
            request += "Sec-WebSocket-Key: " + key + "\r\n";
        request += "Sec-WebSocket-Version: " + version + "\r\n" + extraHeaders + "\r\n";
        m_socket.write(request);
        waitUntil([&] {
            m_input += m_socket.readAll();
            return m_input.contains("\r\n\r\n") ||
                   m_socket.state() != QAbstractSocket::ConnectedState;
        });
        const qsizetype end = m_input.indexOf("\r\n\r\n");
        if (end < 0)
            return {};
        head = m_input.left(end);
        m_input.remove(0, end + 4);
        return head.left(head.indexOf("\r\n"));
    }

    void send(const Frame &frame)
    {
        sendFrame(quint8((frame.fin ? 0x80 : 0) | frame.opcode), frame.payload);
    }
    // `first` is the whole first byte: FIN, reserved bits and opcode.
    void sendFrame(quint8 first, const QByteArray &payload, bool masked = true)
    {
        QByteArray out;
        out.append(char(first));
        const quint8 maskBit = masked ? 0x80 : 0;
        const qint64 size = payload.size();
        if (size < 126) {
            out.append(char(maskBit | size));
        } else if (size < 65536) {
            out.append(char(maskBit | 126));
            out.append(char(size >> 8)).append(char(size & 0xff));
        } else {
            out.append(char(maskBit | 127));
            for (int shift = 56; shift >= 0; shift -= 8)
                out.append(char((size >> shift) & 0xff));
        }
        const char key[4] = {0x12, 0x34, 0x56, 0x78};
        if (masked)
            out.append(key, 4);
        for (qsizetype i = 0; i < payload.size(); ++i)
            out.append(masked ? char(payload[i] ^ key[i % 4]) : payload[i]);
        m_socket.write(out);
    }
    void sendRaw(const QByteArray &bytes) { m_socket.write(bytes); }

    // The next frame from the server, or nothing within the timeout.
    std::optional<Frame> next(int timeoutMs = 5'000)
    {
        std::optional<Frame> frame;
        waitUntil(
            [&] {
                m_input += m_socket.readAll();
                frame = parse();
                return frame.has_value() || m_socket.state() != QAbstractSocket::ConnectedState;
            },
            timeoutMs);
        if (!frame)
            frame = parse();
        return frame;
    }
    bool waitDisconnected(int timeoutMs = 5'000)
    {
        return waitUntil(
            [&] {
                m_input += m_socket.readAll();
                return m_socket.state() == QAbstractSocket::UnconnectedState;
            },
            timeoutMs);
    }

    QByteArray head;
    QByteArray httpVersion = "HTTP/1.1"; // of the upgrade request

private:
    std::optional<Frame> parse()
    {
        if (m_input.size() < 2)
            return std::nullopt;
        Frame frame;
        frame.fin = quint8(m_input[0]) & 0x80;
        frame.opcode = quint8(m_input[0]) & 0x0f;
        if (quint8(m_input[1]) & 0x80)
            qWarning("the server masked a frame");
        qint64 length = quint8(m_input[1]) & 0x7f;
        qsizetype header = 2;
        if (length == 126) {
            if (m_input.size() < 4)
                return std::nullopt;
            length = qFromBigEndian<quint16>(m_input.constData() + 2);
            header = 4;
        } else if (length == 127) {
            if (m_input.size() < 10)
                return std::nullopt;
            length = qint64(qFromBigEndian<quint64>(m_input.constData() + 2));
            header = 10;
        }
        if (m_input.size() < header + length)
            return std::nullopt;
        frame.payload = m_input.mid(header, length);
        m_input.remove(0, header + length);
        return frame;
    }

    QTcpSocket m_socket;
    QByteArray m_input;
};

quint16 closeCode(const Frame &frame)
{
    return frame.payload.size() >= 2 ? qFromBigEndian<quint16>(frame.payload.constData()) : 0;
}

QByteArray messageBody(const QString &text)
{
    return QJsonDocument(TestServer::message(text)).toJson(QJsonDocument::Compact);
}

} // namespace

class ApiWebSocketProtocolTest : public QObject
{
    Q_OBJECT

private:
    std::unique_ptr<TestServer> m_server;
    QUuid m_id;

    QByteArray streamPath() const { return "/sockets/events/" + toWireId(m_id).toLatin1(); }

private Q_SLOTS:
    void init()
    {
        m_server = std::make_unique<TestServer>();
        QVERIFY2(m_server->start(), qPrintable(m_server->errorString()));
        m_id = m_server->create(QJsonObject{{u"agent"_s, QJsonObject{{u"kind"_s, u"echo"_s}}}});
        QVERIFY(!m_id.isNull());
    }
    void cleanup() { m_server.reset(); }

    void handshakeAnswersTheKey()
    {
        RawClient client;
        QCOMPARE(client.open(m_server->url(), streamPath()), "HTTP/1.1 101 Switching Protocols"_ba);
        // The example of RFC 6455 section 1.3.
        QVERIFY2(client.head.contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="),
                 client.head.constData());
    }

    void badHandshakesAreRefused_data()
    {
        QTest::addColumn<QByteArray>("key");
        QTest::addColumn<QByteArray>("version");
        QTest::addColumn<QByteArray>("status");
        QTest::addColumn<QByteArray>("httpVersion");
        QTest::addRow("no key") << QByteArray() << "13"_ba
                                << "HTTP/1.1 400 Bad Request"_ba
                                << "HTTP/1.1"_ba;
        QTest::addRow("short key") << "c2hvcnQ="_ba
                                   << "13"_ba
                                   << "HTTP/1.1 400 Bad Request"_ba
                                   << "HTTP/1.1"_ba;
        // 16 bytes to a decoder that skips what is not base64.
        QTest::addRow("key not base64") << "dGhlIHNh*bXBsZSBub25jZQ=="_ba
                                        << "13"_ba
                                        << "HTTP/1.1 400 Bad Request"_ba
                                        << "HTTP/1.1"_ba;
        QTest::addRow("old version") << "dGhlIHNhbXBsZSBub25jZQ=="_ba
                                     << "8"_ba
                                     << "HTTP/1.1 426 Upgrade Required"_ba
                                     << "HTTP/1.1"_ba;
        QTest::addRow("HTTP/1.0") << "dGhlIHNhbXBsZSBub25jZQ=="_ba
                                  << "13"_ba
                                  << "HTTP/1.1 400 Bad Request"_ba
                                  << "HTTP/1.0"_ba;
        QTest::addRow("HTTP/1.9") << "dGhlIHNhbXBsZSBub25jZQ=="_ba
                                  << "13"_ba
                                  << "HTTP/1.1 400 Bad Request"_ba
                                  << "HTTP/1.9"_ba;
    }
    void badHandshakesAreRefused()
    {
        QFETCH(QByteArray, key);
        QFETCH(QByteArray, version);
        QFETCH(QByteArray, status);
        QFETCH(QByteArray, httpVersion);
        RawClient client;
        client.httpVersion = httpVersion;
        QCOMPARE(client.open(m_server->url(), streamPath(), {}, key, version), status);
        QVERIFY(client.waitDisconnected());
    }

    // Only a stream's path upgrades: any other was switched, and then closed with 4004.
    void upgradesOfOtherPathsAreNotFound_data()
    {
        QTest::addColumn<QByteArray>("path");
        QTest::addRow("unknown") << "/nope"_ba;
        QTest::addRow("a health route") << "/alive"_ba;
        QTest::addRow("an api route") << "/api/conversations/search"_ba;
        QTest::addRow("below a stream") << "/sockets/events/x/y"_ba;
    }
    void upgradesOfOtherPathsAreNotFound()
    {
        QFETCH(QByteArray, path);
        RawClient client;
        QCOMPARE(client.open(m_server->url(), path), "HTTP/1.1 404 Not Found"_ba);
        QVERIFY(client.waitDisconnected());
    }

    // A browser opens a WebSocket for any page, and the server's answer is the page's to read:
    // a page of another site could follow every conversation of a loopback server.
    void upgradesFromPagesOfOtherSitesAreRefused_data()
    {
        QTest::addColumn<QByteArray>("origin");
        QTest::addColumn<QByteArray>("status");
        QTest::addRow("another site") << "https://evil.example"_ba
                                      << "HTTP/1.1 403 Forbidden"_ba;
        QTest::addRow("an opaque origin") << "null"_ba
                                          << "HTTP/1.1 403 Forbidden"_ba;
        QTest::addRow("this server") << "this server"_ba
                                     << "HTTP/1.1 101 Switching Protocols"_ba;
    }
    void upgradesFromPagesOfOtherSitesAreRefused()
    {
        QFETCH(QByteArray, origin);
        QFETCH(QByteArray, status);
        if (origin == "this server")
            origin = "http://" + m_server->url().authority().toUtf8();
        RawClient client;
        QCOMPARE(client.open(m_server->url(), streamPath(), "Origin: " + origin + "\r\n"), status);
        if (status.contains("403")) {
            QVERIFY(client.waitDisconnected());
            QVERIFY2(client.head.contains("Content-Type: application/json"),
                     client.head.constData());
        }
    }

    // Each message frame was queued to the main thread as it was read, without a bound: one
    // client's 150,000 frames kept every HTTP request waiting 24 s behind them. A client with
    // MaxMessagesInFlight on their way is not read until one is stored.
    void aClientsMessagesWaitTheirTurn()
    {
        constexpr int Messages = 5000;
        RawClient client;
        QCOMPARE(client.open(m_server->url(), streamPath()), "HTTP/1.1 101 Switching Protocols"_ba);
        QByteArray frames;
        for (int i = 0; i < Messages; ++i) {
            const QByteArray payload = messageBody(u"flood %1"_s.arg(i));
            Q_ASSERT(payload.size() < 126);
            frames += char(0x81);
            frames += char(0x80 | payload.size());
            frames += QByteArray(4, '\0'); // a zero mask leaves the payload as it is
            frames += payload;
        }
        client.sendRaw(frames);
        const QString count = ServerConnection::conversationPath(m_id, u"events/count"_s);
        QTRY_VERIFY_WITH_TIMEOUT(m_server->get(count).json.toInteger() > 0, 10'000);
        // An HTTP request is served between the client's messages, not after all of them.
        QVERIFY(m_server->get(u"/alive"_s).ok());
        const qint64 storedMeanwhile = m_server->get(count).json.toInteger();
        QVERIFY2(storedMeanwhile < Messages / 2, qPrintable(QString::number(storedMeanwhile)));
        // All of them are stored in the end, in order.
        QTRY_COMPARE_WITH_TIMEOUT(m_server->get(count).json.toInteger(), Messages, 60'000);
        const QList<QJsonObject> events = m_server->events(m_id);
        QCOMPARE(messageText(events.first()), u"flood 0"_s);
        QCOMPARE(messageText(events.last()), u"flood %1"_s.arg(Messages - 1));
    }

    // A normal request on the same port is unaffected by the upgrade detection.
    void plainHttpStillWorks() { QCOMPARE(m_server->get(u"/alive"_s).status, 200); }

    void fragmentedMessageIsAssembled()
    {
        RawClient client;
        QCOMPARE(client.open(m_server->url(), streamPath()), "HTTP/1.1 101 Switching Protocols"_ba);
        const QByteArray body = messageBody(u"in three parts"_s);
        const qsizetype third = body.size() / 3;
        client.send({false, 0x1, body.left(third)});
        client.send({false, 0x0, body.mid(third, third)});
        client.send({true, 0x9, "in between"}); // a control frame may come between fragments
        client.send({true, 0x0, body.mid(2 * third)});
        const auto pong = client.next();
        QVERIFY(pong);
        QCOMPARE(pong->opcode, quint8(0xA));
        QCOMPARE(pong->payload, "in between"_ba);
        QVERIFY(waitUntil([&] { return m_server->events(m_id).size() == 1; }));
        QCOMPARE(messageText(m_server->events(m_id).first()), u"in three parts"_s);
    }

    void largeMessageWithLongLength()
    {
        RawClient client;
        QCOMPARE(client.open(m_server->url(), streamPath()), "HTTP/1.1 101 Switching Protocols"_ba);
        client.send({true, 0x1, messageBody(QString(70'000, u'y'))});
        QVERIFY(waitUntil([&] { return m_server->events(m_id).size() == 1; }));
        // The live frame of that event uses the 64-bit length form.
        const auto frame = client.next();
        QVERIFY(frame);
        QCOMPARE(frame->opcode, quint8(0x1));
        QVERIFY(frame->payload.size() > 70'000);
        QCOMPARE(QJsonDocument::fromJson(frame->payload).object().value(u"seq"_s).toInt(), 1);
    }

    void refusedFramesCloseTheConnection_data()
    {
        QTest::addColumn<quint8>("first");
        QTest::addColumn<QByteArray>("payload");
        QTest::addColumn<bool>("masked");
        QTest::addColumn<QByteArray>("raw"); // sent as it is instead, when not empty
        QTest::addColumn<int>("code");
        QTest::addRow("unmasked") << quint8(0x81) << "{}"_ba << false << QByteArray() << 1002;
        QTest::addRow("reserved bit") << quint8(0xC1) << "{}"_ba << true << QByteArray() << 1002;
        QTest::addRow("unknown opcode") << quint8(0x83) << "{}"_ba << true << QByteArray() << 1002;
        QTest::addRow("continuation first")
            << quint8(0x80) << "{}"_ba << true << QByteArray() << 1002;
        QTest::addRow("fragmented ping") << quint8(0x09) << "x"_ba << true << QByteArray() << 1002;
        QTest::addRow("invalid utf-8")
            << quint8(0x81) << "\xc3\x28"_ba << true << QByteArray() << 1007;
        // Only a header, masked, saying 5 MiB: refused before the payload is read.
        QTest::addRow("too big") << quint8(0) << QByteArray() << true
                                 << "\x81\xff\x00\x00\x00\x00\x00\x50\x00\x00"_ba << 1009;
    }
    void refusedFramesCloseTheConnection()
    {
        QFETCH(quint8, first);
        QFETCH(QByteArray, payload);
        QFETCH(bool, masked);
        QFETCH(QByteArray, raw);
        QFETCH(int, code);
        RawClient client;
        QCOMPARE(client.open(m_server->url(), streamPath()), "HTTP/1.1 101 Switching Protocols"_ba);
        if (raw.isEmpty())
            client.sendFrame(first, payload, masked);
        else
            client.sendRaw(raw);
        const auto close = client.next();
        QVERIFY2(close, "no close frame");
        QCOMPARE(close->opcode, quint8(0x8));
        QCOMPARE(int(closeCode(*close)), code);
        QVERIFY(client.waitDisconnected());
        // The server is fine afterwards.
        QCOMPARE(m_server->get(u"/alive"_s).status, 200);
    }

    // A client that sends a frame with its upgrade request and resets the connection at once:
    // the read queued for what came with the head ran after Qt had closed the device, and Qt
    // warned of it, once per such connection.
    void aResetRightAfterTheUpgradeWarnsOfNothing()
    {
        QTest::failOnWarning(QRegularExpression(u"device not open"_s));
        const QByteArray ping = "\x89\x80\x12\x34\x56\x78"_ba; // masked, empty
        for (const QByteArray &path :
             QList<QByteArray>{streamPath() + "?after_seq=x", streamPath()}) {
            for (int i = 0; i < 20; ++i) {
                QTcpSocket socket;
                socket.connectToHost(m_server->url().host(), quint16(m_server->url().port()));
                QVERIFY(socket.waitForConnected(5'000));
                socket.write("GET " + path +
                             " HTTP/1.1\r\nHost: " + m_server->url().authority().toUtf8() +
                             "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                             "Sec-WebSocket-Version: 13\r\n\r\n" +
                             ping);
                QVERIFY(socket.waitForBytesWritten(5'000));
                const linger reset{1, 0}; // close() then sends a reset
                ::setsockopt(int(socket.socketDescriptor()), SOL_SOCKET, SO_LINGER, &reset,
                             sizeof reset);
                socket.close();
            }
        }
        // Upgrades are taken in turn by the streams' thread: once this one is answered, the
        // reads queued for those before it have run.
        RawClient last;
        QCOMPARE(last.open(m_server->url(), streamPath()), "HTTP/1.1 101 Switching Protocols"_ba);
    }

    void closeHandshakeIsAnswered_data()
    {
        QTest::addColumn<int>("code");
        QTest::addRow("normal") << 1000;
        // Registered after RFC 6455 (1012-1014); the server sends 1013 itself, and a client
        // echoing it was answered 1002.
        QTest::addRow("try again later") << 1013;
    }
    void closeHandshakeIsAnswered()
    {
        QFETCH(int, code);
        RawClient client;
        QCOMPARE(client.open(m_server->url(), streamPath()), "HTTP/1.1 101 Switching Protocols"_ba);
        QByteArray payload(2, Qt::Uninitialized);
        qToBigEndian(quint16(code), payload.data());
        client.send({true, 0x8, payload + "bye"});
        const auto close = client.next();
        QVERIFY(close);
        QCOMPARE(close->opcode, quint8(0x8));
        QCOMPARE(int(closeCode(*close)), code);
        QVERIFY(client.waitDisconnected());
        QVERIFY(waitUntil([&] {
            return m_server->get(u"/metrics"_s).body.contains("agentdeck_websocket_connections 0");
        }));
    }
};

QTEST_GUILESS_MAIN(ApiWebSocketProtocolTest)
#include "tst_api_websocket_protocol.moc"
