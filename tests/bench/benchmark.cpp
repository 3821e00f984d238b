#include "benchmark.h"

#include "bounds.h"
#include "dockerfigures.h"
#include "fanoutreference.h"
#include "loadgenerator.h"
#include "nginxreference.h"
#include "procinfo.h"
#include "publisher.h"
#include "sandboxfigures.h"
#include "serverconnection.h"
#include "websocketsubscribers.h"
#include "wiretypes.h"
#include "wrkload.h"

#include <QByteArrayMatcher>
#include <QCoroSignal>
#include <QCoroTimer>
#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRandomGenerator>
#include <QSet>
#include <QSqlDatabase>
#include <QSqlError>
#include <QSqlQuery>
#include <QTemporaryDir>
#include <QUuid>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <limits>

using namespace Qt::StringLiterals;
using namespace std::chrono_literals;

namespace AgentDeck::Bench {

namespace {

constexpr auto RequestTimeout = 30s;
const QByteArray SearchTarget = "/api/conversations/search?limit=100"_ba;

QString kib(const std::optional<ProcessMemory> &memory)
{
    return memory ? u"%1 MiB"_s.arg(double(memory->rssKiB) / 1024.0, 0, 'f', 1) : u"n/a"_s;
}

QString seconds(qint64 ns)
{
    return u"%1 s"_s.arg(double(ns) / 1e9, 0, 'f', 2);
}

double ratioOf(double value, double reference)
{
    return reference > 0 ? value / reference : 0;
}

// The best of three runs of `pragma` on the SQLite file at `path`, on a connection opened for
// it; -1 when it failed or found damage. Synchronous: it runs between servers, when
// nothing else in the bench is waiting.
qint64 timePragma(const QString &path, const QString &pragma)
{
    const QString name = u"bench-"_s + QUuid::createUuid().toString(QUuid::WithoutBraces);
    qint64 best = -1;
    {
        QSqlDatabase db = QSqlDatabase::addDatabase(u"QSQLITE"_s, name);
        db.setDatabaseName(path);
        for (int run = 0; run < 3 && db.open(); ++run) {
            QSqlQuery query(db);
            const qint64 startNs = nowNs();
            if (!query.exec(pragma) || !query.next() || query.value(0).toString() != u"ok"_s) {
                say(u"   %1 on %2: %3"_s.arg(pragma, path,
                                             query.lastError().isValid()
                                                 ? query.lastError().text()
                                                 : query.value(0).toString()));
                best = -1;
                break;
            }
            const qint64 ns = nowNs() - startNs;
            best = best < 0 ? ns : std::min(best, ns);
        }
        db.close();
    }
    QSqlDatabase::removeDatabase(name);
    return best;
}

// Reads "<digits>" at `pos`; advances `pos` past them.
qint64 readNumber(QByteArrayView text, qsizetype &pos)
{
    qint64 value = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9')
        value = value * 10 + (text[pos++] - '0');
    return value;
}

// Removes the bench's data dirs on every way out of the run, unless they are to be kept.
struct DataRemover
{
    QString path;
    bool keep = false;

    ~DataRemover() { removeNow(); }
    void removeNow()
    {
        if (keep || path.isEmpty())
            return;
        std::error_code error;
        std::filesystem::remove_all(std::filesystem::path(path.toStdString()), error);
        path.clear();
    }
};

// Polls `condition` until it holds or `timeout` passes: for states that have no signal of their
// own (a hundred sockets, a count reached).
QCoro::Task<bool> waitUntil(std::function<bool()> condition, std::chrono::milliseconds timeout)
{
    const qint64 deadline = nowNs() + std::chrono::nanoseconds(timeout).count();
    while (!condition()) {
        if (nowNs() > deadline)
            co_return false;
        co_await QCoro::sleepFor(5ms);
    }
    co_return true;
}

// Collects what the subscribers of the fan-out measurement receive. onMessage() runs in the
// subscribers' reading threads, each subscriber always in the same one; the counters are read
// from the bench's thread while it waits, the samples only once the readers have ended.
class FanoutCollector
{
public:
    FanoutCollector(int subscribers, qint64 warmupEvents, qint64 expectedEvents)
        : m_warmupEvents(warmupEvents)
        , m_subscribers(std::size_t(subscribers))
    {
        const auto samples = std::size_t(std::max<qint64>(0, expectedEvents - warmupEvents));
        for (Subscriber &subscriber : m_subscribers) {
            subscriber.fromSend.reserve(samples);
            subscriber.fromSchedule.reserve(samples);
        }
    }

    void onMessage(int index, QByteArrayView payload, qint64 receivedNs)
    {
        static const QByteArrayMatcher marker(Publisher::marker());
        Subscriber &subscriber = m_subscribers[std::size_t(index)];
        if (index == 0)
            m_payloadBytes.store(payload.size(), std::memory_order_relaxed);
        const qsizetype at = marker.indexIn(payload.data(), payload.size());
        if (at < 0) {
            if (payload.contains("bench probe"))
                subscriber.probeSeen = true;
            return;
        }
        qsizetype pos = at + Publisher::marker().size();
        const qint64 n = readNumber(payload, pos);
        pos += 3; // " t="
        const qint64 sentNs = readNumber(payload, pos);
        pos += 3; // " s="
        const qint64 scheduledNs = readNumber(payload, pos);
        subscriber.received.fetch_add(1, std::memory_order_relaxed);
        if (n < m_warmupEvents)
            return;
        subscriber.fromSend.add(receivedNs - sentNs);
        subscriber.fromSchedule.add(receivedNs - scheduledNs);
        if (index == 0)
            recordCommitLatency(payload);
    }

    bool allSawProbe() const
    {
        return std::all_of(
            m_subscribers.begin(), m_subscribers.end(),
            [](const Subscriber &subscriber) { return subscriber.probeSeen.load(); });
    }
    qint64 fewestReceived() const
    {
        qint64 fewest = std::numeric_limits<qint64>::max();
        for (const Subscriber &subscriber : m_subscribers)
            fewest = std::min(fewest, subscriber.received.load());
        return fewest;
    }
    qint64 totalReceived() const
    {
        qint64 total = 0;
        for (const Subscriber &subscriber : m_subscribers)
            total += subscriber.received.load();
        return total;
    }

    // Client write of the POST -> frame read by a subscriber; all subscribers.
    Samples fromSend() const { return merged(&Subscriber::fromSend); }
    // Scheduled time of the POST -> frame read.
    Samples fromSchedule() const { return merged(&Subscriber::fromSchedule); }
    Samples fromCommit; // server "timestamp" (ms, wall clock) -> frame read, subscriber 0
    // The size of the last message subscriber 0 read.
    qsizetype payloadBytes() const { return m_payloadBytes.load(); }

private:
    void recordCommitLatency(QByteArrayView payload)
    {
        static const QByteArrayMatcher key("\"timestamp\":\"");
        const qsizetype at = key.indexIn(payload.data(), payload.size());
        if (at < 0 || payload.size() < at + 13 + 24)
            return;
        const qint64 nowMs = QDateTime::currentMSecsSinceEpoch();
        const auto stamp = QDateTime::fromString(QString::fromLatin1(payload.sliced(at + 13, 24)),
                                                 Qt::ISODateWithMs);
        if (stamp.isValid())
            fromCommit.add((nowMs - stamp.toMSecsSinceEpoch()) * 1'000'000);
    }

