#include "websocketconnection.h"

#include "apierror.h"
#include "http/httphead.h"
#include "http/httptypes.h"
#include "http/requestpath.h"
#include "logging.h"
#include "sendbudget.h"
#include "websocketframing.h"

#include <QCryptographicHash>
#include <QPointer>
#include <QStringDecoder>
#include <QTcpSocket>
#include <QtEndian>

#include <cerrno>
#include <sys/socket.h>
#include <sys/uio.h>

using namespace Qt::StringLiterals;

namespace AgentDeck {

using namespace WebSocketFraming;

namespace {
QByteArray refusal(int status, const QString &detail, QByteArrayView extraHeader = {},
                   QByteArrayView extraValue = {})
{
    HttpResponse response = HttpResponse::error({status, u"invalid_upgrade"_s, detail});
    if (!extraHeader.isEmpty())
        response.headers.append({extraHeader.toByteArray(), extraValue.toByteArray()});
    return response.closingAnswer();
}

bool isValidUtf8(QByteArrayView bytes)
{
    QStringDecoder decoder(QStringDecoder::Utf8);
    const QString decoded = decoder.decode(bytes); // the conversion runs here, not in decode()
    return !decoder.hasError();
}

// Close codes a peer may send: RFC 6455 7.4's, those IANA registered since (1012-1014; this
// server sends 1013 itself, and a client may echo it), and the private and registered ranges.
bool isValidCloseCode(quint16 code)
{
    return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
           (code >= 3000 && code <= 4999);
}

} // namespace

WebSocketConnection::Handshake WebSocketConnection::parseHandshake(const QByteArray &head)
{
    Handshake handshake;
    const auto bad = [&](QByteArrayView detail) {
        handshake.refusal = refusal(400, QString::fromLatin1(detail));
        return handshake;
    };
    QList<QByteArrayView> lines;
    for (qsizetype start = 0; start < head.size();) {
        qsizetype end = head.indexOf('\n', start);
        if (end < 0)
            end = head.size();
        lines.append(QByteArrayView(head).sliced(start, end - start).trimmed());
        start = end + 1;
    }
    while (!lines.isEmpty() && lines.last().isEmpty())
        lines.removeLast();
    if (lines.isEmpty())
        return bad("Empty request");
    const QList<QByteArray> requestLine = lines.first().toByteArray().split(' ');
    if (requestLine.size() != 3 || requestLine[0] != "GET" || requestLine[2] != "HTTP/1.1")
        return bad("A WebSocket upgrade must be an HTTP/1.1 GET");
    handshake.url = QUrl::fromEncoded(requestLine[1]);
    if (!handshake.url.isValid() || !handshake.url.path().startsWith(u'/'))
        return bad("Invalid request target");
    // Decoded as an HTTP request's path is, for the same checks to see the same spelling.
    const QByteArrayView target(requestLine[1]);
    const qsizetype question = target.indexOf('?');
    const RequestPath path = decodeRequestPath(question < 0 ? target : target.first(question));
    if (!path.accepted()) {
        handshake.refusal = HttpResponse::error(pathRefusal(path.fault)).closingAnswer();
        return handshake;
    }
    handshake.path = path.path;

    bool host = false, upgrade = false, connectionUpgrade = false;
    QByteArray key, version;
    for (qsizetype i = 1; i < lines.size(); ++i) {
        const qsizetype colon = lines[i].indexOf(':');
        if (colon <= 0)
            return bad("Malformed header line");
        const QByteArrayView name = lines[i].first(colon).trimmed();
        const QByteArrayView value = lines[i].sliced(colon + 1).trimmed();
        if (name.compare("host", Qt::CaseInsensitive) == 0) {
            host = true;
            handshake.host = value.toByteArray();
        } else if (name.compare("origin", Qt::CaseInsensitive) == 0) {
            handshake.origin = value.toByteArray();
        } else if (name.compare("x-session-api-key", Qt::CaseInsensitive) == 0) {
            handshake.sessionKey = value.toByteArray();
        } else if (name.compare("user-agent", Qt::CaseInsensitive) == 0) {
            handshake.userAgent = value.toByteArray();
        } else if (name.compare("upgrade", Qt::CaseInsensitive) == 0) {
            upgrade = upgrade || headerHasToken(value, "websocket");
        } else if (name.compare("connection", Qt::CaseInsensitive) == 0) {
            connectionUpgrade = connectionUpgrade || headerHasToken(value, "upgrade");
        } else if (name.compare("sec-websocket-key", Qt::CaseInsensitive) == 0) {
            key = value.toByteArray();
        } else if (name.compare("sec-websocket-version", Qt::CaseInsensitive) == 0) {
            version = value.toByteArray();
        }
    }
    if (!host || !upgrade || !connectionUpgrade)
        return bad("A WebSocket upgrade needs Host, Upgrade: websocket and Connection: Upgrade");
    if (version != "13") {
        handshake.refusal =
            refusal(426, u"Only WebSocket version 13 is spoken"_s, "Sec-WebSocket-Version", "13");
        return handshake;
    }
    const auto decodedKey =
        QByteArray::fromBase64Encoding(key, QByteArray::AbortOnBase64DecodingErrors);
    if (!decodedKey || decodedKey.decoded.size() != 16)
        return bad("Sec-WebSocket-Key must be 16 bytes in base64");
    const QByteArray keyAndGuid = key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    handshake.accept = QCryptographicHash::hash(keyAndGuid, QCryptographicHash::Sha1).toBase64();
    return handshake;
}

QByteArray WebSocketConnection::textFrame(QByteArrayView utf8)
{
    QByteArray frame = frameHeader(0x80 | Text, quint64(utf8.size()));
    frame.reserve(frame.size() + utf8.size());
    frame.append(utf8);
    return frame;
}

WebSocketConnection::WebSocketConnection(QTcpSocket *socket, const QByteArray &accept,
                                         const QUrl &url, qint64 maxMessageBytes,
                                         SendBudget *budget, QObject *parent)
    : QObject(parent)
    , m_socket(socket)
    , m_url(url)
    , m_maxMessageBytes(maxMessageBytes)
    , m_budget(budget)
{
    m_socket->setParent(this);
    if (m_budget)
        m_budget->join(this);
    // Frames are small and must not wait for the previous one to be acknowledged (Nagle).
    m_socket->setSocketOption(QAbstractSocket::LowDelayOption, 1);
    // What is read is parsed at once, so this bounds only what waits while reading is paused.
    m_socket->setReadBufferSize(ReadBufferBytes);
    m_closeTimer.setSingleShot(true);
    connect(&m_closeTimer, &QTimer::timeout, this, &WebSocketConnection::onCloseTimeout);
    connect(m_socket, &QTcpSocket::readyRead, this, &WebSocketConnection::onReadyRead);
    connect(m_socket, &QTcpSocket::bytesWritten, this, &WebSocketConnection::onSocketBytesWritten);
    connect(m_socket, &QTcpSocket::disconnected, this, &WebSocketConnection::onSocketDisconnected);
    m_socket->write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                    "Connection: Upgrade\r\nSec-WebSocket-Accept: " +
                    accept + "\r\n\r\n");
    accountOwnBuffer();
    // Whatever came with the head, or a close before now, is seen once the owner is connected.
    if (m_socket->bytesAvailable() > 0)
        QMetaObject::invokeMethod(this, &WebSocketConnection::onReadyRead, Qt::QueuedConnection);
    if (m_socket->state() != QAbstractSocket::ConnectedState)
        QMetaObject::invokeMethod(this, &WebSocketConnection::onSocketDisconnected,
                                  Qt::QueuedConnection);
}

