#include "eventstreams.h"

#include "conversationservice.h"
#include "eventstreamsession.h"
#include "http/apiauth.h"
#include "http/httplistener.h"
#include "logging.h"
#include "metrics.h"
#include "storage/conversationstore.h"
#include "websocketconnection.h"
#include "wiretypes.h"

#include <QTcpSocket>
#include <QUrlQuery>

using namespace Qt::StringLiterals;

namespace AgentDeck {

EventStreams::EventStreams(HttpListener &listener, Context context, QObject *parent)
    : QObject(parent)
    , m_context(std::move(context))
{
    connect(&listener, &HttpListener::upgradeRequested, this, &EventStreams::onUpgrade);
    connect(&m_context.service, &ConversationService::deleted, this, [this](const QUuid &id) {
        const auto sessions = m_sessions;
        for (EventStreamSession *session : sessions) {
            if (session->conversationId() == id)
                session->closeWith(4004, u"conversation deleted"_s);
        }
    });
}

EventStreams::~EventStreams()
{
    const auto sessions = m_sessions;
    for (EventStreamSession *session : sessions)
        delete session;
}

void EventStreams::closeAll()
{
    const auto sessions = m_sessions;
    for (EventStreamSession *session : sessions)
        session->closeWith(WebSocketConnection::CloseGoingAway, u"server stopping"_s);
}

void EventStreams::onUpgrade(QTcpSocket *socket, const QByteArray &head)
{
    const WebSocketConnection::Handshake handshake = WebSocketConnection::parseHandshake(head);
    if (!handshake.refusal.isEmpty()) {
        qCInfo(lcStreams) << "refusing a WebSocket upgrade:" << head.left(head.indexOf('\r'));
        socket->setParent(this);
        connect(socket, &QTcpSocket::disconnected, socket, &QObject::deleteLater);
        socket->write(handshake.refusal);
        socket->disconnectFromHost();
        return;
    }
    auto connection = std::make_unique<WebSocketConnection>(socket, handshake.accept, handshake.url,
                                                            m_context.settings.maxMessageBytes);
    const QUrl &url = handshake.url;
    const QStringList segments = url.path().split(u'/', Qt::SkipEmptyParts);
    const auto id =
        segments.size() == 3 && segments[0] == u"sockets"_s && segments[1] == u"events"_s
            ? parseWireId(segments[2])
            : std::nullopt;
    const QUrlQuery query(url);
    std::optional<qint64> afterSeq;
    bool validQuery = true;
    if (query.queryItemValue(u"resend_all"_s).toLower() == u"true"_s) {
        afterSeq = 0;
    } else if (query.hasQueryItem(u"after_seq"_s)) {
        afterSeq = query.queryItemValue(u"after_seq"_s).toLongLong(&validQuery);
        validQuery = validQuery && *afterSeq >= 0;
    }
    if (!id || !validQuery) {
        qCInfo(lcStreams) << "refusing stream for" << url.path();
        auto *raw = connection.release();
        raw->setParent(this);
        connect(raw, &WebSocketConnection::disconnected, raw, &QObject::deleteLater);
        raw->close(4004, id ? u"invalid after_seq"_s : u"unknown stream"_s);
        return;
    }
    auto *session = new EventStreamSession(std::move(connection), *id, afterSeq, m_context);
    m_sessions.insert(session);
    m_context.metrics.webSocketOpened();
    connect(session, &EventStreamSession::finished, this, [this](EventStreamSession *done) {
        if (m_sessions.remove(done)) {
            m_context.metrics.webSocketClosed();
            done->deleteLater();
        }
    });
    session->start();
}

} // namespace AgentDeck
