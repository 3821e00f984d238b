// A WebSocket connection's output: frames reach the kernel in the call that sends them, corked
// frames wait for uncork(), and a client that falls behind still gets every frame in order.
// With a send budget: a frame queued on many connections counts once, over the budget the
// slowest consumer is dropped, and it reads its 1013 close frame before its dropped frames.
#include "streams/sendbudget.h"
#include "streams/websocketconnection.h"

#include <QSignalSpy>
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

// A client of its own WebSocketConnection on `server`, which it does not read yet: its kernel
// takes little (loopback lets it take megabytes otherwise).
struct Peer
{
    std::unique_ptr<QTcpSocket> client;
    std::unique_ptr<WebSocketConnection> connection;
    QByteArray bytes; // read so far, after the 101 answer

    bool open(QTcpServer &server, SendBudget *budget)
    {
        client = std::make_unique<QTcpSocket>();
        client->setReadBufferSize(4096);
        client->connectToHost(QHostAddress::LocalHost, server.serverPort());
        if (!client->waitForConnected(5000))
            return false;
        const int receiveBuffer = 32 * 1024;
        ::setsockopt(int(client->socketDescriptor()), SOL_SOCKET, SO_RCVBUF, &receiveBuffer,
                     sizeof receiveBuffer);
        if (!QTest::qWaitFor([&] { return server.hasPendingConnections(); }, 5000))
            return false;
        connection =
            std::make_unique<WebSocketConnection>(server.nextPendingConnection(), "accept",
                                                  QUrl(u"/sockets/events/x"_s), 1 << 20, budget);
        return QTest::qWaitFor(
            [&] {
                bytes += client->readAll();
                return bytes.contains("\r\n\r\n");
            },
            5000);
    }
    // Reads until a close frame came (its code), or the connection ended (0); counts the text
    // frames before it.
    int readToClose(int *textFrames)
    {
        client->setReadBufferSize(0);
        bytes.remove(0, bytes.indexOf("\r\n\r\n") + 4);
        int code = 0;
        *textFrames = 0;
        (void)QTest::qWaitFor(
            [&] {
                bytes += client->readAll();
                while (code == 0 && bytes.size() >= 2) {
                    const auto *data = reinterpret_cast<const uchar *>(bytes.constData());
                    qint64 length = data[1] & 0x7F;
                    qsizetype header = 2;
                    if (length == 126 || length == 127) {
                        header = length == 126 ? 4 : 10;
                        if (bytes.size() < header)
                            break;
                        length = length == 126 ? qFromBigEndian<quint16>(data + 2)
                                               : qint64(qFromBigEndian<quint64>(data + 2));
                    }
                    if (bytes.size() < header + length)
                        break;
                    if ((data[0] & 0x0F) == 0x8)
                        code = qFromBigEndian<quint16>(data + header);
                    else
                        ++*textFrames;
                    bytes.remove(0, header + length);
                }
                return code != 0 || client->state() != QAbstractSocket::ConnectedState;
            },
            10'000);
        return code;
    }
};
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

    // A frame queued on many connections is one buffer, counted once: a hundred subscribers that
    // did not read had the server copy every frame for each (1.5 GB for 40 frames of 1 MB).
    void aFrameQueuedOnManyConnectionsCountsOnce()
    {
        SendBudget budget(1LL << 40);
        std::vector<Peer> peers(20);
        for (Peer &peer : peers)
            QVERIFY(peer.open(m_server, &budget));
        constexpr int Frames = 64; // 16 MiB: the kernel takes some 4 MB of each
        const QByteArray payload(256 * 1024, 'x');
        qint64 framesBytes = 0;
        for (int i = 0; i < Frames; ++i) {
            const QByteArray frame = WebSocketConnection::textFrame(payload);
            framesBytes += frame.size();
            for (Peer &peer : peers)
                peer.connection->sendFrame(frame);
        }
        qint64 unsentEverywhere = 0;
        for (const Peer &peer : peers)
            unsentEverywhere += peer.connection->bytesToWrite();
        // Each holds most of the frames: the kernel took little of them.
        QVERIFY2(unsentEverywhere > qint64(peers.size()) * framesBytes / 2,
                 qPrintable(QString::number(unsentEverywhere)));
        QVERIFY2(
            budget.unsent() <=
                framesBytes + qint64(peers.size()) * WebSocketConnection::OwnBufferBytes,
            qPrintable(u"%1 counted for %2 unsent"_s.arg(budget.unsent()).arg(unsentEverywhere)));
        peers.clear();
        QCOMPARE(budget.unsent(), 0);
    }

    // Over the budget the consumer furthest behind (holding the oldest unsent frame) is dropped
    // with 1013; one that reads is not. The dropped one's queued frames go, its close frame
    // comes right after what its kernel already held.
    void overTheBudgetTheSlowestConsumerIsDropped()
    {
        constexpr qint64 Limit = 4 << 20;
        SendBudget budget(Limit);
        Peer slow;
        Peer reader;
        QVERIFY(slow.open(m_server, &budget));
        QVERIFY(reader.open(m_server, &budget));
        reader.client->setReadBufferSize(0);
        QSignalSpy dropped(slow.connection.get(), &WebSocketConnection::droppedAsSlowConsumer);
        QSignalSpy readerDropped(reader.connection.get(),
                                 &WebSocketConnection::droppedAsSlowConsumer);
        const QByteArray payload(64 * 1024, 'x');
        int sent = 0;
        qint64 most = 0;
        while (dropped.isEmpty() && sent < 1000) {
            const QByteArray frame = WebSocketConnection::textFrame(payload);
            for (Peer *peer : {&slow, &reader}) {
                if (budget.makeRoom(frame, peer->connection.get()))
                    peer->connection->sendFrame(frame);
            }
            ++sent;
            most = std::max(most, budget.unsent());
            // The reader keeps up: what it was sent has gone before the next frame.
            QVERIFY(QTest::qWaitFor(
                [&] {
                    reader.bytes += reader.client->readAll();
                    return reader.connection->bytesToWrite() == 0;
                },
                5000));
        }
        QCOMPARE(dropped.size(), 1);
        QVERIFY(readerDropped.isEmpty());
        QVERIFY2(most <= Limit + payload.size() + 16, qPrintable(QString::number(most)));
        // All it keeps is the rest of a frame it began, and its close frame.
        QVERIFY2(slow.connection->bytesToWrite() <=
                     payload.size() + 16 + WebSocketConnection::OwnBufferBytes,
                 qPrintable(QString::number(slow.connection->bytesToWrite())));
        QVERIFY(budget.unsent() <= 2 * (payload.size() + 16) + WebSocketConnection::OwnBufferBytes);

        int textFrames = 0;
        QCOMPARE(slow.readToClose(&textFrames), int(WebSocketConnection::CloseTryAgainLater));
        QVERIFY2(textFrames < sent - (Limit / payload.size()) / 2,
                 qPrintable(u"%1 of %2 frames before the close"_s.arg(textFrames).arg(sent)));
        qInfo("dropped after %d frames of 64 KiB; it read %d before its close frame", sent,
              textFrames);
    }

private:
    QTcpServer m_server;
    std::unique_ptr<QTcpSocket> m_client;
    std::unique_ptr<WebSocketConnection> m_connection;
};

QTEST_GUILESS_MAIN(WebSocketConnectionTest)
#include "tst_websocketconnection.moc"
