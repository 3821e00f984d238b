#include "fanoutreference.h"

#include "publisher.h"
#include "rawsocket.h"
#include "samples.h"
#include "websocketframing.h"

#include <arpa/inet.h>
#include <cerrno>
#include <ctime>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace Qt::StringLiterals;

namespace AgentDeck::Bench {

FanoutReference::FanoutReference(ReferencePlan plan)
    : m_plan(plan)
{}

FanoutReference::~FanoutReference()
{
    wait();
    for (int fd : m_sockets)
        ::close(fd);
    if (m_listener >= 0)
        ::close(m_listener);
    if (m_wakeUp >= 0)
        ::close(m_wakeUp);
}

bool FanoutReference::listen(QString *error)
{
    m_listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    m_wakeUp = ::eventfd(0, EFD_CLOEXEC);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (m_listener < 0 || m_wakeUp < 0 ||
        ::bind(m_listener, reinterpret_cast<sockaddr *>(&address), sizeof address) != 0 ||
        ::listen(m_listener, 1024) != 0 ||
        ::getsockname(m_listener, reinterpret_cast<sockaddr *>(&address), &length) != 0) {
        *error = systemError("listen");
        return false;
    }
    m_endpoint.port = ntohs(address.sin_port);
    return true;
}

bool FanoutReference::acceptSubscribers(int count, QString *error)
{
    const int one = 1;
    for (int i = 0; i < count; ++i) {
        const int fd = ::accept4(m_listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) {
            *error = systemError("accept");
            return false;
        }
        m_sockets.push_back(fd);
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        QByteArray head;
        char chunk[4096];
        while (!head.contains("\r\n\r\n")) {
            const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
            if (n <= 0) {
                *error = u"a subscriber left before its upgrade request"_s;
                return false;
            }
            head.append(chunk, n);
        }
        // The subscribers check the status line only.
        if (!sendAll(fd, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                         "Connection: Upgrade\r\nSec-WebSocket-Accept: reference\r\n\r\n")) {
            *error = systemError("send");
            return false;
        }
        setNonBlocking(fd);
    }
    return true;
}

void FanoutReference::start()
{
    m_fanOut = std::thread([this] { fanOut(); });
    m_scheduler = std::thread([this] { schedule(); });
}

void FanoutReference::wait()
{
    if (m_scheduler.joinable())
        m_scheduler.join();
    if (m_fanOut.joinable())
        m_fanOut.join();
}

void FanoutReference::schedule()
{
    const qint64 planned = qint64(m_plan.ratePerSecond) * m_plan.duration.count() / 1000;
    const qint64 startNs = nowNs();
    for (qint64 n = 0; n < planned; ++n) {
        const qint64 dueNs = startNs + n * 1'000'000'000 / m_plan.ratePerSecond;
        const timespec due{time_t(dueNs / 1'000'000'000), long(dueNs % 1'000'000'000)};
        while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &due, nullptr) == EINTR) {
        }
        {
            const std::lock_guard lock(m_mutex);
            m_queue.push_back({n, nowNs(), dueNs});
            m_lastQueued = n + 1 == planned;
        }
        const quint64 one = 1;
        (void)::write(m_wakeUp, &one, sizeof one);
    }
}

void FanoutReference::fanOut()
{
    for (;;) {
        quint64 count = 0;
        if (::read(m_wakeUp, &count, sizeof count) < 0 && errno != EINTR)
            break;
        std::deque<Due> burst;
        bool last = false;
        {
            const std::lock_guard lock(m_mutex);
            burst.swap(m_queue);
            last = m_lastQueued;
        }
        // Like the server: a burst goes to each socket in one write.
        QByteArray frames;
        for (const Due &event : burst)
            frames += frameFor(event);
        for (int fd : m_sockets)
            (void)::send(fd, frames.constData(), std::size_t(frames.size()),
                         MSG_DONTWAIT | MSG_NOSIGNAL);
        m_published += qint64(burst.size());
        if (last)
            break;
    }
    m_finished = true;
}

QByteArray FanoutReference::frameFor(const Due &event) const
{
    QByteArray payload = "{\"kind\":\"message\",\"text\":\"" + Publisher::marker() +
                         QByteArray::number(event.n) + " t=" + QByteArray::number(event.sentNs) +
                         " s=" + QByteArray::number(event.scheduledNs) + "\",\"padding\":\"";
    payload.append(std::max<qsizetype>(0, m_plan.payloadBytes - payload.size() - 2), 'x');
    payload.append("\"}");
    using namespace WebSocketFraming;
    return frameHeader(0x80 | Text, quint64(payload.size())) + payload;
}

} // namespace AgentDeck::Bench
