#pragma once

#include "httpconnection.h"

#include <QObject>
#include <QTcpSocket>

#include <functional>

namespace AgentDeck::Bench {

// A raw RFC 6455 client that only reads: the handshake, then unmasked server frames, answering
// pings. Hand-rolled for the same reason as HttpConnection: a hundred of them must cost the
// bench little, so that the latency measured is the server's.
class WebSocketSubscriber : public QObject
{
    Q_OBJECT
public:
    // Called for every complete text message with the time its bytes were read.
    using MessageHandler = std::function<void(QByteArrayView payload, qint64 receivedNs)>;

    WebSocketSubscriber(Endpoint endpoint, QByteArray path, MessageHandler handler,
                        QObject *parent = nullptr);

    void open();
    bool isUpgraded() const { return m_upgraded; }
    bool isClosed() const { return m_closed; }
    QString closeReason() const { return m_closeReason; }
    void close();

Q_SIGNALS:
    void upgraded();
    void closed();

private:
    void onReadyRead();
    bool readHandshake();
    void readFrames(qint64 receivedNs);
    void sendControl(quint8 opcode, QByteArrayView payload);
    void markClosed(const QString &reason);

    Endpoint m_endpoint;
    QByteArray m_path;
    MessageHandler m_handler;
    QTcpSocket m_socket;
    QByteArray m_buffer;
    QByteArray m_fragments;
    bool m_upgraded = false;
    bool m_closed = false;
    QString m_closeReason;
};

} // namespace AgentDeck::Bench
