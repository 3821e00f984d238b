#include "lifecyclestreamsession.h"

#include "auditfeed.h"
#include "eventstreams.h"
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
                                               QString client, EventStreams &streams,
                                               QObject *parent)
    : StreamSession(std::move(socket), serial, std::move(urlKey), std::move(client), streams,
                    parent)
    , m_after(after)
    , m_filter(std::move(filter))
{}

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
    while (more && isStreaming()) {
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
                if (!self || !isStreaming())
                    co_return;
                if (m_socket->bytesToWrite() >= before) {
                    m_streams.metrics().slowConsumerDropped();
                    closeWith(CloseSlowConsumer, u"slow_consumer"_s);
                    co_return;
                }
            }
            switch (m_streams.send(*m_socket, frame)) {
            case EventStreams::Sent::Yes:
                m_last = record.number;
                continue;
            case EventStreams::Sent::SlowConsumer:
                closeWith(CloseSlowConsumer, u"slow_consumer"_s);
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

void LifecycleStreamSession::onFrame(const QByteArray &)
{
    // The stream only sends: anything a client says past its auth frame is ignored.
}

} // namespace AgentDeck
