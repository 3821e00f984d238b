#include "streamsession.h"

#include "eventstreams.h"
#include "metrics.h"
#include "websocketconnection.h"

using namespace Qt::StringLiterals;

namespace AgentDeck {

StreamSession::StreamSession(std::unique_ptr<WebSocketConnection> socket, quint64 serial,
                             std::optional<QByteArray> urlKey, QString client,
                             EventStreams &streams, QObject *parent)
    : QObject(parent)
    , m_socket(std::move(socket))
    , m_streams(streams)
    , m_serial(serial)
    , m_urlKey(std::move(urlKey))
    , m_actor{{}, std::move(client)}
{
    m_authTimer.setSingleShot(true);
    connect(&m_authTimer, &QTimer::timeout, this,
            [this] { closeWith(CloseUnauthorized, u"no auth frame in time"_s); });
    connect(m_socket.get(), &WebSocketConnection::textMessageReceived, this,
            &StreamSession::onMessage);
    // Not one JSON object either: answered as such a text frame is.
    connect(m_socket.get(), &WebSocketConnection::binaryMessageReceived, this,
            [this] { onMessage({}); });
    // The server-wide budget dropped it (SendBudget): it is closing already.
    connect(m_socket.get(), &WebSocketConnection::droppedAsSlowConsumer, this, [this] {
        m_streams.metrics().slowConsumerDropped();
        markClosed();
    });
    connect(m_socket.get(), &WebSocketConnection::disconnected, this, [this] {
        markClosed();
        Q_EMIT finished(this);
    });
}

StreamSession::~StreamSession()
{
    // The connection aborts its socket when destroyed; nothing of that reaches this session.
    m_socket->disconnect(this);
}

void StreamSession::start()
{
    // With keys configured nothing, not even whether what it asks for exists, is told before.
    switch (m_streams.authenticate(m_urlKey, &m_actor.key)) {
    case EventStreams::Authenticated::Yes:
        m_authenticated = true;
        beginStreaming();
        break;
    case EventStreams::Authenticated::No:
        closeWith(CloseUnauthorized, u"unauthorized"_s);
        break;
    case EventStreams::Authenticated::AwaitingFrame:
        m_authTimer.start(m_streams.settings().authTimeoutMs);
        break;
    }
}

void StreamSession::closeWith(int code, const QString &reason)
{
    if (m_closed)
        return;
    markClosed();
    m_socket->close(quint16(code), reason, 5000,
                    code == CloseSlowConsumer ? WebSocketConnection::Unsent::Drop
                                              : WebSocketConnection::Unsent::Send);
}

void StreamSession::markClosed()
{
    if (std::exchange(m_closed, true))
        return;
    m_authTimer.stop();
    stopped();
}

void StreamSession::onMessage(const QByteArray &message)
{
    if (m_closed)
        return;
    if (m_authenticated) {
        onFrame(message);
        return;
    }
    if (!m_streams.acceptsAuthFrame(message, &m_actor.key)) {
        closeWith(CloseUnauthorized, u"unauthorized"_s);
        return;
    }
    m_authTimer.stop();
    m_authenticated = true;
    beginStreaming();
}

} // namespace AgentDeck
