#pragma once

#include <QElapsedTimer>
#include <QJsonArray>
#include <QJsonObject>
#include <QList>
#include <QObject>
#include <QPointer>
#include <QQueue>
#include <QTcpServer>

class QTcpSocket;

namespace AgentDeck::Testing {

// A scripted OpenAI-compatible chat completions server on a free loopback port, written as raw
// HTTP/1.1 over QTcpServer so that it can stream server-sent events, hang, or answer garbage.
// Each request takes the next scripted response; with none left it answers a plain "done".
class FakeLlmServer : public QObject
{
    Q_OBJECT
public:
    struct Response
    {
        int status = 200;
        QByteArray body;          // sent as is (JSON or garbage)
        QList<QByteArray> events; // with `stream`: the data of each SSE event
        QList<QPair<QByteArray, QByteArray>> headers;
        bool stream = false;
        bool hang = false;     // never answer; the connection stays open until the client leaves
        bool held = false;     // answered when answerHeld() is called
        bool keepOpen = false; // answer, then leave the connection open
    };

    struct Request
    {
        QJsonObject body;
        QByteArray authorization;
        qint64 receivedAtMs = 0; // on the server's elapsed timer
    };

    explicit FakeLlmServer(QObject *parent = nullptr);
    ~FakeLlmServer() override;

    bool listen();
    // http://127.0.0.1:PORT/v1
    QString baseUrl() const;
    void enqueue(const Response &response) { m_script.enqueue(response); }
    // Answers the requests whose responses were held, with those responses.
    void answerHeld();

    QList<Request> requests;
    int openConnections() const;

    // The names of the tools a chat completions request offered.
    static QStringList toolNames(const QJsonObject &request);

    // Responses.
    static Response toolCalls(const QJsonArray &calls, const QString &content = {},
                              int promptTokens = 10, int completionTokens = 5);
    static Response toolCall(const QString &name, const QJsonObject &arguments,
                             const QString &id = {}, const QString &content = {});
    static Response text(const QString &content);
    static Response streamedText(const QStringList &deltas);
    static Response streamedToolCall(const QString &name, const QString &id,
                                     const QStringList &argumentFragments);
    // One chunk per delta, then `finishReason` and the usage.
    static Response streamedDeltas(const QList<QJsonObject> &deltas, const QString &finishReason);
    static Response status(int code, const QByteArray &retryAfter = {});
    static Response hanging();
    static Response garbage();

    // The `messages` of request `index`.
    QJsonArray messagesOf(int index) const
    {
        return requests.value(index).body.value(QLatin1StringView("messages")).toArray();
    }

Q_SIGNALS:
    void requestReceived(int index);

private:
    void onConnection();
    void onReadyRead(QTcpSocket *socket);
    void respond(QTcpSocket *socket, const Response &response);

    QTcpServer m_server;
    QQueue<Response> m_script;
    QList<QPointer<QTcpSocket>> m_sockets;
    QList<QPair<QPointer<QTcpSocket>, Response>> m_held;
    QElapsedTimer m_clock;
};

} // namespace AgentDeck::Testing
