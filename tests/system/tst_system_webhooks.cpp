// --webhook against a receiver of the test's own on 127.0.0.1: the audit log's changes made
// arrive signed and in order; a receiver that fails and recovers gets them all, without a
// second copy of one it acknowledged; one that stalls slows no request and is tried again; a
// SIGKILL loses nothing; a failing webhook shows in /server_info and /metrics; bad options stop
// the start.
#include <QCryptographicHash>
#include <QElapsedTimer>
#include <QHash>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMessageAuthenticationCode>
#include <QPointer>
#include <QTcpServer>
#include <QTcpSocket>
#include <QTemporaryDir>
#include <QTest>

#include "postgrescluster.h"
#include "serverprocess.h"

using namespace Qt::StringLiterals;
using namespace AgentDeck::Testing;

namespace {

constexpr QByteArrayView Secret = "webhook-test-secret";

// A plain HTTP/1.1 receiver: records every request it gets, and answers 200, 500 or nothing.
class Receiver : public QObject
{
public:
    enum class Mode
    {
        Accept,
        Fail,
        Stall
    };
    struct Request
    {
        QByteArray path;
        QByteArray delivery;
        QByteArray signature;
        QByteArray body;
        bool acknowledged = false;

        QJsonObject json() const { return QJsonDocument::fromJson(body).object(); }
    };

    Receiver()
    {
        m_server.listen(QHostAddress::LocalHost, 0);
        connect(&m_server, &QTcpServer::newConnection, this, [this] {
            while (QTcpSocket *socket = m_server.nextPendingConnection()) {
                m_sockets.append(socket);
                connect(socket, &QTcpSocket::readyRead, this, [this, socket] { read(socket); });
            }
        });
    }
    ~Receiver() override
    {
        for (const QPointer<QTcpSocket> &socket : std::as_const(m_sockets))
            delete socket.get();
    }

    QString url(const QString &path = u"/hook"_s) const
    {
        return u"http://127.0.0.1:%1%2"_s.arg(m_server.serverPort()).arg(path);
    }

    Mode mode = Mode::Accept;
    QList<Request> requests;

