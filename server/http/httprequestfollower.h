#pragma once

#include <QByteArray>
#include <QByteArrayView>
#include <QList>

namespace AgentDeck {

// The one parser of the HTTP API's requests: takes the bytes of one HTTP/1.1 connection as they
// arrive and hands back each request once it is whole, its head and its body (Content-Length
// or chunked, decoded). It reports as soon as the bytes say so what HttpConnection acts on
// before a request is whole:
// - a body over the limit is refused as soon as its head (or its chunks) say so, instead of
//   being buffered whole first; so is a head over MaxHeadBytes, and a framing it cannot read;
// - `Expect: 100-continue` is answered, so that a client waiting for it sends the body now
//   (curl waits a second for bodies over 1 MiB);
// - a request that has begun and not ended is acknowledged at once, so that a client with
//   Nagle's algorithm on sends its last small piece without waiting for a delayed ACK;
// - a head that does not come whole, or a body that pauses, in time is answered 408;
// - a request that asks for the connection to close after its answer has it closed.
class HttpRequestFollower
{
public:
    explicit HttpRequestFollower(qint64 maxBodyBytes);

    // The largest head (request line and headers) taken.
    static constexpr qsizetype MaxHeadBytes = 64 * 1024;

    // Why a request cannot be taken. Once one is reported nothing more is followed.
    enum class Problem
    {
        None,
        HeadTooLarge,       // or the trailers of a chunked body
        BodyTooLarge,       // by its Content-Length or by the chunks seen so far
        Malformed,          // a Content-Length or chunk size that is not a number, a runaway
                            // line, a chunk line or chunk end that is not CRLF
        MalformedHead,      // a request line or header line HTTP/1.1 does not allow, a bare LF
        VersionNotSupported // a request line of an HTTP version other than 1.x
    };
    // A request that arrived whole.
    struct Request
    {
        QByteArray head; // the request line and header lines, without the empty line
        QByteArray body; // decoded: a chunked body without its framing
        // It asked for the connection to close after its answer (`Connection: close`, or
        // HTTP/1.0 without `Connection: keep-alive`).
        bool closeAfter = false;
    };
    struct News
    {
        // A head asked for `100 Continue` and its body has not all arrived.
        bool expectsContinue = false;
        Problem problem = Problem::None;
        // Requests whose last byte came with these bytes,
        int requestsEnded = 0;
        // ... where each ended, counted as followed() is,
        QList<qint64> requestEnds;
        // ... and the requests themselves.
        QList<Request> requests;
    };
    // Takes the next bytes of the connection.
    News follow(QByteArrayView bytes);
    // A request has begun and not all of it has arrived.
    bool inRequest() const;
    // ... and it is still in its head.
    bool inHead() const { return m_state == State::Head && !m_pending.isEmpty(); }
    // A problem was reported: nothing more is followed.
    bool lost() const { return m_state == State::Lost; }
    // Bytes taken so far, counted from the connection's first.
    qint64 followed() const { return m_followed; }
    // Where the request being followed (or the one with the problem) began, counted as
    // followed() is: the end of the request before it.
    qint64 requestStart() const { return m_requestStart; }

private:
    enum class State
    {
        Head,
        Body,
        ChunkSize,
        ChunkData,
        ChunkEnd,
        Trailers,
        Lost
    };
    // Consume a piece of `bytes` in the current state; return how much.
    qsizetype inHead(QByteArrayView bytes, News &news);
    qsizetype inLine(QByteArrayView bytes, News &news); // ChunkSize and Trailers: to a line's end
    void startBody(QByteArrayView head, News &news);
    void endLine(News &news);
    void endRequest(News &news);
    void fail(News &news, Problem problem);

    qint64 m_maxBodyBytes;
    State m_state = State::Head;
    qint64 m_followed = 0;
    qint64 m_requestStart = 0;
    bool m_requestLineChecked = false;
    QByteArray m_pending;   // the head, or a chunk-size or trailer line, so far
    Request m_request;      // the request being followed, once its head is whole
    qint64 m_remaining = 0; // bytes of the body (or chunk, or chunk end) still to come
    qint64 m_bodyBytes = 0; // decoded body bytes of a chunked request so far
    qint64 m_trailerBytes = 0;
    bool m_expectsContinue = false;
};

} // namespace AgentDeck
