// A WebSocket connection's output: frames reach the kernel in the call that sends them, corked
// frames wait for uncork(), and a client that falls behind still gets every frame in order.
#include "streams/websocketconnection.h"

#include <QTcpServer>
#include <QTcpSocket>
#include <QTest>
#include <QtEndian>

#include <sys/ioctl.h>
#include <sys/socket.h>

using namespace Qt::StringLiterals;
using namespace AgentDeck;

namespace {
// Bytes that have reached the client's kernel buffer and not been read yet.
qint64 bytesArrived(QTcpSocket &client)
{
    int pending = 0;
    ::ioctl(int(client.socketDescriptor()), FIONREAD, &pending);
    return client.bytesAvailable() + pending;
}

// The payloads of the complete unmasked text frames at the start of `bytes`, which are
// removed from it.
QList<QByteArray> takeFrames(QByteArray &bytes)
{
    QList<QByteArray> payloads;
    qsizetype pos = 0;
    while (bytes.size() - pos >= 2) {
        const auto *data = reinterpret_cast<const uchar *>(bytes.constData()) + pos;
        qint64 length = data[1] & 0x7F;
        qsizetype header = 2;
        if (length == 126) {
            if (bytes.size() - pos < 4)
                break;
            length = qFromBigEndian<quint16>(data + 2);
            header = 4;
        }
        if (bytes.size() - pos < header + length)
            break;
        payloads.append(bytes.mid(pos + header, length));
        pos += header + length;
    }
    bytes.remove(0, pos);
    return payloads;
}
} // namespace

class WebSocketConnectionTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void init()
    {
        QVERIFY(m_server.listen(QHostAddress::LocalHost));
        m_client = std::make_unique<QTcpSocket>();
        m_client->connectToHost(QHostAddress::LocalHost, m_server.serverPort());
        QVERIFY(QTest::qWaitFor([this] { return m_server.hasPendingConnections(); }, 5000));
        m_connection = std::make_unique<WebSocketConnection>(
            m_server.nextPendingConnection(), "accept", QUrl(u"/sockets/events/x"_s), 1 << 20);
        // The 101 answer goes through Qt's buffer: read it, so that nothing is pending.
        QByteArray head;
        QVERIFY(QTest::qWaitFor(
            [&] {
                head += m_client->readAll();
                return head.contains("\r\n\r\n");
            },
            5000));
        QVERIFY(head.startsWith("HTTP/1.1 101"));
        QCOMPARE(m_connection->bytesToWrite(), 0);
    }
    void cleanup()
    {
        m_connection.reset();
        m_client.reset();
        m_server.close();
    }

    void framesReachTheKernelAtOnce()
    {
        const QByteArray frame = WebSocketConnection::textFrame("one");
        m_connection->sendFrame(frame);
        // Not on the next turn of the event loop: before sendFrame() returned.
        QCOMPARE(m_connection->bytesToWrite(), 0);
        QCOMPARE(bytesArrived(*m_client), frame.size());
    }

    void corkedFramesWaitForUncork()
    {
        m_connection->cork();
        qint64 total = 0;
        for (const char *text : {"one", "two", "three"}) {
            const QByteArray frame = WebSocketConnection::textFrame(text);
            m_connection->sendFrame(frame);
            total += frame.size();
        }
        QCOMPARE(m_connection->bytesToWrite(), total);
        QCOMPARE(bytesArrived(*m_client), 0);

        m_connection->uncork();
        QCOMPARE(m_connection->bytesToWrite(), 0);
        QCOMPARE(bytesArrived(*m_client), total);
        QByteArray bytes;
        QVERIFY(QTest::qWaitFor(
            [&] {
                bytes += m_client->readAll();
                return bytes.size() == total;
            },
            5000));
        QCOMPARE(takeFrames(bytes), (QList<QByteArray>{"one", "two", "three"}));
    }

    // Once the kernel takes no more, frames wait in Qt's buffer, and so does every frame after
    // them until it has drained: none overtakes another.
    void orderHoldsWhenTheClientFallsBehind()
    {
        const QByteArray filler(1000, 'x');
        int sent = 0;
        const auto sendNext = [&] {
            m_connection->sendFrame(WebSocketConnection::textFrame(
                QByteArray(QByteArray::number(sent++) + ' ' + filler)));
        };
        while (m_connection->bytesToWrite() == 0 && sent < 100'000)
            sendNext();
        QVERIFY2(m_connection->bytesToWrite() > 0, "the kernel never refused a frame");
        // The client reads some, straight from the kernel: there is room there again while
        // Qt's buffer still holds frames.
        QByteArray bytes(256 * 1024, Qt::Uninitialized);
        const ssize_t drained = ::recv(int(m_client->socketDescriptor()), bytes.data(),
                                       std::size_t(bytes.size()), MSG_DONTWAIT);
        QVERIFY(drained > 0);
        bytes.truncate(drained);
        for (int i = 0; i < 50; ++i) {
            sendNext();
            if (i % 10 == 0) { // corked bursts join the same queue
                m_connection->cork();
                sendNext();
                sendNext();
                m_connection->uncork();
            }
        }

        QList<QByteArray> payloads;
        QVERIFY(QTest::qWaitFor(
            [&] {
                bytes += m_client->readAll();
                payloads += takeFrames(bytes);
                return payloads.size() == sent;
            },
            20'000));
        for (int i = 0; i < sent; ++i)
            QCOMPARE(payloads.at(i).first(payloads.at(i).indexOf(' ')), QByteArray::number(i));
        QCOMPARE(m_connection->bytesToWrite(), 0);
    }

    // Every ping is answered: a client that sent pings without reading the pongs had the server
    // queue them without end (775 MiB in 5 s). Past a bound of unsent bytes its frames are not
    // read, until it reads.
    void aClientThatDoesNotReadIsNotReadEither()
    {
        constexpr int Pings = 100'000; // 12.7 MB of pongs
        QByteArray ping = "\x89\xfd"_ba + "mask" + QByteArray(125, 'p');
        QByteArray pings;
        for (int i = 0; i < Pings; ++i)
            pings += ping;
        // Loopback lets the kernel take megabytes for a client that does not read.
        const int receiveBuffer = 64 * 1024;
        QCOMPARE(::setsockopt(int(m_client->socketDescriptor()), SOL_SOCKET, SO_RCVBUF,
                              &receiveBuffer, sizeof receiveBuffer),
                 0);
        m_client->write(pings);
        qint64 most = 0;
        const auto backlogBeyondTheBound = [&] {
            most = std::max(most, m_connection->bytesToWrite());
            return most > WebSocketConnection::MaxUnsentWhileReading + 127;
        };
        QVERIFY(QTest::qWaitFor(
            [&] {
                backlogBeyondTheBound();
                return most >= WebSocketConnection::MaxUnsentWhileReading;
            },
            10'000));
        QVERIFY2(!QTest::qWaitFor(backlogBeyondTheBound, 1000),
                 QByteArray::number(most).constData());

        // Once it reads, it is read again: every ping gets its pong.
        QByteArray bytes;
        qsizetype pongs = 0;
        QVERIFY(QTest::qWaitFor(
            [&] {
                bytes += m_client->readAll();
                pongs = bytes.count("\x8a\x7d"_ba);
                return pongs >= Pings;
            },
            20'000));
        QCOMPARE(pongs, Pings);
    }

private:
    QTcpServer m_server;
    std::unique_ptr<QTcpSocket> m_client;
    std::unique_ptr<WebSocketConnection> m_connection;
};

QTEST_GUILESS_MAIN(WebSocketConnectionTest)
#include "tst_websocketconnection.moc"
