#include "websocketsubscribers.h"

#include "rawsocket.h"
#include "samples.h"
#include "websocketframing.h"

#include <QRandomGenerator>
#include <QtEndian>

#include <cerrno>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace Qt::StringLiterals;

namespace AgentDeck::Bench {

using namespace WebSocketFraming;

struct WebSocketSubscribers::Subscriber
{
    int index = 0;
    int fd = -1;
    int epoll = -1; // of the thread that reads it
    QByteArray buffer;
    QByteArray fragments;
    bool upgraded = false;
    bool closed = false;
};

WebSocketSubscribers::WebSocketSubscribers(Endpoint endpoint, QByteArray path, int count,
                                           int threads, MessageHandler handler)
    : m_endpoint(std::move(endpoint))
    , m_path(std::move(path))
    , m_count(count)
    , m_handler(std::move(handler))
    , m_readers(std::size_t(std::max(1, threads)))
{}

WebSocketSubscribers::~WebSocketSubscribers()
{
    stop();
    for (const auto &subscriber : m_subscribers) {
        if (subscriber->fd >= 0)
            ::close(subscriber->fd);
    }
    for (const Reader &reader : m_readers) {
        if (reader.epoll >= 0)
            ::close(reader.epoll);
    }
    if (m_wakeUp >= 0)
        ::close(m_wakeUp);
}

bool WebSocketSubscribers::open()
{
    m_wakeUp = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    for (Reader &reader : m_readers) {
        reader.epoll = ::epoll_create1(EPOLL_CLOEXEC);
        if (reader.epoll < 0 || m_wakeUp < 0) {
            m_error = systemError("epoll");
            return false;
        }
        // Readable once stop() writes it, and never read: it wakes every thread.
        epoll_event stopEvent{};
        stopEvent.events = EPOLLIN;
        stopEvent.data.u64 = ~quint64(0);
        ::epoll_ctl(reader.epoll, EPOLL_CTL_ADD, m_wakeUp, &stopEvent);
    }

    const QByteArray hostHeader =
        m_endpoint.host.toLatin1() + ':' + QByteArray::number(m_endpoint.port);
    for (int i = 0; i < m_count; ++i) {
        Subscriber &subscriber = *m_subscribers.emplace_back(std::make_unique<Subscriber>());
        subscriber.index = i;
        subscriber.epoll = m_readers[std::size_t(i) % m_readers.size()].epoll;
        subscriber.fd = connectTcp(m_endpoint, &m_error);
        if (subscriber.fd < 0)
            return false;
        QByteArray key(16, Qt::Uninitialized);
        QRandomGenerator::global()->fillRange(reinterpret_cast<quint32 *>(key.data()), 4);
        const QByteArray request = "GET " + m_path + " HTTP/1.1\r\nHost: " + hostHeader +
                                   "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                                   "Sec-WebSocket-Key: " +
                                   key.toBase64() + "\r\nSec-WebSocket-Version: 13\r\n\r\n";
        if (!sendAll(subscriber.fd, request)) {
            m_error = systemError("send");
            return false;
        }
        setNonBlocking(subscriber.fd);
        epoll_event event{};
        event.events = EPOLLIN | EPOLLRDHUP;
        event.data.u64 = quint64(i);
        ::epoll_ctl(subscriber.epoll, EPOLL_CTL_ADD, subscriber.fd, &event);
    }
    for (Reader &reader : m_readers)
        reader.thread = std::thread([this, epoll = reader.epoll] { run(epoll); });
    return true;
}

void WebSocketSubscribers::stop()
{
    const quint64 one = 1;
    (void)::write(m_wakeUp, &one, sizeof one);
    for (Reader &reader : m_readers) {
        if (reader.thread.joinable())
            reader.thread.join();
    }
}

QStringList WebSocketSubscribers::closeReasons() const
{
    std::lock_guard lock(m_reasonsMutex);
    return m_closeReasons;
}

void WebSocketSubscribers::run(int epoll)
{
    epoll_event events[64];
    for (;;) {
        const int ready = ::epoll_wait(epoll, events, 64, -1);
        if (ready < 0 && errno != EINTR)
            return;
        for (int i = 0; i < ready; ++i) {
            if (events[i].data.u64 == ~quint64(0))
                return;
            readFrom(*m_subscribers[std::size_t(events[i].data.u64)]);
        }
    }
}

void WebSocketSubscribers::readFrom(Subscriber &subscriber)
{
    char chunk[64 * 1024];
    for (;;) {
        const ssize_t n = ::recv(subscriber.fd, chunk, sizeof chunk, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            markClosed(subscriber, n == 0 ? u"disconnected"_s : systemError("recv"));
            return;
        }
        const qint64 receivedNs = nowNs();
        subscriber.buffer.append(chunk, n);
        if (!subscriber.upgraded && !readHandshake(subscriber))
            return;
        readFrames(subscriber, receivedNs);
        if (subscriber.closed || std::size_t(n) < sizeof chunk)
            return;
    }
}

bool WebSocketSubscribers::readHandshake(Subscriber &subscriber)
{
    const qsizetype end = subscriber.buffer.indexOf("\r\n\r\n");
    if (end < 0)
        return false;
    const QByteArray statusLine = subscriber.buffer.left(subscriber.buffer.indexOf("\r\n"));
    if (!statusLine.startsWith("HTTP/1.1 101")) {
        markClosed(subscriber, u"handshake refused: "_s + QString::fromLatin1(statusLine));
        return false;
    }
    subscriber.buffer.remove(0, end + 4);
    subscriber.upgraded = true;
    m_openCount.fetch_add(1, std::memory_order_relaxed);
    return true;
}

void WebSocketSubscribers::readFrames(Subscriber &subscriber, qint64 receivedNs)
{
    QByteArray &buffer = subscriber.buffer;
    qsizetype pos = 0;
    const auto *data = reinterpret_cast<const uchar *>(buffer.constData());
    while (buffer.size() - pos >= 2) {
        const bool fin = data[pos] & 0x80;
        const quint8 opcode = data[pos] & 0x0F;
        const bool masked = data[pos + 1] & 0x80;
        qint64 length = data[pos + 1] & 0x7F;
        qsizetype header = 2;
        if (length == 126) {
            if (buffer.size() - pos < 4)
                break;
            length = qFromBigEndian<quint16>(data + pos + 2);
            header = 4;
        } else if (length == 127) {
            if (buffer.size() - pos < 10)
                break;
            length = qint64(qFromBigEndian<quint64>(data + pos + 2));
            header = 10;
        }
        if (masked)
            header += 4; // servers do not mask; skip the key if one did
        if (buffer.size() - pos < header + length)
            break;
        const QByteArrayView payload(buffer.constData() + pos + header, length);
        pos += header + length;
        switch (opcode) {
        case Text:
        case Binary:
            if (fin)
                m_handler(subscriber.index, payload, receivedNs);
            else
                subscriber.fragments = payload.toByteArray();
            break;
        case Continuation:
            subscriber.fragments.append(payload);
            if (fin) {
                m_handler(subscriber.index, subscriber.fragments, receivedNs);
                subscriber.fragments.clear();
            }
            break;
        case Ping: {
            // Client frames are masked (RFC 6455 5.3).
            QByteArray pong = frameHeader(0x80 | Pong, quint64(payload.size()));
            pong[1] = char(pong[1] | 0x80);
            char key[4];
            qToBigEndian(QRandomGenerator::global()->generate(), key);
            pong.append(key, 4);
            for (qsizetype i = 0; i < payload.size(); ++i)
                pong.append(char(payload[i] ^ key[i % 4]));
            if (!sendAll(subscriber.fd, pong))
                markClosed(subscriber, systemError("send"));
            break;
        }
        case Close:
            markClosed(subscriber,
                       u"close frame %1"_s.arg(
                           payload.size() >= 2 ? qFromBigEndian<quint16>(payload.data()) : 0));
            return;
        default:
            break;
        }
        if (subscriber.closed)
            return;
    }
    buffer.remove(0, pos);
}

void WebSocketSubscribers::markClosed(Subscriber &subscriber, const QString &reason)
{
    if (subscriber.closed)
        return;
    subscriber.closed = true;
    if (subscriber.upgraded)
        m_openCount.fetch_sub(1, std::memory_order_relaxed);
    ::epoll_ctl(subscriber.epoll, EPOLL_CTL_DEL, subscriber.fd, nullptr);
    ::shutdown(subscriber.fd, SHUT_RDWR);
    std::lock_guard lock(m_reasonsMutex);
    m_closeReasons.append(reason);
}

} // namespace AgentDeck::Bench
