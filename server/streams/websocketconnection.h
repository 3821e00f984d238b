#pragma once

#include <QByteArray>
#include <QObject>
#include <QTimer>
#include <QUrl>

#include <optional>

class QTcpSocket;

namespace AgentDeck {

// The server side of a WebSocket (RFC 6455) on a QTcpSocket whose upgrade request head has been
// read: the handshake answer, reading masked client frames (text, binary, continuation, ping,
// pong, close), and writing frames. Frames to a client are not masked, so a frame built once
// with textFrame() can be written to any number of connections as it is; that is why the
// server does not use QWebSocket (it frames and converts every message for every socket).
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
    };

    // The upgrade request: the target, and the answer to write when it cannot be accepted.
    struct Handshake
    {
        QUrl url;           // path and query of the request target
        QByteArray accept;  // Sec-WebSocket-Accept for the 101 answer
        QByteArray refusal; // a complete HTTP answer when the request is not a valid upgrade
        QByteArray host;    // the Host and Origin headers' values, empty when absent
        QByteArray origin;
    };
    static Handshake parseHandshake(const QByteArray &head);

    // Takes `socket` over (it becomes a child) and answers the handshake with 101.
    // Text messages larger than `maxMessageBytes` close the connection with 1009.
    WebSocketConnection(QTcpSocket *socket, const QByteArray &accept, const QUrl &url,
                        qint64 maxMessageBytes, QObject *parent = nullptr);
    ~WebSocketConnection() override;

    // Bytes Qt reads ahead of the parser, at most: see pauseReading().
    static constexpr qint64 ReadBufferBytes = 256 * 1024;
    // Past this many unsent bytes no frame of the client's is read: each may be answered (a
    // pong, an error frame), and a client that sent without reading the answers had the server
    // queue them without end (775 MiB in 5 s of pings).
    static constexpr qint64 MaxUnsentWhileReading = 1024 * 1024;

    // A complete unmasked text frame carrying `utf8`.
    static QByteArray textFrame(QByteArrayView utf8);

    QUrl requestUrl() const { return m_url; }
    // Open: connected, and no close frame sent or received.
    bool isOpen() const;
    // Writes a frame built with textFrame(); nothing happens once closing.
    void sendFrame(const QByteArray &frame);
    void sendText(QByteArrayView utf8) { sendFrame(textFrame(utf8)); }
    // Frames sent while corked are held, and uncork() hands them to the kernel in one write: a
    // burst of events costs each socket one system call, not one per event.
    void cork() { m_corked = true; }
    void uncork();
    // Bytes accepted by sendFrame() and not yet handed to the kernel, held ones included.
    qint64 bytesToWrite() const;
    // Sends a close frame and ends the connection when the client answers it, or after
    // `graceMs` when it does not (a client that stopped reading never does).
    void close(quint16 code, const QString &reason = {}, int graceMs = 5000);
    void abort();
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

private:
    void onReadyRead();
    // Parses one frame at the start of m_input; false when it is incomplete or the connection
    // failed.
    bool readFrame();
    void onMessage(quint8 opcode, QByteArray payload);
    void fail(quint16 code, const QString &reason);
    void writeControl(quint8 opcode, QByteArrayView payload);
    // Holds `bytes` while corked, writes them otherwise.
    void queue(const QByteArray &bytes);
    void writeOut(const QByteArray &bytes);
    void onSocketDisconnected();

    QTcpSocket *m_socket;
    QUrl m_url;
    qint64 m_maxMessageBytes;
    QByteArray m_input;
    bool m_readingPaused = false;
    bool m_backlogged = false; // reading waits for the unsent bytes to go below the bound
    QByteArray m_held;         // frames sent while corked
    bool m_corked = false;
    QByteArray m_fragments; // a fragmented message being assembled
    std::optional<quint8> m_fragmentOpcode;
    bool m_closeSent = false;
    bool m_closeReceived = false;
    bool m_disconnected = false;
    QTimer m_closeTimer;
};

} // namespace AgentDeck
