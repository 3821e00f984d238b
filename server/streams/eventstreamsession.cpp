#include "eventstreamsession.h"

#include "http/apiauth.h"
#include "logging.h"
#include "metrics.h"
#include "signalwait.h"
#include "storage/conversationstore.h"
#include "storage/database.h"
#include "websocketconnection.h"

#include <QJsonDocument>
#include <QJsonObject>

using namespace Qt::StringLiterals;

namespace AgentDeck {

EventStreamSession::EventStreamSession(std::unique_ptr<WebSocketConnection> socket, quint64 serial,
                                       const QUuid &conversationId, std::optional<qint64> afterSeq,
                                       std::optional<QByteArray> urlKey, QString client,
                                       EventStreams &streams, QObject *parent)
    : StreamSession(std::move(socket), serial, std::move(urlKey), std::move(client), streams,
                    parent)
    , m_id(conversationId)
    , m_afterSeq(afterSeq)
{}

EventStreamSession::~EventStreamSession()
{
    if (!isClosed())
        m_streams.hub().unsubscribe(m_id, this);
}

void EventStreamSession::stopped()
{
    m_state = State::Closed;
    m_streams.hub().unsubscribe(m_id, this);
}

void EventStreamSession::conversationDeleted()
{
    if (m_state != State::Authenticating)
        closeWith(CloseNotFound, u"conversation deleted"_s);
}

void EventStreamSession::beginStreaming()
{
    // Subscribe first: from here on nothing committed escapes both the replay and the live path.
    // (An unknown conversation is unsubscribed again by closeWith().)
    m_streams.hub().subscribe(m_id, this);
    std::optional<qint64> committed;
    try {
        committed = m_streams.eventCountOf(m_id);
    } catch (const StorageError &error) {
        qCWarning(lcStreams) << "cannot start a stream:" << error.what();
        closeWith(WebSocketConnection::CloseInternalError, u"storage failure"_s);
        return;
    }
    if (!committed) {
        closeWith(CloseNotFound, u"unknown conversation"_s);
        return;
    }
    if (!m_afterSeq) {
        // Live only: start after whatever is committed now.
        m_lastSeq = *committed;
        goLive();
        return;
    }
    m_state = State::Replaying;
    m_lastSeq = *m_afterSeq;
    replay();
}

QCoro::Task<> EventStreamSession::replay()
{
    QPointer<EventStreamSession> self(this);
    const int pageSize = m_streams.settings().replayPageSize;
    const qint64 budget = m_streams.settings().sendBudgetBytes;
    // A page is held while the client drains it: 256 command outputs of 1 MiB made a page of
    // 256 MiB for every replaying socket, on top of its budget.
    const qint64 pageBytes = budget / 4;
    for (;;) {
        QList<StoredEvent> page;
        try {
            page = m_streams.eventsAfter(m_id, m_lastSeq, pageSize, pageBytes);
        } catch (const StorageError &error) {
            qCWarning(lcStreams) << "replay failed:" << error.what();
            closeWith(WebSocketConnection::CloseInternalError, u"storage failure"_s);
            co_return;
        }
        bool waited = false;
        qint64 bytes = 0;
        m_socket->cork(); // a page in one write, as far as the budget allows
        for (const StoredEvent &event : page) {
            bytes += event.json.size();
            // Replay goes at the client's pace: wait for it to drain rather than overrun the
            // budget. Only a client that drains nothing for the stall timeout is a slow consumer
            // here.
            const QByteArray frame = WebSocketConnection::textFrame(event.json);
            if (m_socket->bytesToWrite() + frame.size() > budget)
                m_socket->uncork(); // what the kernel takes now does not count against it
            while (m_socket->bytesToWrite() > 0 &&
                   m_socket->bytesToWrite() + frame.size() > budget) {
                waited = true;
                const qint64 before = m_socket->bytesToWrite();
                auto drained =
                    signalOrTimeout(m_socket.get(), &WebSocketConnection::bytesWritten,
                                    std::chrono::milliseconds(m_streams.settings().stallTimeoutMs));
                co_await std::move(drained);
                if (!self || m_state != State::Replaying)
                    co_return;
                if (m_socket->bytesToWrite() >= before) {
                    m_streams.metrics().slowConsumerDropped();
                    closeWith(CloseSlowConsumer, u"slow_consumer"_s);
                    co_return;
                }
            }
            if (!send(frame))
                co_return;
            m_lastSeq = event.seq;
        }
        m_socket->uncork();
        // Live only right after a short read with no wait since it: whatever was committed
        // after that read is published to us as live. (A page cut at its byte bound is not
        // short; one that ended there anyway is followed by an empty one.)
        if (!waited && page.size() < pageSize && bytes < pageBytes) {
            goLive();
            co_return;
        }
    }
}

void EventStreamSession::deliver(qint64 seq, const QByteArray &frame)
{
    if (m_state != State::Live || seq <= m_lastSeq)
        return;
    // Events of this process arrive gapless; events another replica wrote come through the
    // change relay, which can miss announcements while its connection is down. Whatever lies
    // between is read from the catalog, so the stream never skips.
    if (seq > m_lastSeq + 1 && !catchUp(seq - 1))
        return;
    if (send(frame))
        m_lastSeq = seq;
}

void EventStreamSession::beginBurst()
{
    m_socket->cork();
}

void EventStreamSession::endBurst()
{
    m_socket->uncork();
}

bool EventStreamSession::catchUp(qint64 untilSeq)
{
    try {
        const QList<StoredEvent> missed =
            m_streams.eventsAfter(m_id, m_lastSeq, int(untilSeq - m_lastSeq));
        for (const StoredEvent &event : missed) {
            if (!send(WebSocketConnection::textFrame(event.json)))
                return false;
            m_lastSeq = event.seq;
        }
    } catch (const StorageError &error) {
        qCWarning(lcStreams) << "cannot read missed events:" << error.what();
        closeWith(WebSocketConnection::CloseInternalError, u"storage failure"_s);
        return false;
    }
    return m_lastSeq == untilSeq;
}

void EventStreamSession::goLive()
{
    m_state = State::Live;
    // A command running now printed before this stream was there to see it.
    if (const auto soFar = m_streams.hub().commandOutputSoFar(m_id))
        deliverTransient(*soFar);
}

void EventStreamSession::deliverTransient(const QByteArray &frame)
{
    // Deltas are a courtesy: a socket replaying or behind on its budget skips them rather than
    // being closed for them, and so does every socket while the server is short of room. The
    // stored message follows anyway.
    if (m_state != State::Live ||
        m_socket->bytesToWrite() + frame.size() > m_streams.settings().sendBudgetBytes / 2 ||
        !m_streams.sendBudget().fits(frame))
        return;
    send(frame);
}

bool EventStreamSession::send(const QByteArray &frame)
{
    switch (m_streams.send(*m_socket, frame)) {
    case EventStreams::Sent::Yes:
        return true;
    case EventStreams::Sent::SlowConsumer:
        qCInfo(lcStreams) << "closing slow consumer of" << m_id;
        closeWith(CloseSlowConsumer, u"slow_consumer"_s);
        return false;
    case EventStreams::Sent::Dropped:
        break;
    }
    return false;
}

void EventStreamSession::sendError(const QString &code, const QString &detail)
{
    const QJsonObject frame{{u"type"_s, u"error"_s}, {u"code"_s, code}, {u"detail"_s, detail}};
    m_socket->sendText(QJsonDocument(frame).toJson(QJsonDocument::Compact));
}

void EventStreamSession::onFrame(const QByteArray &message)
{
    QJsonParseError parseError;
    const QJsonDocument document = QJsonDocument::fromJson(message, &parseError);
    const bool isObject = parseError.error == QJsonParseError::NoError && document.isObject();
    const QJsonObject frame = document.object();
    if (!isObject) {
        sendError(u"malformed_json"_s, u"A frame must be one JSON object"_s);
        return;
    }
    if (frame.value(u"type"_s) == u"auth"_s)
        return; // a repeated auth frame is harmless
    QString error;
    auto request = MessageRequest::fromJson(frame, &error);
    if (!request) {
        sendError(u"invalid_parameter"_s, error);
        return;
    }
    if (++m_messagesInFlight == MaxMessagesInFlight)
        m_socket->pauseReading();
    m_streams.sendMessage(this, std::move(*request));
}

void EventStreamSession::messageAnswered(const QString &code, const QString &detail)
{
    if (m_messagesInFlight-- == MaxMessagesInFlight)
        m_socket->resumeReading();
    if (!code.isEmpty())
        sendError(code, detail);
}

} // namespace AgentDeck
