#include "bashstreamsession.h"

#include "bashevents.h"
#include "eventstreams.h"
#include "eventstreamsession.h"
#include "metrics.h"
#include "websocketconnection.h"
#include "wiretypes.h"

#include <QDateTime>
#include <QJsonDocument>
#include <QJsonObject>
#include <QUuid>

using namespace Qt::StringLiterals;

namespace AgentDeck {

BashStreamSession::BashStreamSession(std::unique_ptr<WebSocketConnection> socket, quint64 serial,
                                     bool resendAll, std::optional<QByteArray> key,
                                     EventStreams &streams, QObject *parent)
    : QObject(parent)
    , m_socket(std::move(socket))
    , m_serial(serial)
    , m_resendAll(resendAll)
    , m_key(std::move(key))
    , m_streams(streams)
{
    m_authTimer.setSingleShot(true);
    connect(&m_authTimer, &QTimer::timeout, this, [this] {
        closeWith(EventStreamSession::CloseUnauthorized, u"no auth frame in time"_s);
    });
    connect(m_socket.get(), &WebSocketConnection::textMessageReceived, this,
            [this](const QByteArray &message) { onTextMessage(message); });
    connect(m_socket.get(), &WebSocketConnection::binaryMessageReceived, this,
            [this] { onTextMessage({}); });
    connect(m_socket.get(), &WebSocketConnection::droppedAsSlowConsumer, this, [this] {
        m_streams.metrics().slowConsumerDropped();
        m_state = State::Closed;
    });
    connect(m_socket.get(), &WebSocketConnection::disconnected, this, [this] {
        m_state = State::Closed;
        Q_EMIT finished(this);
    });
}

BashStreamSession::~BashStreamSession()
{
    m_socket->disconnect(this);
}

void BashStreamSession::start()
{
    switch (m_streams.authenticate(m_key)) {
    case EventStreams::Authenticated::Yes:
        beginStreaming();
        break;
    case EventStreams::Authenticated::No:
        closeWith(EventStreamSession::CloseUnauthorized, u"unauthorized"_s);
        break;
    case EventStreams::Authenticated::AwaitingFrame:
        m_authTimer.start(m_streams.settings().authTimeoutMs);
        break;
    }
}

void BashStreamSession::beginStreaming()
{
    m_state = State::Live;
    // Following first, then the snapshot: an event added in between comes twice, and its
    // number tells the second one apart.
    connect(&m_streams.bashEvents(), &BashEventLog::added, this, &BashStreamSession::onAdded);
    const auto [events, last] = m_streams.bashEvents().snapshot();
    if (m_resendAll) {
        m_socket->cork();
        for (const QByteArray &event : events) {
            if (m_streams.send(*m_socket, WebSocketConnection::textFrame(event)) !=
                EventStreams::Sent::Yes) {
                closeWith(EventStreamSession::CloseSlowConsumer, u"slow_consumer"_s);
                return;
            }
        }
        m_socket->uncork();
    }
    m_lastNumber = last;
}

void BashStreamSession::onAdded(quint64 number, const QByteArray &json)
{
    if (m_state != State::Live || number <= m_lastNumber)
        return;
    m_lastNumber = number;
    if (m_streams.send(*m_socket, WebSocketConnection::textFrame(json)) ==
        EventStreams::Sent::SlowConsumer)
        closeWith(EventStreamSession::CloseSlowConsumer, u"slow_consumer"_s);
}

void BashStreamSession::closeWith(int code, const QString &reason)
{
    if (m_state == State::Closed)
        return;
    m_state = State::Closed;
    m_authTimer.stop();
    m_socket->close(quint16(code), reason, 5000,
                    code == EventStreamSession::CloseSlowConsumer
                        ? WebSocketConnection::Unsent::Drop
                        : WebSocketConnection::Unsent::Send);
}

void BashStreamSession::sendBashError(const QString &code, const QString &detail)
{
    if (m_state != State::Live)
        return;
    // OpenHands' BashError.
    const QJsonObject error{{u"kind"_s, u"BashError"_s},
                            {u"id"_s, QUuid::createUuid().toString(QUuid::WithoutBraces)},
                            {u"timestamp"_s, toWireTime(QDateTime::currentMSecsSinceEpoch())},
                            {u"code"_s, code},
                            {u"detail"_s, detail}};
    m_socket->sendText(QJsonDocument(error).toJson(QJsonDocument::Compact));
}

void BashStreamSession::onTextMessage(const QByteArray &message)
{
    if (m_state == State::Authenticating) {
        if (!m_streams.acceptsAuthFrame(message)) {
            closeWith(EventStreamSession::CloseUnauthorized, u"unauthorized"_s);
            return;
        }
        m_authTimer.stop();
        beginStreaming();
        return;
    }
    if (m_state == State::Closed)
        return;
    QJsonParseError parseError;
    const QJsonDocument document = QJsonDocument::fromJson(message, &parseError);
    const bool isObject = parseError.error == QJsonParseError::NoError && document.isObject();
    const QJsonObject frame = document.object();
    if (!isObject) {
        sendBashError(u"malformed_json"_s, u"A frame must be one JSON object"_s);
        return;
    }
    if (frame.value(u"type"_s) == u"auth"_s)
        return; // a repeated auth frame is harmless
    m_streams.startBashCommand(this, frame);
}

} // namespace AgentDeck
