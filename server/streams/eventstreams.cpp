#include "eventstreams.h"

#include "apierror.h"
#include "auditfeed.h"
#include "bashevents.h"
#include "bashstreamsession.h"
#include "conversationservice.h"
#include "eventstreamsession.h"
#include "http/apiauth.h"
#include "http/httplistener.h"
#include "http/httptypes.h"
#include "lifecyclestreamsession.h"
#include "logging.h"
#include "metrics.h"
#include "storage/auditlog.h"
#include "storage/conversationstore.h"
#include "storage/database.h"
#include "websocketconnection.h"
#include "wiretypes.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QPointer>
#include <QTcpSocket>
#include <QThread>
#include <QUrlQuery>

#ifdef __GLIBC__
#include <malloc.h>
#endif

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {
// Runs in the main thread, where the service lives; the answer (an empty code when the
// message was stored) goes back to the streams' thread.
QCoro::Task<> storeMessage(ConversationService &service, QUuid id, MessageRequest request,
                           ChangeCause cause,
                           std::function<void(QString code, QString detail)> answer)
{
    try {
        auto sending = service.sendMessage(id, std::move(request), std::move(cause));
        co_await std::move(sending);
        answer({}, {});
    } catch (const ApiError &apiError) {
        answer(apiError.code, apiError.detail);
    } catch (const std::exception &failure) {
        qCWarning(lcStreams) << "message frame failed:" << failure.what();
        answer(u"internal_error"_s, u"The message could not be stored"_s);
    }
}
} // namespace

std::unique_ptr<EventStreams> EventStreams::open(Context context, QString *error)
{
    auto database = context.database.openAnother(error);
    if (!database)
        return nullptr;
    return std::unique_ptr<EventStreams>(new EventStreams(std::move(context), std::move(database)));
}

EventStreams::EventStreams(Context context, std::unique_ptr<Database> database)
    : m_context(std::move(context))
    , m_sendBudget(m_context.settings.totalSendBudgetBytes,
                   &m_context.metrics.webSocketUnsentBytes())
    , m_database(std::move(database))
    // Read-only, and the rows change under it: no cache.
    , m_store(std::make_unique<ConversationStore>(*m_database, 0))
    , m_auditReader(std::make_unique<AuditLog>(*m_database, QString()))
{
    if (m_context.audit)
        m_auditFeed = std::make_unique<AuditFeed>(*m_context.audit, m_context.database);
    // At most twice a second, after the session's memory is freed (deleteLater).
    m_trim.setSingleShot(true);
    m_trim.setInterval(500);
#ifdef __GLIBC__
    m_trim.callOnTimeout(this, [] { malloc_trim(0); });
#endif
    // Emitted in the main thread: queued to this one.
    connect(&m_context.service, &ConversationService::deleted, this, [this](const QUuid &id) {
        const auto sessions = m_sessions;
        for (EventStreamSession *session : sessions) {
            if (session->conversationId() == id)
                session->conversationDeleted();
        }
    });
}

EventStreams::~EventStreams()
{
    const auto sessions = m_sessions;
    for (EventStreamSession *session : sessions)
        delete session;
    qDeleteAll(std::exchange(m_bashSessions, {}));
    qDeleteAll(std::exchange(m_lifecycleSessions, {}));
}

void EventStreams::acceptFrom(HttpListener &listener)
{
    connect(
        &listener, &HttpListener::upgradeRequested, this,
        [this](QTcpSocket *socket, const QByteArray &head) {
            // In the listener's thread, from within the socket's readyRead: the socket may
            // change threads only once that has returned, and only without a parent.
            QMetaObject::invokeMethod(
                socket,
                [self = QPointer(this), socket, head] {
                    if (!self) {
                        socket->abort();
                        socket->deleteLater();
                        return;
                    }
                    socket->setParent(nullptr);
                    socket->moveToThread(self->thread());
                    QMetaObject::invokeMethod(
                        self.data(),
                        [streams = self.data(), socket, head] { streams->onUpgrade(socket, head); },
                        Qt::QueuedConnection);
                },
                Qt::QueuedConnection);
        },
        Qt::DirectConnection);
}

