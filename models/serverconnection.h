#pragma once

#include "auditentry.h"
#include "conversationfilter.h"
#include "conversationrequests.h"
#include "wiretypes.h"

#include <QCoroTask>
#include <QJsonValue>
#include <QNetworkAccessManager>
#include <QObject>
#include <QPointer>
#include <QUrl>
#include <QUrlQuery>

#include <chrono>

namespace AgentDeck {

// What one HTTP call answered. A refused or dropped connection is a value (status 0), not an
// exception: callers decide what to tell the user.
struct ApiReply
{
    int status = 0;
    QByteArray body;
    QJsonValue json;
    QString errorCode;
    QString detail;
    QByteArray retryAfter;
    // No answer came in time (status 0): whether the request arrived is not known.
    bool timedOut = false;
    // It was a read (GET, HEAD), which changes nothing whether it arrived or not.
    bool wasRead = false;

    bool ok() const { return status >= 200 && status < 300; }
    // The status a reply is given when its 2xx answer is not what the API answers (502, as a
    // gateway would call it): a login page or another web server where AgentDeck was expected.
    static constexpr int UnexpectedAnswer = 502;
    bool unreachable() const { return status == 0; }
    // Makes this the reply to an answer no AgentDeck server gives; `what` says what came.
    void markUnexpected(const QString &what);
    // The one place that turns a server answer into a sentence for a person.
    QString errorSentence() const;
};

struct ConversationPage
{
    QList<ConversationInfo> items;
    QString nextPageId;
};

class EventStream;
class FollowedSocket;
class LifecycleFeed;

// The client of the REST and WebSocket API: the console, the CLI and the tests all use it.
class ServerConnection : public QObject
{
    Q_OBJECT
public:
    explicit ServerConnection(const QUrl &baseUrl, QObject *parent = nullptr);

    // The server as an operator names it: "host:port", or an http:// or https:// URL whose path
    // (a reverse proxy's prefix) goes before every API path. Nothing for anything else.
    static std::optional<QUrl> baseUrlFrom(QString text);
    // Whether `key` can be sent as a header value: a control character (a line break) in it
    // ended the header and began another one of the key's making.
    static bool isSendableApiKey(const QString &key);

    // The client every connection of this program names in User-Agent, "agentdeck-NAME/VERSION"
    // (the server records changes as made by a key's name "via NAME"); set once, at the start.
    static void setClientName(const QString &name);
    static QByteArray userAgent();

    QUrl baseUrl() const { return m_baseUrl; }
    QString apiKey() const { return m_apiKey; }
    void setApiKey(const QString &key) { m_apiKey = key; }

    QCoro::Task<ApiReply> request(QByteArray method, QString path, QUrlQuery query = {},
                                  QByteArray body = {});
    QCoro::Task<ApiReply> get(QString path, QUrlQuery query = {});
    QCoro::Task<ApiReply> post(QString path, QJsonValue body = {});
    QCoro::Task<ApiReply> patch(QString path, QJsonValue body);
    QCoro::Task<ApiReply> deleteResource(QString path);

    QCoro::Task<ApiReply> createConversation(CreateConversationRequest request);
    QCoro::Task<std::optional<ConversationInfo>> conversation(QUuid id);
    // Nothing when the search failed; `failure`, if given, then holds the answer (or its lack).
    QCoro::Task<std::optional<ConversationPage>>
    searchConversations(ConversationFilter filter,
                        ConversationSort sort = ConversationSort::CreatedAtDesc,
                        QString pageId = {}, int limit = 100, ApiReply *failure = nullptr);
    // How many conversations the filter matches; nothing when the count failed.
    QCoro::Task<std::optional<qint64>> countConversations(ConversationFilter filter);
    QCoro::Task<ApiReply> sendMessage(QUuid id, MessageRequest message);
    // Up to `limit` (1..100) events of `id` after seq `afterSeq`, in seq order; nothing when
    // the read failed, and `failure`, if given, then holds the answer (or its lack).
    QCoro::Task<std::optional<QList<Event>>> eventsAfter(QUuid id, qint64 afterSeq, int limit,
                                                         ApiReply *failure = nullptr);
    QCoro::Task<ApiReply> conversationAction(QUuid id, QString action);
    // A page of the audit log (GET /api/audit), newest first, from `pageId` (none: the
    // newest); nothing when the read failed, and `failure`, if given, then holds the answer.
    QCoro::Task<std::optional<AuditPage>> searchAudit(AuditQuery query, QString pageId = {},
                                                      ApiReply *failure = nullptr);

