// The lifecycle feed /sockets/lifecycle against an in-process server: the audit log's records
// of changes made, in order, as GET /api/audit gives them; resuming after a record's id across
// a reconnect and a restart with no gap and no duplicate; filters; the key check; bad cursors
// refused cleanly; a client that never reads dropped within the send bounds. On SQLite, and on
// PostgreSQL (tst_api_lifecycle_postgres). Replicas and the real binary: tst_system_lifecycle.
#include "agentdeckserver.h"
#include "feedrecorder.h"
#include "storage/auditlog.h"
#include "testserver.h"
#include "wiretypes.h"

#include <QJsonArray>
#include <QTcpSocket>
#include <QTemporaryDir>
#include <QTest>

using namespace Qt::StringLiterals;
using namespace AgentDeck;
using namespace AgentDeck::Testing;

namespace {
constexpr int CloseUnauthorized = 4001;
constexpr int CloseInvalidParameter = 4022;
constexpr int CloseSlowConsumer = 1013;

QUrlQuery after(qint64 id)
{
    return QUrlQuery{{u"after"_s, QString::number(id)}};
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
} // namespace

class TestApiLifecycle : public QObject
{
    Q_OBJECT

    std::unique_ptr<TestServer> m_server;

    bool start(TestServerOptions options = {})
    {
        m_server = std::make_unique<TestServer>(std::move(options));
        if (!m_server->start()) {
            qWarning().noquote() << "the server did not start:" << m_server->errorString();
            return false;
        }
        return true;
    }

    QList<QJsonObject> auditedChanges() { return Testing::auditedChanges(*m_server); }

    // Makes one change of each kind to a new conversation: create, update, archive, unarchive,
    // delete; plus an attempt that is refused (no change: not in the feed).
    QUuid makeChanges()
    {
        const QUuid id = m_server->create();
        if (id.isNull())
            return {};
        const QString path = ServerConnection::conversationPath(id);
        m_server->call("PATCH", path, QJsonObject{{u"title"_s, u"renamed"_s}});
        m_server->post(path + u"/archive"_s);
        m_server->post(path + u"/unarchive"_s);
        m_server->post(path + u"/runtime/start_fresh"_s); // refused: not archived
        m_server->call("DELETE", path);
        return id;
    }

private Q_SLOTS:
    void cleanup()
    {
        if (m_server)
            m_server->stop();
        m_server.reset();
    }

    // Each change made arrives as one frame, the record GET /api/audit gives; a refused attempt
    // is no change and does not.
    void changesArriveAsTheirRecords()
    {
        QVERIFY(start());
        m_server->create(); // before the feed: not sent to a client that gave no cursor
        FeedRecorder feed(m_server->url());
        QVERIFY2(feed.waitConnected(), qPrintable(feed.describe()));
        const QUuid id = makeChanges();
        QVERIFY(!id.isNull());
        const QStringList expected{u"create"_s, u"update"_s, u"archive"_s, u"unarchive"_s,
                                   u"delete"_s};
        QVERIFY2(feed.waitForRecords(expected.size()), qPrintable(feed.describe()));
        QCOMPARE(feed.actions(), expected);
        const QList<QJsonObject> audited = auditedChanges();
        QCOMPARE(feed.records, audited.mid(audited.size() - expected.size()));
        for (const QJsonObject &record : std::as_const(feed.records))
            QCOMPARE(record.value(u"conversation_id"_s).toString(), toWireId(id));
        QVERIFY(!feed.closed);
    }

