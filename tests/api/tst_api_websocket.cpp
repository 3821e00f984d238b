// The WebSocket event stream /sockets/events/{id} end to end against a real in-process server:
// replay and live, ordering under concurrent publishing, auth, unknown ids, message and bad
// frames, and the per-connection byte budget (slow consumers are dropped, publishing never waits).
#include "conversationservice.h"
#include "testevents.h"
#include "testserver.h"

#include <QCoroTask>
#include <QDeadlineTimer>
#include <QElapsedTimer>
#include <QJsonArray>
#include <QJsonDocument>
#include <QSignalSpy>
#include <QTcpSocket>
#include <QTest>
#include <QTimer>
#include <QWebSocket>

#include <functional>

using namespace Qt::StringLiterals;
using namespace AgentDeck;
using namespace AgentDeck::Testing;

namespace {

constexpr int CloseUnauthorized = 4001;
constexpr int CloseNotFound = 4004;
constexpr int CloseInvalidParameter = 4022;
constexpr int CloseSlowConsumer = 1013;
const QByteArray SlowConsumerDrops = "agentdeck_websocket_slow_consumer_drops_total"_ba;

// Waits for a condition with a deadline, blocking on events between checks (no sleeping poll),
// so that high-volume socket traffic is processed at full speed.
bool waitUntil(const std::function<bool()> &done, int timeoutMs = 10'000)
{
    const QDeadlineTimer deadline(timeoutMs);
    QTimer wakeUp; // to look at the deadline even when nothing happens
    wakeUp.start(20);
    while (!done()) {
        if (deadline.hasExpired())
            return done();
        QCoreApplication::processEvents(QEventLoop::AllEvents | QEventLoop::WaitForMoreEvents);
    }
    return true;
}

QUrl streamUrl(TestServer &server, const QString &idPart, const QString &query = {})
{
    QUrl url = server.url();
    url.setScheme(u"ws"_s);
    url.setPath(u"/sockets/events/"_s + idPart);
    if (!query.isEmpty())
        url.setQuery(query);
    return url;
}

QUrl streamUrl(TestServer &server, const QUuid &id, const QString &query = {})
{
    return streamUrl(server, toWireId(id), query);
}

QList<qint64> seqRange(qint64 first, qint64 last)
{
    QList<qint64> seqs;
    for (qint64 seq = first; seq <= last; ++seq)
        seqs.append(seq);
    return seqs;
}

QString compact(const QJsonObject &object)
{
    return QString::fromUtf8(QJsonDocument(object).toJson(QJsonDocument::Compact));
}

// Stores one user message in-process (no HTTP) and returns its seq.
qint64 publish(TestServer &server, const QUuid &id, const QString &text)
{
    return QCoro::waitFor(
               server.server().service().sendMessage(id, MessageRequest{u"user"_s, text, false}))
        .seq;
}

qint64 metric(TestServer &server, const QByteArray &name)
{
    const ApiReply reply = server.get(u"/metrics"_s);
    for (const QByteArray &line : reply.body.split('\n')) {
        if (line.startsWith(QByteArray(name + ' ')))
            return line.mid(name.size() + 1).trimmed().toLongLong();
    }
    return -1;
}

// A plain QWebSocket that records every frame it gets, so duplicates and gaps stay visible
// (the EventStream client class would hide duplicates).
class StreamClient
{
public:
    explicit StreamClient(const QUrl &url)
    {
        QObject::connect(
            &m_socket, &QWebSocket::textMessageReceived, &m_socket, [this](const QString &text) {
                const QJsonObject frame = QJsonDocument::fromJson(text.toUtf8()).object();
                if (frame.value(u"type"_s) == u"error"_s) {
                    errors.append(frame);
                } else {
                    events.append(frame);
                    if (onEvent)
                        onEvent(frame.value(u"seq"_s).toInteger());
                }
            });
        QObject::connect(&m_socket, &QWebSocket::disconnected, &m_socket, [this] {
            closed = true;
            closeCode = m_socket.closeCode();
            closeReason = m_socket.closeReason();
        });
        m_socket.open(url);
    }

    bool waitConnected(int timeoutMs = 5'000)
    {
        return waitUntil([this] { return isConnected() || closed; }, timeoutMs) && !closed;
    }
    bool waitClosed(int timeoutMs = 5'000)
    {
        return waitUntil([this] { return closed; }, timeoutMs);
    }
    bool waitForEvents(qsizetype count, int timeoutMs = 10'000)
    {
        return waitUntil([&] { return events.size() >= count || closed; }, timeoutMs) &&
               events.size() >= count;
    }
    bool waitForErrors(qsizetype count, int timeoutMs = 5'000)
    {
        return waitUntil([&] { return errors.size() >= count || closed; }, timeoutMs) &&
               errors.size() >= count;
    }
    bool isConnected() const { return m_socket.state() == QAbstractSocket::ConnectedState; }
    void sendText(const QString &text) { m_socket.sendTextMessage(text); }
    void sendBinary(const QByteArray &data) { m_socket.sendBinaryMessage(data); }
    void sendJson(const QJsonObject &object) { sendText(compact(object)); }
    QList<qint64> seqs() const
    {
        QList<qint64> seqs;
        for (const QJsonObject &event : events)
            seqs.append(event.value(u"seq"_s).toInteger(-1));
        return seqs;
    }
    qint64 lastSeq() const
    {
        return events.isEmpty() ? 0 : events.last().value(u"seq"_s).toInteger(-1);
    }
    QString describeClose() const
    {
        return u"closed=%1 code=%2 reason=\"%3\" after %4 events"_s.arg(closed)
            .arg(closeCode)
            .arg(closeReason)
            .arg(events.size());
    }

    QList<QJsonObject> events;
    QList<QJsonObject> errors;
    std::function<void(qint64)> onEvent;
    bool closed = false;
    int closeCode = 0;
    QString closeReason;

private:
    QWebSocket m_socket;
};

// A client that does the WebSocket upgrade by hand on a raw TCP socket and then stops reading,
// with a tiny read buffer so that Qt stops draining the kernel buffer: a wedged consumer.
class WedgedClient
{
public:
    bool open(const QUrl &url, const QString &path)
    {
        m_socket.setReadBufferSize(1024);
        m_socket.connectToHost(url.host(), quint16(url.port()));
        if (!m_socket.waitForConnected(5'000))
            return false;
        m_socket.write("GET " + path.toUtf8() +
                       " HTTP/1.1\r\n"
                       "Host: " +
                       url.authority().toUtf8() +
                       "\r\n"
                       "Upgrade: websocket\r\n"
                       "Connection: Upgrade\r\n"
                       "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                       "Sec-WebSocket-Version: 13\r\n\r\n");
        QByteArray response;
        const bool gotHeaders = waitUntil(
            [&] {
                response += m_socket.readAll();
                return response.contains("\r\n\r\n") ||
                       m_socket.state() != QAbstractSocket::ConnectedState;
            },
            5'000);
        m_pending = response.mid(response.indexOf("\r\n\r\n") + 4);
        return gotHeaders && response.startsWith("HTTP/1.1 101");
    }

    // Starts reading again, and parses the server's frames until a close frame or disconnection.
    void resumeReading()
    {
        QObject::connect(&m_socket, &QTcpSocket::readyRead, &m_socket, [this] { drain(); });
        QObject::connect(&m_socket, &QTcpSocket::disconnected, &m_socket,
                         [this] { disconnected = true; });
        m_socket.setReadBufferSize(0);
        drain();
    }
    bool finished() const
    {
        return closeCode != 0 || disconnected ||
               m_socket.state() == QAbstractSocket::UnconnectedState;
    }

    int textFrames = 0;
    int closeCode = 0;
    QString closeReason;
    bool disconnected = false;

private:
    void drain()
    {
        m_pending += m_socket.readAll();
        while (closeCode == 0 && m_pending.size() >= 2) {
            const auto opcode = quint8(m_pending[0]) & 0x0f;
            qint64 length = quint8(m_pending[1]) & 0x7f;
            qsizetype header = 2;
            if (length == 126) {
                if (m_pending.size() < 4)
                    return;
                length = (quint8(m_pending[2]) << 8) | quint8(m_pending[3]);
                header = 4;
            } else if (length == 127) {
                if (m_pending.size() < 10)
                    return;
                length = 0;
                for (int i = 2; i < 10; ++i)
                    length = (length << 8) | quint8(m_pending[i]);
                header = 10;
            }
            if (m_pending.size() < header + length)
                return;
            const QByteArray payload = m_pending.mid(header, length);
            m_pending.remove(0, header + length);
            if (opcode == 0x1) {
                ++textFrames;
            } else if (opcode == 0x8 && payload.size() >= 2) {
                closeCode = (quint8(payload[0]) << 8) | quint8(payload[1]);
                closeReason = QString::fromUtf8(payload.mid(2));
                m_socket.abort();
            }
        }
    }

    QTcpSocket m_socket;
    QByteArray m_pending;
};

} // namespace

class ApiWebSocketTest : public QObject
{
    Q_OBJECT

private:
    bool startServer(TestServerOptions options = {})
    {
        m_server = std::make_unique<TestServer>(std::move(options));
        if (m_server->start())
            return true;
        qWarning() << "server did not start:" << m_server->errorString();
        return false;
    }
    QUuid createEcho()
    {
        return m_server->create(QJsonObject{{u"agent"_s, QJsonObject{{u"kind"_s, u"echo"_s}}}});
    }

    std::unique_ptr<TestServer> m_server;

private Q_SLOTS:
    void cleanup() { m_server.reset(); }

    void replaysFromTheRequestedSeqThenGoesLive_data()
    {
        QTest::addColumn<QString>("query");
        QTest::addColumn<int>("replayFrom"); // 6: nothing is replayed
        QTest::addRow("after_seq=0") << u"after_seq=0"_s << 1;
        QTest::addRow("after_seq=2") << u"after_seq=2"_s << 3;
        QTest::addRow("after_seq at the end") << u"after_seq=5"_s << 6;
        QTest::addRow("resend_all=true") << u"resend_all=true"_s << 1;
        QTest::addRow("no parameter: live only") << QString() << 6;
        QTest::addRow("resend_all=false: live only") << u"resend_all=false"_s << 6;
    }
    void replaysFromTheRequestedSeqThenGoesLive()
    {
        QFETCH(QString, query);
        QFETCH(int, replayFrom);
        QVERIFY(startServer());
        const QUuid id = createEcho();
        QVERIFY(!id.isNull());
        for (int i = 1; i <= 5; ++i)
            QCOMPARE(publish(*m_server, id, u"before %1"_s.arg(i)), i);
        const QList<QJsonObject> stored = m_server->events(id);
        QCOMPARE(stored.size(), 5);

        StreamClient client(streamUrl(*m_server, id, query));
        QVERIFY2(client.waitConnected(), qPrintable(client.describeClose()));
        const int replayed = 6 - replayFrom;
        QVERIFY2(client.waitForEvents(replayed), qPrintable(client.describeClose()));
        for (int i = 0; i < replayed; ++i)
            QCOMPARE(client.events[i], stored[replayFrom - 1 + i]);

        // Live: one event over HTTP, one in-process.
        const ApiReply posted = m_server->send(id, u"live 6"_s);
        QVERIFY2(posted.ok(), posted.body.constData());
        QCOMPARE(publish(*m_server, id, u"live 7"_s), 7);
        QVERIFY2(waitUntil([&] { return client.lastSeq() >= 7 || client.closed; }),
                 qPrintable(client.describeClose()));
        QCOMPARE(client.seqs(), seqRange(replayFrom, 7));
        QCOMPARE(messageText(client.events.last()), u"live 7"_s);
        QCOMPARE(client.events.last(), m_server->events(id).last());
        QVERIFY(client.errors.isEmpty());
        QVERIFY(!client.closed);
    }

    void acceptsDashedAnd32HexIds_data()
    {
        QTest::addColumn<bool>("hex");
        QTest::addRow("dashed") << false;
        QTest::addRow("32 hex") << true;
    }
    void acceptsDashedAnd32HexIds()
    {
        QFETCH(bool, hex);
        QVERIFY(startServer());
        const QUuid id = createEcho();
        QCOMPARE(publish(*m_server, id, u"hello"_s), 1);
        StreamClient client(streamUrl(*m_server, hex ? id.toString(QUuid::Id128) : toWireId(id),
                                      u"resend_all=true"_s));
        QVERIFY2(client.waitForEvents(1), qPrintable(client.describeClose()));
        QCOMPARE(messageText(client.events.first()), u"hello"_s);
    }

    // Replay and live must hand over without interleaving, duplicates or gaps while events are
    // being published during the replay. Publishing runs on every event loop turn from before
    // the socket opens until well after the history has arrived. A budget under the replayed
    // volume makes the replay page and wait for the client to drain, so it spans many event loop
    // turns (and so many publishes); with the default budget the replay is one synchronous burst.
    // Every page of 256 events stays under half the budget: see replayStaysWithinTheBudget for
    // what happens otherwise.
    void replayAndLiveHandOverWhilePublishing_data()
    {
        QTest::addColumn<int>("prefill");
        QTest::addColumn<int>("textSize");
        QTest::addColumn<qint64>("budget");
        QTest::addRow("2000 x 1 KiB, 1 MiB budget") << 2000 << 1024 << qint64(1 << 20);
        QTest::addRow("1000 x 8 KiB, 8 MiB budget") << 1000 << 8 * 1024 << qint64(8 << 20);
        QTest::addRow("3000 x 100 B, default budget") << 3000 << 100 << qint64(16 << 20);
    }
    void replayAndLiveHandOverWhilePublishing()
    {
        QFETCH(int, prefill);
        QFETCH(int, textSize);
        QFETCH(qint64, budget);
        const int liveAfterHistory = 200;
        TestServerOptions options;
        options.streamBudgetBytes = budget;
        QVERIFY(startServer(std::move(options)));
        const QUuid id = createEcho();
        const QString filler(textSize, u'x');
        for (int i = 1; i <= prefill; ++i)
            QCOMPARE(publish(*m_server, id, u"%1 "_s.arg(i) + filler), i);

        int published = 0;
        int publishedWhenHistoryArrived = -1;
        QTimer publisher;
        publisher.setInterval(0);
        connect(&publisher, &QTimer::timeout, this, [&] {
            if (publishedWhenHistoryArrived >= 0 &&
                published >= publishedWhenHistoryArrived + liveAfterHistory) {
                publisher.stop();
                return;
            }
            ++published;
            publish(*m_server, id, u"live %1"_s.arg(published));
        });
        publisher.start();
        StreamClient client(streamUrl(*m_server, id, u"after_seq=0"_s));
        client.onEvent = [&](qint64 seq) {
            if (seq == prefill)
                publishedWhenHistoryArrived = published;
        };
        const auto state = [&]() -> QString {
            return client.describeClose() + u", published %1 live"_s.arg(published);
        };
        QVERIFY2(waitUntil(
                     [&] {
                         return client.closed || (!publisher.isActive() &&
                                                  client.events.size() >= prefill + published);
                     },
                     20'000),
                 qPrintable(state()));
        QVERIFY2(!client.closed, qPrintable(state()));

        const QList<qint64> seqs = client.seqs();
        QCOMPARE(seqs.size(), prefill + published);
        for (int i = 0; i < seqs.size(); ++i) {
            if (seqs[i] != i + 1)
                QFAIL(qPrintable(u"frame %1 has seq %2, expected %3 (previous %4)"_s.arg(i)
                                     .arg(seqs[i])
                                     .arg(i + 1)
                                     .arg(i > 0 ? seqs[i - 1] : 0)));
        }
        QCOMPARE(messageText(client.events.last()), u"live %1"_s.arg(published));
        // Sanity check of the set-up: publishing was already going on while the history was
        // being replayed.
        QVERIFY2(publishedWhenHistoryArrived > 0,
                 qPrintable(
                     u"published when the history arrived: %1"_s.arg(publishedWhenHistoryArrived)));
        QVERIFY(client.errors.isEmpty());
        qInfo("%d live events were published before the last of the %d replayed ones arrived",
              publishedWhenHistoryArrived, prefill);
    }

    // A client that reads as fast as it can must not be dropped by the replay itself. The replay
    // sends a whole page (256 events) without an event loop turn, so unsent bytes cannot go down
    // meanwhile; it waits for a drain only down to half the budget. Either way a page can push a
    // fast client past its budget, and it is closed with 1013 as a "slow consumer".
    void replayStaysWithinTheBudget_data()
    {
        QTest::addColumn<int>("count");
        QTest::addColumn<int>("textSize");
        QTest::addColumn<qint64>("budget");
        // A page of 256 x 8 KiB (about 2.1 MB) is more than the whole budget.
        QTest::addRow("page over the budget") << 300 << 8 * 1024 << qint64(1 << 20);
        // A page (about 310 KB) fits in the budget, but not on top of the half budget the
        // replay leaves unsent before reading the next page.
        QTest::addRow("page over half the budget") << 2000 << 1024 << qint64(512 * 1024);
        // The same with the default budget: events of 70 KiB (a long command output).
        QTest::addRow("default budget, 70 KiB events") << 300 << 70 * 1024 << qint64(16 << 20);
        // Events larger than the whole budget go one at a time, each once the socket drained.
        QTest::addRow("events over the whole budget") << 4 << 200 * 1024 << qint64(64 * 1024);
    }
    void replayStaysWithinTheBudget()
    {
        QFETCH(int, count);
        QFETCH(int, textSize);
        QFETCH(qint64, budget);
        TestServerOptions options;
        options.streamBudgetBytes = budget;
        QVERIFY(startServer(std::move(options)));
        const QUuid id = createEcho();
        const QString filler(textSize, u'x');
        for (int i = 1; i <= count; ++i)
            QCOMPARE(publish(*m_server, id, u"%1 "_s.arg(i) + filler), i);

        StreamClient client(streamUrl(*m_server, id, u"resend_all=true"_s));
        waitUntil([&] { return client.events.size() >= count || client.closed; }, 10'000);
        // (A Qt 6.4 QWebSocket client reports the server's 1013 as 1002: it rejects 1013 as
        // invalid.)
        QVERIFY2(!client.closed,
                 qPrintable(client.describeClose() + u", slow-consumer drops %1"_s.arg(
                                                         metric(*m_server, SlowConsumerDrops))));
        QCOMPARE(client.seqs(), seqRange(1, count));
        QCOMPARE(metric(*m_server, SlowConsumerDrops), 0);
    }

    // Live too: an event larger than the budget reaches a client that has nothing unsent.
    void anEventLargerThanTheBudgetIsDeliveredLive()
    {
        TestServerOptions options;
        options.streamBudgetBytes = 64 * 1024;
        QVERIFY(startServer(std::move(options)));
        const QUuid id = createEcho();
        StreamClient client(streamUrl(*m_server, id, u"after_seq=0"_s));
        QVERIFY(client.waitConnected());
        const QString big(200 * 1024, u'y');
        QCOMPARE(publish(*m_server, id, big), 1);
        QVERIFY2(waitUntil([&] { return !client.events.isEmpty() || client.closed; }, 10'000),
                 qPrintable(client.describeClose()));
        QVERIFY2(!client.closed, qPrintable(client.describeClose()));
        QCOMPARE(messageText(client.events.first()), big);
    }

    void authFrameDecides_data()
    {
        QTest::addColumn<QString>("firstFrame"); // empty: none is sent
        QTest::addColumn<bool>("knownConversation");
        QTest::addColumn<int>("expectedClose"); // 0: the stream works
        const auto auth = [](const QString &key) {
            return compact(QJsonObject{{u"type"_s, u"auth"_s}, {u"session_api_key"_s, key}});
        };
        QTest::addRow("correct key") << auth(u"key-one"_s) << true << 0;
        QTest::addRow("second configured key") << auth(u"key-two"_s) << true << 0;
        QTest::addRow("wrong key") << auth(u"key-three"_s) << true << CloseUnauthorized;
        QTest::addRow("empty key") << auth(QString()) << true << CloseUnauthorized;
        QTest::addRow("no auth frame") << QString() << true << CloseUnauthorized;
        QTest::addRow("message frame instead of auth")
            << compact(TestServer::message(u"sneaky"_s)) << true << CloseUnauthorized;
        // It got an error frame and could send more, each answered, without the key.
        QTest::addRow("not JSON instead of auth") << u"x"_s << true << CloseUnauthorized;
        QTest::addRow("correct key, unknown conversation")
            << auth(u"key-one"_s) << false << CloseNotFound;
        QTest::addRow("wrong key, unknown conversation")
            << auth(u"nope"_s) << false << CloseUnauthorized;
    }
    void authFrameDecides()
    {
        QFETCH(QString, firstFrame);
        QFETCH(bool, knownConversation);
        QFETCH(int, expectedClose);
        TestServerOptions options;
        options.apiKeys = {u"key-one"_s, u"key-two"_s};
        options.streamAuthTimeoutMs = 200;
        QVERIFY(startServer(std::move(options)));
        const QUuid id = knownConversation ? createEcho() : QUuid::createUuid();
        QVERIFY(!id.isNull());
        if (knownConversation) {
            for (int i = 1; i <= 2; ++i) {
                QVERIFY(m_server->send(id, u"before %1"_s.arg(i)).ok());
            }
        }

        StreamClient client(streamUrl(*m_server, id, u"after_seq=0"_s));
        QVERIFY2(client.waitConnected(), qPrintable(client.describeClose()));
        QElapsedTimer sinceConnected;
        sinceConnected.start();
        if (!firstFrame.isEmpty())
            client.sendText(firstFrame);

        if (expectedClose != 0) {
            QVERIFY2(client.waitClosed(5'000), "the server did not close the stream");
            QCOMPARE(client.closeCode, expectedClose);
            QVERIFY(client.events.isEmpty());
            QVERIFY(client.errors.isEmpty()); // nothing is answered before the key
            if (firstFrame.isEmpty())
                QVERIFY2(sinceConnected.elapsed() >= 150,
                         qPrintable(u"closed after %1 ms"_s.arg(sinceConnected.elapsed())));
            return;
        }
        QVERIFY2(client.waitForEvents(2), qPrintable(client.describeClose()));
        client.sendJson(TestServer::message(u"over the socket"_s));
        QVERIFY2(client.waitForEvents(3), qPrintable(client.describeClose()));
        QCOMPARE(client.seqs(), seqRange(1, 3));
        QCOMPARE(messageText(client.events.last()), u"over the socket"_s);
        // Still open well past the auth timeout.
        QVERIFY(!QTest::qWaitFor([&] { return client.closed; }, 400));
        QVERIFY(client.isConnected());
    }

    // OpenHands' client (1.39) gives the key in the URL, ?session_api_key=K, and sends no auth
    // frame: it waited for events that never came, and was closed after the auth timeout.
    void aKeyInTheUrlTakesTheAuthFramesPlace_data()
    {
        QTest::addColumn<QStringList>("serverKeys");
        QTest::addColumn<QString>("urlKey");
        QTest::addColumn<bool>("knownConversation");
        QTest::addColumn<int>("expectedClose"); // 0: the stream works
        const QStringList keys{u"key-one"_s, u"key-two"_s};
        QTest::addRow("correct key") << keys << u"key-two"_s << true << 0;
        QTest::addRow("wrong key") << keys << u"key-three"_s << true << CloseUnauthorized;
        QTest::addRow("empty key") << keys << QString() << true << CloseUnauthorized;
        QTest::addRow("correct key, unknown conversation")
            << keys << u"key-one"_s << false << CloseNotFound;
        QTest::addRow("wrong key, unknown conversation")
            << keys << u"nope"_s << false << CloseUnauthorized;
        QTest::addRow("server without keys") << QStringList() << u"anything"_s << true << 0;
    }
    void aKeyInTheUrlTakesTheAuthFramesPlace()
    {
        QFETCH(QStringList, serverKeys);
        QFETCH(QString, urlKey);
        QFETCH(bool, knownConversation);
        QFETCH(int, expectedClose);
        TestServerOptions options;
        options.apiKeys = serverKeys;
        options.streamAuthTimeoutMs = 1'000;
        QVERIFY(startServer(std::move(options)));
        const QUuid id = knownConversation ? createEcho() : QUuid::createUuid();
        QVERIFY(!id.isNull());
        if (knownConversation)
            QVERIFY(m_server->send(id, u"before"_s).ok());

        QUrlQuery query;
        query.addQueryItem(u"resend_all"_s, u"true"_s);
        query.addQueryItem(u"session_api_key"_s, urlKey);
        QElapsedTimer sinceOpened;
        sinceOpened.start();
        StreamClient client(streamUrl(*m_server, id, query.toString(QUrl::FullyEncoded)));
        if (expectedClose != 0) {
            QVERIFY2(client.waitClosed(5'000), "the server did not close the stream");
            QCOMPARE(client.closeCode, expectedClose);
            QVERIFY(client.events.isEmpty());
            // At once: the key was there to check, no auth frame is waited for.
            QVERIFY2(sinceOpened.elapsed() < 800,
                     qPrintable(u"closed after %1 ms"_s.arg(sinceOpened.elapsed())));
            return;
        }
        QVERIFY2(client.waitForEvents(1), qPrintable(client.describeClose()));
        QCOMPARE(messageText(client.events.first()), u"before"_s);
        client.sendJson(TestServer::message(u"over the socket"_s));
        QVERIFY2(client.waitForEvents(2), qPrintable(client.describeClose()));
        // Still open past the auth timeout.
        QVERIFY(!QTest::qWaitFor([&] { return client.closed; }, 1'200));
        QVERIFY(client.isConnected());
    }

    void httpNeedsTheKeyButHealthDoesNot()
    {
        TestServerOptions options;
        options.apiKeys = {u"key-one"_s};
        QVERIFY(startServer(std::move(options)));
        ServerConnection anonymous(m_server->url());
        const ApiReply search = QCoro::waitFor(anonymous.get(u"/api/conversations/search"_s));
        QCOMPARE(search.status, 401);
        const ApiReply create = QCoro::waitFor(anonymous.post(u"/api/conversations"_s));
        QCOMPARE(create.status, 401);
        ServerConnection wrong(m_server->url());
        wrong.setApiKey(u"key-two"_s);
        QCOMPARE(QCoro::waitFor(wrong.get(u"/api/conversations/search"_s)).status, 401);
        // Without the key /api does not tell which routes exist: no 404 or 405.
        QCOMPARE(QCoro::waitFor(anonymous.get(u"/api/no/such/route"_s)).status, 401);
        QCOMPARE(QCoro::waitFor(anonymous.request("PUT"_ba, u"/api/conversations/search"_s)).status,
                 401);
        QCOMPARE(QCoro::waitFor(anonymous.get(u"/alive"_s)).status, 200);
        QCOMPARE(m_server->get(u"/api/conversations/search"_s).status, 200);
    }

    // The client class the console uses sends the auth frame itself and follows the stream.
    void eventStreamClientAuthenticatesAndFollows()
    {
        TestServerOptions options;
        options.apiKeys = {u"key-one"_s};
        options.streamAuthTimeoutMs = 200;
        QVERIFY(startServer(std::move(options)));
        const QUuid id = createEcho();
        QCOMPARE(publish(*m_server, id, u"one"_s), 1);
        QCOMPARE(publish(*m_server, id, u"two"_s), 2);
        std::unique_ptr<EventStream> stream(m_server->client().openEventStream(id, 1));
        QSignalSpy received(stream.get(), &EventStream::eventReceived);
        QSignalSpy closedByServer(stream.get(), &EventStream::closedByServer);
        QVERIFY(waitUntil([&] { return received.size() >= 1; }));
        stream->sendMessage(MessageRequest{u"user"_s, u"three"_s, false});
        QVERIFY(waitUntil([&] { return received.size() >= 2; }));
        QCOMPARE(received[0][0].value<Event>().seq, 2);
        QCOMPARE(received[1][0].value<Event>().seq, 3);
        QCOMPARE(received[1][0].value<Event>().messageText(), u"three"_s);
        QCOMPARE(stream->lastSeq(), 3);
        QVERIFY(closedByServer.isEmpty());
    }

    void unknownStreamClosesWith4004_data()
    {
        QTest::addColumn<QString>("idPart");
        QTest::addRow("unknown dashed id") << toWireId(QUuid::createUuid());
        QTest::addRow("unknown 32-hex id") << QUuid::createUuid().toString(QUuid::Id128);
        QTest::addRow("not an id") << u"not-a-conversation"_s;
    }
    void unknownStreamClosesWith4004()
    {
        QFETCH(QString, idPart);
        QVERIFY(startServer());
        createEcho(); // a conversation exists, just not this one
        StreamClient client(streamUrl(*m_server, idPart, u"after_seq=0"_s));
        QVERIFY2(client.waitClosed(), "the server did not close the stream");
        QCOMPARE(client.closeCode, CloseNotFound);
        QVERIFY(client.events.isEmpty());
    }

    // A bad after_seq is the client's mistake, not an unknown conversation: clients give up
    // on 4004 ("not found").
    void badAfterSeqClosesWith4022_data()
    {
        QTest::addColumn<QString>("query");
        QTest::addRow("negative") << u"after_seq=-5"_s;
        QTest::addRow("not a number") << u"after_seq=abc"_s;
        QTest::addRow("with a space") << u"after_seq=%201"_s;
        QTest::addRow("too large") << u"after_seq=99999999999999999999"_s;
    }
    void badAfterSeqClosesWith4022()
    {
        QFETCH(QString, query);
        QVERIFY(startServer());
        const QUuid id = createEcho();
        StreamClient client(streamUrl(*m_server, toWireId(id), query));
        QVERIFY2(client.waitClosed(), "the server did not close the stream");
        QCOMPARE(client.closeCode, CloseInvalidParameter);
        QVERIFY(client.events.isEmpty());
    }

    void messageFrameIsStoredAndStreamed()
    {
        QVERIFY(startServer());
        const QUuid id = createEcho();
        StreamClient client(streamUrl(*m_server, id));
        QVERIFY2(client.waitConnected(), qPrintable(client.describeClose()));
        client.sendText(
            uR"({"role":"user","content":[{"type":"text","text":"hello "},{"type":"text","text":"socket"}],"run":false})"_s);
        QVERIFY2(client.waitForEvents(1), qPrintable(client.describeClose()));
        const QJsonObject streamed = client.events.first();
        QCOMPARE(streamed.value(u"seq"_s).toInteger(), 1);
        QCOMPARE(streamed.value(u"kind"_s).toString(), u"MessageEvent"_s);
        QCOMPARE(streamed.value(u"source"_s).toString(), u"user"_s);
        QCOMPARE(streamed.value(u"llm_message"_s).toObject().value(u"role"_s).toString(),
                 u"user"_s);
        QCOMPARE(messageText(streamed), u"hello socket"_s);

        const QList<QJsonObject> stored = m_server->events(id);
        QCOMPARE(stored.size(), 1);
        QCOMPARE(stored.first(), streamed);
        QCOMPARE(m_server->status(id), u"idle"_s); // run: false starts nothing
        QVERIFY(client.errors.isEmpty());
    }

    void badFrameGetsAnErrorFrameAndTheStreamStaysOpen_data()
    {
        QTest::addColumn<QString>("frame");
        QTest::addColumn<QString>("expectedCode");
        // A message frame's JSON in a binary frame, which went unanswered.
        QTest::addRow("binary frame") << u"binary"_s << u"malformed_json"_s;
        QTest::addRow("not JSON") << u"this is not json {"_s << u"malformed_json"_s;
        QTest::addRow("JSON array") << u"[1, 2, 3]"_s << u"malformed_json"_s;
        QTest::addRow("role not allowed")
            << uR"({"role":"robot","content":[{"type":"text","text":"x"}]})"_s
            << u"invalid_parameter"_s;
        QTest::addRow("content missing") << uR"({"role":"user"})"_s << u"invalid_parameter"_s;
        QTest::addRow("content part not text")
            << uR"({"role":"user","content":[{"type":"image","url":"x"}]})"_s
            << u"invalid_parameter"_s;
        QTest::addRow("run not a boolean")
            << uR"({"role":"user","content":[{"type":"text","text":"x"}],"run":"yes"})"_s
            << u"invalid_parameter"_s;
    }
    void badFrameGetsAnErrorFrameAndTheStreamStaysOpen()
    {
        QFETCH(QString, frame);
        QFETCH(QString, expectedCode);
        QVERIFY(startServer());
        const QUuid id = createEcho();
        StreamClient client(streamUrl(*m_server, id));
        QVERIFY2(client.waitConnected(), qPrintable(client.describeClose()));
        client.sendJson(TestServer::message(u"first"_s));
        QVERIFY2(client.waitForEvents(1), qPrintable(client.describeClose()));

        if (frame == u"binary"_s)
            client.sendBinary(QJsonDocument(TestServer::message(u"in binary"_s)).toJson());
        else
            client.sendText(frame);
        QVERIFY2(client.waitForErrors(1), qPrintable(client.describeClose()));
        const QJsonObject error = client.errors.first();
        QCOMPARE(error.value(u"code"_s).toString(), expectedCode);
        QVERIFY(!error.value(u"detail"_s).toString().isEmpty());

        client.sendJson(TestServer::message(u"second"_s));
        QVERIFY2(client.waitForEvents(2), qPrintable(client.describeClose()));
        QCOMPARE(client.seqs(), seqRange(1, 2));
        QCOMPARE(messageText(client.events.last()), u"second"_s);
        QCOMPARE(m_server->events(id).size(), 2); // the bad frame stored nothing
        QCOMPARE(client.errors.size(), 1);
        QVERIFY(client.isConnected());
    }

    // A message frame the service refuses answers with the API's error code, like POST /events,
    // and stores nothing; the stream stays usable.
    void refusedMessageFrameGetsTheApiErrorCode()
    {
        QVERIFY(startServer());
        const QUuid id = createEcho();
        const ApiReply archived =
            m_server->post(ServerConnection::conversationPath(id, u"archive"_s));
        QVERIFY2(archived.ok(), archived.body.constData());
        StreamClient client(streamUrl(*m_server, id));
        QVERIFY2(client.waitConnected(), qPrintable(client.describeClose()));
        client.sendJson(TestServer::message(u"run it"_s, true));
        QVERIFY2(client.waitForErrors(1), qPrintable(client.describeClose()));
        QCOMPARE(client.errors.first().value(u"code"_s).toString(), u"conversation_archived"_s);
        // The archive's own state event only.
        QCOMPARE(m_server->events(id).size(), 1);
        client.sendJson(TestServer::message(u"just store it"_s, false));
        QVERIFY2(client.waitForEvents(1), qPrintable(client.describeClose()));
        QCOMPARE(messageText(client.events.first()), u"just store it"_s);
        QCOMPARE(m_server->events(id).size(), 2);
        QVERIFY(client.isConnected());
    }

    // A conversation deleted under an open stream: a message frame is refused with not_found
    // (or the server has closed the stream with 4004), and nothing is stored anywhere.
    void messageFrameForADeletedConversationIsRefused()
    {
        QVERIFY(startServer());
        const QUuid id = createEcho();
        const QUuid other = createEcho();
        StreamClient client(streamUrl(*m_server, id));
        QVERIFY2(client.waitConnected(), qPrintable(client.describeClose()));
        QVERIFY(m_server->call("DELETE"_ba, ServerConnection::conversationPath(id)).ok());
        client.sendJson(TestServer::message(u"into the void"_s));
        QVERIFY2(client.waitForErrors(1) || client.closed, qPrintable(client.describeClose()));
        if (client.closed)
            QCOMPARE(client.closeCode, CloseNotFound);
        else
            QCOMPARE(client.errors.first().value(u"code"_s).toString(), u"not_found"_s);
        QVERIFY(client.events.isEmpty());
        QCOMPARE(m_server->get(ServerConnection::conversationPath(id)).status, 404);
        QVERIFY(m_server->events(other).isEmpty());
    }

    // Deleting a conversation ends its streams with 4004 (a follower learns it is gone).
    void deletingAConversationClosesItsStreams()
    {
        QVERIFY(startServer());
        const QUuid id = createEcho();
        const QUuid other = createEcho();
        StreamClient doomed(streamUrl(*m_server, id));
        StreamClient bystander(streamUrl(*m_server, other));
        QVERIFY2(doomed.waitConnected(), qPrintable(doomed.describeClose()));
        QVERIFY2(bystander.waitConnected(), qPrintable(bystander.describeClose()));
        QVERIFY(m_server->call("DELETE"_ba, ServerConnection::conversationPath(id)).ok());
        QVERIFY2(doomed.waitClosed(), qPrintable(doomed.describeClose()));
        QCOMPARE(doomed.closeCode, CloseNotFound);
        QVERIFY(bystander.isConnected());
    }

    // With keys configured a stream tells nothing before its auth frame, not even that its
    // conversation was deleted: 4004 at once had an anonymous socket tell a real id from an
    // unknown one.
    void deletionIsToldOnlyAfterAuth()
    {
        TestServerOptions options;
        options.apiKeys = {u"key-one"_s};
        options.streamAuthTimeoutMs = 300;
        QVERIFY(startServer(std::move(options)));
        const QUuid id = createEcho();
        StreamClient silent(streamUrl(*m_server, id));
        StreamClient late(streamUrl(*m_server, id));
        QVERIFY2(silent.waitConnected(), qPrintable(silent.describeClose()));
        QVERIFY2(late.waitConnected(), qPrintable(late.describeClose()));
        QVERIFY(m_server->call("DELETE"_ba, ServerConnection::conversationPath(id)).ok());
        late.sendText(
            compact(QJsonObject{{u"type"_s, u"auth"_s}, {u"session_api_key"_s, u"key-one"_s}}));
        QVERIFY2(late.waitClosed(), qPrintable(late.describeClose()));
        QCOMPARE(late.closeCode, CloseNotFound);
        QVERIFY2(silent.waitClosed(), qPrintable(silent.describeClose()));
        QCOMPARE(silent.closeCode, CloseUnauthorized);
    }

    // A wedged consumer is dropped with 1013 once over its budget; publishing never waits for it
    // and a normal subscriber of the same conversation gets everything.
    void slowConsumerIsDroppedWithoutStallingPublishers()
    {
        TestServerOptions options;
        options.streamBudgetBytes = 4 << 20;
        QVERIFY(startServer(std::move(options)));
        const QUuid id = createEcho();

        WedgedClient wedged;
        QVERIFY(wedged.open(m_server->url(), u"/sockets/events/"_s + toWireId(id)));
        StreamClient normal(streamUrl(*m_server, id));
        QVERIFY2(normal.waitConnected(), qPrintable(normal.describeClose()));
        QCOMPARE(metric(*m_server, SlowConsumerDrops), 0);

        const int count = 500;
        const QString filler(64 * 1024, u'x');
        QElapsedTimer loop;
        loop.start();
        qint64 slowestPublishMs = 0;
        for (int i = 1; i <= count; ++i) {
            QElapsedTimer one;
            one.start();
            QCOMPARE(publish(*m_server, id, u"%1 "_s.arg(i) + filler), i);
            slowestPublishMs = std::max(slowestPublishMs, one.elapsed());
            // Pace on the normal subscriber only (a reader that keeps up), never on the wedged one.
            QVERIFY2(waitUntil([&] { return normal.events.size() >= i - 8 || normal.closed; }),
                     qPrintable(normal.describeClose()));
        }
        const qint64 loopMs = loop.elapsed();
        QVERIFY2(normal.waitForEvents(count), qPrintable(normal.describeClose()));
        QCOMPARE(normal.seqs(), seqRange(1, count));
        QVERIFY2(!normal.closed, qPrintable(normal.describeClose()));
        QVERIFY2(slowestPublishMs < 1'000,
                 qPrintable(u"a publish took %1 ms"_s.arg(slowestPublishMs)));
        QVERIFY2(loopMs < 15'000, qPrintable(u"publishing took %1 ms"_s.arg(loopMs)));

        QCOMPARE(metric(*m_server, SlowConsumerDrops), 1);
        // The wedged client, reading again, finds a 1013 close frame after what its kernel
        // held: the frames the server had queued for it were dropped, not sent before it.
        wedged.resumeReading();
        QVERIFY2(waitUntil([&] { return wedged.finished(); }, 10'000),
                 "the wedged connection was not closed");
        QCOMPARE(wedged.closeCode, CloseSlowConsumer);
        QCOMPARE(wedged.closeReason, u"slow_consumer"_s);
        QVERIFY(wedged.textFrames < count);
        qInfo(
            "publishing %d x 64 KiB took %lld ms (slowest %lld ms); wedged got %d frames, close %d",
            count, loopMs, slowestPublishMs, wedged.textFrames, wedged.closeCode);
    }

    // Unsent bytes are bounded for the whole server, not only per connection: one wedged
    // subscriber on each of several conversations stays within its own budget, and together
    // they pass the server's. The one furthest behind goes first; a subscriber that reads
    // keeps getting everything.
    void theServerWideBudgetDropsTheSlowestConsumers()
    {
        constexpr qint64 Total = 8 << 20;
        TestServerOptions options;
        options.streamBudgetBytes = 16 << 20; // never reached: the server's budget is smaller
        options.streamTotalBudgetBytes = Total;
        QVERIFY(startServer(std::move(options)));
        constexpr int Conversations = 4;
        QList<QUuid> ids;
        std::vector<std::unique_ptr<WedgedClient>> wedged;
        for (int i = 0; i < Conversations; ++i) {
            ids.append(createEcho());
            auto &client = wedged.emplace_back(std::make_unique<WedgedClient>());
            QVERIFY(client->open(m_server->url(), u"/sockets/events/"_s + toWireId(ids.last())));
        }
        StreamClient normal(streamUrl(*m_server, ids.first()));
        QVERIFY2(normal.waitConnected(), qPrintable(normal.describeClose()));
        QVERIFY(waitUntil([&] {
            return metric(*m_server, "agentdeck_websocket_connections"_ba) == Conversations + 1;
        }));

        const QString filler(64 * 1024, u'x');
        qint64 most = 0;
        int published = 0;
        // Round the conversations until every wedged one is dropped: each holds at most what the
        // server's budget leaves it, far below its own.
        for (int round = 1; round <= 200; ++round) {
            for (const QUuid &id : std::as_const(ids))
                publish(*m_server, id, u"%1 "_s.arg(round) + filler);
            ++published;
            QVERIFY2(waitUntil([&] { return normal.events.size() >= published || normal.closed; }),
                     qPrintable(normal.describeClose()));
            most = std::max(most, metric(*m_server, "agentdeck_websocket_unsent_bytes"_ba));
            if (metric(*m_server, SlowConsumerDrops) == Conversations)
                break;
        }
        QCOMPARE(metric(*m_server, SlowConsumerDrops), Conversations);
        QVERIFY2(!normal.closed, qPrintable(normal.describeClose()));
        QCOMPARE(normal.seqs(), seqRange(1, published));
        // The budget, plus at most a frame and the sockets' own buffers.
        QVERIFY2(most <= Total + 5 * (64 * 1024 + 64) + 5 * 64 * 1024,
                 qPrintable(u"%1 bytes unsent at most"_s.arg(most)));
        for (const auto &client : wedged) {
            client->resumeReading();
            QVERIFY2(waitUntil([&] { return client->finished(); }, 10'000),
                     "a wedged connection was not closed");
            QCOMPARE(client->closeCode, CloseSlowConsumer);
        }
        qInfo("%d rounds of %d events of 64 KiB; at most %lld bytes unsent on the server",
              published, Conversations, most);
    }
};

QTEST_GUILESS_MAIN(ApiWebSocketTest)
#include "tst_api_websocket.moc"