void EventStreams::closeAll()
{
    const auto sessions = m_sessions;
    for (EventStreamSession *session : sessions)
        session->closeWith(WebSocketConnection::CloseGoingAway, u"server stopping"_s);
    const auto bashSessions = m_bashSessions;
    for (BashStreamSession *session : bashSessions)
        session->closeWith(WebSocketConnection::CloseGoingAway, u"server stopping"_s);
    const auto lifecycleSessions = m_lifecycleSessions;
    for (LifecycleStreamSession *session : lifecycleSessions)
        session->closeWith(WebSocketConnection::CloseGoingAway, u"server stopping"_s);
}

void EventStreams::sendMessage(EventStreamSession *session, MessageRequest request)
{
    QPointer<EventStreams> self(this);
    auto answer = [self, serial = session->serial()](QString code, QString detail) {
        // The streams go before the service when the server is destroyed, both from the main
        // thread: `self` cannot be cleared while this reads it.
        if (self)
            QMetaObject::invokeMethod(
                self.data(),
                [streams = self.data(), serial, code, detail] {
                    streams->answerSession(serial, code, detail);
                },
                Qt::QueuedConnection);
    };
    QMetaObject::invokeMethod(
        &m_context.service,
        [&service = m_context.service, id = session->conversationId(), request = std::move(request),
         cause = ChangeCause{session->actor(), {}}, answer = std::move(answer)]() mutable {
            storeMessage(service, id, std::move(request), std::move(cause), std::move(answer));
        },
        Qt::QueuedConnection);
}

EventStreams::Authenticated EventStreams::authenticate(const std::optional<QByteArray> &key,
                                                       QString *keyName) const
{
    if (!m_context.auth.enabled())
        return Authenticated::Yes;
    if (!key)
        return Authenticated::AwaitingFrame;
    const std::optional<QString> name = m_context.auth.nameOf(*key);
    if (name && keyName)
        *keyName = *name;
    return name ? Authenticated::Yes : Authenticated::No;
}

bool EventStreams::acceptsAuthFrame(const QByteArray &frame, QString *keyName) const
{
    const QJsonObject object = QJsonDocument::fromJson(frame).object();
    if (object.value(u"type"_s) != u"auth"_s)
        return false;
    const std::optional<QString> name =
        m_context.auth.nameOf(object.value(u"session_api_key"_s).toString().toUtf8());
    if (name && keyName)
        *keyName = *name;
    return name.has_value();
}

EventStreams::Sent EventStreams::send(WebSocketConnection &socket, const QByteArray &frame)
{
    const qint64 budget = m_context.settings.sendBudgetBytes;
    qint64 unsent = socket.bytesToWrite();
    // Frames held for the burst's one write are no backlog: they go now rather than make a
    // reader that keeps up a slow consumer (a burst of 16 events of 1 MB did, while the
    // fan-out to 300 subscribers that did not read let events pile up).
    if (unsent > 0 && unsent + frame.size() > budget) {
        socket.writeHeld();
        unsent = socket.bytesToWrite();
    }
    // A frame larger than the whole budget goes when nothing else is unsent: a client that
    // drained everything is not slow, and it was closed at such an event on every reconnect.
    if (unsent > 0 && unsent + frame.size() > budget) {
        qCInfo(lcStreams) << "a slow consumer has" << unsent << "bytes unsent";
        m_context.metrics.slowConsumerDropped();
        return Sent::SlowConsumer;
    }
    // Over the server's budget the slowest consumers go, this one perhaps.
    if (!m_sendBudget.makeRoom(frame, &socket))
        return Sent::Dropped;
    socket.sendFrame(frame);
    return Sent::Yes;
}

template<typename Read> auto EventStreams::retried(Read read) -> decltype(read())
{
    try {
        return read();
    } catch (const StorageError &error) {
        qCInfo(lcStreams) << "a stream's read failed; trying again:" << error.what();
    }
    return read();
}

std::optional<qint64> EventStreams::eventCountOf(const QUuid &conversationId)
{
    return retried([&]() -> std::optional<qint64> {
        const auto info = m_store->find(conversationId);
        return info ? std::optional(info->eventCount) : std::nullopt;
    });
}