    // after=0: everything kept; after=ID: exactly what follows ID, though it was written while
    // no client was connected.
    void resumingAfterAnIdGivesExactlyTheMissingRecords()
    {
        QVERIFY(start());
        FeedRecorder first(m_server->url(), after(0));
        QVERIFY(!makeChanges().isNull());
        QVERIFY2(first.waitForRecords(5), qPrintable(first.describe()));
        const qint64 seen = first.records.at(2).value(u"id"_s).toString().toLongLong();
        first.close();

        QVERIFY(!makeChanges().isNull());
        FeedRecorder resumed(m_server->url(), after(seen));
        QVERIFY(!makeChanges().isNull());
        const QList<QJsonObject> audited = auditedChanges();
        QCOMPARE(audited.size(), 15);
        QVERIFY2(resumed.waitForRecords(12), qPrintable(resumed.describe()));
        QCOMPARE(resumed.records, audited.mid(3));

        FeedRecorder everything(m_server->url(), after(0));
        QVERIFY2(everything.waitForRecords(15), qPrintable(everything.describe()));
        QCOMPARE(everything.records, audited);
        // Nothing more, and no repeat, once a later change wakes the streams again.
        m_server->create();
        QVERIFY2(everything.waitForRecords(16), qPrintable(everything.describe()));
        QVERIFY2(resumed.waitForRecords(13), qPrintable(resumed.describe()));
        QCOMPARE(everything.records.mid(0, 15), audited);
        QCOMPARE(resumed.records.last(), everything.records.last());
    }

    // The cursor is in the catalog: a client resumes after a restart of the server where it
    // left off.
    void resumingAcrossARestart()
    {
        QTemporaryDir dir;
        const auto onDir = [&] {
            TestServerOptions options;
            options.dataDir = dir.path();
            return options;
        };
        QVERIFY(start(onDir()));
        FeedRecorder before(m_server->url(), after(0));
        QVERIFY(!makeChanges().isNull());
        QVERIFY2(before.waitForRecords(5), qPrintable(before.describe()));
        const qint64 seen = before.lastId();
        QVERIFY(!makeChanges().isNull()); // perhaps seen, perhaps not: the server stops
        m_server->stop();
        QVERIFY(before.waitClosed());

        QVERIFY(start(onDir()));
        QVERIFY(!makeChanges().isNull());
        FeedRecorder after_(m_server->url(), after(seen));
        const QList<QJsonObject> audited = auditedChanges();
        QCOMPARE(audited.size(), 15);
        QVERIFY2(after_.waitForRecords(10), qPrintable(after_.describe()));
        QCOMPARE(after_.records, audited.mid(5));
    }

    void filters_data()
    {
        QTest::addColumn<QString>("action");
        QTest::addColumn<bool>("ofTheConversation");
        QTest::addColumn<QStringList>("expected");
        QTest::addRow("action") << u"archive"_s << false << QStringList{u"archive"_s, u"archive"_s};
        QTest::addRow("conversation")
            << QString() << true
            << QStringList{u"create"_s, u"update"_s, u"archive"_s, u"unarchive"_s, u"delete"_s};
        QTest::addRow("both") << u"delete"_s << true << QStringList{u"delete"_s};
    }
    void filters()
    {
        QFETCH(QString, action);
        QFETCH(bool, ofTheConversation);
        QFETCH(QStringList, expected);
        QVERIFY(start());
        QVERIFY(!makeChanges().isNull());
        const QUuid id = makeChanges();
        QVERIFY(!id.isNull());
        QUrlQuery query = after(0);
        if (!action.isEmpty())
            query.addQueryItem(u"action"_s, action);
        if (ofTheConversation)
            query.addQueryItem(u"conversation_id"_s, toWireId(id));
        FeedRecorder feed(m_server->url(), query);
        QVERIFY2(feed.waitForRecords(expected.size()), qPrintable(feed.describe()));
        m_server->create(); // not of the filter: nothing follows
        FeedRecorder all(m_server->url(), after(0));
        QVERIFY2(all.waitForRecords(11), qPrintable(all.describe()));
        QCOMPARE(feed.actions(), expected);
    }

    // A bad cursor or filter closes the socket with 4022 and a reason; the server goes on.
    void badQueriesAreRefused_data()
    {
        QTest::addColumn<QString>("query");
        QTest::addRow("negative") << u"after=-1"_s;
        QTest::addRow("text") << u"after=latest"_s;
        QTest::addRow("fraction") << u"after=1.5"_s;
        QTest::addRow("empty") << u"after="_s;
        QTest::addRow("too large") << u"after=99999999999999999999999"_s;
        QTest::addRow("bad conversation") << u"conversation_id=nope"_s;
    }
    void badQueriesAreRefused()
    {
        QFETCH(QString, query);
        if (!m_server)
            QVERIFY(start());
        FeedRecorder feed(m_server->url(), QUrlQuery(query));
        QVERIFY2(feed.waitClosed(), qPrintable(feed.describe()));
        QCOMPARE(feed.closeCode, CloseInvalidParameter);
        QVERIFY(!feed.closeReason.isEmpty());
        QVERIFY(m_server->get(u"/ready"_s).ok());
    }

