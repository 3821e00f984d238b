// Following HTTP/1.1 requests byte by byte: heads, Content-Length and chunked bodies, pipelining,
// `Expect: 100-continue` and the body limit.
#include "http/httpconnection.h"
#include "http/httprequestfollower.h"

#include <QTest>

using namespace AgentDeck;
using namespace Qt::StringLiterals;
using News = HttpRequestFollower::News;

namespace {

constexpr qint64 Limit = 1000;

// What following `stream` reports, fed in pieces of `piece` bytes (0: all at once).
using Problem = HttpRequestFollower::Problem;

struct Followed
{
    int continues = 0;
    Problem problem = Problem::None;
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
        if (news.problem != Problem::None)
            followed.problem = news.problem;
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
        QTest::addColumn<Problem>("problem"); // also: lost() afterwards
        const QByteArray get = "GET /alive HTTP/1.1\r\nHost: h\r\n\r\n";
        const auto row = [](const char *name, const QByteArray &stream, bool inRequest,
                            Problem problem = Problem::None, int continues = 0) {
            QTest::addRow("%s", name) << stream << inRequest << continues << problem;
        };
        row("get", get, false);
        row("half a head", get.first(20), true);
        row("empty lines before a request", "\r\n\r\n" + get, false);
        row("post", post("{\"a\":1}"), false);
        row("post without its last byte", post("{\"a\":1}").chopped(1), true);
        row("pipelined", get + post("xyz") + get, false);
        row("pipelined, the last one cut", get + post("xyz") + get.first(5), true);
        row("expect, head only", post("12345", "Expect: 100-continue\r\n").chopped(5), true,
            Problem::None, 1);
        row("at the limit", post(QByteArray(Limit, 'x')) + get, false);
        row("over the limit, head only", post(QByteArray(Limit + 1, 'x')).chopped(Limit + 1), false,
            Problem::BodyTooLarge);
        row("expect over the limit",
            post(QByteArray(Limit + 1, 'x'), "Expect: 100-continue\r\n").chopped(Limit + 1), false,
            Problem::BodyTooLarge);
        row("chunked", chunked({"abc", QByteArray(300, 'y')}) + get, false);
        row("chunked, no last chunk", chunked({"abc"}, false), true);
        row("chunked, trailers cut", chunked({"abc"}).chopped(2), true);
        row("chunked at the limit", chunked({QByteArray(Limit - 1, 'a'), "b"}), false);
        row("chunked over the limit", chunked({QByteArray(Limit, 'a'), "b"}, false), false,
            Problem::BodyTooLarge);
        row("chunk extension",
            "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: "
            "chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\n\r\n",
            false);
        row("trailers without end",
            chunked({"abc"}, false) + "0\r\n" + QByteArray("X-T: tttttttttt\r\n").repeated(4000),
            false, Problem::HeadTooLarge);
        row("unreadable length", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: lots\r\n\r\n",
            false, Problem::Malformed);
        // Framing Qt's parser would read otherwise: it took the first of two lengths, and any
        // coding ending in "chunked", and buffered a body of any size before the limit.
        row("two lengths that differ",
            "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 999999999\r\n\r\nx",
            false, Problem::Malformed);
        row("the same length twice",
            "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx" + get,
            false);
        row("a coding that is not chunked",
            "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: "
            "xchunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
            false, Problem::Malformed);
        row("codings before chunked",
            "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
            false, Problem::Malformed);
        row("a length and chunked",
            "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: "
            "chunked\r\n\r\n0\r\n"
            "\r\n",
            false, Problem::Malformed);
        row("unreadable chunk size",
            "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", false,
            Problem::Malformed);
        // Digits only: toLongLong() took a sign, and "0x" in a chunk size.
        row("a length with a sign", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +1\r\n\r\nx",
            false, Problem::Malformed);
        row("a length with a space inside",
            "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1 0\r\n\r\nx", false,
            Problem::Malformed);
        row("a chunk size with 0x",
            "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0x3\r\nabc\r\n", false,
            Problem::Malformed);
        row("a chunk size with a sign",
            "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n+3\r\nabc\r\n", false,
            Problem::Malformed);
        // Chunk lines and the end of a chunk's data are CRLF: Qt's parser takes a bare LF too,
        // and where it ended the chunks differed from here (a request behind went unanswered).
        const QByteArray chunkedHead =
            "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
        row("a chunk size line ending in a bare LF", chunkedHead + "3\nabc\r\n0\r\n\r\n" + get,
            false, Problem::Malformed);
        row("a chunk's data ending in a bare LF", chunkedHead + "3\r\nabc\n0\r\n\r\n" + get, false,
            Problem::Malformed);
        row("a chunk's data ending in a bare CR", chunkedHead + "3\r\nabc\r0\r\n\r\n", false,
            Problem::Malformed);
        row("a chunk's data not ending where its size says", chunkedHead + "3\r\nabcd\r\n0\r\n\r\n",
            false, Problem::Malformed);
        row("the last chunk ending in bare LFs", chunkedHead + "3\r\nabc\r\n0\n\n" + get, false,
            Problem::Malformed);
        row("the end of the trailers a bare LF", chunkedHead + "0\r\nX-T: t\r\n\n" + get, false,
            Problem::Malformed);
        row("a bare CR in a chunk size line", chunkedHead + "3\r;x\r\nabc\r\n0\r\n\r\n", false,
            Problem::Malformed);
        row("chunk size line without end",
            "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n1;" +
                QByteArray(5000, 'e'),
            false, Problem::Malformed);
        row("head too large",
            "GET / HTTP/1.1\r\nHost: h\r\nX: " + QByteArray(HttpRequestFollower::MaxHeadBytes, 'h'),
            false, Problem::HeadTooLarge);
        // Heads Qt's parser drops the connection for, with no answer; or, with bare LFs, takes
        // while the follower waited for a CRLF CRLF that never came.
        row("a body with bare LFs", post("{\n  \"a\": 1\r\n}\n") + get, false);
        row("a lowercase method", "get /alive HTTP/1.1\r\nHost: h\r\n\r\n", false);
        row("no version", "GET /alive\r\nHost: h\r\n\r\n", false, Problem::MalformedHead);
        row("no version, nothing after", "GET /alive\r\n", false, Problem::MalformedHead);
        row("no target", "GET  HTTP/1.1\r\nHost: h\r\n\r\n", false, Problem::MalformedHead);
        row("tabs", "GET\t/alive\tHTTP/1.1\r\nHost: h\r\n\r\n", false, Problem::MalformedHead);
        row("a space in the target", "GET /a b HTTP/1.1\r\n\r\n", false, Problem::MalformedHead);
        row("a version that is not HTTP", "GET /alive FTP/1.1\r\n\r\n", false,
            Problem::MalformedHead);
        row("HTTP/2.0", "GET /alive HTTP/2.0\r\nHost: h\r\n\r\n", false,
            Problem::VersionNotSupported);
        row("bare LFs", "GET /alive HTTP/1.1\nHost: h\n\n", false, Problem::MalformedHead);
        row("a bare LF after the request line", "GET /alive HTTP/1.1\r\nHost: h\n\r\n", false,
            Problem::MalformedHead);
        row("a bare CR", "GET /alive HTTP/1.1\r\nHost: h\rX: y\r\n\r\n", false,
            Problem::MalformedHead);
        row("a folded header", "GET /alive HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n", false,
            Problem::MalformedHead);
        // RFC 9112, 3.2: an HTTP/1.1 request without Host is answered 400; HTTP/1.0 had none.
        row("HTTP/1.1 without Host", "GET /alive HTTP/1.1\r\nX: y\r\n\r\n", false,
            Problem::MalformedHead);
        row("HTTP/1.0 without Host", "GET /alive HTTP/1.0\r\n\r\n", false);
        row("a header without a colon", "GET /alive HTTP/1.1\r\nHost h\r\n\r\n", false,
            Problem::MalformedHead);
        row("a space before the colon", "GET /alive HTTP/1.1\r\nHost : h\r\n\r\n", false,
            Problem::MalformedHead);
        row("two Host headers", "GET /alive HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", false,
            Problem::MalformedHead);
        row("a malformed head after good ones", get + get + "GET /alive\r\n\r\n", false,
            Problem::MalformedHead);
    }
    void followsStreams()
    {
        QFETCH(QByteArray, stream);
        QFETCH(bool, inRequest);
        QFETCH(int, continues);
        QFETCH(Problem, problem);
        // The same whether the bytes come at once, one by one, or in odd pieces.
        for (const qsizetype piece : {qsizetype(0), qsizetype(1), qsizetype(7)}) {
            const Followed followed = follow(stream, piece);
            const QByteArray where = "in pieces of " + QByteArray::number(piece);
            QVERIFY2(followed.inRequest == inRequest, where.constData());
            QVERIFY2(followed.problem == problem, where.constData());
            QVERIFY2(followed.lost == (problem != Problem::None), where.constData());
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
        const QByteArray head = "POST / HTTP/1.1\r\nHost: h\r\nExpect: "
                                "100-continue\r\nTransfer-Encoding: chunked\r\n\r\n";
        QVERIFY(follower.follow(head).expectsContinue);
        QVERIFY(!follower.follow("1\r\na\r\n0\r\n\r\n").expectsContinue);
        QVERIFY(!follower.inRequest());
    }

    void endedRequestsAreCounted()
    {
        HttpRequestFollower follower(Limit);
        const QByteArray get = "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
        const QByteArray three = get + post("ab") + chunked({"c"}) + get.first(4);
        QCOMPARE(follower.follow(three).requestsEnded, 3);
        QCOMPARE(follower.follow(get.sliced(4)).requestsEnded, 1);
        QCOMPARE(follower.follow(post("abc").chopped(1)).requestsEnded, 0);
        QCOMPARE(follower.follow("c").requestsEnded, 1);
    }

    // Each whole request comes back with its head and its body, a chunked one decoded, however
    // its bytes were cut.
    void wholeRequestsComeBackWithTheirBodies()
    {
        const QByteArray get = "GET /a?b=c HTTP/1.1\r\nHost: h\r\n\r\n";
        const QByteArray stream = get + post("ab") + chunked({"c", QByteArray(300, 'd')}) +
                                  "GET / HTTP/1.0\r\n\r\n" + get;
        for (const qsizetype piece : {qsizetype(1), qsizetype(7), stream.size()}) {
            HttpRequestFollower follower(Limit);
            QList<HttpRequestFollower::Request> requests;
            for (qsizetype at = 0; at < stream.size(); at += piece)
                requests.append(follower
                                    .follow(QByteArrayView(stream).sliced(at).first(
                                        std::min(piece, stream.size() - at)))
                                    .requests);
            QCOMPARE(requests.size(), 5);
            QCOMPARE(requests[0].head, get.chopped(4));
            QCOMPARE(requests[0].body, QByteArray());
            QCOMPARE(requests[1].body, "ab"_ba);
            QVERIFY(requests[2].head.endsWith("Transfer-Encoding: chunked"));
            QCOMPARE(requests[2].body, "c" + QByteArray(300, 'd'));
            // HTTP/1.0 closes unless told otherwise; the request after it is still followed.
            QCOMPARE(requests[3].closeAfter, true);
            QCOMPARE(requests[4].closeAfter, false);
        }
    }

    void aRequestIsWhatItsHeadSays()
    {
        HttpRequestFollower follower(Limit);
        const News news = follower.follow(
            "PATCH /api/conversations/a%41b/x%20y?q=fix+login&n=%2B1 HTTP/1.1\r\nHost: h\r\n"
            "X-Session-API-Key:  key \r\nContent-Length: 2\r\n\r\n{}");
        QCOMPARE(news.requests.size(), 1);
        const HttpRequest request = HttpConnection::toRequest(news.requests.first());
        QCOMPARE(request.method, HttpMethod::Patch);
        // The path decoded; a '+' in the query is a space.
        QCOMPARE(request.path, u"/api/conversations/aAb/x y"_s);
        QVERIFY(request.pathFault.isEmpty());
        QCOMPARE(request.query.queryItemValue(u"q"_s, QUrl::FullyDecoded), u"fix login"_s);
        QCOMPARE(request.query.queryItemValue(u"n"_s, QUrl::FullyDecoded), u"+1"_s);
        QCOMPARE(request.header("x-session-api-key"), "key"_ba);
        QCOMPARE(request.body, "{}"_ba);
        const News absolute =
            follower.follow("GET http://h:1/alive?x=1 HTTP/1.1\r\nHost: h\r\n\r\n");
        const HttpRequest proxied = HttpConnection::toRequest(absolute.requests.first());
        QCOMPARE(proxied.path, u"/alive"_s);
        QCOMPARE(proxied.query.queryItemValue(u"x"_s), u"1"_s);
        // A path not in its one spelling is not routed: it says why it is refused.
        const News encodedSlash =
            follower.follow("GET /api/conversations/a%2Fb HTTP/1.1\r\nHost: h\r\n\r\n");
        const HttpRequest refused = HttpConnection::toRequest(encodedSlash.requests.first());
        QVERIFY(refused.path.isEmpty());
        QVERIFY2(refused.pathFault.contains(u"encoded /"_s), qPrintable(refused.pathFault));
        const News other = follower.follow("BREW / HTTP/1.1\r\nHost: h\r\n\r\n");
        QCOMPARE(HttpConnection::toRequest(other.requests.first()).method, HttpMethod::Unknown);
    }

    // A refusal, or `100 Continue`, concerns the request being followed.
    void whereEachRequestStartsIsKnown()
    {
        HttpRequestFollower follower(Limit);
        const QByteArray get = "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
        const QByteArray expecting = post("abc", "Expect: 100-continue\r\n");
        News news = follower.follow(QByteArray(get + get + expecting.chopped(3)));
        QVERIFY(news.expectsContinue);
        QCOMPARE(follower.requestStart(), 2 * get.size());
        QCOMPARE(follower.followed(), 2 * get.size() + expecting.size() - 3);
        news = follower.follow(
            QByteArray("abc\r\n" + get.first(3))); // a stray CRLF belongs to the next one
        QCOMPARE(news.requestsEnded, 1);
        QCOMPARE(follower.requestStart(), 2 * get.size() + expecting.size());
        news = follower.follow(QByteArray(get.sliced(3) + "GET /x\r\n\r\n"));
        QCOMPARE(news.problem, Problem::MalformedHead);
        QCOMPARE(follower.requestStart(), 3 * get.size() + expecting.size() + 2);
        QCOMPARE(follower.followed(), 3 * get.size() + expecting.size() + 2 + 10);
    }

    void nothingIsReportedOnceLost()
    {
        HttpRequestFollower follower(Limit);
        QCOMPARE(follower.follow(post(QByteArray(Limit + 1, 'x')).chopped(Limit + 1)).problem,
                 Problem::BodyTooLarge);
        QVERIFY(follower.lost());
        const News news = follower.follow(post("1", "Expect: 100-continue\r\n").chopped(1));
        QCOMPARE(news.problem, Problem::None);
        QVERIFY(!news.expectsContinue);
        QVERIFY(!follower.inRequest());
    }
};

QTEST_GUILESS_MAIN(HttpRequestFollowerTest)
#include "tst_httprequestfollower.moc"
