#include "bashstreamsession.h"

#include "bashevents.h"
#include "eventstreams.h"
#include "websocketconnection.h"
#include "wiretypes.h"

#include <QDateTime>
#include <QJsonDocument>
#include <QJsonObject>
#include <QUuid>

using namespace Qt::StringLiterals;

namespace AgentDeck {

BashStreamSession::BashStreamSession(std::unique_ptr<WebSocketConnection> socket, quint64 serial,
                                     bool resendAll, std::optional<QByteArray> key, QString client,
                                     EventStreams &streams, QObject *parent)
    : StreamSession(std::move(socket), serial, std::move(key), std::move(client), streams, parent)
    , m_resendAll(resendAll)
{}

void BashStreamSession::beginStreaming()
{
    // Following first, then the snapshot: an event added in between comes twice, and its
    // number tells the second one apart.
    connect(&m_streams.bashEvents(), &BashEventLog::added, this, &BashStreamSession::onAdded);
    const auto [events, last] = m_streams.bashEvents().snapshot();
    if (m_resendAll) {
        m_socket->cork();
        for (const QByteArray &event : events) {
            if (m_streams.send(*m_socket, WebSocketConnection::textFrame(event)) !=
                EventStreams::Sent::Yes) {
                closeWith(CloseSlowConsumer, u"slow_consumer"_s);
                return;
            }
        }
        m_socket->uncork();
    }
    m_lastNumber = last;
}

void BashStreamSession::onAdded(quint64 number, const QByteArray &json)
{
    if (!isStreaming() || number <= m_lastNumber)
        return;
    m_lastNumber = number;
    if (m_streams.send(*m_socket, WebSocketConnection::textFrame(json)) ==
        EventStreams::Sent::SlowConsumer)
        closeWith(CloseSlowConsumer, u"slow_consumer"_s);
}

void BashStreamSession::sendBashError(const QString &code, const QString &detail)
{
    if (!isStreaming())
        return;
    // OpenHands' BashError.
    const QJsonObject error{{u"kind"_s, u"BashError"_s},
                            {u"id"_s, QUuid::createUuid().toString(QUuid::WithoutBraces)},
                            {u"timestamp"_s, toWireTime(QDateTime::currentMSecsSinceEpoch())},
                            {u"code"_s, code},
                            {u"detail"_s, detail}};
    m_socket->sendText(QJsonDocument(error).toJson(QJsonDocument::Compact));
}

void BashStreamSession::onFrame(const QByteArray &message)
{
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