    // The key check of the other sockets: in the URL, the header, or the auth frame.
    void theKeyIsChecked()
    {
        TestServerOptions options;
        options.apiKeys = {u"feed-key"_s};
        QVERIFY(start(std::move(options)));
        FeedRecorder wrong(m_server->url(), QUrlQuery{{u"session_api_key"_s, u"nope"_s}});
        QVERIFY(wrong.waitClosed());
        QCOMPARE(wrong.closeCode, CloseUnauthorized);
        QVERIFY(wrong.records.isEmpty());

        QUrlQuery query = after(0);
        query.addQueryItem(u"session_api_key"_s, u"feed-key"_s);
        FeedRecorder inUrl(m_server->url(), query);
        FeedRecorder byFrame(m_server->url(), after(0));
        QVERIFY(byFrame.waitConnected());
        byFrame.socket().sendTextMessage(u"{\"type\":\"auth\",\"session_api_key\":\"feed-key\"}"_s);
        QVERIFY(!m_server->create().isNull());
        QVERIFY2(inUrl.waitForRecords(1), qPrintable(inUrl.describe()));
        QVERIFY2(byFrame.waitForRecords(1), qPrintable(byFrame.describe()));
        QCOMPARE(inUrl.actions(), QStringList{u"create"_s});
        QCOMPARE(byFrame.actions(), QStringList{u"create"_s});
    }

    // A client that never reads is dropped with 1013 once it takes nothing for the stall
    // timeout: the server holds at most its budget for it, and the backlog stays in the table.
    // A client that reads gets everything meanwhile.
    void aClientThatNeverReadsIsDropped()
    {
        TestServerOptions options;
        constexpr qint64 Budget = 256 * 1024;
        options.streamBudgetBytes = Budget;
        options.streamStallTimeoutMs = 1'000;
        QVERIFY(start(std::move(options)));
        // Far more than the kernel's buffers take (a record here is about 650 bytes).
        constexpr int Records = 30'000;
        {
            AuditLog writer(m_server->server().database(), u"bulk"_s);
            const QString reason(ChangeCause::MaxReasonLength, u'r');
            for (int i = 0; i < Records; ++i)
                writer.record(Actor::server(u"retention"_s), u"archive"_s, QUuid::createUuid(),
                              reason);
            writer.flush();
        }
        QTcpSocket wedged;
        wedged.setReadBufferSize(1024);
        wedged.connectToHost(m_server->url().host(), quint16(m_server->url().port()));
        QVERIFY(wedged.waitForConnected(5'000));
        wedged.write("GET /sockets/lifecycle?after=0 HTTP/1.1\r\nHost: " +
                     m_server->url().authority().toUtf8() +
                     "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                     "Sec-WebSocket-Version: 13\r\n\r\n");
        FeedRecorder reader(m_server->url(), after(0));
        QVERIFY2(reader.waitForRecords(Records, 60'000), qPrintable(reader.describe()));
        QVERIFY(QTest::qWaitFor(
            [&] {
                return metric(*m_server, "agentdeck_websocket_slow_consumer_drops_total"_ba) == 1;
            },
            20'000));
        QVERIFY(!reader.closed);
        QVERIFY(metric(*m_server, "agentdeck_websocket_unsent_bytes"_ba) <= Budget);
        // Reading again, it finds the connection closed.
        wedged.setReadBufferSize(0);
        QVERIFY(QTest::qWaitFor(
            [&] {
                wedged.readAll();
                return wedged.state() == QAbstractSocket::UnconnectedState;
            },
            20'000));
    }
};

QTEST_GUILESS_MAIN(TestApiLifecycle)
#include "tst_api_lifecycle.moc"
