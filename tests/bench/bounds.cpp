#include "bounds.h"

#include "httpconnection.h"
#include "rawsocket.h"
#include "samples.h"
#include "serverprocess.h"
#include "websocketsubscribers.h"

#include <QCoroTimer>
#include <QDir>
#include <QElapsedTimer>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <arpa/inet.h>
#include <atomic>
#include <cerrno>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace Qt::StringLiterals;
using namespace std::chrono_literals;

namespace AgentDeck::Bench {

namespace {

constexpr int Messages = 40;
// Every message in flight at once: the events then come in bursts, as from many clients.
constexpr int PostingConnections = 40;
constexpr qint64 GrowthGoalMiB = 256;
constexpr int SlowHeads = 250;
constexpr int OpenFileLimit = 256;
constexpr qint64 AliveGoalMs = 2000;

QByteArray upgradeRequest(const QByteArray &path, quint16 port)
{
    return "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1:" + QByteArray::number(port) +
           "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
}

QCoro::Task<qint64> metric(Endpoint endpoint, QByteArray name)
{
    HttpConnection http(endpoint);
    auto opening = http.open(5s);
    if (!co_await std::move(opening))
        co_return -1;
    auto asking = http.request(http.makeRequest("GET", "/metrics"), 10s);
    const HttpResult reply = co_await std::move(asking);
    for (const QByteArray &line : reply.body.split('\n')) {
        if (line.startsWith(QByteArray(name + ' ')))
            co_return line.mid(name.size() + 1).trimmed().toLongLong();
    }
    co_return -1;
}

// Posts the messages over `connections` blocking connections, each in a thread of its own.
bool postAtOnce(Endpoint endpoint, const QByteArray &target, int messages, int connections)
{
    std::atomic<int> next{0};
    std::atomic<bool> failed{false};
    const QString text(1024 * 1024, u'x');
    std::vector<std::thread> threads;
    for (int c = 0; c < connections; ++c) {
        threads.emplace_back([&] {
            QString error;
            const int fd = connectTcp(endpoint, &error);
            if (fd < 0) {
                failed = true;
                return;
            }
            HttpResponseReader reader;
            for (int i = next++; i < messages && !failed; i = next++) {
                const QJsonObject message{
                    {u"role"_s, u"user"_s},
                    {u"content"_s,
                     QJsonArray{
                         QJsonObject{{u"type"_s, u"text"_s},
                                     {u"text"_s, QString(QString::number(i + 1) + u' ' + text)}}}},
                    {u"run"_s, false}};
                const QByteArray request =
                    makeHttpRequest("127.0.0.1", "POST", target,
                                    QJsonDocument(message).toJson(QJsonDocument::Compact));
                if (!sendAll(fd, request)) {
                    failed = true;
                    break;
                }
                char chunk[4096];
                HttpResponseReader::Progress progress = HttpResponseReader::Progress::Incomplete;
                while (progress == HttpResponseReader::Progress::Incomplete) {
                    const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
                    if (n <= 0)
                        break;
                    progress = reader.feed(QByteArrayView(chunk, n));
                }
                if (progress != HttpResponseReader::Progress::Complete ||
                    reader.take().status != 200)
                    failed = true;
            }
            ::close(fd);
        });
    }
    for (std::thread &thread : threads)
        thread.join();
    return !failed;
}

int openDescriptors(qint64 pid)
{
    return int(QDir(u"/proc/%1/fd"_s.arg(pid))
                   .entryList(QDir::AllEntries | QDir::System | QDir::NoDotAndDotDot)
                   .size());
}

} // namespace

QCoro::Task<GoalResult> measureSlowSubscribers(QString binary, QString dataDir, int subscribers)
{
    GoalResult goal;
    goal.name = u"8. server growth, %1 subscribers that do not read, %2 x 1 MiB"_s.arg(subscribers)
                    .arg(Messages);
    goal.goal = u"< %1 MiB, and a reader gets every event"_s.arg(GrowthGoalMiB);
    ServerProcess server(binary, dataDir);
    auto starting = server.start(60s);
    if (!co_await std::move(starting)) {
        goal.figure = server.errorString();
        co_return goal;
    }
    const Endpoint endpoint = server.endpoint();
    HttpConnection http(endpoint);
    auto opening = http.open(5s);
    co_await std::move(opening);
    auto creating = http.request(
        http.makeRequest("POST", "/api/conversations", R"({"agent":{"kind":"echo"}})"), 10s);
    const HttpResult created = co_await std::move(creating);
    const QByteArray id =
        QJsonDocument::fromJson(created.body).object().value(u"id"_s).toString().toLatin1();
    if (created.status != 201 || id.isEmpty()) {
        goal.figure = u"cannot create a conversation: %1"_s.arg(created.status);
        co_return goal;
    }
    const QByteArray path = "/sockets/events/" + id;

    std::atomic<int> received{0};
    WebSocketSubscribers reader(endpoint, path, 1, 1,
                                [&](int, QByteArrayView, qint64) { ++received; });
    if (!reader.open()) {
        goal.figure = reader.error();
        co_return goal;
    }
    std::vector<int> deaf;
    const QByteArray upgrade = upgradeRequest(path, endpoint.port);
    for (int i = 0; i < subscribers; ++i) {
        QString error;
        const int fd = connectTcp(endpoint, &error);
        if (fd < 0)
            break;
        // Small: the kernel then holds little for a subscriber that does not read.
        const int receiveBuffer = 16 * 1024;
        ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receiveBuffer, sizeof receiveBuffer);
        deaf.push_back(fd);
        sendAll(fd, upgrade);
    }
    for (int i = 0; i < 400; ++i) {
        auto counting = metric(endpoint, "agentdeck_websocket_connections");
        if (co_await std::move(counting) >= subscribers + 1)
            break;
        co_await QCoro::sleepFor(50ms);
    }
    const auto before = server.memory();