QList<StoredEvent> EventStreams::eventsAfter(const QUuid &conversationId, qint64 afterSeq,
                                             int limit, qsizetype maxBytes)
{
    return retried([&] { return m_store->eventsAfter(conversationId, afterSeq, limit, maxBytes); });
}

QList<AuditRecord> EventStreams::auditRecordsAfter(qint64 afterNumber, const QString &action,
                                                   const QUuid &conversationId, int limit)
{
    AuditLog::Query query;
    query.action = action;
    query.conversationId = conversationId;
    query.results = AuditLog::Query::Results::Done;
    query.descending = false;
    query.after = afterNumber;
    query.limit = limit;
    return retried([&] { return m_auditReader->search(query).first; });
}

qint64 EventStreams::newestAuditNumber()
{
    AuditLog::Query query;
    query.limit = 1;
    const QList<AuditRecord> newest = retried([&] { return m_auditReader->search(query).first; });
    return newest.isEmpty() ? 0 : newest.constFirst().number;
}

void EventStreams::answerSession(quint64 serial, const QString &code, const QString &detail)
{
    if (EventStreamSession *session = m_sessions.value(serial))
        session->messageAnswered(code, detail);
}

void EventStreams::onUpgrade(QTcpSocket *socket, const QByteArray &head)
{
    WebSocketConnection::Handshake handshake = WebSocketConnection::parseHandshake(head);
    const QStringList segments = handshake.path.split(u'/', Qt::SkipEmptyParts);
    // Only a stream's path upgrades; another was switched, then closed with 4004.
    const bool bashPath =
        segments.size() == 2 && segments[0] == u"sockets"_s && segments[1] == u"bash-events"_s;
    const bool lifecyclePath = m_auditFeed && segments.size() == 2 && segments[0] == u"sockets"_s &&
                               segments[1] == u"lifecycle"_s;
    const bool streamPath =
        bashPath || lifecyclePath ||
        (segments.size() == 3 && segments[0] == u"sockets"_s && segments[1] == u"events"_s);
    if (handshake.refusal.isEmpty() && !streamPath)
        handshake.refusal =
            HttpResponse::error(ApiError::notFound(u"No stream at %1"_s.arg(handshake.path)))
                .closingAnswer();
    if (handshake.refusal.isEmpty()) {
        if (auto refused = m_context.auth.browserRefusal(handshake.host, handshake.origin))
            handshake.refusal = HttpResponse::error(*refused).closingAnswer();
    }
    if (!handshake.refusal.isEmpty()) {
        // Without the query: it may hold a session API key.
        const QByteArray requestLine = head.left(head.indexOf('\r'));
        const qsizetype query = requestLine.indexOf('?');
        qCInfo(lcStreams) << "refusing a WebSocket upgrade:"
                          << (query < 0 ? requestLine : requestLine.left(query));
        socket->setParent(this);
        connect(socket, &QTcpSocket::disconnected, socket, &QObject::deleteLater);
        socket->write(handshake.refusal);
        socket->disconnectFromHost();
        return;
    }
    auto connection = std::make_unique<WebSocketConnection>(
        socket, handshake.accept, handshake.url, m_context.settings.maxMessageBytes, &m_sendBudget);
    const QUrl &url = handshake.url;
    const QUrlQuery query(url);
    // OpenHands' clients (1.39) send the key in the URL rather than in an auth frame; others
    // in the X-Session-API-Key header.
    std::optional<QByteArray> key = handshake.sessionKey;
    if (query.hasQueryItem(u"session_api_key"_s))
        key = query.queryItemValue(u"session_api_key"_s, QUrl::FullyDecoded).toUtf8();
    if (bashPath) {
        acceptBashStream(std::move(connection), std::move(key),
                         Actor::clientFrom(handshake.userAgent));
        return;
    }
    if (lifecyclePath) {
        acceptLifecycleStream(std::move(connection), std::move(key),
                              Actor::clientFrom(handshake.userAgent));
        return;
    }
    const auto id = parseWireId(segments[2]);
    std::optional<qint64> afterSeq;
    bool validQuery = true;
    if (query.queryItemValue(u"resend_all"_s).toLower() == u"true"_s) {
        afterSeq = 0;
    } else if (query.hasQueryItem(u"after_seq"_s)) {
        afterSeq = parseWireCount(query.queryItemValue(u"after_seq"_s));
        validQuery = afterSeq.has_value();
    }
    if (!id || !validQuery) {
        // A bad after_seq is not an unknown conversation: clients give up on 4004.
        refuse(std::move(connection),
               id ? EventStreamSession::CloseInvalidParameter : EventStreamSession::CloseNotFound,
               id ? u"after_seq must be a whole number from 0"_s : u"unknown stream"_s);
        return;
    }
    const quint64 serial = m_nextSerial++;
    keep(m_sessions,
         new EventStreamSession(std::move(connection), serial, *id, afterSeq, std::move(key),
                                Actor::clientFrom(handshake.userAgent), *this));
}

