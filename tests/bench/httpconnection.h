#pragma once

#include <QCoroTask>
#include <QObject>
#include <QTcpSocket>

#include <chrono>

namespace AgentDeck::Bench {

struct Endpoint
{
    QString host = QStringLiteral("127.0.0.1");
    quint16 port = 0;
};

// One answer; status 0 means the connection failed or timed out before a full response.
struct HttpResult
{
    int status = 0;
    QByteArray body;
    qint64 latencyNs = 0; // from the write of the request to the last byte of the response
};

// "METHOD target HTTP/1.1" with Host, and a JSON body with its Content-Type and -Length.
QByteArray makeHttpRequest(QByteArrayView hostHeader, QByteArrayView method, QByteArrayView target,
                           QByteArrayView jsonBody = {});

// Splits a byte stream into HTTP/1.1 responses that carry Content-Length (the server always
// sends it).
class HttpResponseReader
{
public:
    enum class Progress
    {
        Incomplete,
        Complete, // take() the response
        Invalid,  // not an HTTP response with a length: give up on the connection
    };

    Progress feed(QByteArrayView bytes);
    // The complete response (latencyNs unset), removed from the stream.
    HttpResult take();
    void reset();

private:
    Progress progress();

    QByteArray m_buffer;
    qsizetype m_bodyStart = -1; // -1 while the header is incomplete
    qsizetype m_contentLength = 0;
    int m_status = 0;
};

// A raw HTTP/1.1 keep-alive client connection with one request in flight: small enough that the
// bench spends its CPU on the server, not on a client stack. Responses must carry
// Content-Length (the server always sends it).
class HttpConnection : public QObject
{
    Q_OBJECT
public:
    explicit HttpConnection(Endpoint endpoint, QObject *parent = nullptr);

    QCoro::Task<bool> open(std::chrono::milliseconds timeout);
    bool isOpen() const { return m_socket.state() == QAbstractSocket::ConnectedState; }
    bool isBusy() const { return m_busy; }

    // Writes a request built with makeRequest(); `responded` follows.
    void send(const QByteArray &request);
    // send() and wait for the answer; status 0 after `timeout`.
    QCoro::Task<HttpResult> request(QByteArray request, std::chrono::milliseconds timeout);

    QByteArray makeRequest(QByteArrayView method, QByteArrayView target,
                           QByteArrayView jsonBody = {}) const;

Q_SIGNALS:
    void responded(const AgentDeck::Bench::HttpResult &result);

private:
    void onReadyRead();
    void fail();

    Endpoint m_endpoint;
    QByteArray m_hostHeader;
    QTcpSocket m_socket;
    HttpResponseReader m_reader;
    bool m_busy = false;
    qint64 m_sentNs = 0;
};

} // namespace AgentDeck::Bench