    // The records acknowledged at `path`, in the order they were.
    QList<Request> acknowledged(const QByteArray &path = "/hook") const
    {
        QList<Request> list;
        for (const Request &request : requests)
            if (request.acknowledged && request.path == path)
                list.append(request);
        return list;
    }
    int attemptsOf(const QByteArray &delivery) const
    {
        return int(std::count_if(requests.cbegin(), requests.cend(), [&](const Request &request) {
            return request.delivery == delivery;
        }));
    }

private:
    void read(QTcpSocket *socket)
    {
        QByteArray &buffer = m_buffers[socket];
        buffer += socket->readAll();
        for (;;) {
            const qsizetype end = buffer.indexOf("\r\n\r\n");
            if (end < 0)
                return;
            const QList<QByteArray> lines = buffer.left(end).split('\n');
            Request request;
            request.path = lines.value(0).split(' ').value(1).split('?').value(0);
            qsizetype length = 0;
            for (const QByteArray &line : lines.mid(1)) {
                const qsizetype colon = line.indexOf(':');
                const QByteArray name = line.left(colon).trimmed().toLower();
                const QByteArray value = line.mid(colon + 1).trimmed();
                if (name == "content-length")
                    length = value.toLongLong();
                else if (name == "x-agentdeck-delivery")
                    request.delivery = value;
                else if (name == "x-agentdeck-signature")
                    request.signature = value;
            }
            if (buffer.size() < end + 4 + length)
                return;
            request.body = buffer.mid(end + 4, length);
            buffer.remove(0, end + 4 + length);
            switch (mode) {
            case Mode::Accept:
                request.acknowledged = true;
                socket->write("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
                break;
            case Mode::Fail:
                socket->write("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n");
                break;
            case Mode::Stall:
                break;
            }
            requests.append(request);
        }
    }

    QTcpServer m_server;
    QList<QPointer<QTcpSocket>> m_sockets;
    QHash<QTcpSocket *, QByteArray> m_buffers;
};

QList<QByteArray> deliveriesOf(const QList<Receiver::Request> &requests)
{
    QList<QByteArray> ids;
    for (const Receiver::Request &request : requests)
        ids.append(request.delivery);
    return ids;
}

QJsonObject firstWebhook(ServerProcess &server)
{
    return server.get(u"/server_info"_s).object().value(u"webhooks"_s).toArray().at(0).toObject();
}

} // namespace

class SystemWebhooksTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        QString problem;
        QVERIFY2(m_fleet.findBinary(&problem), qPrintable(problem));
        QVERIFY(m_secretDir.isValid());
        m_secretFile = m_secretDir.filePath(u"webhook.secret"_s);
        QFile file(m_secretFile);
        QVERIFY(file.open(QIODevice::WriteOnly));
        // The line break an editor or `echo` leaves is not part of the key.
        file.write(Secret.toByteArray() + "\n");
    }
    void cleanup() { m_fleet.cleanUp(); }

    // Each change made, as its record's JSON, signed over the exact body, in number order, its
    // id the delivery header; refused attempts are not sent; a filter sends only its actions.
    void deliversSignedRecordsInOrder()
    {
        Receiver receiver;
        ServerProcess &server =
            startWith({receiver.url(), receiver.url(u"/archives#actions=archive"_s)});
        QList<QUuid> ids;
        for (int i = 0; i < 3; ++i) {
            ids.append(server.create(QJsonObject{{u"title"_s, u"w%1"_s.arg(i)}}));
            QVERIFY(!ids.constLast().isNull());
        }
        QVERIFY(server.post(conversationPath(ids.at(1), u"archive"_s)).ok());
        // Refused: recorded in the audit log, not a change made.
        QCOMPARE(server.post(conversationPath(QUuid::createUuid(), u"archive"_s)).status, 404);
        QTRY_COMPARE_WITH_TIMEOUT(receiver.acknowledged().size(), 4, 10'000);
        QTRY_COMPARE_WITH_TIMEOUT(receiver.acknowledged("/archives").size(), 1, 10'000);

        const QList<Receiver::Request> all = receiver.acknowledged();
        QStringList actions;
        qint64 previous = 0;
        for (const Receiver::Request &request : all) {
            QCOMPARE(request.signature,
                     "sha256=" + QMessageAuthenticationCode::hash(
                                     request.body, Secret.toByteArray(), QCryptographicHash::Sha256)
                                     .toHex());
            const QJsonObject record = request.json();
            QCOMPARE(record.value(u"id"_s).toString().toUtf8(), request.delivery);
            QVERIFY2(request.delivery.toLongLong() > previous, request.delivery.constData());
            previous = request.delivery.toLongLong();
            QCOMPARE(record.value(u"result"_s).toString(), u"done"_s);
            actions.append(record.value(u"action"_s).toString());
        }
        QCOMPARE(actions, (QStringList{u"create"_s, u"create"_s, u"create"_s, u"archive"_s}));
        QCOMPARE(all.at(3).json().value(u"conversation_id"_s).toString(), wireId(ids.at(1)));
        // The same record as the audit log answers it.
        QJsonObject audited;
        for (const QJsonValue item :
             server.get(u"/api/audit"_s).object().value(u"items"_s).toArray())
            if (item.toObject().value(u"id"_s).toString().toUtf8() == all.at(3).delivery)
                audited = item.toObject();
        QCOMPARE(all.at(3).json(), audited);
        QCOMPARE(receiver.acknowledged("/archives").at(0).body, all.at(3).body);
        QTRY_COMPARE(firstWebhook(server).value(u"state"_s).toString(), u"ok"_s);
        QCOMPARE(firstWebhook(server).value(u"url"_s).toString(), receiver.url());
    }

    // 500s are tried again with backoff; once the receiver recovers it gets every record, in
    // order, and the one it acknowledged before is never sent again. Meanwhile the webhook is
    // reported failing in /server_info and /metrics.
    void failingReceiverRecoversWithoutDuplicates()
    {
        Receiver receiver;
        ServerProcess &server = startWith(
            {u"http://user:password@"_s + receiver.url().mid(7) + u"?token=query-secret"_s});
        QVERIFY(!server.create({}).isNull());
        QTRY_COMPARE_WITH_TIMEOUT(receiver.acknowledged().size(), 1, 10'000);
        const QByteArray first = receiver.acknowledged().at(0).delivery;

        receiver.mode = Receiver::Mode::Fail;
        QVERIFY(!server.create({}).isNull());
        QVERIFY(!server.create({}).isNull());
        QTRY_VERIFY_WITH_TIMEOUT(receiver.requests.size() >= 5, 10'000);
        QTRY_COMPARE_WITH_TIMEOUT(firstWebhook(server).value(u"state"_s).toString(), u"failing"_s,
                                  10'000);
        const QJsonObject failing = firstWebhook(server);
        QCOMPARE(failing.value(u"last_error"_s).toString(), u"HTTP 500"_s);
        QVERIFY(!failing.value(u"failing_since"_s).toString().isEmpty());
        QCOMPARE(failing.value(u"pending"_s).toInteger(), 2);
        // Neither the credentials nor the query of the URL are shown.
        const QString url = failing.value(u"url"_s).toString();
        QCOMPARE(url, receiver.url());
        const QByteArray metrics = server.get(u"/metrics"_s).body;
        const QByteArray labels = "{webhook=\"1\",url=\"" + url.toUtf8() + "\"}";
        QVERIFY2(metrics.contains(QByteArray("agentdeck_webhook_failing" + labels + " 1")),
                 metrics.constData());
        QVERIFY2(metrics.contains(QByteArray("agentdeck_webhook_pending" + labels + " 2")),
                 metrics.constData());
        QVERIFY2(metrics.contains(QByteArray("agentdeck_webhook_delivered_total" + labels + " 1")),
                 metrics.constData());
        QVERIFY2(!metrics.contains("password") && !metrics.contains("query-secret"),
                 metrics.constData());

        receiver.mode = Receiver::Mode::Accept;
        QTRY_COMPARE_WITH_TIMEOUT(receiver.acknowledged().size(), 3, 10'000);
        const QList<QByteArray> delivered = deliveriesOf(receiver.acknowledged());
        QCOMPARE(delivered.at(0), first);
        QVERIFY(delivered.at(0).toLongLong() < delivered.at(1).toLongLong());
        QVERIFY(delivered.at(1).toLongLong() < delivered.at(2).toLongLong());
        QCOMPARE(receiver.attemptsOf(first), 1);
        // The third was not sent while the second failed: one at a time, in order.
        QCOMPARE(receiver.attemptsOf(delivered.at(2)), 1);
        QTRY_COMPARE(firstWebhook(server).value(u"state"_s).toString(), u"ok"_s);
        QCOMPARE(firstWebhook(server).value(u"pending"_s).toInteger(), 0);
    }

    // A receiver that takes the request and never answers holds nothing else: API requests are
    // as quick as ever meanwhile, and the record is posted again after the timeout.
    void stallingReceiverSlowsNoRequest()
    {
        Receiver receiver;
        receiver.mode = Receiver::Mode::Stall;
        ServerProcess &server =
            startWith({receiver.url()}, u"timeout_ms=3000,retry_ms=50,max_retry_ms=200"_s);
        QVERIFY(!server.create({}).isNull());
        QTRY_COMPARE_WITH_TIMEOUT(receiver.requests.size(), 1, 10'000);
        const QByteArray stalled = receiver.requests.at(0).delivery;
        qint64 slowest = 0;
        int created = 1;
        for (; created <= 10 && receiver.requests.size() == 1; ++created) {
            QElapsedTimer timer;
            timer.start();
            QVERIFY(!server.create({}).isNull());
            QVERIFY(server.get(u"/api/conversations/search"_s).ok());
            slowest = std::max(slowest, timer.elapsed());
        }
        QVERIFY2(receiver.requests.size() == 1, "the stalled post was let go too early");
        // The post waits 3 s for an answer; a request that waited for it would take as long.
        QVERIFY2(slowest < 1000, qPrintable(u"a create and a search took %1 ms"_s.arg(slowest)));

        QTRY_COMPARE_WITH_TIMEOUT(receiver.attemptsOf(stalled), 2, 10'000);
        QCOMPARE(firstWebhook(server).value(u"last_error"_s).toString(),
                 u"no answer within 3000 ms"_s);
        receiver.mode = Receiver::Mode::Accept;
        QTRY_COMPARE_WITH_TIMEOUT(receiver.acknowledged().size(), created, 20'000);
        QCOMPARE(receiver.acknowledged().at(0).delivery, stalled);
    }

    // The cursor is in the catalog: after a SIGKILL the records not acknowledged are delivered
    // by the next start, and those acknowledged are not sent again.
    void killedServerDeliversTheRestAfterRestart()
    {
        Receiver receiver;
        const QString dataDir = m_fleet.newDataDir();
        ServerProcess &server = startWith({receiver.url()}, {}, dataDir);
        QVERIFY(!server.create({}).isNull());
        QVERIFY(!server.create({}).isNull());
        QTRY_COMPARE_WITH_TIMEOUT(receiver.acknowledged().size(), 2, 10'000);

        receiver.mode = Receiver::Mode::Fail;
        QVERIFY(!server.create({}).isNull());
        QVERIFY(!server.create({}).isNull());
        QTRY_COMPARE_WITH_TIMEOUT(
            server.get(u"/api/audit"_s).object().value(u"items"_s).toArray().size(), 4, 10'000);
        QTRY_VERIFY_WITH_TIMEOUT(receiver.requests.size() >= 4, 10'000);
        server.sendSignal(SIGKILL);
        QVERIFY(server.waitForExit(10'000));

        const QList<QByteArray> before = deliveriesOf(receiver.acknowledged());
        receiver.mode = Receiver::Mode::Accept;
        ServerProcess &again = startWith({receiver.url()}, {}, dataDir);
        QTRY_COMPARE_WITH_TIMEOUT(receiver.acknowledged().size(), 4, 10'000);
        const QList<QByteArray> delivered = deliveriesOf(receiver.acknowledged());
        QCOMPARE(delivered.mid(0, 2), before);
        for (const QByteArray &id : before)
            QCOMPARE(receiver.attemptsOf(id), 1);
        QVERIFY(delivered.at(1).toLongLong() < delivered.at(2).toLongLong());
        QVERIFY(delivered.at(2).toLongLong() < delivered.at(3).toLongLong());
        QTRY_COMPARE(firstWebhook(again).value(u"state"_s).toString(), u"ok"_s);
    }

    // A record failing for longer than the retry window is given up, counted and logged, and
    // the records after it are delivered.
    void givesUpARecordAfterTheRetryWindow()
    {
        Receiver receiver;
        receiver.mode = Receiver::Mode::Fail;
        ServerProcess &server =
            startWith({receiver.url()}, u"retry_ms=50,max_retry_ms=100,give_up_ms=600"_s);
        QVERIFY(!server.create({}).isNull());
        QTRY_VERIFY_WITH_TIMEOUT(receiver.requests.size() >= 2, 10'000);
        const QByteArray lost = receiver.requests.at(0).delivery;
        QTRY_VERIFY_WITH_TIMEOUT(
            server.stderrText().contains(u"gave up audit record "_s + QString::fromUtf8(lost)),
            10'000);
        QCOMPARE(firstWebhook(server).value(u"given_up"_s).toInteger(), 1);
        QVERIFY(
            server.get(u"/metrics"_s)
                .body.contains(QByteArray("agentdeck_webhook_given_up_total{webhook=\"1\",url=\"" +
                                          receiver.url().toUtf8() + "\"} 1")));
        receiver.mode = Receiver::Mode::Accept;
        QVERIFY(!server.create({}).isNull());
        QTRY_COMPARE_WITH_TIMEOUT(receiver.acknowledged().size(), 1, 10'000);
        QVERIFY(receiver.acknowledged().at(0).delivery.toLongLong() > lost.toLongLong());
        QTRY_COMPARE(firstWebhook(server).value(u"state"_s).toString(), u"ok"_s);
    }

    // On PostgreSQL every replica with the webhook could deliver it; one does at a time, and
    // when it is killed another takes over once its lease lapses, from its cursor.
    void oneReplicaDeliversOnPostgres()
    {
        QString error;
        if (!m_cluster) {
            m_cluster = std::make_unique<PostgresCluster>();
            QVERIFY2(m_cluster->start(&error), qPrintable(error));
        }
        const QUrl database = m_cluster->createDatabase(u"webhooks"_s, &error);
        QVERIFY2(database.isValid(), qPrintable(error));
        Receiver receiver;
        const auto replica = [&](const QString &name) -> ServerProcess & {
            return startWith({receiver.url()}, u"retry_ms=50,max_retry_ms=100,lease_ms=1500"_s, {},
                             {u"--database"_s, database.toString(), u"--replica-id"_s, name,
                              u"--runtime"_s, u"process"_s});
        };
        ServerProcess &a = replica(u"a"_s);
        ServerProcess &b = replica(u"b"_s);
        for (int i = 0; i < 3; ++i) {
            QVERIFY(!a.create({}).isNull());
            QVERIFY(!b.create({}).isNull());
        }
        QTRY_COMPARE_WITH_TIMEOUT(receiver.acknowledged().size(), 6, 10'000);
        const QJsonObject atA = firstWebhook(a);
        const QJsonObject atB = firstWebhook(b);
        const QString holder = atA.value(u"delivering_replica"_s).toString();
        QVERIFY2(holder == u"a"_s || holder == u"b"_s, qPrintable(holder));
        QCOMPARE(QStringList({atA.value(u"state"_s).toString(), atB.value(u"state"_s).toString()}),
                 holder == u"a"_s ? QStringList({u"ok"_s, u"standby"_s})
                                  : QStringList({u"standby"_s, u"ok"_s}));

        receiver.mode = Receiver::Mode::Fail;
        ServerProcess &holding = holder == u"a"_s ? a : b;
        ServerProcess &other = holder == u"a"_s ? b : a;
        QVERIFY(!other.create({}).isNull());
        QTRY_VERIFY_WITH_TIMEOUT(receiver.requests.size() >= 8, 10'000);
        holding.sendSignal(SIGKILL);
        QVERIFY(holding.waitForExit(10'000));
        receiver.mode = Receiver::Mode::Accept;
        QTRY_COMPARE_WITH_TIMEOUT(receiver.acknowledged().size(), 7, 15'000);
        QTRY_COMPARE(firstWebhook(other).value(u"state"_s).toString(), u"ok"_s);
        QCOMPARE(firstWebhook(other).value(u"delivering_replica"_s).toString(),
                 holder == u"a"_s ? u"b"_s : u"a"_s);
        // Every record once, in number order.
        const QList<QByteArray> delivered = deliveriesOf(receiver.acknowledged());
        for (qsizetype i = 1; i < delivered.size(); ++i)
            QVERIFY2(delivered.at(i - 1).toLongLong() < delivered.at(i).toLongLong(),
                     delivered.join(' ').constData());
    }

    void refusesBadOptions_data()
    {
        QTest::addColumn<QStringList>("arguments");
        QTest::addColumn<QString>("words");
        const QString secret = u"--webhook-secret-file"_s;
        const QString takes = u"--webhook takes an http(s) URL"_s;
        QTest::addRow("not a URL")
            << QStringList{u"--webhook"_s, u"hooks example"_s, secret, m_secretFile} << takes;
        QTest::addRow("not http") << QStringList{u"--webhook"_s, u"ftp://127.0.0.1/x"_s, secret,
                                                 m_secretFile}
                                  << takes;
        QTest::addRow("no host") << QStringList{u"--webhook"_s, u"http:///x"_s, secret,
                                                m_secretFile}
                                 << takes;
        QTest::addRow("unknown filter")
            << QStringList{u"--webhook"_s, u"http://127.0.0.1:9/x#colors=red"_s, secret,
                           m_secretFile}
            << takes;
        QTest::addRow("no secret file") << QStringList{u"--webhook"_s, u"http://127.0.0.1:9/x"_s}
                                        << u"--webhook needs --webhook-secret-file"_s;
        QTest::addRow("missing secret file")
            << QStringList{u"--webhook"_s, u"http://127.0.0.1:9/x"_s, secret,
                           m_secretDir.filePath(u"absent"_s)}
            << u"--webhook-secret-file: cannot read"_s;
        QTest::addRow("empty secret file")
            << QStringList{u"--webhook"_s, u"http://127.0.0.1:9/x"_s, secret, emptyFile()}
            << u"is empty"_s;
    }
    void refusesBadOptions()
    {
        QFETCH(QStringList, arguments);
        QFETCH(QString, words);
        ServerProcess &server = m_fleet.add({}, arguments);
        QVERIFY2(!server.start(), qPrintable(u"it started: "_s + server.stderrText()));
        QVERIFY(server.waitForExit(StartTimeoutMs));
        QCOMPARE(server.exitCode(), 2);
        QVERIFY2(server.stderrText().contains(words), qPrintable(server.stderrText()));
    }

private:
    ServerProcess &startWith(const QStringList &webhooks,
                             const QString &timing = u"retry_ms=50,max_retry_ms=200"_s,
                             const QString &dataDir = {}, const QStringList &more = {})
    {
        QStringList arguments = QStringList{u"--webhook-secret-file"_s, m_secretFile} + more;
        for (const QString &webhook : webhooks)
            arguments << u"--webhook"_s << webhook;
        ServerProcess &server = m_fleet.add(dataDir, arguments);
        server.setEnvironmentVariable(
            u"AGENTDECK_TEST_WEBHOOK_TIMING"_s,
            (timing.isEmpty() ? u"retry_ms=50,max_retry_ms=200"_s : timing) + u",poll_ms=200"_s);
        if (!server.startReady())
            qWarning().noquote() << server.stderrText();
        return server;
    }
    QString emptyFile()
    {
        const QString path = m_secretDir.filePath(u"empty.secret"_s);
        QFile file(path);
        if (file.open(QIODevice::WriteOnly))
            file.write("\n");
        return path;
    }

    ServerFleet m_fleet;
    std::unique_ptr<PostgresCluster> m_cluster;
    QTemporaryDir m_secretDir;
    QString m_secretFile;
};

QTEST_GUILESS_MAIN(SystemWebhooksTest)
#include "tst_system_webhooks.moc"
