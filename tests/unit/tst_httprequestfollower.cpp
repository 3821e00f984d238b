// Following HTTP/1.1 requests byte by byte: heads, Content-Length and chunked bodies, pipelining,
// `Expect: 100-continue` and the body limit.
#include "http/httprequestfollower.h"

#include <QTest>

using namespace AgentDeck;
using News = HttpRequestFollower::News;

namespace {

constexpr qint64 Limit = 1000;

// What following `stream` reports, fed in pieces of `piece` bytes (0: all at once).
struct Followed
{
    int continues = 0;
    bool tooLarge = false;
    bool inRequest = false;
    bool lost = false;
};

Followed follow(QByteArrayView stream, qsizetype piece = 0)
{
    HttpRequestFollower follower(Limit);
    Followed followed;
    const qsizetype step = piece > 0 ? piece : std::max<qsizetype>(stream.size(), 1);
    for (qsizetype at = 0; at < stream.size(); at += step) {
        const News news = follower.follow(stream.sliced(at, std::min(step, stream.size() - at)));
        followed.continues += news.expectsContinue ? 1 : 0;
        followed.tooLarge = followed.tooLarge || news.tooLarge;
    }
    followed.inRequest = follower.inRequest();
    followed.lost = follower.lost();
    return followed;
}

QByteArray post(QByteArrayView body, QByteArrayView extraHeaders = {})
{
    return "POST /api/x HTTP/1.1\r\nHost: h\r\nContent-Length: " + QByteArray::number(body.size()) +
           "\r\n" + extraHeaders.toByteArray() + "\r\n" + body.toByteArray();
}

QByteArray chunked(const QList<QByteArray> &chunks, bool last = true)
{
    QByteArray out = "POST /api/x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (const QByteArray &chunk : chunks)
        out += QByteArray::number(chunk.size(), 16) + "\r\n" + chunk + "\r\n";
    if (last)
        out += "0\r\nX-Trailer: t\r\n\r\n";
    return out;
}

} // namespace

class HttpRequestFollowerTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void followsStreams_data()
    {
        QTest::addColumn<QByteArray>("stream");
        QTest::addColumn<bool>("inRequest"); // at the end of the stream
        QTest::addColumn<int>("continues");
        QTest::addColumn<bool>("tooLarge");
        QTest::addColumn<bool>("lost");
        const QByteArray get = "GET /alive HTTP/1.1\r\nHost: h\r\n\r\n";
        QTest::addRow("get") << get << false << 0 << false << false;
        QTest::addRow("half a head") << get.first(20) << true << 0 << false << false;
        QTest::addRow("empty lines before a request")
            << "\r\n\r\n" + get << false << 0 << false << false;
        QTest::addRow("post") << post("{\"a\":1}") << false << 0 << false << false;
        QTest::addRow("post without its last byte")
            << post("{\"a\":1}").chopped(1) << true << 0 << false << false;
        QTest::addRow("pipelined") << get + post("xyz") + get << false << 0 << false << false;
        QTest::addRow("pipelined, the last one cut")
            << get + post("xyz") + get.first(5) << true << 0 << false << false;
        QTest::addRow("expect, head only")
            << post("12345", "Expect: 100-continue\r\n").chopped(5) << true << 1 << false << false;
        QTest::addRow("at the limit")
            << post(QByteArray(Limit, 'x')) + get << false << 0 << false << false;
        QTest::addRow("over the limit, head only")
            << post(QByteArray(Limit + 1, 'x')).chopped(Limit + 1) << false << 0 << true << true;
        QTest::addRow("expect over the limit")
            << post(QByteArray(Limit + 1, 'x'), "Expect: 100-continue\r\n").chopped(Limit + 1)
            << false << 0 << true << true;
        QTest::addRow("chunked") << chunked({"abc", QByteArray(300, 'y')}) + get << false << 0
                                 << false << false;
        QTest::addRow("chunked, no last chunk")
            << chunked({"abc"}, false) << true << 0 << false << false;
        QTest::addRow("chunked, trailers cut")
            << chunked({"abc"}).chopped(2) << true << 0 << false << false;
        QTest::addRow("chunked at the limit")
            << chunked({QByteArray(Limit - 1, 'a'), "b"}) << false << 0 << false << false;
        QTest::addRow("chunked over the limit")
            << chunked({QByteArray(Limit, 'a'), "b"}, false) << false << 0 << true << true;
        QTest::addRow("chunk extension")
            << QByteArray(
                   "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\n\r\n")
            << false << 0 << false << false;
        QTest::addRow("unreadable length")
            << QByteArray("POST / HTTP/1.1\r\nContent-Length: lots\r\n\r\n") << false << 0 << false
            << true;
        QTest::addRow("head too large")
            << "GET / HTTP/1.1\r\nX: " + QByteArray(HttpRequestFollower::MaxHeadBytes, 'h') << false
            << 0 << false << true;
    }
    void followsStreams()
    {
        QFETCH(QByteArray, stream);
        QFETCH(bool, inRequest);
        QFETCH(int, continues);
        QFETCH(bool, tooLarge);
        QFETCH(bool, lost);
        // The same whether the bytes come at once, one by one, or in odd pieces.
        for (const qsizetype piece : {qsizetype(0), qsizetype(1), qsizetype(7)}) {
            const Followed followed = follow(stream, piece);
            const QByteArray where = "in pieces of " + QByteArray::number(piece);
            QVERIFY2(followed.inRequest == inRequest, where.constData());
            QVERIFY2(followed.tooLarge == tooLarge, where.constData());
            QVERIFY2(followed.lost == lost, where.constData());
            if (piece == 0)
                QCOMPARE(followed.continues, continues);
        }
    }

    void continueIsReportedOnlyWhileTheBodyIsMissing()
    {
        HttpRequestFollower follower(Limit);
        const QByteArray request = post("12345", "Expect: 100-continue\r\n");
        // Head and body together: nothing to wait for.
        QVERIFY(!follower.follow(request).expectsContinue);
        // Head alone: once, however the rest of the head and the body come.
        QVERIFY(follower.follow(request.chopped(5)).expectsContinue);
        QVERIFY(!follower.follow("12").expectsContinue);
        QVERIFY(!follower.follow("345").expectsContinue);
        QVERIFY(!follower.inRequest());
        // A chunked body too.
        const QByteArray head =
            "POST / HTTP/1.1\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n";
        QVERIFY(follower.follow(head).expectsContinue);
        QVERIFY(!follower.follow("1\r\na\r\n0\r\n\r\n").expectsContinue);
        QVERIFY(!follower.inRequest());
    }

    void nothingIsReportedOnceLost()
    {
        HttpRequestFollower follower(Limit);
        QVERIFY(follower.follow(post(QByteArray(Limit + 1, 'x')).chopped(Limit + 1)).tooLarge);
        QVERIFY(follower.lost());
        const News news = follower.follow(post("1", "Expect: 100-continue\r\n").chopped(1));
        QVERIFY(!news.tooLarge);
        QVERIFY(!news.expectsContinue);
        QVERIFY(!follower.inRequest());
    }
};

QTEST_GUILESS_MAIN(HttpRequestFollowerTest)
#include "tst_httprequestfollower.moc"
