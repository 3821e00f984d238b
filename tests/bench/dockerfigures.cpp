#include "dockerfigures.h"
#include "sandboxfigures.h"

#include "dockerdaemon.h"
#include "runtime/dockerengine.h"
#include "runtime/sandboxcontainers.h"

#include <QCoroTimer>
#include <QDir>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <unistd.h>

using namespace Qt::StringLiterals;
using namespace std::chrono_literals;

namespace AgentDeck::Bench {

namespace {

constexpr auto RequestTimeout = 30s;
const QString Image = u"agentdeck-bench:shell"_s;
constexpr qint64 WarmGoalNs = 100'000'000;
constexpr double ColdGoalRatio = 1.3;

double ratio(qint64 value, qint64 reference)
{
    return reference > 0 ? double(value) / double(reference) : 0;
}

QString spread(const Samples &samples)
{
    return u"p50 %1, p90 %2"_s.arg(formatMs(samples.median()), formatMs(samples.percentile(0.9)));
}

} // namespace

DockerFigures::DockerFigures(DockerFigureOptions options)
    : m_options(std::move(options))
{}

DockerFigures::~DockerFigures()
{
    abort();
}

void DockerFigures::abort()
{
    m_coldHttp.reset();
    m_warmHttp.reset();
    m_cold.reset();
    m_warm.reset();
    m_engine.reset();
    if (m_daemon)
        m_daemon->stop();
}

void DockerFigures::fail(const QString &problem)
{
    m_results.failures.append(problem);
    say(u"   FAILED: "_s + problem);
}

QCoro::Task<bool> DockerFigures::startServer(std::unique_ptr<ServerProcess> &server,
                                             QString dataDir, QStringList arguments)
{
    QDir().mkpath(dataDir);
    server = std::make_unique<ServerProcess>(m_options.binary, dataDir);
    server->setExtraArguments(QStringList{u"--runtime"_s, u"docker"_s, u"--docker-host"_s,
                                          m_daemon->host(), u"--sandbox-image"_s, Image} +
                              arguments);
    auto starting = server->start(60s);
    if (!co_await std::move(starting)) {
        fail(server->errorString());
        co_return false;
    }
    co_return true;
}

QCoro::Task<std::optional<DockerFigures::Timing>> DockerFigures::createAndRun(HttpConnection &http)
{
    static const QByteArray body =
        R"({"title":"docker bench","agent":{"kind":"shell"},"initial_message":)"
        R"({"role":"user","content":[{"type":"text","text":"true"}],"run":true}})"_ba;
    const qint64 startNs = nowNs();
    auto creating =
        http.request(http.makeRequest("POST", "/api/conversations", body), RequestTimeout);
    const HttpResult created = co_await std::move(creating);
    Timing timing;
    timing.answeredNs = nowNs() - startNs;
    timing.id = QJsonDocument::fromJson(created.body).object().value(u"id"_s).toString().toUtf8();
    if (created.status != 201 || timing.id.isEmpty()) {
        fail(u"create: %1 %2"_s.arg(created.status).arg(QString::fromUtf8(created.body.left(300))));
        co_return std::nullopt;
    }
    const QByteArray path = "/api/conversations/" + timing.id;
    QString status;
    while (nowNs() - startNs < 60'000'000'000LL) {
        auto asking = http.request(http.makeRequest("GET", path), RequestTimeout);
        const HttpResult answer = co_await std::move(asking);
        status =
            QJsonDocument::fromJson(answer.body).object().value(u"execution_status"_s).toString();
        if (status == u"finished"_s || status == u"error"_s || status == u"stuck"_s ||
            answer.status != 200)
            break;
        co_await QCoro::sleepFor(1ms);
    }
    timing.finishedNs = nowNs() - startNs;
    if (status != u"finished"_s) {
        fail(u"the first command of %1 did not finish: execution_status %2"_s.arg(
            QString::fromLatin1(timing.id), status));
        co_return std::nullopt;
    }
    co_return timing;
}

QCoro::Task<qint64> DockerFigures::bareRun()
{
    // `docker run --rm --network none IMAGE true`: what the CLI asks the engine for.
    const QByteArray spec =
        QJsonDocument(QJsonObject{
                          {u"Image"_s, Image},
                          {u"Cmd"_s, QJsonArray{u"true"_s}},
                          {u"HostConfig"_s, QJsonObject{{u"NetworkMode"_s, u"none"_s}}},
                      })
            .toJson(QJsonDocument::Compact);
    const qint64 startNs = nowNs();
    auto creating = m_engine->request("POST", u"/containers/create"_s, spec);
    const DockerResult created = co_await std::move(creating);
    const QString id = created.json.object().value(u"Id"_s).toString();
    if (!created.ok() || id.isEmpty()) {
        fail(u"a bare run's create: "_s + created.error);
        co_return -1;
    }
    auto starting = m_engine->startContainer(id);
    const DockerResult started = co_await std::move(starting);
    auto waiting = m_engine->request("POST", u"/containers/%1/wait"_s.arg(id), QByteArray(""));
    const DockerResult waited = co_await std::move(waiting);
    const qint64 elapsedNs = nowNs() - startNs;
    auto removing = m_engine->removeContainer(id);
    co_await std::move(removing);
    if (!started.ok() || !waited.ok()) {
        fail(u"a bare run: "_s + (started.ok() ? waited.error : started.error));
        co_return -1;
    }
    co_return elapsedNs;
}

QCoro::Task<qint64> DockerFigures::execFloor(QString container)
{
    const qint64 startNs = nowNs();
    auto running = m_engine->exec(container, {u"true"_s}, 10s);
    const DockerExecResult ran = co_await std::move(running);
    co_return ran.ok() ? nowNs() - startNs : -1;
}

QCoro::Task<bool> DockerFigures::waitForWarm(HttpConnection &http, int count)
{
    const QByteArray full = "agentdeck_sandboxes_warm " + QByteArray::number(count) + '\n';
    const qint64 startNs = nowNs();
    while (nowNs() - startNs < 60'000'000'000LL) {
        auto asking = http.request(http.makeRequest("GET", "/metrics"), RequestTimeout);
        const HttpResult answer = co_await std::move(asking);
        if (answer.body.contains(full))
            co_return true;
        co_await QCoro::sleepFor(20ms);
    }
    fail(u"the warm pool did not fill to %1 within 60 s"_s.arg(count));
    co_return false;
}

QCoro::Task<DockerFigureResults> DockerFigures::run()
{
    GoalResult warmGoal{u"13. docker: create to first command's end p50, warm container"_s,
                        u"n/a"_s, u"<= 100 ms"_s};
    GoalResult coldGoal{u"14. docker: create to first command's end p50, cold"_s, u"n/a"_s,
                        u"<= 1.3x a bare docker run"_s};
    warmGoal.otherCpu = coldGoal.otherCpu = -1;
    const auto finish = [&] {
        m_results.goals = {warmGoal, coldGoal};
        return m_results;
    };
    if (::geteuid() != 0) {
        fail(u"the docker figures need root (dockerd runs as root only)"_s);
        co_return finish();
    }
    m_daemon = std::make_unique<Testing::DockerDaemon>();
    QString problem;
    if (!m_daemon->start(&problem) ||
        !m_daemon->importShellImage(u"agentdeck-bench"_s, u"shell"_s, &problem)) {
        fail(u"dockerd: "_s + problem);
        co_return finish();
    }
    m_engine = std::make_unique<DockerEngine>(m_daemon->host());
    m_engine->setDefaultTimeout(30s);
    say(u"   dockerd up in %1 ms; image %2"_s.arg(m_daemon->startMilliseconds()).arg(Image));

    auto startingCold = startServer(m_cold, QDir(m_options.dataDir).filePath(u"cold"_s), {});
    if (!co_await std::move(startingCold))
        co_return finish();
    auto startingWarm = startServer(m_warm, QDir(m_options.dataDir).filePath(u"warm"_s),
                                    {u"--sandbox-warm"_s, QString::number(m_options.warm)});
    if (!co_await std::move(startingWarm))
        co_return finish();
    m_coldHttp = std::make_unique<HttpConnection>(m_cold->endpoint());
    m_warmHttp = std::make_unique<HttpConnection>(m_warm->endpoint());
    auto openingCold = m_coldHttp->open(10s);
    auto openingWarm = m_warmHttp->open(10s);
    if (!co_await std::move(openingCold) || !co_await std::move(openingWarm)) {
        fail(u"cannot connect to the servers"_s);
        co_return finish();
    }

    Samples warm, warmAnswered, cold, coldAnswered, bare, exec, spawn;
    const int total = m_options.warmups + m_options.samples;
    for (int i = 0; i < total; ++i) {
        const bool counted = i >= m_options.warmups;
        // Each create is a claim: the pool is full before it (not timed).
        auto filling = waitForWarm(*m_warmHttp, m_options.warm);
        if (!co_await std::move(filling))
            co_return finish();
        auto runningWarm = createAndRun(*m_warmHttp);
        const auto warmTiming = co_await std::move(runningWarm);
        auto runningBare = bareRun();
        const qint64 bareNs = co_await std::move(runningBare);
        auto runningCold = createAndRun(*m_coldHttp);
        const auto coldTiming = co_await std::move(runningCold);
        if (!warmTiming || !coldTiming || bareNs < 0)
            co_return finish();
        // A command in a running container, as container-exec runs it.
        const QJsonArray containers = Testing::containersLabelled(
            *m_engine, {u"%1=%2"_s.arg(QLatin1StringView(SandboxContainers::ConversationLabel),
                                       QString::fromLatin1(coldTiming->id))});
        // The spawn of the binary each command of a container runs through (container-exec).
        auto spawning = timeSpawn(m_options.binary, {u"--version"_s});
        const qint64 spawnNs = co_await std::move(spawning);
        auto execing = execFloor(containers.at(0).toObject().value(u"Id"_s).toString());
        const qint64 execNs = co_await std::move(execing);
        if (!counted)
            continue;
        warm.add(warmTiming->finishedNs);
        warmAnswered.add(warmTiming->answeredNs);
        cold.add(coldTiming->finishedNs);
        coldAnswered.add(coldTiming->answeredNs);
        bare.add(bareNs);
        if (execNs > 0)
            exec.add(execNs);
        if (spawnNs > 0)
            spawn.add(spawnNs);
    }
    say(u"   warm: %1 (the create answered: %2)"_s.arg(spread(warm), spread(warmAnswered)));
    say(u"   cold: %1 (the create answered: %2)"_s.arg(spread(cold), spread(coldAnswered)));
    say(u"   bare docker run (create, start, wait): %1"_s.arg(spread(bare)));
    say(u"   exec of `true` in a running container: %1"_s.arg(spread(exec)));
    say(u"   agentdeck --version (the spawn of container-exec): %1"_s.arg(spread(spawn)));

    warmGoal.measured = !warm.isEmpty();
    warmGoal.met = warm.median() <= WarmGoalNs;
    // The floor of a command in a running container as the sandbox host runs it: a process of
    // the binary, and an exec.
    const qint64 floorNs = exec.median() + spawn.median();
    warmGoal.figure =
        u"%1; %2 of a bare docker run (%3), %4 of the command floor %5 (exec %6 + spawn %7)"_s.arg(
            spread(warm), formatRatio(ratio(warm.median(), bare.median())), formatMs(bare.median()),
            formatRatio(ratio(warm.median(), floorNs)), formatMs(floorNs), formatMs(exec.median()),
            formatMs(spawn.median()));
    coldGoal.measured = !cold.isEmpty() && !bare.isEmpty();
    const double coldRatio = ratio(cold.median(), bare.median());
    coldGoal.met = coldRatio <= ColdGoalRatio;
    coldGoal.figure = u"%1; %2 of a bare docker run (%3)"_s.arg(
        spread(cold), formatRatio(coldRatio), formatMs(bare.median()));
    co_return finish();
}

} // namespace AgentDeck::Bench
