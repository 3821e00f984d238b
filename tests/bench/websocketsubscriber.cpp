#include "websocketsubscriber.h"

#include "samples.h"

#include <QRandomGenerator>
#include <QtEndian>

using namespace Qt::StringLiterals;

namespace AgentDeck::Bench {

namespace {
enum Opcode : quint8
{
    Continuation = 0x0,
    Text = 0x1,
    Binary = 0x2,
    Close = 0x8,
    Ping = 0x9,
    Pong = 0xA,
};
} // namespace

WebSocketSubscriber::WebSocketSubscriber(Endpoint endpoint, QByteArray path, MessageHandler handler,
                                         QObject *parent)
    : QObject(parent)
    , m_endpoint(std::move(endpoint))
    , m_path(std::move(path))
    , m_handler(std::move(handler))
{
    connect(&m_socket, &QTcpSocket::connected, this, [this] {
        QByteArray key(16, Qt::Uninitialized);
        QRandomGenerator::global()->fillRange(reinterpret_cast<quint32 *>(key.data()), 4);
        m_socket.write("GET " + m_path + " HTTP/1.1\r\nHost: " + m_endpoint.host.toLatin1() + ':' +
                       QByteArray::number(m_endpoint.port) +
                       "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: " +
                       key.toBase64() + "\r\nSec-WebSocket-Version: 13\r\n\r\n");
    });
    connect(&m_socket, &QTcpSocket::readyRead, this, &WebSocketSubscriber::onReadyRead);
    connect(&m_socket, &QTcpSocket::disconnected, this, [this] { markClosed(u"disconnected"_s); });
    connect(&m_socket, &QTcpSocket::errorOccurred, this,
            [this] { markClosed(m_socket.errorString()); });
}

void WebSocketSubscriber::open()
{
    m_socket.setSocketOption(QAbstractSocket::LowDelayOption, 1);
    m_socket.connectToHost(QHostAddress(m_endpoint.host), m_endpoint.port);
}

void WebSocketSubscriber::close()
{
    if (m_closed)
        return;
    m_closed = true;
    m_closeReason = u"closed by the bench"_s;
    m_socket.abort();
}

void WebSocketSubscriber::markClosed(const QString &reason)
{
    if (m_closed)
        return;
    m_closed = true;
    m_closeReason = reason;
    Q_EMIT closed();
}

void WebSocketSubscriber::onReadyRead()
{
    const qint64 receivedNs = nowNs();
    m_buffer.append(m_socket.readAll());
    if (!m_upgraded && !readHandshake())
        return;
    readFrames(receivedNs);
}

bool WebSocketSubscriber::readHandshake()
{
    const qsizetype end = m_buffer.indexOf("\r\n\r\n");
    if (end < 0)
        return false;
    const QByteArray statusLine = m_buffer.left(m_buffer.indexOf("\r\n"));
    if (!statusLine.startsWith("HTTP/1.1 101")) {
        markClosed(u"handshake refused: "_s + QString::fromLatin1(statusLine));
        m_socket.abort();
        return false;
    }
    m_buffer.remove(0, end + 4);
    m_upgraded = true;
    Q_EMIT upgraded();
    return true;
}

void WebSocketSubscriber::readFrames(qint64 receivedNs)
{
    qsizetype pos = 0;
    const auto *data = reinterpret_cast<const uchar *>(m_buffer.constData());
    while (m_buffer.size() - pos >= 2) {
        const bool fin = data[pos] & 0x80;
        const quint8 opcode = data[pos] & 0x0F;
        const bool masked = data[pos + 1] & 0x80;
        qint64 length = data[pos + 1] & 0x7F;
        qsizetype header = 2;
        if (length == 126) {
            if (m_buffer.size() - pos < 4)
                break;
            length = qFromBigEndian<quint16>(data + pos + 2);
            header = 4;
        } else if (length == 127) {
            if (m_buffer.size() - pos < 10)
                break;
            length = qint64(qFromBigEndian<quint64>(data + pos + 2));
            header = 10;
        }
        if (masked)
            header += 4; // servers do not mask; skip the key if one did
        if (m_buffer.size() - pos < header + length)
            break;
        const QByteArrayView payload(m_buffer.constData() + pos + header, length);
        pos += header + length;
        switch (opcode) {
        case Text:
        case Binary:
            if (fin)
                m_handler(payload, receivedNs);
            else
                m_fragments = payload.toByteArray();
            break;
        case Continuation:
            m_fragments.append(payload);
            if (fin) {
                m_handler(m_fragments, receivedNs);
                m_fragments.clear();
            }
            break;
        case Ping:
            sendControl(Pong, payload);
            break;
        case Close:
            markClosed(u"close frame %1"_s.arg(
                payload.size() >= 2 ? qFromBigEndian<quint16>(payload.data()) : 0));
            m_socket.abort();
            return;
        default:
            break;
        }
    }
    m_buffer.remove(0, pos);
}

void WebSocketSubscriber::sendControl(quint8 opcode, QByteArrayView payload)
{
    // Client frames are masked (RFC 6455 5.3); control payloads are under 126 bytes.
    QByteArray frame;
    frame.append(char(0x80 | opcode));
    frame.append(char(0x80 | payload.size()));
    const quint32 mask = QRandomGenerator::global()->generate();
    char key[4];
    qToBigEndian(mask, key);
    frame.append(key, 4);
    for (qsizetype i = 0; i < payload.size(); ++i)
        frame.append(char(payload[i] ^ key[i % 4]));
    m_socket.write(frame);
}

} // namespace AgentDeck::Bench
