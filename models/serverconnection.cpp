#include "serverconnection.h"

#include "followedsocket.h"
#include "lifecyclefeed.h"

#include <QCoroNetworkReply>
#include <QJsonArray>
#include <QJsonDocument>
#include <QNetworkReply>

#include <algorithm>
#include <limits>
#include <memory>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {
constexpr qint64 ReadBufferBytes = 1024 * 1024;

// Qt 6.4 holds back what it reads of an answer to the reply's read buffer only for a request
// with nothing to upload, and sendCustomRequest() always has something: an endless answer to
// it took several GB before the bound below was reached. Answers to POST and PATCH are bounded
// too, but a server sending faster than the client reads may take it past the bound first.
QNetworkReply *send(QNetworkAccessManager &network, const QNetworkRequest &request,
                    const QByteArray &method, const QByteArray &body)
{
    if (body.isEmpty() && method == "GET")
        return network.get(request);
    if (body.isEmpty() && method == "DELETE")
        return network.deleteResource(request);
    return network.sendCustomRequest(request, method, body);
}

QByteArray toBody(const QJsonValue &value)
{
    if (value.isUndefined() || value.isNull())
        return {};
    if (value.isArray())
        return QJsonDocument(value.toArray()).toJson(QJsonDocument::Compact);
    return QJsonDocument(value.toObject()).toJson(QJsonDocument::Compact);
}

// The items of a page of `what` (conversations, events); nothing when the read failed or the
// answer is no page, and `failure`, if given, then says which. A login page, or another web
// server on that port, is not an empty catalog.
std::optional<QJsonArray> pageItems(const ApiReply &reply, const QString &what, ApiReply *failure)
{
    const QJsonValue items = reply.json.toObject().value(u"items"_s);
    if (reply.ok() && items.isArray())
        return items.toArray();
    if (failure) {
        *failure = reply;
        if (reply.ok())
            failure->markUnexpected(u"The server answered something that is not a page of "_s +
                                    what);
    }
    return std::nullopt;
}
} // namespace

void ApiReply::markUnexpected(const QString &what)
{
    status = UnexpectedAnswer;
    errorCode = u"unexpected_answer"_s;
    detail = what + u"; is it an AgentDeck server?"_s;
}

QString ApiReply::errorSentence() const
{
    if (ok())
        return {};
    if (timedOut && wasRead)
        return u"The server did not answer in time (%1)."_s.arg(detail);
    if (timedOut)
        return u"The server did not answer in time (%1); the request may still take effect once "
               "it does."_s.arg(detail);
    if (unreachable())
        return detail.isEmpty() ? u"The server cannot be reached."_s
                                : u"The server cannot be reached: "_s + detail;
    QString sentence =
        detail.isEmpty() ? u"The server answered with status %1."_s.arg(status) : detail;
    // The server's details are sentences without their full stop, as ctl prints its own: "...
    // when one of them ends Retry in 5 s." ran the two together.
    if (!retryAfter.isEmpty())
        sentence += u"; retry in %1 s"_s.arg(QString::fromLatin1(retryAfter));
    return sentence;
}

ServerConnection::ServerConnection(const QUrl &baseUrl, QObject *parent)
    : QObject(parent)
    , m_baseUrl(baseUrl)
{}

namespace {
QByteArray &clientUserAgent()
{
    static QByteArray value = "agentdeck/" AGENTDECK_VERSION;
    return value;
}
} // namespace

void ServerConnection::setClientName(const QString &name)
{
    clientUserAgent() = "agentdeck-" + name.toLatin1() + "/" AGENTDECK_VERSION;
}

QByteArray ServerConnection::userAgent()
{
    return clientUserAgent();
}

bool ServerConnection::isSendableApiKey(const QString &key)
{
    return std::none_of(key.cbegin(), key.cend(),
                        [](QChar c) { return c.unicode() < 0x20 || c.unicode() == 0x7f; });
}

std::optional<QUrl> ServerConnection::baseUrlFrom(QString text)
{
    if (!text.contains(u"://"_s)) {
        // A scheme with a slash missing ("http:/host:8000") became the host "http".
        if (text.contains(u":/"_s))
            return std::nullopt;
        text.prepend(u"http://"_s);
    }
    const QUrl url(text, QUrl::StrictMode);
    if (!url.isValid() || url.host().isEmpty() || url.hasQuery() || url.hasFragment() ||
        (url.scheme() != u"http"_s && url.scheme() != u"https"_s))
        return std::nullopt;
    return url;
}