    std::atomic<bool> posted{false};
    bool postedOk = false;
    QElapsedTimer posting;
    posting.start();
    std::thread poster([&] {
        postedOk = postAtOnce(endpoint, "/api/conversations/" + id + "/events", Messages,
                              PostingConnections);
        posted = true;
    });
    while (!posted)
        co_await QCoro::sleepFor(20ms);
    poster.join();
    const qint64 postingMs = posting.elapsed();
    for (int i = 0; i < 600 && received < Messages && reader.openCount() > 0; ++i)
        co_await QCoro::sleepFor(100ms);
    const auto after = server.memory();
    auto dropping = metric(endpoint, "agentdeck_websocket_slow_consumer_drops_total");
    const qint64 drops = co_await std::move(dropping);
    reader.stop();
    for (const int fd : deaf)
        ::close(fd);
    auto stopping = server.stop();
    co_await std::move(stopping);

    if (!before || !after || !postedOk) {
        goal.figure = postedOk ? u"memory not read"_s : u"posting failed"_s;
        co_return goal;
    }
    const qint64 growthMiB = (after->hwmKiB - before->rssKiB) / 1024;
    goal.measured = true;
    goal.met = growthMiB < GrowthGoalMiB && received == Messages;
    goal.figure =
        u"**%1 MiB** to the peak (RSS %2 MiB before, peak %3 MiB, %4 MiB after); the "
        "reader got %5 of %6 events; %7 slow consumers dropped; posting took %8 ms"_s.arg(growthMiB)
            .arg(before->rssKiB / 1024)
            .arg(after->hwmKiB / 1024)
            .arg(after->rssKiB / 1024)
            .arg(received.load())
            .arg(Messages)
            .arg(drops)
            .arg(postingMs);
    co_return goal;
}

QCoro::Task<GoalResult> measureSlowHeads(QString binary, QString dataDir)
{
    GoalResult goal;
    goal.name = u"9. GET /alive past %1 slow request heads, %2 open files"_s.arg(SlowHeads).arg(
        OpenFileLimit);
    goal.goal = u"every answer < %1 ms"_s.arg(AliveGoalMs);
    ServerProcess server(binary, dataDir);
    server.setOpenFileLimit(OpenFileLimit);
    auto starting = server.start(60s);
    if (!co_await std::move(starting)) {
        goal.figure = server.errorString();
        co_return goal;
    }
    const Endpoint endpoint = server.endpoint();

    // The slow clients, in a thread: a byte of a head on connecting, one more every 3 s, and
    // a new connection for one that was closed.
    std::atomic<bool> stop{false};
    std::atomic<int> reopened{0};
    std::thread slow([&] {
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_port = htons(endpoint.port);
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        std::vector<int> fds(SlowHeads, -1);
        const auto open = [&](int &fd) {
            fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
            ::connect(fd, reinterpret_cast<const sockaddr *>(&address), sizeof address);
        };
        for (int &fd : fds)
            open(fd);
        QElapsedTimer round;
        round.start();
        bool first = true;
        while (!stop) {
            if (first || round.elapsed() >= 3000) {
                for (int &fd : fds) {
                    if (::send(fd, first ? "G" : "E", 1, MSG_NOSIGNAL) < 0 && errno != EAGAIN &&
                        errno != ENOTCONN) {
                        ::close(fd);
                        open(fd);
                        ++reopened;
                    }
                }
                first = false;
                round.restart();
            }
            std::this_thread::sleep_for(20ms); // the pace of the slow clients, not a wait
        }
        for (const int fd : fds)
            ::close(fd);
    });
    for (int i = 0; i < 200 && openDescriptors(server.pid()) < OpenFileLimit - 32; ++i)
        co_await QCoro::sleepFor(50ms);
    const int held = openDescriptors(server.pid());

    Samples latencies;
    int unanswered = 0;
    QElapsedTimer window;
    window.start();
    while (window.elapsed() < 10'000) {
        QElapsedTimer one;
        one.start();
        HttpConnection http(endpoint);
        auto opening = http.open(std::chrono::milliseconds(AliveGoalMs + 500));
        const bool opened = co_await std::move(opening);
        HttpResult answer;
        if (opened) {
            auto asking = http.request(http.makeRequest("GET", "/alive"),
                                       std::chrono::milliseconds(AliveGoalMs + 500));
            answer = co_await std::move(asking);
        }
        if (answer.status == 200)
            latencies.add(one.nsecsElapsed());
        else
            ++unanswered;
        co_await QCoro::sleepFor(100ms); // one health check every ~100 ms
    }
    stop = true;
    slow.join();
    auto stopping = server.stop();
    co_await std::move(stopping);

    goal.measured = true;
    const double maxMs = latencies.isEmpty() ? 0 : latencies.max() / 1e6;
    goal.met = unanswered == 0 && !latencies.isEmpty() && maxMs < AliveGoalMs;
    goal.figure = u"%1 of %2 answered; p50 **%3 ms**, max **%4 ms**; the server held %5 "
                  "descriptors; %6 slow connections were closed and opened again"_s
                      .arg(qint64(latencies.size()))
                      .arg(qint64(latencies.size()) + unanswered)
                      .arg(latencies.isEmpty() ? 0 : latencies.median() / 1e6, 0, 'f', 1)
                      .arg(maxMs, 0, 'f', 1)
                      .arg(held)
                      .arg(reopened.load());
    co_return goal;
}

} // namespace AgentDeck::Bench
