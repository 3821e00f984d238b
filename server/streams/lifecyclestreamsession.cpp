#include "lifecyclestreamsession.h"

#include "auditfeed.h"
#include "eventstreams.h"
#include "eventstreamsession.h"
#include "logging.h"
#include "metrics.h"
#include "signalwait.h"
#include "storage/auditlog.h"
#include "storage/database.h"
#include "websocketconnection.h"

#include <QJsonDocument>
#include <QPointer>

using namespace Qt::StringLiterals;

namespace AgentDeck {

LifecycleStreamSession::LifecycleStreamSession(std::unique_ptr<WebSocketConnection> socket,
                                               quint64 serial, std::optional<qint64> after,
                                               Filter filter, std::optional<QByteArray> urlKey,
                                               EventStreams &streams, QObject *parent)
    : QObject(parent)
    , m_socket(std::move(socket))
    , m_serial(serial)
    , m_after(after)
    , m_filter(std::move(filter))
    , m_urlKey(std::move(urlKey))
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
    // The server-wide budget dropped it (SendBudget): it is closing already.
    connect(m_socket.get(), &WebSocketConnection::droppedAsSlowConsumer, this, [this] {
        m_streams.metrics().slowConsumerDropped();
        m_state = State::Closed;
    });
    connect(m_socket.get(), &WebSocketConnection::disconnected, this, [this] {
        m_state = State::Closed;
        Q_EMIT finished(this);
    });
}

LifecycleStreamSession::~LifecycleStreamSession()
{
    m_socket->disconnect(this);
}

void LifecycleStreamSession::start()
{
    switch (m_streams.authenticate(m_urlKey)) {
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

void LifecycleStreamSession::beginStreaming()
{
    try {
        // Without a cursor: after the newest record now, whatever its kind.
        m_last = m_after ? *m_after : m_streams.newestAuditNumber();
    } catch (const StorageError &error) {
        qCWarning(lcStreams) << "cannot start a lifecycle stream:" << error.what();
        closeWith(WebSocketConnection::CloseInternalError, u"storage failure"_s);
        return;
    }
    m_state = State::Live;
    connect(&m_streams.auditFeed(), &AuditFeed::woke, this, [this] { pump(); });
    pump();
}

QCoro::Task<> LifecycleStreamSession::pump()
{
    if (m_pumping) {
        m_readAgain = true;
        co_return;
    }
    m_pumping = true;
    QPointer<LifecycleStreamSession> self(this);
    const qint64 budget = m_streams.settings().sendBudgetBytes;
    const int pageSize = m_streams.settings().replayPageSize;
    bool more = true;
    while (more && m_state == State::Live) {
        m_readAgain = false;
        QList<AuditRecord> page;
        try {
            page = m_streams.auditRecordsAfter(m_last, m_filter.action, m_filter.conversationId,
                                               pageSize);
        } catch (const StorageError &error) {
            qCWarning(lcStreams) << "a lifecycle stream's read failed:" << error.what();
            closeWith(WebSocketConnection::CloseInternalError, u"storage failure"_s);
            co_return;
        }
        m_socket->cork(); // a page in one write, as far as the budget allows
        for (const AuditRecord &record : std::as_const(page)) {
            const QByteArray frame = WebSocketConnection::textFrame(
                QJsonDocument(record.toJson()).toJson(QJsonDocument::Compact));
            // At the client's pace, as a replay goes: the rest waits in the table. A client
            // that takes nothing for the stall timeout is a slow consumer.
            if (m_socket->bytesToWrite() + frame.size() > budget)
                m_socket->uncork();
            while (m_socket->bytesToWrite() > 0 &&
                   m_socket->bytesToWrite() + frame.size() > budget) {
                const qint64 before = m_socket->bytesToWrite();
                auto drained =
                    signalOrTimeout(m_socket.get(), &WebSocketConnection::bytesWritten,
                                    std::chrono::milliseconds(m_streams.settings().stallTimeoutMs));
                co_await std::move(drained);
                if (!self || m_state != State::Live)
                    co_return;
                if (m_socket->bytesToWrite() >= before) {
                    m_streams.metrics().slowConsumerDropped();
                    closeWith(EventStreamSession::CloseSlowConsumer, u"slow_consumer"_s);
                    co_return;
                }
            }
            switch (m_streams.send(*m_socket, frame)) {
            case EventStreams::Sent::Yes:
                m_last = record.number;
                continue;
            case EventStreams::Sent::SlowConsumer:
                closeWith(EventStreamSession::CloseSlowConsumer, u"slow_consumer"_s);
                co_return;
            case EventStreams::Sent::Dropped:
                co_return;
            }
        }
        m_socket->uncork();
        more = page.size() == pageSize || m_readAgain;
    }
    m_pumping = false;
}

void LifecycleStreamSession::closeWith(int code, const QString &reason)
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

void LifecycleStreamSession::onTextMessage(const QByteArray &message)
{
    if (m_state == State::Authenticating) {
        // Anything but the auth frame ends it, as on the event streams.
        if (!m_streams.acceptsAuthFrame(message)) {
            closeWith(EventStreamSession::CloseUnauthorized, u"unauthorized"_s);
            return;
        }
        m_authTimer.stop();
        beginStreaming();
    }
    // The stream only sends: anything else a client says is ignored.
}

} // namespace AgentDeck
