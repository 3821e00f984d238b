#pragma once

#include <QByteArray>
#include <QHash>
#include <QSet>

#include <atomic>

namespace AgentDeck {

class WebSocketConnection;

// The bytes the server has accepted for its WebSocket clients and not yet handed to the kernel,
// counted once per frame buffer: a frame built once and queued (by reference) on a hundred
// sockets counts once, for as long as one of them still holds it. The bytes a connection
// copied into its socket's own buffer (a bounded piece: see WebSocketConnection) count too.
//
// Over the limit, room is made by dropping slow consumers: the connection holding the oldest
// unsent frame, which is the one furthest behind, goes first. Every connection using a budget
// lives in the budget's thread.
class SendBudget
{
public:
    // `unsentGauge`, when given, follows unsent() (for /metrics, read from another thread).
    explicit SendBudget(qint64 limitBytes, std::atomic<qint64> *unsentGauge = nullptr);
    ~SendBudget();
    SendBudget(const SendBudget &) = delete;
    SendBudget &operator=(const SendBudget &) = delete;

    qint64 limit() const { return m_limit; }
    qint64 unsent() const { return m_sharedBytes + m_ownBytes; }
    qint64 peak() const { return m_peak; }

    // Whether queueing `frame` now would take unsent() over the limit. A frame some connection
    // holds already costs nothing more; one larger than the whole limit fits when nothing else
    // is unsent.
    bool fits(const QByteArray &frame) const;
    // Drops slow consumers until `frame` fits, or no connection is left to drop. False when
    // `sender` (the connection about to queue it) was dropped itself.
    bool makeRoom(const QByteArray &frame, const WebSocketConnection *sender);

    // For WebSocketConnection.
    void join(WebSocketConnection *connection);
    void leave(WebSocketConnection *connection);
    // A connection queues `frame`; it is counted unless another connection holds it already.
    void hold(const QByteArray &frame);
    // ... and no longer holds it (sent, or dropped).
    void release(const QByteArray &frame);
    // Bytes a connection copied into its own buffer (negative: those it handed to the kernel).
    void addOwn(qint64 delta);
    // When `frame` was first held, in the order of holds: smaller is older. 0: not held.
    quint64 ageOf(const QByteArray &frame) const;

private:
    struct Held
    {
        qint64 bytes = 0;
        int holders = 0;
        quint64 age = 0;
    };
    qint64 costOf(const QByteArray &frame) const;
    void changed();

    qint64 m_limit;
    std::atomic<qint64> *m_gauge;
    qint64 m_sharedBytes = 0;
    qint64 m_ownBytes = 0;
    qint64 m_peak = 0;
    quint64 m_nextAge = 1;
    // By the address of the frame's bytes: a held frame's buffer lives until its last holder
    // lets go, so no other buffer can have that address meanwhile.
    QHash<const char *, Held> m_held;
    QSet<WebSocketConnection *> m_connections;
};

} // namespace AgentDeck