    // A live event stream of one conversation; replays everything after `afterSeq` first.
    EventStream *openEventStream(const QUuid &id, qint64 afterSeq, QObject *parent = nullptr);
    // The server's lifecycle feed: every change made, after the record `after` (none: from now).
    LifecycleFeed *openLifecycleFeed(std::optional<qint64> after, QObject *parent = nullptr);

    static QString conversationPath(const QUuid &id, QStringView suffix = {});

    // How long a request, or a followed stream, may go without a byte from the server before it
    // is given up (a stream then reconnects): a frozen server (SIGSTOP, a paused VM) kept ctl
    // and the console waiting for ever.
    static constexpr std::chrono::milliseconds DefaultSilenceTimeout{30'000};
    void setSilenceTimeout(std::chrono::milliseconds timeout) { m_silenceTimeout = timeout; }

    // The largest answer, or stream message, taken. Qt keeps an answer whole in memory, and a
    // server that never ended one grew ctl to 2.4 GB. AgentDeck's largest answers are far
    // smaller: a page of events stops past 8 MiB, and one event's JSON is at most ~24 MiB (a
    // 4 MiB message of control characters, each escaped in six).
    static constexpr qint64 MaxAnswerBytes = 64 * 1024 * 1024;

private:
    // `path` (from the root of the API) under the base URL's own path.
    QUrl urlFor(const QString &path) const;

    QUrl m_baseUrl;
    QString m_apiKey;
    std::chrono::milliseconds m_silenceTimeout = DefaultSilenceTimeout;
    QNetworkAccessManager m_network;
};

// Reads the CommandOutput frames of a stream: what each adds to the running command's output.
// The server sends what the command printed so far when a stream goes live, then each piece with
// its offset; a piece that repeats what that gave is cut to what is new.
class CommandOutputFollower
{
public:
    struct Piece
    {
        QUuid actionId;
        QString text; // empty: nothing new (or no CommandOutput frame)
    };
    Piece take(const QJsonObject &frame);

private:
    QUuid m_action;
    qint64 m_end = 0; // the offset after what was taken
};

// Follows one conversation's events over the WebSocket. Reconnects with backoff after a drop and
// resubscribes after the last seq it delivered, so a consumer sees every event once and in order.
class EventStream : public QObject
{
    Q_OBJECT
public:
    EventStream(const QUrl &url, const QString &apiKey, qint64 afterSeq,
                std::chrono::milliseconds silenceTimeout, QObject *parent = nullptr);
    ~EventStream() override;

    qint64 lastSeq() const { return m_lastSeq; }
    bool isConnected() const;
    void close();
    // The server is known to answer again: a stream waiting to reconnect does so now rather
    // than after its backoff (up to 10 s), with the backoff started over.
    void reconnectNow();
    // Sends a message frame (same body as POST /events).
    void sendMessage(const MessageRequest &message);

Q_SIGNALS:
    void connected();
    void eventReceived(const AgentDeck::Event &event);
    // A transient frame ({"type": "transient", ...}: a streamed text delta, what a running
    // command printed, CommandOutputFollower); never stored, no seq, not replayed.
    void transientReceived(const QJsonObject &frame);
    void errorFrame(const QString &code, const QString &detail);
    // The server closed the stream for good (auth failure, unknown conversation); no
    // disconnected() comes with it.
    void closedByServer(int code, const QString &reason);
    // The connection dropped; the stream reconnects.
    void disconnected();

private:
    void onTextMessage(const QString &message);

    qint64 m_lastSeq = 0;
    FollowedSocket *m_socket;
};

} // namespace AgentDeck
