#pragma once

#include <QCoroTask>
#include <QObject>
#include <QString>
#include <QTimer>
#include <QUuid>

#include <memory>
#include <optional>

namespace AgentDeck {

class EventStreams;
class WebSocketConnection;

// One client following /sockets/lifecycle: the audit log's records of changes made, in number
// order, one JSON record (as GET /api/audit gives it) a frame. The cursor is the number of the
// last record sent; every wake-up (AuditFeed) reads the table past it, so nothing is skipped
// and nothing sent twice, and a client that reconnects with ?after=ID continues where it left.
// The table is the backlog: pages are read at the client's pace, under the connection's budget.
class LifecycleStreamSession : public QObject
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
                           std::optional<QByteArray> urlKey, EventStreams &streams,
                           QObject *parent = nullptr);
    ~LifecycleStreamSession() override;

    void start();
    quint64 serial() const { return m_serial; }
    void closeWith(int code, const QString &reason);

Q_SIGNALS:
    void finished(AgentDeck::LifecycleStreamSession *session);

private:
    enum class State
    {
        Authenticating,
        Live,
        Closed
    };
    void beginStreaming();
    void onTextMessage(const QByteArray &message);
    // Sends what the table holds past the cursor; a wake-up while it runs makes it read again.
    QCoro::Task<> pump();

    std::unique_ptr<WebSocketConnection> m_socket;
    quint64 m_serial;
    std::optional<qint64> m_after;
    Filter m_filter;
    std::optional<QByteArray> m_urlKey;
    EventStreams &m_streams;
    State m_state = State::Authenticating;
    qint64 m_last = 0;
    bool m_pumping = false;
    bool m_readAgain = false;
    QTimer m_authTimer;
};

} // namespace AgentDeck