template<typename Session>
void EventStreams::keep(QHash<quint64, Session *> &sessions, Session *session)
{
    sessions.insert(session->serial(), session);
    m_context.metrics.webSocketOpened();
    connect(session, &StreamSession::finished, this, [this, &sessions](StreamSession *done) {
        if (sessions.remove(done->serial())) {
            m_context.metrics.webSocketClosed();
            done->deleteLater();
            if (!m_trim.isActive())
                m_trim.start();
        }
    });
    session->start();
}

void EventStreams::refuse(std::unique_ptr<WebSocketConnection> connection, int code,
                          const QString &reason)
{
    qCInfo(lcStreams) << "refusing stream for" << connection->requestUrl().path() << ":" << reason;
    auto *raw = connection.release();
    raw->setParent(this);
    connect(raw, &WebSocketConnection::disconnected, raw, &QObject::deleteLater);
    raw->close(quint16(code), reason);
}

void EventStreams::acceptLifecycleStream(std::unique_ptr<WebSocketConnection> connection,
                                         std::optional<QByteArray> key, QString client)
{
    const QUrlQuery query(connection->requestUrl());
    std::optional<qint64> after;
    LifecycleStreamSession::Filter filter;
    QString invalid;
    if (query.hasQueryItem(u"after"_s)) {
        after = parseWireCount(query.queryItemValue(u"after"_s));
        if (!after)
            invalid = u"after must be a record's id, a whole number from 0"_s;
    }
    if (query.hasQueryItem(u"conversation_id"_s)) {
        const auto id = parseWireId(query.queryItemValue(u"conversation_id"_s));
        if (id)
            filter.conversationId = *id;
        else
            invalid = u"conversation_id must be a conversation's id"_s;
    }
    filter.action = query.queryItemValue(u"action"_s, QUrl::FullyDecoded);
    if (!invalid.isEmpty()) {
        refuse(std::move(connection), EventStreamSession::CloseInvalidParameter, invalid);
        return;
    }
    const quint64 serial = m_nextSerial++;
    keep(m_lifecycleSessions,
         new LifecycleStreamSession(std::move(connection), serial, after, std::move(filter),
                                    std::move(key), std::move(client), *this));
}

void EventStreams::acceptBashStream(std::unique_ptr<WebSocketConnection> connection,
                                    std::optional<QByteArray> key, QString client)
{
    const QUrlQuery query(connection->requestUrl());
    const bool resendAll = query.queryItemValue(u"resend_mode"_s) == u"all"_s ||
                           query.queryItemValue(u"resend_all"_s).toLower() == u"true"_s;
    const quint64 serial = m_nextSerial++;
    keep(m_bashSessions, new BashStreamSession(std::move(connection), serial, resendAll,
                                               std::move(key), std::move(client), *this));
}

void EventStreams::startBashCommand(BashStreamSession *session, const QJsonObject &request)
{
    QPointer<EventStreams> self(this);
    auto refused = [self, serial = session->serial()](QString code, QString detail) {
        if (self)
            QMetaObject::invokeMethod(
                self.data(),
                [streams = self.data(), serial, code, detail] {
                    if (BashStreamSession *open = streams->m_bashSessions.value(serial))
                        open->sendBashError(code, detail);
                },
                Qt::QueuedConnection);
    };
    QMetaObject::invokeMethod(
        m_context.bashEvents.get(),
        [log = m_context.bashEvents, request, refused = std::move(refused)]() mutable {
            log->start(request, std::move(refused));
        },
        Qt::QueuedConnection);
}

} // namespace AgentDeck