    struct Subscriber
    {
        std::atomic<qint64> received{0};
        std::atomic<bool> probeSeen{false};
        Samples fromSend;
        Samples fromSchedule;
    };

    Samples merged(Samples Subscriber::*samples) const
    {
        Samples all;
        all.reserve(m_subscribers.size() * (m_subscribers.front().*samples).size());
        for (const Subscriber &subscriber : m_subscribers)
            all.append(subscriber.*samples);
        return all;
    }

    qint64 m_warmupEvents;
    std::vector<Subscriber> m_subscribers;
    std::atomic<qsizetype> m_payloadBytes{0};
};

} // namespace

void say(const QString &line)
{
    std::fputs(qPrintable(line + u'\n'), stdout);
    std::fflush(stdout);
}

void BenchOptions::makeQuick()
{
    quick = true;
    throughputRounds = 1;
    throughputWindow = 1000ms;
    fanoutWindow = 2000ms;
    minPageSamples = 50;
}

Benchmark::Benchmark(BenchOptions options, QObject *parent)
    : QObject(parent)
    , m_options(std::move(options))
{}

Benchmark::~Benchmark() = default;

void Benchmark::abort()
{
    m_server.reset();
}

void Benchmark::noteInterference(int number, const CpuMeter &cpu)
{
    // What the bench does not control: other processes, and the host's share of our CPUs.
    m_interference[number] =
        std::max(m_interference.value(number), cpu.otherShare() + cpu.stealShare());
}

void Benchmark::addGoal(GoalResult goal, int number)
{
    // Timings only: a resident size does not depend on who else runs.
    goal.otherCpu = m_interference.value(number, -1);
    say(u"   => %1: %2 (goal %3): %4%5"_s.arg(
        goal.name, goal.figure, goal.goal,
        !goal.measured ? u"NOT MEASURED"_s
        : goal.met     ? u"MET"_s
                       : u"NOT MET"_s,
        goal.otherCpu < 0
            ? QString()
            : u"; other processes and the host took up to %1% of a core meanwhile"_s.arg(
                  qRound(goal.otherCpu * 100))));
    m_goals.append(std::move(goal));
}

QCoro::Task<int> Benchmark::run()
{
    const qint64 runStartNs = nowNs();
    const MachineInfo machine = MachineInfo::read();
    say(u"AgentDeck benchmark%1"_s.arg(m_options.quick ? u" (--quick)"_s : QString()));
    say(u"machine: "_s + machine.describe());
    say(u"server:  "_s + m_options.binary);
    say(u"catalogues: %1 conversations against a reference of %2"_s.arg(m_options.conversations)
            .arg(m_options.referenceConversations));

    QTemporaryDir root(QDir(m_options.workDir).filePath(u"agentdeck-bench-XXXXXX"_s));
    if (!root.isValid()) {
        say(u"cannot create a work dir under "_s + m_options.workDir);
        co_return 1;
    }
    // std::filesystem removes the 100,000 workspace dirs several times faster than QDir does.
    root.setAutoRemove(false);
    DataRemover remover{root.path(), m_options.keepData};
    say(u"data:    "_s + root.path() + (m_options.keepData ? u" (kept)"_s : QString()));
    {
        // The machine may be shared: say how busy it is before anything starts.
        CpuMeter idle(0);
        co_await QCoro::sleepFor(1s);
        QFile loadavg(u"/proc/loadavg"_s);
        const QByteArray load =
            loadavg.open(QIODevice::ReadOnly) ? loadavg.readLine().trimmed() : QByteArray("n/a");
        say(u"load:    other processes used %1% of a core over 1 s, the host %2%; /proc/loadavg %3"_s
                .arg(qRound(idle.otherShare() * 100))
                .arg(qRound(idle.stealShare() * 100))
                .arg(QString::fromLatin1(load)));
    }

    if (m_options.fanoutOnly) {
        auto fanout = measureFanoutAlone(root.filePath(u"fanout"_s));
        co_await std::move(fanout);
        printSummary();
        co_return m_failures.isEmpty() ? 0 : 1;
    }
    if (m_options.boundsOnly) {
        auto bounds = measureBounds(root.path());
        co_await std::move(bounds);
        printSummary();
        co_return m_failures.isEmpty() ? 0 : 1;
    }

    if (m_options.httpOnly) {
        auto http = measureHttpAlone(root.filePath(u"http"_s));
        co_await std::move(http);
        printSummary();
        co_return m_failures.isEmpty() ? 0 : 1;
    }

    if (m_options.dockerOnly) {
        auto docker = measureDocker(root.filePath(u"docker"_s));
        co_await std::move(docker);
        printSummary();
        co_return m_failures.isEmpty() ? 0 : 1;
    }

    if (m_options.sandboxOnly) {
        auto sandboxes = measureSandboxes(root.filePath(u"sandboxes"_s));
        co_await std::move(sandboxes);
        printSummary();
        co_return m_failures.isEmpty() ? 0 : 1;
    }

    CatalogueFigures reference;
    CatalogueFigures large;
    QList<QUuid> ids;

    say(QString());
    say(u"== Reference catalogue (%1 conversations)"_s.arg(m_options.referenceConversations));
    auto measuringReference =
        measureCatalogue(u"reference"_s, root.filePath(u"reference"_s),
                         m_options.referenceConversations, reference, nullptr);
    const bool referenceOk = co_await std::move(measuringReference);
    if (!referenceOk) {
        printSummary();
        co_return 1;
    }
    auto restartingReference =
        restartAndSample(u"reference"_s, root.filePath(u"reference"_s), reference);
    co_await std::move(restartingReference);

    say(QString());
    say(u"== Large catalogue (%1 conversations)"_s.arg(m_options.conversations));
    auto measuringLarge = measureCatalogue(u"large"_s, root.filePath(u"large"_s),
                                           m_options.conversations, large, &ids);
    const bool largeOk = co_await std::move(measuringLarge);
    if (!largeOk) {
        printSummary();
        co_return 1;
    }
    reportSearchAndMemory(reference, large);

    say(QString());
    say(u"== 1. HTTP throughput against nginx, %1 keep-alive connections"_s.arg(
        m_options.throughputConnections));
    auto throughput = measureThroughput(*m_server, ids);
    co_await std::move(throughput);

    say(QString());
    say(u"== 2. Event published -> received, %1 WebSocket subscribers, %2 events/s"_s
            .arg(m_options.subscribers)
            .arg(m_options.eventsPerSecond));
    auto fanout = measureFanout(*m_server);
    co_await std::move(fanout);

    say(QString());
    say(u"== Large catalogue after a restart"_s);
    auto restartingLarge = restartAndSample(u"large"_s, root.filePath(u"large"_s), large);
    co_await std::move(restartingLarge);
    if (reference.memoryAfterRestartSample && large.memoryAfterRestartSample)
        say(u"   RSS after a restart and 40 search pages: %1 against %2, ratio %3"_s.arg(
            kib(large.memoryAfterRestartSample), kib(reference.memoryAfterRestartSample),
            formatRatio(ratioOf(double(large.memoryAfterRestartSample->rssKiB),
                                double(reference.memoryAfterRestartSample->rssKiB)))));
    if (reference.restartStartupNs > 0 && large.restartStartupNs > 0)
        say(u"   startup to ready on an existing catalogue: %1 against %2, ratio %3"_s.arg(
            formatMs(large.restartStartupNs), formatMs(reference.restartStartupNs),
            formatRatio(
                ratioOf(double(large.restartStartupNs), double(reference.restartStartupNs)))));
    reportStartupCheck(reference, large, root.filePath(u"reference"_s), root.filePath(u"large"_s));

    auto bounds = measureBounds(root.path());
    co_await std::move(bounds);
    auto sandboxes = measureSandboxes(root.filePath(u"sandboxes"_s));
    co_await std::move(sandboxes);

    printSummary();
    say(u"the run took %1"_s.arg(seconds(nowNs() - runStartNs)));
    if (!m_options.keepData) {
        const qint64 removeStartNs = nowNs();
        remover.removeNow();
        say(u"removed %1 in %2"_s.arg(root.path(), seconds(nowNs() - removeStartNs)));
    }
    co_return m_failures.isEmpty() ? 0 : 1;
}

QCoro::Task<> Benchmark::measureFanoutAlone(QString dataDir)
{
    say(QString());
    say(u"== 2. Event published -> received, %1 WebSocket subscribers, %2 events/s"_s
            .arg(m_options.subscribers)
            .arg(m_options.eventsPerSecond));
    auto starting = startServer(m_server, dataDir);
    const bool started = co_await std::move(starting);
    if (!started)
        co_return;
    auto fanout = measureFanout(*m_server);
    co_await std::move(fanout);
}

QCoro::Task<> Benchmark::measureHttpAlone(QString dataDir)
{
    say(QString());
    say(u"== 1. HTTP throughput against nginx, %1 conversations, %2 keep-alive connections"_s
            .arg(m_options.referenceConversations)
            .arg(m_options.throughputConnections));
    auto starting = startServer(m_server, dataDir);
    if (!co_await std::move(starting))
        co_return;
    CatalogueFigures figures;
    QList<QUuid> ids;
    auto seeding = seed(*m_server, m_options.referenceConversations, figures, &ids);
    if (!co_await std::move(seeding))
        co_return;
    auto throughput = measureThroughput(*m_server, ids);
    co_await std::move(throughput);
}

QCoro::Task<> Benchmark::measureBounds(QString root)
{
    say(QString());
    say(u"== 8. Server growth with %1 WebSocket subscribers that do not read"_s.arg(
        m_options.subscribers));
    auto subscribers = measureSlowSubscribers(m_options.binary, QDir(root).filePath(u"deaf"_s),
                                              m_options.subscribers);
    addGoal(co_await std::move(subscribers), 8);
    say(QString());
    say(u"== 9. GET /alive past slow request heads at the descriptor limit"_s);
    auto heads = measureSlowHeads(m_options.binary, QDir(root).filePath(u"slowheads"_s));
    addGoal(co_await std::move(heads), 9);
}

QCoro::Task<> Benchmark::measureSandboxes(QString dataDir)
{
    SandboxFigures sandboxes(
        {m_options.binary, std::move(dataDir), m_options.sandboxConversations});
    auto measuring = sandboxes.run();
    const SandboxFigureResults results = co_await std::move(measuring);
    m_failures.append(results.failures);
    for (const GoalResult &goal : results.goals) {
        // The sandbox figures meter other processes themselves (CpuMeter would count the hosts
        // among them); keyed apart from the numbered figures.
        const int key = -1 - int(m_goals.size());
        if (goal.otherCpu >= 0)
            m_interference[key] = goal.otherCpu;
        addGoal(goal, key);
    }
}

QCoro::Task<> Benchmark::measureDocker(QString dataDir)
{
    say(QString());
    say(u"== 13, 14. docker: a conversation's create to its first command's end"_s);
    DockerFigures docker({m_options.binary, std::move(dataDir), m_options.dockerSamples});
    auto measuring = docker.run();
    const DockerFigureResults results = co_await std::move(measuring);
    m_failures.append(results.failures);
    for (const GoalResult &goal : results.goals)
        addGoal(goal, -1 - int(m_goals.size()));
}

QCoro::Task<bool> Benchmark::startServer(std::unique_ptr<ServerProcess> &server, QString dataDir)
{
    server = std::make_unique<ServerProcess>(m_options.binary, dataDir);
    auto starting = server->start(60s);
    const bool started = co_await std::move(starting);
    if (!started) {
        m_failures.append(server->errorString());
        say(u"   FAILED: "_s + server->errorString());
    }
    co_return started;
}

QCoro::Task<bool> Benchmark::seed(ServerProcess &server, qint64 count, CatalogueFigures &figures,
                                  QList<QUuid> *ids)
{
    if (ids) {
        ids->clear();
        ids->reserve(count);
    }
    LoadSpec spec;
    spec.connections = m_options.seedConnections;
    spec.maxRequests = count;
    spec.deadline = std::max<std::chrono::milliseconds>(60s, std::chrono::milliseconds(count * 5));
    spec.request = [](HttpConnection &connection, qint64 index) {
        const QByteArray body = "{\"agent\":{\"kind\":\"shell\"},\"title\":\"bench conversation " +
                                QByteArray::number(index) + "\"}";
        return connection.makeRequest("POST", "/api/conversations", body);
    };
    spec.onResponse = [ids](qint64, const HttpResult &result) {
        if (!ids || result.status != 201)
            return;
        static const QByteArrayMatcher key("\"id\":\"");
        const qsizetype at = key.indexIn(result.body);
        if (at >= 0) {
            if (const auto id = parseWireId(QString::fromLatin1(result.body.mid(at + 6, 36))))
                ids->append(*id);
        }
    };
    CpuMeter cpu(server.pid());
    auto loading = runLoad(server.endpoint(), std::move(spec));
    const LoadResult result = co_await std::move(loading);
    figures.seedPerSecond = result.perSecond();
    say(u"   seeded %1 conversations with %2 concurrent POSTs in %3 s: %4 per second; create "
        "latency %5; %6"_s.arg(result.counted)
            .arg(m_options.seedConnections)
            .arg(result.windowSeconds, 0, 'f', 1)
            .arg(result.perSecond(), 0, 'f', 0)
            .arg(result.latency.summary(), cpu.report()));
    if (!result.finished || result.counted != count || (ids && ids->size() != count)) {
        const QString problem =
            u"seeding stopped at %1 of %2 conversations (%3 errors%4)"_s.arg(result.counted)
                .arg(count)
                .arg(result.errors)
                .arg(result.finished ? QString() : u", deadline passed"_s);
        m_failures.append(problem);
        say(u"   FAILED: "_s + problem);
        co_return false;
    }
    co_return true;
}

QCoro::Task<bool> Benchmark::timePages(Endpoint endpoint, QList<QByteArray> targets, bool fresh,
                                       Samples *latencies, QString *problem, int uncounted)
{
    std::unique_ptr<HttpConnection> connection;
    for (qsizetype i = 0; i < targets.size(); ++i) {
        const QByteArray &target = targets[i];
        // The latency is from the write of the request: a new connection's handshake is not in it.
        if (!connection || fresh)
            connection = std::make_unique<HttpConnection>(endpoint);
        auto asking = connection->request(connection->makeRequest("GET", target), RequestTimeout);
        const HttpResult result = co_await std::move(asking);
        if (result.status != 200) {
            *problem = u"GET %1 answered %2"_s.arg(QString::fromLatin1(target)).arg(result.status);
            co_return false;
        }
        if (i >= uncounted)
            latencies->add(result.latencyNs);
    }
    co_return true;
}

QCoro::Task<SearchFigures> Benchmark::walkSearch(Endpoint endpoint, qint64 expected)
{
    SearchFigures figures;
    figures.freshConnections = true;
    // The first few warm the caches and are not counted.
    auto asking =
        timePages(endpoint, QList<QByteArray>(5 + m_options.firstPageRepeats, SearchTarget), true,
                  &figures.firstPage, &figures.problem, 5);
    const bool asked = co_await std::move(asking);
    if (!asked)
        co_return figures;

    const qint64 pageBound = expected / 100 + 10;
    for (int walk = 0; walk < 1000; ++walk) {
        std::vector<qint64> latencies;
        QList<QByteArray> cursors;
        QSet<QString> seen;
        qint64 items = 0;
        QByteArray pageId;
        for (;;) {
            const QByteArray target =
                pageId.isEmpty() ? SearchTarget : SearchTarget + "&page_id=" + pageId;
            HttpConnection connection(endpoint);
            auto reading =
                connection.request(connection.makeRequest("GET", target), RequestTimeout);
            const HttpResult result = co_await std::move(reading);
            if (result.status != 200) {
                figures.problem = u"page %1 answered %2"_s.arg(latencies.size()).arg(result.status);
                co_return figures;
            }
            latencies.push_back(result.latencyNs);
            cursors.append(pageId);
            const QJsonObject page = QJsonDocument::fromJson(result.body).object();
            if (walk == 0) {
                const QJsonArray pageItems = page.value(u"items"_s).toArray();
                items += pageItems.size();
                for (const QJsonValue &item : pageItems)
                    seen.insert(item.toObject().value(u"id"_s).toString());
            }
            const QJsonValue next = page.value(u"next_page_id"_s);
            if (!next.isString())
                break;
            pageId = next.toString().toLatin1();
            if (qint64(latencies.size()) > pageBound) {
                figures.problem = u"the walk did not end after %1 pages"_s.arg(pageBound);
                co_return figures;
            }
        }
        figures.pagesPerWalk = qint64(latencies.size());
        for (std::size_t i = 0; i < latencies.size(); ++i) {
            figures.allPages.add(latencies[i]);
            if (i >= latencies.size() / 2)
                figures.deepPages.add(latencies[i]);
        }
        if (walk == 0) {
            figures.deepCursors = cursors.mid(cursors.size() / 2);
            figures.deepCursors.removeAll(QByteArray()); // a one-page catalogue has none
            figures.complete = items == expected && qint64(seen.size()) == expected;
            if (!figures.complete)
                figures.problem = u"a walk saw %1 items, %2 distinct, of %3"_s.arg(items)
                                      .arg(seen.size())
                                      .arg(expected);
        }
        figures.walks = walk + 1;
        if (qint64(figures.allPages.size()) >= m_options.minPageSamples)
            break;
    }
    co_return figures;
}

QCoro::Task<SearchFigures> Benchmark::sampleSearch(Endpoint endpoint, QList<QByteArray> deepCursors)
{
    SearchFigures figures;
    figures.freshConnections = false;
    QList<QByteArray> targets(5 + m_options.firstPageRepeats, SearchTarget);
    auto asking = timePages(endpoint, targets, false, &figures.firstPage, &figures.problem, 5);
    const bool asked = co_await std::move(asking);
    if (!asked)
        co_return figures;
    if (deepCursors.isEmpty()) {
        figures.problem = u"no deep pages to ask"_s;
        co_return figures;
    }
    // Evenly spread over the deep half; round after round when there are fewer pages than asks.
    targets.clear();
    const qsizetype count = m_options.deepPageSamples;
    for (qsizetype i = 0; i < count; ++i) {
        const qsizetype index =
            deepCursors.size() >= count ? i * deepCursors.size() / count : i % deepCursors.size();
        targets.append(SearchTarget + "&page_id=" + deepCursors[index]);
    }
    auto deep = timePages(endpoint, targets, false, &figures.deepPages, &figures.problem);
    co_await std::move(deep);
    co_return figures;
}

void Benchmark::reportSearch(const SearchFigures &search, const QString &timing)
{
    say(u"   search pages, limit 100, sequential, %1 (%2):"_s.arg(
        search.freshConnections ? u"a new connection per request"_s
                                : u"one keep-alive connection"_s,
        timing));
    say(u"     first page, asked %1 times:          %2"_s.arg(search.firstPage.size())
            .arg(search.firstPage.summary()));
    if (search.freshConnections) {
        say(u"     every page of %1 walk(s) of %2 pages: %3"_s.arg(search.walks)
                .arg(search.pagesPerWalk)
                .arg(search.allPages.summary()));
        say(u"     the first walk saw every conversation once: %1"_s.arg(
            search.complete ? u"yes"_s : u"NO"_s));
    }
    say(u"     deep pages (second half of the catalogue): %1"_s.arg(search.deepPages.summary()));
}

QCoro::Task<bool> Benchmark::measureCatalogue(QString label, QString dataDir, qint64 count,
                                              CatalogueFigures &figures, QList<QUuid> *ids)
{
    figures.conversations = count;
    auto starting = startServer(m_server, dataDir);
    const bool started = co_await std::move(starting);
    if (!started)
        co_return false;
    figures.memoryAtStart = m_server->memory();
    say(u"   %1 server pid %2 on port %3, started in %4, RSS %5"_s.arg(label)
            .arg(m_server->pid())
            .arg(m_server->endpoint().port)
            .arg(formatMs(m_server->startupNs()), kib(figures.memoryAtStart)));
    auto seeding = seed(*m_server, count, figures, ids);
    const bool seeded = co_await std::move(seeding);
    if (!seeded)
        co_return false;
    figures.memoryAfterSeed = m_server->memory();

    CpuMeter walkCpu(m_server->pid());
    qint64 startNs = nowNs();
    auto walking = walkSearch(m_server->endpoint(), count);
    figures.searchFresh = co_await std::move(walking);
    reportSearch(figures.searchFresh, seconds(nowNs() - startNs) + u"; "_s + walkCpu.report());
    noteInterference(3, walkCpu);
    if (figures.searchFresh.problem.isEmpty()) {
        CpuMeter sampleCpu(m_server->pid());
        startNs = nowNs();
        auto sampling = sampleSearch(m_server->endpoint(), figures.searchFresh.deepCursors);
        figures.searchKeepAlive = co_await std::move(sampling);
        reportSearch(figures.searchKeepAlive,
                     seconds(nowNs() - startNs) + u"; "_s + sampleCpu.report());
        noteInterference(3, sampleCpu);
    }
    for (const SearchFigures *search : {&figures.searchFresh, &figures.searchKeepAlive}) {
        if (!search->problem.isEmpty()) {
            m_failures.append(label + u" search: "_s + search->problem);
            say(u"   FAILED: "_s + search->problem);
            co_return false;
        }
    }
    figures.memoryAfterWalk = m_server->memory();
    say(u"   RSS: %1 at start, %2 after seeding, %3 after the walks (peak %4 MiB)"_s.arg(
        kib(figures.memoryAtStart), kib(figures.memoryAfterSeed), kib(figures.memoryAfterWalk),
        figures.memoryAfterWalk
            ? QString::number(double(figures.memoryAfterWalk->hwmKiB) / 1024.0, 'f', 1)
            : u"n/a"_s));
    if (m_server->warningCount() > 0)
        say(u"   the server logged %1 warnings; last lines:\n     "_s.arg(
                m_server->warningCount()) +
            m_server->recentLog().join(u"\n     "_s));
    co_return true;
}

QCoro::Task<bool> Benchmark::restartAndSample(QString label, QString dataDir,
                                              CatalogueFigures &figures)
{
    if (m_server) {
        auto stopping = m_server->stop();
        co_await std::move(stopping);
        m_server.reset();
    }
    auto starting = startServer(m_server, dataDir);
    const bool started = co_await std::move(starting);
    if (!started)
        co_return false;
    figures.restartStartupNs = m_server->startupNs();
    figures.memoryAfterRestart = m_server->memory();
    ServerConnection client(QUrl(u"http://127.0.0.1:%1"_s.arg(m_server->endpoint().port)));
    auto counting = client.get(u"/api/conversations/count"_s);
    const ApiReply count = co_await std::move(counting);
    // Deep pages by the page ids of the first walk: keyset ids stay valid across a restart.
    QList<QByteArray> targets(20, SearchTarget);
    const QList<QByteArray> &cursors = figures.searchFresh.deepCursors;
    for (qsizetype i = 0; i < 20 && !cursors.isEmpty(); ++i)
        targets.append(SearchTarget + "&page_id=" + cursors[i * cursors.size() / 20]);
    Samples pages;
    QString problem;
    auto asking = timePages(m_server->endpoint(), targets, true, &pages, &problem);
    co_await std::move(asking);
    figures.memoryAfterRestartSample = m_server->memory();
    // The check reads the whole catalogue once the server is ready, while the pages above are
    // served, as it does in production.
    auto checking = m_server->integrityCheckMs(120s);
    figures.integrityCheckMs = co_await std::move(checking);
    say(u"   %1 server restarted on its data dir: ready in %2 with %3 conversations, RSS %4; "
        "its integrity check after startup took %8; %5 search pages (new connections: %6), "
        "RSS %7"_s.arg(label, formatMs(figures.restartStartupNs))
            .arg(count.ok() ? count.json.toInteger() : -1)
            .arg(kib(figures.memoryAfterRestart))
            .arg(pages.size())
            .arg(pages.summary(), kib(figures.memoryAfterRestartSample),
                 figures.integrityCheckMs < 0 ? u"(not reported)"_s
                                              : u"%1 ms"_s.arg(figures.integrityCheckMs)));
    if (figures.integrityCheckMs < 0)
        say(u"   the server did not report its integrity check within 120 s; last lines:\n     "_s +
            m_server->recentLog().join(u"\n     "_s));
    if (!problem.isEmpty()) {
        m_failures.append(label + u" search after the restart: "_s + problem);
        say(u"   FAILED: "_s + problem);
    }
    auto stopping = m_server->stop();
    co_await std::move(stopping);
    m_server.reset();
    co_return problem.isEmpty();
}

void Benchmark::reportStartupCheck(const CatalogueFigures &reference, const CatalogueFigures &large,
                                   const QString &referenceDir, const QString &largeDir)
{
    say(QString());
    say(u"== 7. The integrity check after startup, %1 against %2 conversations"_s
            .arg(large.conversations)
            .arg(reference.conversations));
    if (large.integrityCheckMs >= 0 && reference.integrityCheckMs >= 0)
        say(u"   as the server ran it (PRAGMA integrity_check, at the lowest priority, after "
            "ready): %1 ms against %2 ms, ratio %3"_s.arg(large.integrityCheckMs)
                .arg(reference.integrityCheckMs)
                .arg(
                    formatRatio(ratioOf(double(large.integrityCheckMs),
                                        double(std::max<qint64>(1, reference.integrityCheckMs))))));
    // On the files with no server running: what comparing the indexes with their tables costs
    // beyond reading every page once.
    for (const auto &[label, dir] :
         {std::pair{u"reference"_s, referenceDir}, std::pair{u"large"_s, largeDir}}) {
        const QString path = QDir(dir).filePath(u"agentdeck.db"_s);
        const qint64 quickNs = timePragma(path, u"PRAGMA quick_check"_s);
        const qint64 fullNs = timePragma(path, u"PRAGMA integrity_check"_s);
        say(u"   %1 catalogue (%2 MiB), best of 3: quick_check %3, integrity_check %4, ratio %5"_s
                .arg(label)
                .arg(double(QFileInfo(path).size()) / (1024.0 * 1024.0), 0, 'f', 1)
                .arg(quickNs < 0 ? u"failed"_s : formatMs(quickNs),
                     fullNs < 0 ? u"failed"_s : formatMs(fullNs),
                     formatRatio(ratioOf(double(fullNs), double(quickNs)))));
        if (quickNs < 0 || fullNs < 0)
            m_failures.append(u"the %1 catalogue did not pass its integrity check"_s.arg(label));
    }
}

void Benchmark::reportSearchAndMemory(const CatalogueFigures &reference,
                                      const CatalogueFigures &large)
{
    say(QString());
    say(u"== 3. Search page latency, %1 against %2 conversations"_s.arg(large.conversations)
            .arg(reference.conversations));
    bool complete = true;
    double worst = 0;
    QStringList figures;
    for (const bool fresh : {false, true}) {
        const SearchFigures &small = fresh ? reference.searchFresh : reference.searchKeepAlive;
        const SearchFigures &big = fresh ? large.searchFresh : large.searchKeepAlive;
        const QString mode = fresh ? u"new connection"_s : u"keep-alive"_s;
        if (fresh) // the walks (new connections) are what checks completeness
            complete = small.complete && big.complete;
        const double firstRatio =
            ratioOf(double(big.firstPage.median()), double(small.firstPage.median()));
        const double deepRatio =
            ratioOf(double(big.deepPages.median()), double(small.deepPages.median()));
        worst = std::max({worst, firstRatio, deepRatio});
        say(u"   %1, first page p50: %2 against %3, ratio %4 (p99 ratio %5)"_s.arg(
            mode, formatMs(big.firstPage.median()), formatMs(small.firstPage.median()),
            formatRatio(firstRatio),
            formatRatio(ratioOf(double(big.firstPage.percentile(0.99)),
                                double(small.firstPage.percentile(0.99))))));
        say(u"   %1, deep pages p50: %2 against %3, ratio %4 (p99 ratio %5)"_s.arg(
            mode, formatMs(big.deepPages.median()), formatMs(small.deepPages.median()),
            formatRatio(deepRatio),
            formatRatio(ratioOf(double(big.deepPages.percentile(0.99)),
                                double(small.deepPages.percentile(0.99))))));
        figures.append(
            u"%1: first %2, deep %3"_s.arg(mode, formatRatio(firstRatio), formatRatio(deepRatio)));
    }
    addGoal({u"3. search page p50, %1 / %2 conversations"_s.arg(large.conversations)
                 .arg(reference.conversations),
             figures.join(u"; "_s), u"<= 2"_s, complete, worst <= 2.0},
            3);

    say(QString());
    say(u"== 4. Server RSS holding %1 against %2 conversations, after walking every page"_s
            .arg(large.conversations)
            .arg(reference.conversations));
    const bool haveMemory = reference.memoryAfterWalk && large.memoryAfterWalk;
    const double memoryRatio = haveMemory ? ratioOf(double(large.memoryAfterWalk->rssKiB),
                                                    double(reference.memoryAfterWalk->rssKiB))
                                          : 0;
    say(u"   VmRSS %1 against %2"_s.arg(kib(large.memoryAfterWalk),
                                        kib(reference.memoryAfterWalk)));
    addGoal(
        {u"4. RSS, %1 / %2 conversations"_s.arg(large.conversations).arg(reference.conversations),
         formatRatio(memoryRatio), u"< 1.5"_s, haveMemory, memoryRatio < 1.5},
        4);
}

QCoro::Task<bool> Benchmark::measureThroughput(ServerProcess &server, const QList<QUuid> &ids)
{
    const auto fail = [this](const QString &problem) {
        m_failures.append(u"throughput: "_s + problem);
        say(u"   FAILED: "_s + problem);
        addGoal({u"1a. GET by id / nginx, same bytes"_s, u"n/a"_s, u">= 0.8"_s, false, false}, 1);
    };
    // The client library reads one of them back first: the bench measures the real contract.
    ServerConnection client(QUrl(u"http://127.0.0.1:%1"_s.arg(server.endpoint().port)));
    auto reading = client.conversation(ids.value(0));
    const auto info = co_await std::move(reading);
    if (!info || info->id != ids.value(0)) {
        fail(u"GET /api/conversations/{id} did not return the conversation"_s);
        co_return false;
    }

    HttpConnection builder(server.endpoint());
    QList<QByteArray> byIdPaths;
    QRandomGenerator random(20240601);
    for (int i = 0; i < 4096; ++i) {
        const QUuid &id = ids[qsizetype(random.bounded(quint32(ids.size())))];
        byIdPaths.append("/api/conversations/" + toWireId(id).toLatin1());
    }
    // The reference serves what the server answers, byte for byte.
    QMap<QString, QByteArray> served;
    auto opening = builder.open(5s);
    co_await std::move(opening);
    for (const auto &[path, target] :
         {std::pair{u"/conversation"_s, byIdPaths.first()}, std::pair{u"/alive"_s, "/alive"_ba}}) {
        auto answering = builder.request(builder.makeRequest("GET", target), 5s);
        const HttpResult answer = co_await std::move(answering);
        if (answer.status != 200) {
            fail(u"GET %1 answered %2"_s.arg(QString::fromLatin1(target)).arg(answer.status));
            co_return false;
        }
        served.insert(path, answer.body);
    }
    NginxReference nginx;
    auto startingNginx = nginx.start(served);
    const bool withNginx = co_await std::move(startingNginx);
    if (!withNginx)
        say(u"   no reference: "_s + nginx.errorString());
    else
        say(u"   reference: nginx (one worker) on port %1 serving the same bytes from files: the "
            "answer to GET by id (%2 bytes) and to /alive (%3 bytes)"_s.arg(nginx.endpoint().port)
                .arg(served.value(u"/conversation"_s).size())
                .arg(served.value(u"/alive"_s).size()));
    // wrk keeps a server of one core busy; the bench's own load generator (one Qt thread)
    // runs out of CPU first, and then both sides measure the client.
    const bool withWrk = !wrkBinary().isEmpty();
    say(withWrk ? u"   load: wrk, %1 thread(s)"_s.arg(m_options.loadThreads)
                : u"   load: the bench's own generator (wrk is not installed: apt-get install "
                  "wrk); it may be the limit on both sides"_s);

    struct Target
    {
        QString label;
        Endpoint endpoint;
        qint64 pid;
        QList<QByteArray> paths; // asked in turn
        double perSecond = 0;    // summed over rounds, as cpuUs
        qint64 errors = 0;
        int rounds = 0;
        double cpuUs = 0;
        double rate() const { return rounds > 0 ? perSecond / rounds : 0; }
    };
    QList<Target> targets{
        {u"GET /conversations/{id}"_s, server.endpoint(), server.pid(), byIdPaths},
        {u"GET /alive"_s, server.endpoint(), server.pid(), {"/alive"_ba}},
        {u"GET search?limit=10"_s,
         server.endpoint(),
         server.pid(),
         {"/api/conversations/search?limit=10"_ba}},
    };
    if (withNginx) {
        targets.append(
            {u"nginx, by id's bytes"_s, nginx.endpoint(), nginx.workerPid(), {"/conversation"_ba}});
        targets.append(
            {u"nginx, /alive's bytes"_s, nginx.endpoint(), nginx.workerPid(), {"/alive"_ba}});
    }
    for (int round = 0; round < m_options.throughputRounds; ++round) {
        // Each round in another order, so that a drift in the machine's speed hits all alike.
        for (qsizetype step = 0; step < targets.size(); ++step) {
            Target &target = targets[(round + step) % targets.size()];
            QString latency;
            double perSecond = 0;
            qint64 errors = 0;
            bool finished = true;
            CpuMeter cpu(target.pid);
            if (withWrk) {
                auto warming = runWrk(target.endpoint, target.paths, m_options.loadThreads,
                                      m_options.throughputConnections,
                                      std::max(m_options.throughputWarmup, 1000ms));
                const WrkResult warm = co_await std::move(warming);
                cpu.restart(); // not the warm-up
                auto loading = runWrk(target.endpoint, target.paths, m_options.loadThreads,
                                      m_options.throughputConnections, m_options.throughputWindow);
                WrkResult result = co_await std::move(loading);
                if (!warm.ran)
                    result = warm;
                if (!result.ran) {
                    fail(result.problem);
                    co_return false;
                }
                perSecond = result.perSecond;
                errors = result.errors;
            } else {
                QList<QByteArray> requests;
                for (const QByteArray &path : std::as_const(target.paths))
                    requests.append(builder.makeRequest("GET", path));
                LoadSpec spec;
                spec.connections = m_options.throughputConnections;
                spec.maxRequests = 20'000'000;
                spec.warmup = m_options.throughputWarmup;
                spec.window = m_options.throughputWindow;
                spec.deadline = spec.warmup + spec.window + 30s;
                spec.request = [requests](HttpConnection &, qint64 index) {
                    return requests[index % requests.size()];
                };
                auto loading = runLoad(target.endpoint, std::move(spec));
                const LoadResult result = co_await std::move(loading);
                noteInterference(1, cpu);
                perSecond = result.perSecond();
                errors = result.errors;
                finished = result.finished;
                latency = u", latency "_s + result.latency.summary();
            }
            target.perSecond += perSecond;
            target.errors += errors;
            ++target.rounds;
            // Server CPU per answer: what a request costs the server, whatever limited the rate.
            const double cpuPerRequestUs = perSecond > 0 ? cpu.serverShare() * 1e6 / perSecond : 0;
            target.cpuUs += cpuPerRequestUs;
            say(u"   round %1, %2: %3 requests/s%4, %5 errors%6; %7; server CPU "
                "%8 us per request"_s.arg(round + 1)
                    .arg(target.label, -23)
                    .arg(perSecond, 0, 'f', 0)
                    .arg(latency)
                    .arg(errors)
                    .arg(finished ? QString() : u" (did not finish in time)"_s)
                    .arg(cpu.report())
                    .arg(cpuPerRequestUs, 0, 'f', 1));
        }
    }
    bool valid = true;
    for (const Target &target : std::as_const(targets)) {
        say(u"   all rounds, %1: %2 requests/s, server CPU %3 us per request"_s
                .arg(target.label, -23)
                .arg(target.rate(), 0, 'f', 0)
                .arg(target.rounds > 0 ? target.cpuUs / target.rounds : 0, 0, 'f', 1));
        valid = valid && target.perSecond > 0 && target.errors == 0;
    }
    if (!valid)
        m_failures.append(u"throughput: errors in the answers"_s);
    say(u"   GET by id / GET /alive: %1"_s.arg(
        formatRatio(ratioOf(targets[0].rate(), targets[1].rate()))));
    const QString connections =
        u" (%1 conn., %2 load thread%3)"_s.arg(m_options.throughputConnections)
            .arg(m_options.loadThreads)
            .arg(m_options.loadThreads == 1 ? u""_s : u"s"_s);
    const double byIdRatio = withNginx ? ratioOf(targets[0].rate(), targets[3].rate()) : 0;
    const double aliveRatio = withNginx ? ratioOf(targets[1].rate(), targets[4].rate()) : 0;
    addGoal({u"1a. GET by id / nginx, same bytes"_s + connections,
             withNginx ? formatRatio(byIdRatio) : u"n/a"_s, u">= 0.8"_s, valid && withNginx,
             byIdRatio >= 0.8},
            1);
    addGoal({u"1b. GET /alive / nginx, same bytes"_s + connections,
             withNginx ? formatRatio(aliveRatio) : u"n/a"_s, u">= 0.9"_s, valid && withNginx,
             aliveRatio >= 0.9},
            1);
    addGoal({u"1c. search page of 10, requests/s"_s + connections,
             QString::number(qRound64(targets[2].rate())), u">= 10000"_s, valid,
             targets[2].rate() >= 10'000},
            1);
    co_return valid;
}

QCoro::Task<bool> Benchmark::measureFanout(ServerProcess &server)
{
    const auto fail = [this](const QString &problem) {
        m_failures.append(u"fan-out: "_s + problem);
        say(u"   FAILED: "_s + problem);
        addGoal({u"2. publish -> receive p99, %1 subscribers"_s.arg(m_options.subscribers),
                 u"n/a"_s, u"< 5 ms"_s, false, false},
                2);
    };
    const Endpoint endpoint = server.endpoint();
    ServerConnection client(QUrl(u"http://127.0.0.1:%1"_s.arg(endpoint.port)));
    CreateConversationRequest create;
    create.title = u"bench fan-out"_s;
    auto creating = client.createConversation(create);
    const ApiReply created = co_await std::move(creating);
    const auto id = parseWireId(created.json.toObject().value(u"id"_s).toString());
    if (!created.ok() || !id) {
        fail(u"cannot create the conversation: "_s + created.errorSentence());
        co_return false;
    }

    const qint64 warmupEvents = m_options.eventsPerSecond * m_options.fanoutWarmup.count() / 1000;
    const std::chrono::milliseconds duration = m_options.fanoutWarmup + m_options.fanoutWindow;
    const qint64 plannedEvents = m_options.eventsPerSecond * duration.count() / 1000;
    FanoutCollector collector(m_options.subscribers, warmupEvents, plannedEvents);
    const QByteArray path = "/sockets/events/" + toWireId(*id).toLatin1();
    WebSocketSubscribers subscribers(
        endpoint, path, m_options.subscribers, m_options.subscriberThreads,
        [&collector](int subscriber, QByteArrayView payload, qint64 receivedNs) {
            collector.onMessage(subscriber, payload, receivedNs);
        });
    if (!subscribers.open()) {
        fail(u"cannot connect the subscribers: "_s + subscribers.error());
        co_return false;
    }
    const auto openCount = [&subscribers] { return subscribers.openCount(); };
    auto upgrading = waitUntil([&] { return openCount() == m_options.subscribers; }, 20s);
    const bool allUpgraded = co_await std::move(upgrading);
    if (!allUpgraded) {
        fail(u"only %1 of %2 subscribers were upgraded"_s.arg(openCount())
                 .arg(m_options.subscribers));
        co_return false;
    }

    // One event that every subscriber must see before the clock starts: all are subscribed.
    HttpConnection probe(endpoint);
    MessageRequest probeMessage;
    probeMessage.text = u"bench probe"_s;
    const QByteArray eventsTarget = "/api/conversations/" + toWireId(*id).toLatin1() + "/events";
    auto probing = probe.request(
        probe.makeRequest("POST", eventsTarget,
                          QJsonDocument(probeMessage.toJson()).toJson(QJsonDocument::Compact)),
        RequestTimeout);
    const HttpResult probed = co_await std::move(probing);
    auto seeing = waitUntil([&collector] { return collector.allSawProbe(); }, 10s);
    const bool allSaw = co_await std::move(seeing);
    if (probed.status < 200 || probed.status >= 300 || !allSaw) {
        fail(u"the probe event (status %1) did not reach every subscriber"_s.arg(probed.status));
        co_return false;
    }

    PublishPlan plan;
    plan.endpoint = endpoint;
    plan.conversation = *id;
    plan.ratePerSecond = m_options.eventsPerSecond;
    plan.duration = duration;
    Publisher publisher(plan);
    CpuMeter cpu(server.pid());
    if (!publisher.start()) {
        fail(u"cannot connect the publisher: "_s + publisher.error());
        co_return false;
    }
    // The publisher ends by itself, past its deadline at the latest.
    auto publishing = waitUntil([&publisher] { return publisher.isFinished(); }, duration + 60s);
    co_await std::move(publishing);
    publisher.wait();
    const PublishResult &published = publisher.result();
    auto delivering = waitUntil(
        [&] {
            return collector.fewestReceived() >= published.stored ||
                   openCount() < m_options.subscribers;
        },
        10s);
    co_await std::move(delivering);
    const QString cpuReport = cpu.report();
    noteInterference(2, cpu);
    const double publishSeconds = double(published.lastSendNs - published.firstSendNs) / 1e9;
    const double cpuPerEventUs =
        published.stored > 0 && publishSeconds > 0
            ? cpu.serverShare() * 1e6 / (double(published.stored) / publishSeconds)
            : 0;
    const auto memory = server.memory();
    subscribers.stop();
    const QStringList closedReasons = subscribers.closeReasons();

    const Samples fromSend = collector.fromSend();
    const qint64 expected = published.stored * m_options.subscribers;
    const qint64 received = collector.totalReceived();
    say(u"   published: %1 of %2 planned POSTs over %3 connections, %4 stored, %5 failed; "
        "achieved %6 events/s; at most %7 waited for a free connection"_s.arg(published.sent)
            .arg(published.planned)
            .arg(plan.connections)
            .arg(published.stored)
            .arg(published.failed)
            .arg(published.achievedRate(), 0, 'f', 0)
            .arg(published.maxBacklog));
    say(u"   POST round trip (client write -> 201 read): %1"_s.arg(
        published.postLatency.summary()));
    say(u"   delivered: %1 of %2 frames (%3 subscribers x %4 events), %5 subscribers closed%6"_s
            .arg(received)
            .arg(expected)
            .arg(m_options.subscribers)
            .arg(published.stored)
            .arg(closedReasons.size())
            .arg(closedReasons.isEmpty() ? QString() : u" ("_s + closedReasons.first() + u')'));
    say(u"   POST write -> frame read, after %1 warm-up events: %2"_s.arg(warmupEvents)
            .arg(fromSend.summary()));
    say(u"   scheduled time -> frame read:                    %1"_s.arg(
        collector.fromSchedule().summary()));
    say(u"   server timestamp -> frame read (subscriber 0, ms wall clock): %1"_s.arg(
        collector.fromCommit.summary()));
    say(u"   %1; server CPU %2 us per event (one POST, %3 frames); server RSS %4"_s.arg(cpuReport)
            .arg(cpuPerEventUs, 0, 'f', 0)
            .arg(m_options.subscribers)
            .arg(kib(memory)));

    const bool complete = received == expected && closedReasons.isEmpty() && published.failed == 0;
    if (!complete)
        m_failures.append(u"fan-out: %1 of %2 frames delivered"_s.arg(received).arg(expected));
    const qint64 p99 = fromSend.percentile(0.99);

    say(u"   reference: the same fan-out from bare sockets, no server (%1-byte messages):"_s.arg(
        collector.payloadBytes()));
    auto referencing = measureFanoutReference(collector.payloadBytes());
    const Samples reference = co_await std::move(referencing);
    const QString versus =
        reference.isEmpty()
            ? QString()
            : u"; reference p99 %1, ratio %2"_s.arg(
                  formatMs(reference.percentile(0.99)),
                  formatRatio(ratioOf(double(p99), double(reference.percentile(0.99)))));
    addGoal({u"2. publish -> receive p99, %1 subscribers, %2/s"_s.arg(m_options.subscribers)
                 .arg(m_options.eventsPerSecond),
             u"p50 %1, p99 %2%3"_s.arg(formatMs(fromSend.median()), formatMs(p99), versus),
             u"p99 < 5 ms"_s, complete && !fromSend.isEmpty(), complete && p99 < 5'000'000},
            2);
    co_return complete;
}

QCoro::Task<Samples> Benchmark::measureFanoutReference(qsizetype payloadBytes)
{
    ReferencePlan plan;
    plan.ratePerSecond = m_options.eventsPerSecond;
    plan.duration = m_options.fanoutWarmup + m_options.fanoutWindow;
    plan.payloadBytes = payloadBytes;
    const qint64 warmupEvents = m_options.eventsPerSecond * m_options.fanoutWarmup.count() / 1000;
    const qint64 plannedEvents = plan.ratePerSecond * plan.duration.count() / 1000;
    FanoutReference fanout(plan);
    QString error;
    if (!fanout.listen(&error)) {
        say(u"   FAILED: "_s + error);
        co_return Samples();
    }
    FanoutCollector collector(m_options.subscribers, warmupEvents, plannedEvents);
    WebSocketSubscribers subscribers(
        fanout.endpoint(), "/reference", m_options.subscribers, m_options.subscriberThreads,
        [&collector](int subscriber, QByteArrayView payload, qint64 receivedNs) {
            collector.onMessage(subscriber, payload, receivedNs);
        });
    if (!subscribers.open() || !fanout.acceptSubscribers(m_options.subscribers, &error)) {
        say(u"   FAILED: "_s + (error.isEmpty() ? subscribers.error() : error));
        co_return Samples();
    }
    auto upgrading =
        waitUntil([&] { return subscribers.openCount() == m_options.subscribers; }, 20s);
    if (const bool allUpgraded = co_await std::move(upgrading); !allUpgraded) {
        say(u"   FAILED: only %1 of %2 subscribers were upgraded"_s.arg(subscribers.openCount())
                .arg(m_options.subscribers));
        co_return Samples();
    }
    CpuMeter cpu(0);
    fanout.start();
    auto publishing = waitUntil([&fanout] { return fanout.isFinished(); }, plan.duration + 60s);
    co_await std::move(publishing);
    fanout.wait();
    auto delivering = waitUntil(
        [&] {
            return collector.fewestReceived() >= fanout.published() ||
                   subscribers.openCount() < m_options.subscribers;
        },
        10s);
    co_await std::move(delivering);
    subscribers.stop();
    const Samples fromSend = collector.fromSend();
    say(u"   delivered: %1 of %2 frames; write -> read, after %3 warm-up events: %4"_s
            .arg(collector.totalReceived())
            .arg(fanout.published() * m_options.subscribers)
            .arg(warmupEvents)
            .arg(fromSend.summary()));
    say(u"   CPU: bench with the reference %1% of a core, other processes %2%, taken by the host %3%"_s
            .arg(qRound(cpu.benchShare() * 100))
            .arg(qRound(cpu.otherShare() * 100))
            .arg(qRound(cpu.stealShare() * 100)));
    co_return fromSend;
}

void Benchmark::printSummary() const
{
    say(QString());
    say(u"== Summary"_s);
    for (const GoalResult &goal : m_goals)
        say(u"   %1 %2: %3 (goal %4)%5"_s.arg(
            !goal.measured ? u"[NOT MEASURED]"_s
            : goal.met     ? u"[MET]    "_s
                           : u"[NOT MET]"_s,
            goal.name, goal.figure, goal.goal,
            goal.otherCpu < 0
                ? QString()
                : u" [others up to %1% of a core]"_s.arg(qRound(goal.otherCpu * 100))));
    for (const QString &failure : m_failures)
        say(u"   problem: "_s + failure);
}

} // namespace AgentDeck::Bench