QUrl ServerConnection::urlFor(const QString &path) const
{
    QUrl url = m_baseUrl;
    QString prefix = m_baseUrl.path();
    while (prefix.endsWith(u'/'))
        prefix.chop(1);
    url.setPath(prefix + path);
    return url;
}

QString ServerConnection::conversationPath(const QUuid &id, QStringView suffix)
{
    QString path = u"/api/conversations/"_s + toWireId(id);
    if (!suffix.isEmpty())
        path += u'/' + suffix;
    return path;
}

QCoro::Task<ApiReply> ServerConnection::request(QByteArray method, QString path, QUrlQuery query,
                                                QByteArray body)
{
    QUrl url = urlFor(path);
    if (!query.isEmpty())
        url.setQuery(query);
    QNetworkRequest networkRequest(url);
    networkRequest.setAttribute(QNetworkRequest::Http2AllowedAttribute, false);
    // Qt takes an int: past ~24.8 days it overflowed, and the timeout was off.
    networkRequest.setTransferTimeout(
        int(std::min<qint64>(m_silenceTimeout.count(), std::numeric_limits<int>::max())));
    networkRequest.setHeader(QNetworkRequest::UserAgentHeader, userAgent());
    if (!m_apiKey.isEmpty())
        networkRequest.setRawHeader("X-Session-API-Key", m_apiKey.toUtf8());
    if (!body.isEmpty())
        networkRequest.setHeader(QNetworkRequest::ContentTypeHeader, "application/json"_ba);

    QNetworkReply *reply = send(m_network, networkRequest, method, body);
    // Read as it comes, so that an answer is in memory once, and given up past the bound. The
    // download outlives this frame: abort() finishes the reply, which may resume (and end)
    // this coroutine before the slot returns.
    struct Download
    {
        QByteArray body;
        bool tooLarge = false;
    };
    const auto download = std::make_shared<Download>();
    // Without a bound Qt reads on, and queues all it read for this thread (see send()).
    reply->setReadBufferSize(ReadBufferBytes);
    const auto giveUp = [reply, download] {
        download->tooLarge = true;
        download->body.clear();
        reply->abort();
    };
    connect(reply, &QNetworkReply::readyRead, reply, [reply, download, giveUp] {
        download->body += reply->readAll();
        if (download->body.size() > MaxAnswerBytes)
            giveUp();
    });
    connect(reply, &QNetworkReply::downloadProgress, reply, [giveUp](qint64, qint64 total) {
        if (total > MaxAnswerBytes) // announced by Content-Length
            giveUp();
    });
    co_await reply;
    reply->deleteLater();

    ApiReply result;
    result.wasRead = method == "GET" || method == "HEAD";
    if (download->tooLarge) {
        result.markUnexpected(u"The server's answer is larger than %1 MiB, which no AgentDeck "
                              "answer is"_s.arg(MaxAnswerBytes / (1024 * 1024)));
        co_return result;
    }
    result.status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
    result.body = std::move(download->body);
    if (reply->isOpen()) // a reply cut by the timeout is closed, and reading it warned
        result.body += reply->readAll();
    result.retryAfter = reply->rawHeader("Retry-After");
    if (result.status == 0) {
        // Qt reports its transfer timeout as a cancellation. The request may have arrived: a
        // frozen server that wakes up carries it out.
        result.timedOut = reply->error() == QNetworkReply::OperationCanceledError;
        // Which server: ctl and the console may have found it themselves (a console's server).
        result.detail =
            result.timedOut
                ? u"it did not answer within %1 ms"_s.arg(m_silenceTimeout.count())
                : u"%1 (%2)"_s.arg(reply->errorString(), m_baseUrl.toString(QUrl::RemoveUserInfo));
        co_return result;
    }
    QJsonParseError parseError;
    const QJsonDocument document = QJsonDocument::fromJson(result.body, &parseError);
    if (parseError.error == QJsonParseError::NoError) {
        if (document.isObject())
            result.json = document.object();
        else if (document.isArray())
            result.json = document.array();
    } else {
        // Bare scalars (the count route answers an integer) are not documents for QJsonDocument.
        bool isNumber = false;
        const qlonglong number = result.body.trimmed().toLongLong(&isNumber);
        if (isNumber)
            result.json = number;
    }
    if (!result.ok()) {
        const QJsonObject error = result.json.toObject();
        result.errorCode = error.value(u"code"_s).toString();
        result.detail = error.value(u"detail"_s).toString();
        // Every 404 of AgentDeck's names its code: one without is another web server's (ctl
        // exited 3, "not found", for a conversation on a server that was never AgentDeck).
        if (result.status == 404 && result.errorCode.isEmpty())
            result.markUnexpected(u"The server answered 404 without AgentDeck's error"_s);
    }
    co_return result;
}