WebSocketConnection::~WebSocketConnection()
{
    disconnect(m_socket, nullptr, this, nullptr);
    m_socket->abort();
    dropQueued(false);
    accountOwnBuffer();
    leaveSendBudget();
}

void WebSocketConnection::leaveSendBudget()
{
    if (!m_budget)
        return;
    m_budget->addOwn(-m_ownAccounted);
    for (const Queued &queued : m_queue)
        m_budget->release(queued.bytes);
    m_budget->leave(this);
    m_budget = nullptr;
    m_ownAccounted = 0;
}

bool WebSocketConnection::isOpen() const
{
    return !m_closeSent && !m_closeReceived && !m_disconnected &&
           m_socket->state() == QAbstractSocket::ConnectedState;
}

void WebSocketConnection::sendFrame(const QByteArray &frame)
{
    if (isOpen())
        queue(frame);
}

void WebSocketConnection::uncork()
{
    m_corked = false;
    writeQueued();
}

qint64 WebSocketConnection::bytesToWrite() const
{
    return m_socket->bytesToWrite() + m_queuedBytes;
}

void WebSocketConnection::writeControl(quint8 opcode, QByteArrayView payload)
{
    QByteArray frame = frameHeader(0x80 | opcode, quint64(payload.size()));
    frame.append(payload);
    queue(frame);
}

