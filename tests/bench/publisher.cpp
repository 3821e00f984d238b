#include "publisher.h"

#include "rawsocket.h"
#include "wiretypes.h"

#include <QJsonDocument>

#include <cerrno>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

using namespace Qt::StringLiterals;

namespace AgentDeck::Bench {

namespace {
constexpr quint64 TimerKey = ~quint64(0);
}

struct Publisher::Connection
{
    int fd = -1;
    HttpResponseReader reader;
    bool busy = false; // a request in flight; a connection that failed is neither busy nor idle
    qint64 sentNs = 0;
};

Publisher::Publisher(PublishPlan plan)
    : m_plan(std::move(plan))
    , m_hostHeader(m_plan.endpoint.host.toLatin1() + ':' + QByteArray::number(m_plan.endpoint.port))
    , m_target("/api/conversations/" + toWireId(m_plan.conversation).toLatin1() + "/events")
{
    m_result.planned = qint64(m_plan.ratePerSecond) * m_plan.duration.count() / 1000;
    m_result.postLatency.reserve(std::size_t(m_result.planned));
    // The wire format comes from the models; only the text changes from one message to the next.
    MessageRequest message;
    message.text = u"@"_s;
    message.run = false;
    const QByteArray body = QJsonDocument(message.toJson()).toJson(QJsonDocument::Compact);
    const qsizetype at = body.indexOf("\"@\"");
    m_bodyBefore = body.left(at + 1);
    m_bodyAfter = body.mid(at + 2);
}

Publisher::~Publisher()
{
    wait();
    for (const auto &connection : m_connections) {
        if (connection->fd >= 0)
            ::close(connection->fd);
    }
    if (m_timer >= 0)
        ::close(m_timer);
    if (m_epoll >= 0)
        ::close(m_epoll);
}

bool Publisher::start()
{
    m_epoll = ::epoll_create1(EPOLL_CLOEXEC);
    m_timer = ::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (m_epoll < 0 || m_timer < 0) {
        m_error = systemError("epoll");
        return false;
    }
    epoll_event timerEvent{};
    timerEvent.events = EPOLLIN;
    timerEvent.data.u64 = TimerKey;
    ::epoll_ctl(m_epoll, EPOLL_CTL_ADD, m_timer, &timerEvent);
    for (int i = 0; i < m_plan.connections; ++i) {
        Connection &connection = *m_connections.emplace_back(std::make_unique<Connection>());
        connection.fd = connectTcp(m_plan.endpoint, &m_error);
        if (connection.fd < 0)
            return false;
        setNonBlocking(connection.fd);
        epoll_event event{};
        event.events = EPOLLIN | EPOLLRDHUP;
        event.data.u64 = quint64(i);
        ::epoll_ctl(m_epoll, EPOLL_CTL_ADD, connection.fd, &event);
        m_idle.push_back(&connection);
    }
    m_thread = std::thread([this] { run(); });
    return true;
}

void Publisher::wait()
{
    if (m_thread.joinable())
        m_thread.join();
}

void Publisher::run()
{
    m_startNs = nowNs();
    m_deadlineNs =
        m_startNs + std::chrono::nanoseconds(m_plan.duration + std::chrono::seconds(15)).count();
    schedule(m_startNs);
    epoll_event events[32];
    while (!done() && nowNs() < m_deadlineNs) {
        const int ready = ::epoll_wait(m_epoll, events, 32, -1);
        if (ready < 0 && errno != EINTR)
            break;
        for (int i = 0; i < ready; ++i) {
            if (events[i].data.u64 == TimerKey) {
                quint64 expirations = 0;
                (void)::read(m_timer, &expirations, sizeof expirations);
                schedule(nowNs());
            } else {
                readFrom(*m_connections[std::size_t(events[i].data.u64)]);
            }
        }
    }
    m_finished = true;
}

void Publisher::schedule(qint64 now)
{
    // Event n is due at start + n / rate.
    const qint64 due =
        std::min(m_result.planned, (now - m_startNs) * m_plan.ratePerSecond / 1'000'000'000 + 1);
    while (m_scheduled < due)
        m_backlog.push_back(m_scheduled++);
    dispatch();
    armTimer(m_scheduled < m_result.planned
                 ? m_startNs + m_scheduled * 1'000'000'000 / m_plan.ratePerSecond
                 : m_deadlineNs);
}

void Publisher::armTimer(qint64 atNs)
{
    itimerspec when{};
    when.it_value.tv_sec = time_t(atNs / 1'000'000'000);
    when.it_value.tv_nsec = long(atNs % 1'000'000'000);
    ::timerfd_settime(m_timer, TFD_TIMER_ABSTIME, &when, nullptr);
}

void Publisher::dispatch()
{
    while (!m_backlog.empty() && !m_idle.empty()) {
        const qint64 n = m_backlog.front();
        m_backlog.pop_front();
        Connection &connection = *m_idle.back();
        m_idle.pop_back();
        const qint64 scheduledNs = m_startNs + n * 1'000'000'000 / m_plan.ratePerSecond;
        const qint64 sentNs = nowNs();
        const QByteArray body = m_bodyBefore + marker() + QByteArray::number(n) +
                                " t=" + QByteArray::number(sentNs) +
                                " s=" + QByteArray::number(scheduledNs) + m_bodyAfter;
        connection.busy = true;
        connection.sentNs = sentNs;
        if (!sendAll(connection.fd, makeHttpRequest(m_hostHeader, "POST", m_target, body))) {
            connection.busy = false;
            ++m_result.failed;
        }
        if (m_result.sent == 0)
            m_result.firstSendNs = sentNs;
        m_result.lastSendNs = sentNs;
        ++m_result.sent;
    }
    m_result.maxBacklog = std::max<qint64>(m_result.maxBacklog, qint64(m_backlog.size()));
}

void Publisher::readFrom(Connection &connection)
{
    char chunk[16 * 1024];
    for (;;) {
        const ssize_t n = ::recv(connection.fd, chunk, sizeof chunk, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        const auto progress = n > 0 && connection.busy
                                  ? connection.reader.feed(QByteArrayView(chunk, n))
                                  : HttpResponseReader::Progress::Invalid;
        if (progress == HttpResponseReader::Progress::Invalid) {
            // Closed, failed, or an answer nobody asked for: this connection is done.
            if (connection.busy)
                ++m_result.failed;
            connection.busy = false;
            ::epoll_ctl(m_epoll, EPOLL_CTL_DEL, connection.fd, nullptr);
            return;
        }
        if (progress == HttpResponseReader::Progress::Complete) {
            const HttpResult answer = connection.reader.take();
            if (answer.status >= 200 && answer.status < 300) {
                ++m_result.stored;
                m_result.postLatency.add(nowNs() - connection.sentNs);
            } else {
                ++m_result.failed;
            }
            connection.busy = false;
            m_idle.push_back(&connection);
            dispatch();
        }
        // A short read took everything there was: no second recv() to hear EAGAIN.
        if (std::size_t(n) < sizeof chunk)
            return;
    }
}

bool Publisher::done() const
{
    return m_scheduled == m_result.planned && m_backlog.empty() &&
           m_result.stored + m_result.failed == m_result.sent;
}

} // namespace AgentDeck::Bench
