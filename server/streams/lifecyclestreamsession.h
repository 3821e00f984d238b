#pragma once

#include "streamsession.h"

#include <QCoroTask>
#include <QString>
#include <QUuid>

namespace AgentDeck {

// One client following /sockets/lifecycle: the audit log's records of changes made, in number
// order, one JSON record (as GET /api/audit gives it) a frame. The cursor is the number of the
// last record sent; every wake-up (AuditFeed) reads the table past it, so nothing is skipped
// and nothing sent twice, and a client that reconnects with ?after=ID continues where it left.
// The table is the backlog: pages are read at the client's pace, under the connection's budget.
class LifecycleStreamSession : public StreamSession
{
    Q_OBJECT
public:
    struct Filter
    {
        QString action;
        QUuid conversationId;
    };

    // `after`: the number to continue after; none for only what is written from now on.
    LifecycleStreamSession(std::unique_ptr<WebSocketConnection> socket, quint64 serial,
                           std::optional<qint64> after, Filter filter,
                           std::optional<QByteArray> urlKey, QString client, EventStreams &streams,
                           QObject *parent = nullptr);

private:
    void beginStreaming() override;
    void onFrame(const QByteArray &frame) override;
    // Sends what the table holds past the cursor; a wake-up while it runs makes it read again.
    QCoro::Task<> pump();

    const std::optional<qint64> m_after;
    const Filter m_filter;
    qint64 m_last = 0;
    bool m_pumping = false;
    bool m_readAgain = false;
};

} // namespace AgentDeck