void WebSocketConnection::queue(const QByteArray &bytes)
{
    if (bytes.isEmpty())
        return;
    m_queue.push_back({bytes, 0});
    m_queuedBytes += bytes.size();
    if (m_budget)
        m_budget->hold(bytes);
    if (!m_corked)
        writeQueued();
}

void WebSocketConnection::advance(qint64 bytes)
{
    m_queuedBytes -= bytes;
    while (bytes > 0) {
        Queued &front = m_queue.front();
        const qint64 step = std::min<qint64>(bytes, front.bytes.size() - front.offset);
        front.offset += step;
        bytes -= step;
        if (front.offset == front.bytes.size()) {
            if (m_budget)
                m_budget->release(front.bytes);
            m_queue.pop_front();
        }
    }
}

void WebSocketConnection::writeQueued()
{
    // Straight to the kernel while Qt holds nothing for this socket: Qt's own path (its buffer,
    // a write notifier, a poll over every socket, a bytesWritten signal) costs more than the
    // write itself at 100,000 frames a second, and it would copy every frame for every socket
    // (a hundred subscribers that did not read held 1.5 GB). One system call takes a burst
    // of frames. A failed send is left to Qt, which then writes and reports the error itself.
    if (m_disconnected || m_socket->state() == QAbstractSocket::UnconnectedState)
        return;
    if (m_socket->bytesToWrite() == 0) {
        const int fd = int(m_socket->socketDescriptor());
        constexpr std::size_t MaxPieces = 64;
        iovec pieces[MaxPieces];
        while (!m_queue.empty()) {
            std::size_t count = 0;
            qint64 total = 0;
            for (auto it = m_queue.cbegin(); it != m_queue.cend() && count < MaxPieces; ++it) {
                pieces[count].iov_base = const_cast<char *>(it->bytes.constData() + it->offset);
                pieces[count].iov_len = std::size_t(it->bytes.size() - it->offset);
                total += qint64(pieces[count].iov_len);
                ++count;
            }
            msghdr message{};
            message.msg_iov = pieces;
            message.msg_iovlen = count;
            ssize_t sent;
            do {
                sent = ::sendmsg(fd, &message, MSG_DONTWAIT | MSG_NOSIGNAL);
            } while (sent < 0 && errno == EINTR);
            if (sent <= 0)
                break;
            advance(sent);
            if (sent < total)
                break; // the kernel is full
        }
    }
    // What is left waits for the kernel to take more; Qt watches for that while its buffer
    // holds something, and says so with bytesWritten.
    while (!m_queue.empty() && m_socket->bytesToWrite() < OwnBufferBytes) {
        const Queued &front = m_queue.front();
        const qint64 piece = std::min<qint64>(front.bytes.size() - front.offset,
                                              OwnBufferBytes - m_socket->bytesToWrite());
        if (m_socket->write(front.bytes.constData() + front.offset, piece) != piece)
            break; // the socket failed: Qt reports it
        advance(piece);
    }
    accountOwnBuffer();
    if (m_disconnectWhenSent && m_queue.empty())
        m_socket->disconnectFromHost(); // after Qt's buffer has gone out
}

void WebSocketConnection::accountOwnBuffer()
{
    const qint64 own = m_socket->bytesToWrite();
    if (m_budget)
        m_budget->addOwn(own - m_ownAccounted);
    m_ownAccounted = own;
}

void WebSocketConnection::dropQueued(bool keepBegunFrame)
{
    // A frame the socket began to send must end, or the client reads what follows as its rest.
    const bool keepFront = keepBegunFrame && !m_queue.empty() && m_queue.front().offset > 0;
    while (m_queue.size() > (keepFront ? 1u : 0u)) {
        const Queued &last = m_queue.back();
        m_queuedBytes -= last.bytes.size() - last.offset;
        if (m_budget)
            m_budget->release(last.bytes);
        m_queue.pop_back();
    }
}