QCoro::Task<ApiReply> ServerConnection::get(QString path, QUrlQuery query)
{
    return request("GET"_ba, std::move(path), std::move(query));
}

QCoro::Task<ApiReply> ServerConnection::post(QString path, QJsonValue body)
{
    return request("POST"_ba, std::move(path), {}, toBody(body));
}

QCoro::Task<ApiReply> ServerConnection::patch(QString path, QJsonValue body)
{
    return request("PATCH"_ba, std::move(path), {}, toBody(body));
}

QCoro::Task<ApiReply> ServerConnection::deleteResource(QString path)
{
    return request("DELETE"_ba, std::move(path));
}

QCoro::Task<ApiReply> ServerConnection::createConversation(CreateConversationRequest request)
{
    return post(u"/api/conversations"_s, request.toJson());
}

QCoro::Task<std::optional<ConversationInfo>> ServerConnection::conversation(QUuid id)
{
    auto getting = get(conversationPath(id));
    const ApiReply reply = co_await std::move(getting);
    if (!reply.ok())
        co_return std::nullopt;
    co_return ConversationInfo::fromJson(reply.json.toObject());
}

QCoro::Task<std::optional<qint64>> ServerConnection::countConversations(ConversationFilter filter)
{
    QUrlQuery query;
    filter.writeTo(query);
    auto counting = get(u"/api/conversations/count"_s, query);
    const ApiReply reply = co_await std::move(counting);
    if (!reply.ok() || !reply.json.isDouble() || reply.json.toDouble() < 0)
        co_return std::nullopt;
    co_return qint64(reply.json.toDouble());
}

QCoro::Task<std::optional<ConversationPage>>
ServerConnection::searchConversations(ConversationFilter filter, ConversationSort sort,
                                      QString pageId, int limit, ApiReply *failure)
{
    QUrlQuery query;
    filter.writeTo(query);
    query.addQueryItem(u"sort_order"_s, toString(sort));
    query.addQueryItem(u"limit"_s, QString::number(limit));
    if (!pageId.isEmpty())
        query.addQueryItem(u"page_id"_s, pageId);
    auto searching = get(u"/api/conversations/search"_s, query);
    const ApiReply reply = co_await std::move(searching);
    const auto items = pageItems(reply, u"conversations"_s, failure);
    if (!items)
        co_return std::nullopt;
    ConversationPage page;
    for (const QJsonValue &item : *items) {
        if (auto info = ConversationInfo::fromJson(item.toObject()))
            page.items.append(std::move(*info));
    }
    page.nextPageId = reply.json.toObject().value(u"next_page_id"_s).toString();
    co_return page;
}

QCoro::Task<std::optional<QList<Event>>> ServerConnection::eventsAfter(QUuid id, qint64 afterSeq,
                                                                       int limit, ApiReply *failure)
{
    QUrlQuery query;
    query.addQueryItem(u"after_seq"_s, QString::number(afterSeq));
    query.addQueryItem(u"limit"_s, QString::number(limit));
    auto searching = get(conversationPath(id, u"events/search"), query);
    const ApiReply reply = co_await std::move(searching);
    const auto items = pageItems(reply, u"events"_s, failure);
    if (!items)
        co_return std::nullopt;
    QList<Event> events;
    for (const QJsonValue &item : *items) {
        if (auto event = Event::fromJson(item.toObject()))
            events.append(std::move(*event));
    }
    co_return events;
}

QCoro::Task<std::optional<AuditPage>>
ServerConnection::searchAudit(AuditQuery query, QString pageId, ApiReply *failure)
{
    QUrlQuery parameters;
    query.writeTo(parameters);
    if (!pageId.isEmpty())
        parameters.addQueryItem(u"page_id"_s, pageId);
    auto searching = get(u"/api/audit"_s, parameters);
    const ApiReply reply = co_await std::move(searching);
    const auto items = pageItems(reply, u"audit records"_s, failure);
    if (!items)
        co_return std::nullopt;
    AuditPage page;
    for (const QJsonValue &item : *items) {
        if (auto entry = AuditEntry::fromJson(item.toObject()))
            page.items.append(std::move(*entry));
    }
    page.nextPageId = reply.json.toObject().value(u"next_page_id"_s).toString();
    co_return page;
}

