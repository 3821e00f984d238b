#pragma once

#include <QByteArray>
#include <QObject>
#include <QTimer>
#include <QUrl>

#include <deque>
#include <optional>

class QTcpSocket;

namespace AgentDeck {

class SendBudget;

// The server side of a WebSocket (RFC 6455) on a QTcpSocket whose upgrade request head has been
// read: the handshake answer, reading masked client frames (text, binary, continuation, ping,
// pong, close), and writing frames. Frames to a client are not masked, so a frame built once
// with textFrame() can be written to any number of connections as it is; that is why the
// server does not use QWebSocket (it frames and converts every message for every socket).
//
// Frames are queued by reference: a frame shared by a hundred connections is one buffer, held
// by each until its socket took it. Only a bounded piece (OwnBufferBytes) is ever copied into
// the socket's own buffer, for Qt to write when the kernel takes more; the rest goes straight
// from the shared buffers to the kernel. With a SendBudget the frames are counted once for the
// whole server, and the budget may drop the connection as a slow consumer.
class WebSocketConnection : public QObject
{
    Q_OBJECT
public:
    enum CloseCode : quint16
    {
        CloseNormal = 1000,
        CloseGoingAway = 1001,
        CloseProtocolError = 1002,
        CloseNoStatus = 1005,
        CloseInvalidPayload = 1007,
        CloseTooBig = 1009,
        CloseInternalError = 1011,
        CloseTryAgainLater = 1013, // "slow_consumer": the client did not keep up
    };

    // The upgrade request: the target, and the answer to write when it cannot be accepted.
    struct Handshake
    {
        QUrl url;           // path and query of the request target
        QString path;       // the target's path, decoded in its one spelling (RequestPath)
        QByteArray accept;  // Sec-WebSocket-Accept for the 101 answer
        QByteArray refusal; // a complete HTTP answer when the request is not a valid upgrade
        QByteArray host;    // the Host and Origin headers' values, empty when absent
        QByteArray origin;
        // The X-Session-API-Key header's value, when there is one (non-browser clients).
        std::optional<QByteArray> sessionKey;
        QByteArray userAgent; // who the changes it asks for are made by (Actor::clientFrom())
    };
    static Handshake parseHandshake(const QByteArray &head);

    // Takes `socket` over (it becomes a child) and answers the handshake with 101.
    // Text messages larger than `maxMessageBytes` close the connection with 1009. What it
    // queues counts against `budget` (which must outlive it, or let it go) when given.
    WebSocketConnection(QTcpSocket *socket, const QByteArray &accept, const QUrl &url,
                        qint64 maxMessageBytes, SendBudget *budget = nullptr,
                        QObject *parent = nullptr);
    ~WebSocketConnection() override;

    // Bytes Qt reads ahead of the parser, at most: see pauseReading().
    static constexpr qint64 ReadBufferBytes = 256 * 1024;
    // Past this many unsent bytes no frame of the client's is read: each may be answered (a
    // pong, an error frame), and a client that sent without reading the answers had the server
    // queue them without end (775 MiB in 5 s of pings).
    static constexpr qint64 MaxUnsentWhileReading = 1024 * 1024;
    // The most of the queued frames copied into the socket's own (Qt's) buffer at a time. It
    // is what keeps Qt watching for the kernel to take more; the shared frames stay shared.
    static constexpr qint64 OwnBufferBytes = 64 * 1024;

    // A complete unmasked text frame carrying `utf8`.
    static QByteArray textFrame(QByteArrayView utf8);

    QUrl requestUrl() const { return m_url; }
    // Open: connected, and no close frame sent or received.
    bool isOpen() const;
    // Queues a frame built with textFrame() (by reference) and writes what the kernel takes;
    // nothing happens once closing.
    void sendFrame(const QByteArray &frame);
    void sendText(QByteArrayView utf8) { sendFrame(textFrame(utf8)); }
    // Frames sent while corked are held, and uncork() hands them to the kernel in one write: a
    // burst of events costs each socket one system call, not one per event.
    void cork() { m_corked = true; }
    void uncork();
    // Writes what is held now, staying corked.
    void writeHeld() { writeQueued(); }
    // Bytes accepted by sendFrame() and not yet handed to the kernel, held ones included.
    qint64 bytesToWrite() const;

    enum class Unsent
    {
        Send, // the close frame goes after every frame queued
        Drop, // queued frames are dropped: the close frame goes next (after the rest of a
              // frame the socket began to send)
    };
    // Sends a close frame and ends the connection when the client answers it. A client that
    // does not answer within `graceMs` of the last progress is cut off: gently once everything
    // is in the kernel's hands (the kernel delivers the close frame to a client that reads
    // later), else at once.
    void close(quint16 code, const QString &reason = {}, int graceMs = 5000,
               Unsent unsent = Unsent::Send);
    void abort();

    // For SendBudget: the oldest frame this connection could drop (null when it has none, or is
    // closing), and dropping it all as a slow consumer (1013, then droppedAsSlowConsumer()).
    const QByteArray *oldestDroppable() const;
    void dropAsSlowConsumer();
    void leaveSendBudget();
    // While paused no frame is read: what the client sends waits in the socket's buffers, and
    // TCP then holds the client back.
    void pauseReading();
    void resumeReading();

Q_SIGNALS:
    // A complete text message, valid UTF-8.
    void textMessageReceived(const QByteArray &utf8);
    // A complete binary message, which this protocol has no use for.
    void binaryMessageReceived();
    void bytesWritten(qint64 bytes);
    // The TCP connection is gone; emitted once.
    void disconnected();
    // The send budget dropped this connection: it is closing with 1013.
    void droppedAsSlowConsumer();

private:
    void onReadyRead();
    // Parses one frame at the start of m_input; false when it is incomplete or the connection
    // failed.
    bool readFrame();
    void onMessage(quint8 opcode, QByteArray payload);
    void fail(quint16 code, const QString &reason);
    void writeControl(quint8 opcode, QByteArrayView payload);
    // Queues `bytes`, and writes unless corked.
    void queue(const QByteArray &bytes);
    // Hands what the kernel takes to it, straight from the queued frames while the socket's own
    // buffer is empty, then tops that buffer up to OwnBufferBytes.
    void writeQueued();
    // Takes `bytes` off the front of the queue: they were written.
    void advance(qint64 bytes);
    void dropQueued(bool keepBegunFrame);
    // Tells the budget how much the socket's own buffer holds now.
    void accountOwnBuffer();
    // Ends the connection once everything queued is in the kernel's hands.
    void disconnectWhenSent();
    void onCloseTimeout();
    void onSocketBytesWritten(qint64 bytes);
    void onSocketDisconnected();

    struct Queued
    {
        QByteArray bytes;     // shared with the other connections that queued it
        qsizetype offset = 0; // how much of it was written
    };

    QTcpSocket *m_socket;
    QUrl m_url;
    qint64 m_maxMessageBytes;
    QByteArray m_input;
    bool m_readingPaused = false;
    bool m_backlogged = false; // reading waits for the unsent bytes to go below the bound
    std::deque<Queued> m_queue;
    qint64 m_queuedBytes = 0; // of m_queue, not written yet
    SendBudget *m_budget;
    qint64 m_ownAccounted = 0; // of the socket's own buffer, as last told to the budget
    bool m_corked = false;
    bool m_disconnectWhenSent = false;
    QByteArray m_fragments; // a fragmented message being assembled
    std::optional<quint8> m_fragmentOpcode;
    bool m_closeSent = false;
    bool m_closeReceived = false;
    bool m_disconnected = false;
    QTimer m_closeTimer;
};

} // namespace AgentDeck