void WebSocketConnection::onSocketBytesWritten(qint64 bytes)
{
    writeQueued();
    if (m_closeTimer.isActive()) // a closing client that reads is given its time
        m_closeTimer.start();
    if (m_backlogged && bytesToWrite() <= MaxUnsentWhileReading) {
        m_backlogged = false;
        QMetaObject::invokeMethod(this, &WebSocketConnection::onReadyRead, Qt::QueuedConnection);
    }
    Q_EMIT bytesWritten(bytes);
}

void WebSocketConnection::disconnectWhenSent()
{
    m_disconnectWhenSent = true;
    if (m_queue.empty())
        m_socket->disconnectFromHost();
}

void WebSocketConnection::close(quint16 code, const QString &reason, int graceMs, Unsent unsent)
{
    if (m_closeSent || m_disconnected)
        return;
    m_closeSent = true;
    QByteArray payload(2, Qt::Uninitialized);
    qToBigEndian(code, payload.data());
    QByteArray text = reason.toUtf8();
    text.truncate(123); // a control frame carries at most 125 bytes
    payload += text;
    if (unsent == Unsent::Drop)
        dropQueued(true);
    m_corked = false; // held frames go before the close frame
    writeControl(Close, payload);
    // Now rather than on the next turn of the loop: a server that is stopping may not have one.
    for (qint64 before = -1; bytesToWrite() > 0 && bytesToWrite() != before;) {
        before = bytesToWrite();
        m_socket->flush();
        writeQueued();
    }
    if (m_closeReceived)
        disconnectWhenSent();
    else
        m_closeTimer.start(graceMs);
}

void WebSocketConnection::onCloseTimeout()
{
    // A client that took everything into its kernel may still read it, the close frame last:
    // the kernel delivers it after the descriptor is closed, unless input was left unread
    // (then it resets the connection).
    if (bytesToWrite() > 0) {
        abort();
        return;
    }
    char sink[16 * 1024];
    for (int i = 0; i < 64; ++i) {
        if (::recv(int(m_socket->socketDescriptor()), sink, sizeof sink, MSG_DONTWAIT) <= 0)
            break;
    }
    m_socket->disconnectFromHost();
}

const QByteArray *WebSocketConnection::oldestDroppable() const
{
    if (m_closeSent || m_disconnected || m_queue.empty())
        return nullptr;
    return &m_queue.front().bytes;
}

void WebSocketConnection::dropAsSlowConsumer()
{
    qCInfo(lcStreams) << "dropping a slow consumer with" << bytesToWrite() << "bytes unsent";
    close(CloseTryAgainLater, u"slow_consumer"_s, 5000, Unsent::Drop);
    Q_EMIT droppedAsSlowConsumer();
}

void WebSocketConnection::abort()
{
    m_socket->abort();
}

void WebSocketConnection::fail(quint16 code, const QString &reason)
{
    qCInfo(lcStreams) << "closing a WebSocket with" << code << reason;
    if (!m_closeSent)
        close(code, reason);
    m_closeReceived = true; // read nothing more
    m_input.clear();
    disconnectWhenSent();
}

void WebSocketConnection::onSocketDisconnected()
{
    if (m_disconnected)
        return;
    m_disconnected = true;
    m_closeTimer.stop();
    dropQueued(false); // nobody to send them to
    accountOwnBuffer();
    Q_EMIT disconnected();
}

void WebSocketConnection::pauseReading()
{
    m_readingPaused = true;
}

void WebSocketConnection::resumeReading()
{
    if (std::exchange(m_readingPaused, false))
        QMetaObject::invokeMethod(this, &WebSocketConnection::onReadyRead, Qt::QueuedConnection);
}

void WebSocketConnection::onReadyRead()
{
    // Queued from the constructor or resumeReading(), it may run after the peer reset the
    // connection and Qt closed the device (which then warned of every read).
    if (!m_socket->isOpen())
        return;
    if (m_closeReceived || m_disconnected) {
        m_socket->readAll(); // nothing after a close counts
        return;
    }
    // Paused, the socket's buffer fills up to its read buffer size and Qt stops reading.
    const auto reading = [this] {
        m_backlogged = bytesToWrite() > MaxUnsentWhileReading;
        return !m_readingPaused && !m_backlogged;
    };
    if (reading())
        m_input.append(m_socket->readAll());
    QPointer<WebSocketConnection> self(this);
    while (self && !m_closeReceived && reading() && readFrame()) {
    }
}