QCoro::Task<ApiReply> ServerConnection::sendMessage(QUuid id, MessageRequest message)
{
    return post(conversationPath(id, u"events"), message.toJson());
}

QCoro::Task<ApiReply> ServerConnection::conversationAction(QUuid id, QString action)
{
    return post(conversationPath(id, action));
}

EventStream *ServerConnection::openEventStream(const QUuid &id, qint64 afterSeq, QObject *parent)
{
    QUrl url = urlFor(u"/sockets/events/"_s + toWireId(id));
    url.setScheme(m_baseUrl.scheme() == u"https"_s ? u"wss"_s : u"ws"_s);
    return new EventStream(url, m_apiKey, afterSeq, m_silenceTimeout, parent);
}

LifecycleFeed *ServerConnection::openLifecycleFeed(std::optional<qint64> after, QObject *parent)
{
    QUrl url = urlFor(u"/sockets/lifecycle"_s);
    url.setScheme(m_baseUrl.scheme() == u"https"_s ? u"wss"_s : u"ws"_s);
    return new LifecycleFeed(url, m_apiKey, after, m_silenceTimeout, parent);
}

EventStream::EventStream(const QUrl &url, const QString &apiKey, qint64 afterSeq,
                         std::chrono::milliseconds silenceTimeout, QObject *parent)
    : QObject(parent)
    , m_lastSeq(afterSeq)
    // 4001 (auth), 4004 (unknown conversation) and 4022 (bad parameter) end the stream.
    , m_socket(new FollowedSocket(
          url, apiKey, silenceTimeout,
          [this] {
              return QUrlQuery{{u"after_seq"_s, QString::number(m_lastSeq)}};
          },
          {4001, 4004, 4022}, this))
{
    connect(m_socket, &FollowedSocket::connected, this, &EventStream::connected);
    connect(m_socket, &FollowedSocket::textReceived, this, &EventStream::onTextMessage);
    connect(m_socket, &FollowedSocket::closedByServer, this, &EventStream::closedByServer);
    connect(m_socket, &FollowedSocket::disconnected, this, &EventStream::disconnected);
    m_socket->start();
}

EventStream::~EventStream() = default;

bool EventStream::isConnected() const
{
    return m_socket->isConnected();
}

void EventStream::close()
{
    m_socket->close();
}

void EventStream::reconnectNow()
{
    m_socket->reconnectNow();
}

void EventStream::sendMessage(const MessageRequest &message)
{
    m_socket->sendText(
        QString::fromUtf8(QJsonDocument(message.toJson()).toJson(QJsonDocument::Compact)));
}

CommandOutputFollower::Piece CommandOutputFollower::take(const QJsonObject &frame)
{
    const auto action = parseWireId(frame.value(u"action_id"_s).toString());
    if (frame.value(u"kind"_s) != u"CommandOutput"_s || !action)
        return {};
    QString text = frame.value(u"text"_s).toString();
    const qint64 offset = frame.value(u"offset"_s).toInteger();
    if (*action != m_action) {
        m_action = *action;
        m_end = offset;
    }
    // Before the end of what was taken: the part after it is new. After it (what was missed
    // while this stream was not live): taken as it is.
    if (offset < m_end)
        text.remove(0, std::min<qint64>(text.size(), m_end - offset));
    m_end = std::max(m_end, offset + frame.value(u"text"_s).toString().size());
    return {*action, text};
}

void EventStream::onTextMessage(const QString &message)
{
    const QJsonObject object = QJsonDocument::fromJson(message.toUtf8()).object();
    if (object.value(u"type"_s) == u"error"_s) {
        Q_EMIT errorFrame(object.value(u"code"_s).toString(), object.value(u"detail"_s).toString());
        return;
    }
    if (object.value(u"type"_s) == u"transient"_s) {
        Q_EMIT transientReceived(object);
        return;
    }
    const auto event = Event::fromJson(object);
    if (!event || event->seq <= m_lastSeq)
        return;
    m_lastSeq = event->seq;
    Q_EMIT eventReceived(*event);
}

} // namespace AgentDeck
