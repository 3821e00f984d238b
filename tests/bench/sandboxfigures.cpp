#include "sandboxfigures.h"

#include <QCoroProcess>
#include <QCoroTimer>
#include <QDir>
#include <QFile>
#include <QHash>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QStandardPaths>

#include <unistd.h>

using namespace Qt::StringLiterals;
using namespace std::chrono_literals;

namespace AgentDeck::Bench {

namespace {

constexpr auto RequestTimeout = 30s;
constexpr auto SpawnTimeout = 10s;
constexpr qint64 ResumeGoalNs = 100'000'000;
constexpr qint64 PssGoalKiB = 4 * 1024;

QByteArray readFile(const QString &path)
{
    QFile file(path);
    return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
}

// User and system time of a process and of its children it waited for, from /proc/PID/stat:
// a sandbox host waits for its probe and its commands, the bench for its references.
qint64 cpuWithChildrenNs(qint64 pid)
{
    const QByteArray stat = readFile(pid > 0 ? u"/proc/%1/stat"_s.arg(pid) : u"/proc/self/stat"_s);
    const qsizetype close = stat.lastIndexOf(')');
    if (close < 0)
        return 0;
    const QList<QByteArray> fields = stat.mid(close + 2).split(' ');
    if (fields.size() < 15)
        return 0;
    qint64 ticks = 0;
    for (int i = 11; i <= 14; ++i) // utime, stime, cutime, cstime
        ticks += fields[i].toLongLong();
    return ticks * (1'000'000'000LL / sysconf(_SC_CLK_TCK));
}

// What other processes and the host took from the machine over a phase, as a share of one
// core: the machine's busy time less the server's, the bench's and the sandbox hosts' (CpuMeter
// would count the hosts and their bubblewraps as "others").
class InterferenceMeter
{
public:
    InterferenceMeter(qint64 serverPid, const QList<qint64> &hosts)
        : m_serverPid(serverPid)
        , m_startNs(nowNs())
        , m_machine(machineTimes())
        , m_serverNs(cpuWithChildrenNs(serverPid))
        , m_benchNs(cpuWithChildrenNs(0))
    {
        for (const qint64 pid : hosts)
            m_hostsNs.insert(pid, cpuWithChildrenNs(pid));
    }

    double share(const QList<qint64> &hosts) const
    {
        const qint64 wall = nowNs() - m_startNs;
        if (wall <= 0)
            return 0;
        const MachineTimes now = machineTimes();
        qint64 ours =
            cpuWithChildrenNs(m_serverPid) - m_serverNs + cpuWithChildrenNs(0) - m_benchNs;
        for (const qint64 pid : hosts)
            ours += cpuWithChildrenNs(pid) - m_hostsNs.value(pid, 0);
        const qint64 others = (now.busyNs - m_machine.busyNs) - ours;
        // Clock ticks make this coarse (10 ms): small negative values are rounding.
        return std::max<double>(0, double(others) / double(wall));
    }

private:
    qint64 m_serverPid;
    qint64 m_startNs;
    MachineTimes m_machine;
    qint64 m_serverNs;
    qint64 m_benchNs;
    QHash<qint64, qint64> m_hostsNs;
};

QString mib(qint64 kib)
{
    return u"%1 MiB"_s.arg(double(kib) / 1024.0, 0, 'f', 2);
}

QString percentiles(const Samples &samples)
{
    return u"p50 %1, p90 %2, min %3, max %4 (n=%5)"_s
        .arg(formatMs(samples.median()), formatMs(samples.percentile(0.9)),
             formatMs(samples.percentile(0)), formatMs(samples.max()))
        .arg(qulonglong(samples.size()));
}

QString sizes(const Samples &kib)
{
    return u"p50 %1 (%2-%3, n=%4)"_s.arg(mib(kib.median()), mib(kib.percentile(0)), mib(kib.max()))
        .arg(qulonglong(kib.size()));
}

double ratio(qint64 value, qint64 reference)
{
    return reference > 0 ? double(value) / double(reference) : 0;
}

// "/api/conversations/ID" followed by `rest`.
QByteArray conversationTarget(const QByteArray &id, QByteArrayView rest = {})
{
    QByteArray target = "/api/conversations/"_ba;
    target.append(id).append(rest);
    return target;
}

bool isGone(qint64 pid)
{
    // A zombie has an empty command line; a host is reaped by whoever adopted it.
    return readFile(u"/proc/%1/cmdline"_s.arg(pid)).isEmpty();
}

} // namespace

QCoro::Task<qint64> timeSpawn(QString program, QStringList arguments)
{
    QProcess process;
    process.setStandardInputFile(QProcess::nullDevice());
    process.setStandardOutputFile(QProcess::nullDevice());
    process.setStandardErrorFile(QProcess::nullDevice());
    const qint64 startNs = nowNs();
    process.start(program, arguments);
    const bool started = co_await qCoro(process).waitForStarted(SpawnTimeout);
    if (!started)
        co_return -1;
    const bool finished = co_await qCoro(process).waitForFinished(SpawnTimeout);
    const qint64 elapsed = nowNs() - startNs;
    if (!finished) {
        process.kill();
        co_await qCoro(process).waitForFinished(SpawnTimeout);
        co_return -1;
    }
    co_return process.exitStatus() == QProcess::NormalExit &&process.exitCode() == 0 ? elapsed : -1;
}

QStringList sandboxPolicyArguments()
{
    // 64 sandboxes of 256 processes fit a host of 32,768 PIDs (fitSandboxProcesses()).
    return {u"--sandbox-memory"_s,  u"1GiB"_s, u"--sandbox-processes"_s, u"256"_s,
            u"--sandbox-cpu"_s,     u"10m"_s,  u"--sandbox-file-size"_s, u"1GiB"_s,
            u"--sandbox-network"_s, u"none"_s, u"--max-sandboxes"_s,     u"64"_s};
}

std::optional<SmapsRollup> readSmapsRollup(qint64 pid)
{
    const QByteArray text = readFile(u"/proc/%1/smaps_rollup"_s.arg(pid));
    if (text.isEmpty())
        return std::nullopt;
    SmapsRollup rollup;
    for (const QByteArray &line : text.split('\n')) {
        const qsizetype colon = line.indexOf(':');
        if (colon < 0)
            continue;
        const QByteArrayView name = QByteArrayView(line).first(colon);
        const qint64 kib = line.mid(colon + 1).trimmed().split(' ').value(0).toLongLong();
        if (name == "Rss")
            rollup.rssKiB = kib;
        else if (name == "Pss")
            rollup.pssKiB = kib;
        else if (name == "Private_Clean" || name == "Private_Dirty")
            rollup.privateKiB += kib;
    }
    return rollup;
}

SandboxFigures::SandboxFigures(SandboxFigureOptions options)
    : m_options(std::move(options))
{}

SandboxFigures::~SandboxFigures() = default;

void SandboxFigures::abort()
{
    m_connection.reset();
    m_server.reset();
}

void SandboxFigures::fail(const QString &problem)
{
    m_results.failures.append(problem);
    say(u"   FAILED: "_s + problem);
}

QList<qint64> SandboxFigures::hostPids() const
{
    QList<qint64> pids;
    for (const Sandbox &sandbox : m_sandboxes) {
        if (sandbox.hostPid > 0)
            pids.append(sandbox.hostPid);
    }
    return pids;
}

QCoro::Task<SandboxFigureResults> SandboxFigures::run()
{
    const qint64 runStartNs = nowNs();
    const QStringList policy = sandboxPolicyArguments();
    say(QString());
    say(u"== 10-11. Sandboxes: cold resume and idle memory, %1 conversations (after %2 not "
        u"counted), "
        "policy %3"_s.arg(m_options.conversations)
            .arg(m_options.warmups)
            .arg(policy.join(u' ')));

    // The host's probe, as SandboxIsolation::probe() runs it: the part of a cold start that
    // containment added.
    m_bwrap = QStandardPaths::findExecutable(u"bwrap"_s);
    if (!m_bwrap.isEmpty()) {
        m_probeArguments = {u"--ro-bind"_s,
                            u"/"_s,
                            u"/"_s,
                            u"--dev"_s,
                            u"/dev"_s,
                            u"--proc"_s,
                            u"/proc"_s,
                            u"--unshare-pid"_s,
                            u"--unshare-ipc"_s,
                            u"--unshare-uts"_s,
                            u"--unshare-cgroup-try"_s,
                            u"--unshare-net"_s};
        if (::geteuid() != 0)
            m_probeArguments << u"--unshare-user"_s << u"--disable-userns"_s;
    }

    m_server = std::make_unique<ServerProcess>(m_options.binary, m_options.dataDir);
    m_server->setExtraArguments(policy);
    auto launching = m_server->start(60s);
    const bool started = co_await std::move(launching);
    if (!started) {
        fail(m_server->errorString());
        co_return m_results;
    }
    m_connection = std::make_unique<HttpConnection>(m_server->endpoint());

    // Each task is held before it is awaited, as everywhere in the bench (GCC 12 mishandles
    // temporaries in co_await expressions).
    auto starting = startIdleReferences();
    bool ok = co_await std::move(starting);
    if (ok) {
        auto creating = createConversations();
        ok = co_await std::move(creating);
    }
    if (ok) {
        auto resuming = resumeAll();
        ok = co_await std::move(resuming);
    }
    Samples pssAfterResume;
    qint64 bashAfterResume = 0;
    if (ok) {
        // Idle: nothing asked of the hosts for a while.
        co_await QCoro::sleepFor(1s);
        reportMemory(u"after a resume"_s, &pssAfterResume, &bashAfterResume);
        auto running = runFirstCommands();
        ok = co_await std::move(running);
    }
    Samples pssAfterCommand;
    qint64 bashAfterCommand = 0;
    if (ok) {
        co_await QCoro::sleepFor(1s);
        reportMemory(u"after a command"_s, &pssAfterCommand, &bashAfterCommand);
    }
    auto stoppingReferences = stopIdleReferences();
    co_await std::move(stoppingReferences);
    auto stoppingSandboxes = stopAll();
    co_await std::move(stoppingSandboxes);
    auto stoppingServer = m_server->stop();
    co_await std::move(stoppingServer);
    m_connection.reset();

    const qint64 floorNs = m_versionReference.median() + m_probeReference.median();
    GoalResult resume{u"10. sandbox resume p50 (cold host, policy in force)"_s, u"n/a"_s,
                      u"<= 100 ms"_s};
    resume.otherCpu = m_resumeInterference;
    if (!m_resume.isEmpty()) {
        resume.measured = true;
        resume.met = m_resume.median() <= ResumeGoalNs;
        resume.figure = u"%1 (p90 %2); %3 of the spawn floor %4 (--version + probe)"_s.arg(
            formatMs(m_resume.median()), formatMs(m_resume.percentile(0.9)),
            formatRatio(ratio(m_resume.median(), floorNs)), formatMs(floorNs));
    }
    m_results.goals.append(resume);

    GoalResult memory{u"11. idle sandbox host PSS p50, %1 hosts up"_s.arg(hostPids().size()),
                      u"n/a"_s, u"<= 4 MiB"_s};
    memory.otherCpu = -1;
    if (!pssAfterResume.isEmpty() && !pssAfterCommand.isEmpty()) {
        memory.measured = true;
        const qint64 worst = std::max(pssAfterResume.median(), pssAfterCommand.median());
        memory.met = worst <= PssGoalKiB;
        memory.figure = u"%1 after a resume, %2 after a command; %3 and %4 of an idle bash"_s.arg(
            mib(pssAfterResume.median()), mib(pssAfterCommand.median()),
            formatRatio(ratio(pssAfterResume.median(), bashAfterResume)),
            formatRatio(ratio(pssAfterCommand.median(), bashAfterCommand)));
    }
    m_results.goals.append(memory);
    say(u"   the sandbox figures took %1 s"_s.arg(double(nowNs() - runStartNs) / 1e9, 0, 'f', 1));
    co_return m_results;
}

QCoro::Task<bool> SandboxFigures::createConversations()
{
    const int total = m_options.warmups + m_options.conversations;
    for (int i = 0; i < total; ++i) {
        const QByteArray body = "{\"title\":\"sandbox bench " + QByteArray::number(i) +
                                "\",\"agent\":{\"kind\":\"shell\"}}";
        auto creating = m_connection->request(
            m_connection->makeRequest("POST", "/api/conversations", body), RequestTimeout);
        const HttpResult created = co_await std::move(creating);
        const QJsonObject object = QJsonDocument::fromJson(created.body).object();
        if (created.status != 201 || object.value(u"id"_s).toString().isEmpty()) {
            fail(u"create a shell conversation: %1 %2"_s.arg(created.status)
                     .arg(QString::fromUtf8(created.body.left(200))));
            co_return false;
        }
        m_sandboxes.push_back(
            {object.value(u"id"_s).toString().toLatin1(), 0, i >= m_options.warmups});
        // The figure is a cold start: a runtime that a create brought up is stopped first.
        const QString status =
            object.value(u"runtime_info"_s).toObject().value(u"runtime_status"_s).toString();
        if (status == u"available"_s) {
            auto stopping = m_connection->request(
                m_connection->makeRequest("DELETE",
                                          conversationTarget(m_sandboxes.back().id, "/runtime")),
                RequestTimeout);
            co_await std::move(stopping);
        }
        if (i == 0)
            say(u"   a new conversation's runtime: %1"_s.arg(status));
    }
    co_return true;
}

QCoro::Task<bool> SandboxFigures::resumeAll()
{
    InterferenceMeter others(m_server->pid(), {});
    for (Sandbox &sandbox : m_sandboxes) {
        // The references first, in the same conditions as the resume that follows.
        auto version = timeSpawn(m_options.binary, {u"--version"_s});
        const qint64 versionNs = co_await std::move(version);
        qint64 probeNs = 0;
        if (!m_bwrap.isEmpty()) {
            auto probing = timeSpawn(m_bwrap, m_probeArguments + QStringList{u"true"_s});
            probeNs = co_await std::move(probing);
        }
        if (versionNs < 0 || probeNs < 0) {
            fail(u"a reference process did not exit 0 (%1 --version, or %2 %3 true)"_s.arg(
                m_options.binary, m_bwrap, m_probeArguments.join(u' ')));
            co_return false;
        }

        auto resuming = m_connection->request(
            m_connection->makeRequest("POST", conversationTarget(sandbox.id, "/runtime/resume")),
            RequestTimeout);
        const HttpResult resumed = co_await std::move(resuming);
        if (resumed.status != 200) {
            fail(u"resume %1: %2 %3"_s.arg(QString::fromLatin1(sandbox.id))
                     .arg(resumed.status)
                     .arg(QString::fromUtf8(resumed.body.left(300))));
            co_return false;
        }
        const QString runtimeDir =
            QDir(m_options.dataDir).filePath(u"runtimes/"_s + QString::fromLatin1(sandbox.id));
        sandbox.hostPid =
            readFile(QDir(runtimeDir).filePath(u"sandbox.pid"_s)).trimmed().toLongLong();
        if (sandbox.hostPid <= 0 || isGone(sandbox.hostPid)) {
            fail(u"no live sandbox host in %1 after a resume"_s.arg(runtimeDir));
            co_return false;
        }
        if (&sandbox == &m_sandboxes.front()) {
            const QJsonObject info = QJsonDocument::fromJson(resumed.body).object();
            const QJsonObject runtime =
                info.contains(u"runtime_info"_s) ? info.value(u"runtime_info"_s).toObject() : info;
            say(u"   runtime after a resume: %1"_s.arg(
                QString::fromUtf8(QJsonDocument(runtime).toJson(QJsonDocument::Compact))));
        }
        if (!sandbox.counted)
            continue;
        m_resume.add(resumed.latencyNs);
        m_versionReference.add(versionNs);
        m_probeReference.add(probeNs);
    }
    m_resumeInterference = others.share(hostPids());
    const qint64 floorNs = m_versionReference.median() + m_probeReference.median();
    say(u"   resume (POST .../runtime/resume, host cold): %1"_s.arg(percentiles(m_resume)));
    say(u"   reference: `agentdeck --version` %1; the host's bubblewrap probe %2"_s.arg(
        percentiles(m_versionReference), percentiles(m_probeReference)));
    say(u"   => resume p50 %1 against the spawn floor (--version p50 + probe p50) %2: ratio %3; "
        "other processes and the host took %4% of a core meanwhile"_s
            .arg(formatMs(m_resume.median()), formatMs(floorNs),
                 formatRatio(ratio(m_resume.median(), floorNs)))
            .arg(qRound(m_resumeInterference * 100)));
    co_return true;
}

QCoro::Task<bool> SandboxFigures::runFirstCommands()
{
    static const QByteArray message =
        R"({"role":"user","content":[{"type":"text","text":"true"}],"run":true})"_ba;
    InterferenceMeter others(m_server->pid(), hostPids());
    for (Sandbox &sandbox : m_sandboxes) {
        qint64 referenceNs = 0;
        if (!m_bwrap.isEmpty()) {
            auto spawning =
                timeSpawn(m_bwrap, m_probeArguments + QStringList{u"bash"_s, u"-c"_s, u"true"_s});
            referenceNs = co_await std::move(spawning);
        }
        const QByteArray path = conversationTarget(sandbox.id);
        const qint64 startNs = nowNs();
        auto posting = m_connection->request(
            m_connection->makeRequest("POST", QByteArray(path + "/events"), message),
            RequestTimeout);
        const HttpResult posted = co_await std::move(posting);
        if (posted.status != 200 && posted.status != 201) {
            fail(u"message to %1: %2 %3"_s.arg(QString::fromLatin1(sandbox.id))
                     .arg(posted.status)
                     .arg(QString::fromUtf8(posted.body.left(300))));
            co_return false;
        }
        QString status;
        const qint64 deadlineNs = startNs + 30'000'000'000LL;
        while (nowNs() < deadlineNs) {
            auto asking =
                m_connection->request(m_connection->makeRequest("GET", path), RequestTimeout);
            const HttpResult answer = co_await std::move(asking);
            status = QJsonDocument::fromJson(answer.body)
                         .object()
                         .value(u"execution_status"_s)
                         .toString();
            if (status == u"finished"_s || status == u"error"_s || status == u"stuck"_s)
                break;
            co_await QCoro::sleepFor(1ms);
        }
        const qint64 elapsedNs = nowNs() - startNs;
        if (status != u"finished"_s) {
            fail(u"the first command of %1 did not finish: execution_status %2"_s.arg(
                QString::fromLatin1(sandbox.id), status));
            co_return false;
        }
        if (sandbox.counted) {
            m_firstCommand.add(elapsedNs);
            m_commandReference.add(referenceNs);
        }
    }
    m_commandInterference = others.share(hostPids());

    // The command ran, and in the sandbox: checked after the timing.
    const QByteArray path = conversationTarget(m_sandboxes.front().id);
    auto observing = m_connection->request(
        m_connection->makeRequest("GET", QByteArray(path + "/events/search?kind=ObservationEvent")),
        RequestTimeout);
    const HttpResult observed = co_await std::move(observing);
    const QJsonObject observation = QJsonDocument::fromJson(observed.body)
                                        .object()
                                        .value(u"items"_s)
                                        .toArray()
                                        .first()
                                        .toObject()
                                        .value(u"observation"_s)
                                        .toObject();
    if (observation.value(u"exit_code"_s).toInt(-1) != 0) {
        fail(u"the first command did not exit 0: %1"_s.arg(
            QString::fromUtf8(observed.body.left(300))));
        co_return false;
    }
    say(u"   first command (`true`, message to finished, polled every 1 ms): %1"_s.arg(
        percentiles(m_firstCommand)));
    if (!m_bwrap.isEmpty())
        say(u"   reference: bubblewrap with the probe's namespaces running `bash -c true` %1; "
            "ratio of the p50s %2; other processes and the host took %3% of a core meanwhile"_s
                .arg(percentiles(m_commandReference),
                     formatRatio(ratio(m_firstCommand.median(), m_commandReference.median())))
                .arg(qRound(m_commandInterference * 100)));
    co_return true;
}

QCoro::Task<bool> SandboxFigures::startIdleReferences()
{
    m_idleBash.setStandardOutputFile(QProcess::nullDevice());
    m_idleBash.setStandardErrorFile(QProcess::nullDevice());
    m_idleBash.start(u"bash"_s, {u"--norc"_s, u"--noprofile"_s}); // stdin: a pipe left open
    m_idleSleep.setStandardInputFile(QProcess::nullDevice());
    m_idleSleep.setStandardOutputFile(QProcess::nullDevice());
    m_idleSleep.setStandardErrorFile(QProcess::nullDevice());
    m_idleSleep.start(u"sleep"_s, {u"3600"_s});
    const bool bashStarted = co_await qCoro(m_idleBash).waitForStarted(SpawnTimeout);
    const bool sleepStarted = co_await qCoro(m_idleSleep).waitForStarted(SpawnTimeout);
    if (!bashStarted || !sleepStarted) {
        fail(u"cannot start an idle bash and sleep"_s);
        co_return false;
    }
    co_return true;
}

QCoro::Task<> SandboxFigures::stopIdleReferences()
{
    for (QProcess *process : {&m_idleBash, &m_idleSleep}) {
        if (process->state() == QProcess::NotRunning)
            continue;
        process->kill();
        co_await qCoro(*process).waitForFinished(SpawnTimeout);
    }
}

void SandboxFigures::reportMemory(const QString &when, Samples *pss, qint64 *bashPssKiB)
{
    const auto bash = readSmapsRollup(m_idleBash.processId());
    const auto sleep = readSmapsRollup(m_idleSleep.processId());
    Samples rss;
    Samples own;
    for (const Sandbox &sandbox : m_sandboxes) {
        if (!sandbox.counted)
            continue;
        if (const auto rollup = readSmapsRollup(sandbox.hostPid)) {
            pss->add(rollup->pssKiB);
            rss.add(rollup->rssKiB);
            own.add(rollup->privateKiB);
        }
    }
    say(u"   idle sandbox hosts %1 (%2 hosts up): PSS %3; private %4; RSS %5"_s.arg(when)
            .arg(hostPids().size())
            .arg(sizes(*pss), sizes(own), sizes(rss)));
    // What PSS depends on: the pages the hosts share (the binary, Qt) are divided among all who
    // map them, so the fewer hosts up, the larger each one's PSS; private is the floor.
    say(u"   (PSS = private + a share of RSS - private, %1 per host, divided among the %2 hosts up "
        "and whoever else maps the same files: the fewer hosts, the larger the PSS)"_s
            .arg(mib(rss.median() - own.median()))
            .arg(hostPids().size()));
    if (bash && sleep) {
        *bashPssKiB = bash->pssKiB;
        say(u"   reference: an idle bash PSS %1 (private %2, RSS %3), an idle sleep PSS %4 "
            "(private %5, RSS %6); host PSS p50 / bash PSS: %7"_s.arg(
                mib(bash->pssKiB), mib(bash->privateKiB), mib(bash->rssKiB), mib(sleep->pssKiB),
                mib(sleep->privateKiB), mib(sleep->rssKiB),
                formatRatio(ratio(pss->median(), bash->pssKiB))));
    }
}

QCoro::Task<> SandboxFigures::stopAll()
{
    // A graceful stop of the server leaves its sandboxes running: each is stopped here.
    const qint64 startNs = nowNs();
    int stopped = 0;
    for (const Sandbox &sandbox : m_sandboxes) {
        if (sandbox.hostPid <= 0)
            continue;
        auto stopping = m_connection->request(
            m_connection->makeRequest("DELETE", conversationTarget(sandbox.id, "/runtime")),
            RequestTimeout);
        const HttpResult answer = co_await std::move(stopping);
        if (answer.status / 100 == 2)
            ++stopped;
    }
    const QList<qint64> pids = hostPids();
    const auto allGone = [&pids] {
        return std::all_of(pids.begin(), pids.end(), [](qint64 pid) { return isGone(pid); });
    };
    for (int wait = 0; wait < 500 && !allGone(); ++wait)
        co_await QCoro::sleepFor(10ms);
    if (!allGone())
        fail(u"sandbox hosts still running 5 s after DELETE .../runtime"_s);
    else if (!pids.isEmpty())
        say(u"   stopped %1 runtimes: every host gone %2 after the first DELETE"_s.arg(stopped).arg(
            formatMs(nowNs() - startNs)));
}

} // namespace AgentDeck::Bench
