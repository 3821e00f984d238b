#include "eventstreams.h"

#include "conversationservice.h"
#include "eventstreamsession.h"
#include "http/apiauth.h"
#include "http/apiserver.h"
#include "logging.h"
#include "metrics.h"
#include "storage/conversationstore.h"
#include "wiretypes.h"

#include <QUrlQuery>
#include <QWebSocket>

using namespace Qt::StringLiterals;

namespace AgentDeck {

EventStreams::EventStreams(ApiServer &server, Context context, QObject *parent)
    : QObject(parent)
    , m_server(server)
    , m_context(std::move(context))
{
    connect(&m_server, &ApiServer::newWebSocketConnection, this, &EventStreams::onNewConnection);
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
        session->closeWith(QWebSocketProtocol::CloseCodeGoingAway, u"server stopping"_s);
}

void EventStreams::onNewConnection()
{
    while (m_server.hasPendingWebSocketConnections()) {
        std::unique_ptr<QWebSocket> socket = m_server.nextPendingWebSocketConnection();
        if (!socket)
            continue;
        const QUrl url = socket->requestUrl();
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
        auto *raw = socket.get();
        if (!id || !validQuery) {
            qCInfo(lcStreams) << "refusing stream for" << url.path();
            raw->close(QWebSocketProtocol::CloseCode(4004),
                       id ? u"invalid after_seq"_s : u"unknown stream"_s);
            raw->setParent(this);
            socket.release();
            connect(raw, &QWebSocket::disconnected, raw, &QObject::deleteLater);
            continue;
        }
        auto *session = new EventStreamSession(std::move(socket), *id, afterSeq, m_context);
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
}

} // namespace AgentDeck