bool WebSocketConnection::readFrame()
{
    if (m_input.size() < 2)
        return false;
    const auto *data = reinterpret_cast<const uchar *>(m_input.constData());
    const bool fin = data[0] & 0x80;
    const quint8 opcode = data[0] & 0x0F;
    if (data[0] & 0x70) {
        fail(CloseProtocolError, u"reserved bits set"_s);
        return false;
    }
    if (!(data[1] & 0x80)) {
        fail(CloseProtocolError, u"client frames must be masked"_s);
        return false;
    }
    quint64 length = data[1] & 0x7F;
    qsizetype header = 2;
    if (length == 126) {
        if (m_input.size() < 4)
            return false;
        length = qFromBigEndian<quint16>(data + 2);
        header = 4;
    } else if (length == 127) {
        if (m_input.size() < 10)
            return false;
        length = qFromBigEndian<quint64>(data + 2);
        header = 10;
    }
    if (opcode & 0x8) {
        if (opcode > Pong) {
            fail(CloseProtocolError, u"unknown opcode"_s);
            return false;
        }
        if (!fin || length > 125) {
            fail(CloseProtocolError, u"invalid control frame"_s);
            return false;
        }
    } else {
        if (opcode > Binary) {
            fail(CloseProtocolError, u"unknown opcode"_s);
            return false;
        }
        if ((opcode == Continuation) != m_fragmentOpcode.has_value()) {
            fail(CloseProtocolError, u"invalid fragmentation"_s);
            return false;
        }
        if (length > quint64(m_maxMessageBytes - m_fragments.size())) {
            fail(CloseTooBig, u"message too big"_s);
            return false;
        }
    }
    const qsizetype total = header + 4 + qsizetype(length);
    if (m_input.size() < total)
        return false;
    const uchar *mask = data + header;
    QByteArray payload(reinterpret_cast<const char *>(data + header + 4), qsizetype(length));
    for (qsizetype i = 0; i < payload.size(); ++i)
        payload[i] = char(payload[i] ^ mask[i % 4]);
    m_input.remove(0, total);

    switch (opcode) {
    case Ping:
        if (!m_closeSent)
            writeControl(Pong, payload);
        return true;
    case Pong:
        return true;
    case Close: {
        quint16 code = CloseNoStatus;
        if (payload.size() == 1) {
            fail(CloseProtocolError, u"invalid close frame"_s);
            return false;
        }
        if (payload.size() >= 2) {
            code = qFromBigEndian<quint16>(payload.constData());
            if (!isValidCloseCode(code)) {
                fail(CloseProtocolError, u"invalid close code"_s);
                return false;
            }
            if (!isValidUtf8(QByteArrayView(payload).sliced(2))) {
                fail(CloseInvalidPayload, u"invalid close reason"_s);
                return false;
            }
        }
        m_closeReceived = true;
        if (!m_closeSent) {
            m_closeSent = true;
            QByteArray echo(2, Qt::Uninitialized);
            qToBigEndian(code == CloseNoStatus ? quint16(CloseNormal) : code, echo.data());
            writeControl(Close, echo);
        }
        disconnectWhenSent();
        return false;
    }
    case Continuation:
        m_fragments.append(payload);
        if (fin) {
            const quint8 messageOpcode = *m_fragmentOpcode;
            m_fragmentOpcode.reset();
            onMessage(messageOpcode, std::exchange(m_fragments, {}));
        }
        return true;
    default: // Text, Binary
        if (fin) {
            onMessage(opcode, std::move(payload));
        } else {
            m_fragmentOpcode = opcode;
            m_fragments = std::move(payload);
        }
        return true;
    }
}

void WebSocketConnection::onMessage(quint8 opcode, QByteArray payload)
{
    if (m_closeSent)
        return;
    if (opcode != Text) {
        Q_EMIT binaryMessageReceived();
        return;
    }
    if (!isValidUtf8(payload)) {
        fail(CloseInvalidPayload, u"text frame is not UTF-8"_s);
        return;
    }
    Q_EMIT textMessageReceived(payload);
}

} // namespace AgentDeck
