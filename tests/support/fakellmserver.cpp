#include "fakellmserver.h"

#include <QJsonDocument>
#include <QTcpSocket>
#include <QUuid>

#include <utility>

using namespace Qt::StringLiterals;

namespace AgentDeck::Testing {

namespace {

QByteArray compact(const QJsonObject &object)
{
    return QJsonDocument(object).toJson(QJsonDocument::Compact);
}

QByteArray reasonPhrase(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 429:
        return "Too Many Requests";
    case 500:
        return "Internal Server Error";
    case 503:
        return "Service Unavailable";
    default:
        return "Status";
    }
}

QJsonObject completion(const QJsonObject &message, int promptTokens, int completionTokens)
{
    return {{u"id"_s, u"chatcmpl-fake"_s},
            {u"object"_s, u"chat.completion"_s},
            {u"model"_s, u"fake"_s},
            {u"choices"_s,
             QJsonArray{QJsonObject{
                 {u"index"_s, 0}, {u"message"_s, message}, {u"finish_reason"_s, u"stop"_s}}}},
            {u"usage"_s, QJsonObject{{u"prompt_tokens"_s, promptTokens},
                                     {u"completion_tokens"_s, completionTokens},
                                     {u"total_tokens"_s, promptTokens + completionTokens}}}};
}

QByteArray chunk(const QJsonObject &delta, const QJsonValue &finishReason = QJsonValue::Null)
{
    return compact({{u"object"_s, u"chat.completion.chunk"_s},
                    {u"choices"_s, QJsonArray{QJsonObject{{u"index"_s, 0},
                                                          {u"delta"_s, delta},
                                                          {u"finish_reason"_s, finishReason}}}}});
}

QByteArray usageChunk()
{
    return compact(
        {{u"object"_s, u"chat.completion.chunk"_s},
         {u"choices"_s, QJsonArray{}},
         {u"usage"_s, QJsonObject{{u"prompt_tokens"_s, 7}, {u"completion_tokens"_s, 3}}}});
}

} // namespace

FakeLlmServer::FakeLlmServer(QObject *parent)
    : QObject(parent)
{
    connect(&m_server, &QTcpServer::newConnection, this, &FakeLlmServer::onConnection);
    m_clock.start();
}

FakeLlmServer::~FakeLlmServer()
{
    for (const auto &socket : std::as_const(m_sockets)) {
        if (socket)
            socket->abort();
    }
}

bool FakeLlmServer::listen()
{
    return m_server.listen(QHostAddress::LocalHost, 0);
}

QString FakeLlmServer::baseUrl() const
{
    return u"http://127.0.0.1:%1/v1"_s.arg(m_server.serverPort());
}

int FakeLlmServer::openConnections() const
{
    int open = 0;
    for (const auto &socket : m_sockets) {
        if (socket && socket->state() == QAbstractSocket::ConnectedState)
            ++open;
    }
    return open;
}

void FakeLlmServer::onConnection()
{
    while (QTcpSocket *socket = m_server.nextPendingConnection()) {
        m_sockets.append(socket);
        socket->setParent(this);
        connect(socket, &QTcpSocket::readyRead, this, [this, socket] { onReadyRead(socket); });
        connect(socket, &QTcpSocket::disconnected, socket, &QObject::deleteLater);
    }
}

void FakeLlmServer::onReadyRead(QTcpSocket *socket)
{
    QByteArray buffer = socket->property("buffer").toByteArray() + socket->readAll();
    const qsizetype headerEnd = buffer.indexOf("\r\n\r\n");
    if (headerEnd < 0) {
        socket->setProperty("buffer", buffer);
        return;
    }
    qsizetype contentLength = 0;
    QByteArray authorization;
    for (const QByteArray &line : buffer.left(headerEnd).split('\n')) {
        const qsizetype colon = line.indexOf(':');
        if (colon < 0)
            continue;
        const QByteArray name = line.left(colon).trimmed().toLower();
        const QByteArray value = line.mid(colon + 1).trimmed();
        if (name == "content-length")
            contentLength = value.toLongLong();
        else if (name == "authorization")
            authorization = value;
    }
    if (buffer.size() < headerEnd + 4 + contentLength) {
        socket->setProperty("buffer", buffer);
        return;
    }
    socket->setProperty("buffer", QByteArray());
    const QByteArray body = buffer.mid(headerEnd + 4, contentLength);
    requests.append({QJsonDocument::fromJson(body).object(), authorization, m_clock.elapsed()});
    const Response response = m_script.isEmpty() ? text(u"done"_s) : m_script.dequeue();
    respond(socket, response);
    Q_EMIT requestReceived(int(requests.size() - 1));
}

void FakeLlmServer::answerHeld()
{
    for (auto &[socket, response] : std::exchange(m_held, {})) {
        response.held = false;
        if (socket)
            respond(socket, response);
    }
}

void FakeLlmServer::respond(QTcpSocket *socket, const Response &response)
{
    if (response.hang)
        return;
    if (response.held) {
        m_held.append({socket, response});
        return;
    }
    QByteArray head = "HTTP/1.1 " + QByteArray::number(response.status) + ' ' +
                      reasonPhrase(response.status) + "\r\nConnection: close\r\n";
    for (const auto &[name, value] : response.headers)
        head += name + ": " + value + "\r\n";
    if (response.stream) {
        head += "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\n\r\n";
        socket->write(head);
        for (const QByteArray &data : response.events)
            socket->write("data: " + data + "\n\n");
        socket->write("data: [DONE]\n\n");
    } else {
        head += "Content-Type: application/json\r\nContent-Length: " +
                QByteArray::number(response.body.size()) + "\r\n\r\n";
        socket->write(head + response.body);
    }
    if (!response.keepOpen)
        socket->disconnectFromHost();
}

FakeLlmServer::Response FakeLlmServer::toolCalls(const QJsonArray &calls, const QString &content,
                                                 int promptTokens, int completionTokens)
{
    QJsonObject message{
        {u"role"_s, u"assistant"_s},
        {u"content"_s, content.isEmpty() ? QJsonValue(QJsonValue::Null) : QJsonValue(content)},
        {u"tool_calls"_s, calls}};
    Response response;
    response.body = compact(completion(message, promptTokens, completionTokens));
    return response;
}

FakeLlmServer::Response FakeLlmServer::toolCall(const QString &name, const QJsonObject &arguments,
                                                const QString &id, const QString &content)
{
    const QJsonObject call{
        {u"id"_s, id.isEmpty() ? u"call_"_s + QUuid::createUuid().toString(QUuid::Id128) : id},
        {u"type"_s, u"function"_s},
        {u"function"_s,
         QJsonObject{{u"name"_s, name}, {u"arguments"_s, QString::fromUtf8(compact(arguments))}}}};
    return toolCalls(QJsonArray{call}, content);
}

FakeLlmServer::Response FakeLlmServer::text(const QString &content)
{
    Response response;
    response.body =
        compact(completion({{u"role"_s, u"assistant"_s}, {u"content"_s, content}}, 10, 5));
    return response;
}

FakeLlmServer::Response FakeLlmServer::streamedText(const QStringList &deltas)
{
    Response response;
    response.stream = true;
    response.events.append(chunk({{u"role"_s, u"assistant"_s}}));
    for (const QString &delta : deltas)
        response.events.append(chunk({{u"content"_s, delta}}));
    response.events.append(chunk({}, u"stop"_s));
    response.events.append(usageChunk());
    return response;
}

FakeLlmServer::Response FakeLlmServer::streamedToolCall(const QString &name, const QString &id,
                                                        const QStringList &argumentFragments)
{
    Response response;
    response.stream = true;
    response.events.append(
        chunk({{u"role"_s, u"assistant"_s},
               {u"tool_calls"_s,
                QJsonArray{QJsonObject{
                    {u"index"_s, 0},
                    {u"id"_s, id},
                    {u"type"_s, u"function"_s},
                    {u"function"_s, QJsonObject{{u"name"_s, name}, {u"arguments"_s, u""_s}}}}}}}));
    for (const QString &fragment : argumentFragments)
        response.events.append(chunk(
            {{u"tool_calls"_s,
              QJsonArray{QJsonObject{{u"index"_s, 0},
                                     {u"function"_s, QJsonObject{{u"arguments"_s, fragment}}}}}}}));
    response.events.append(chunk({}, u"tool_calls"_s));
    response.events.append(usageChunk());
    return response;
}

FakeLlmServer::Response FakeLlmServer::streamedDeltas(const QList<QJsonObject> &deltas,
                                                      const QString &finishReason)
{
    Response response;
    response.stream = true;
    for (const QJsonObject &delta : deltas)
        response.events.append(chunk(delta));
    response.events.append(chunk({}, finishReason));
    response.events.append(usageChunk());
    return response;
}

FakeLlmServer::Response FakeLlmServer::status(int code, const QByteArray &retryAfter)
{
    Response response;
    response.status = code;
    response.body =
        compact({{u"error"_s, QJsonObject{{u"message"_s, u"scripted failure %1"_s.arg(code)}}}});
    if (!retryAfter.isEmpty())
        response.headers.append({"Retry-After", retryAfter});
    return response;
}

FakeLlmServer::Response FakeLlmServer::hanging()
{
    Response response;
    response.hang = true;
    return response;
}

FakeLlmServer::Response FakeLlmServer::garbage()
{
    Response response;
    response.body = "{\"choices\": [ this is not json";
    return response;
}

QStringList FakeLlmServer::toolNames(const QJsonObject &request)
{
    QStringList names;
    for (const QJsonValue &tool : request.value(u"tools"_s).toArray())
        names.append(tool.toObject().value(u"function"_s).toObject().value(u"name"_s).toString());
    return names;
}

} // namespace AgentDeck::Testing
