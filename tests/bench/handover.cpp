// Handover benchmark: how long after its owner stops (SIGTERM) or dies (SIGKILL) another
// replica serves /recover for a conversation the owner was running. Two real replicas on a
// throwaway PostgreSQL cluster, with the server's default settings unless a TTL is given;
// median of N rounds each (the goals: under 1 s after SIGTERM; after SIGKILL under 5 s with the
// defaults, under TTL + one renewal interval with a TTL given).
//
//   build/tests/bench/agentdeck_handover_bench [--rounds 10] [--lease-ttl-ms MS]
// From tests/support (angle brackets: tests/bench has a serverprocess.h of its own).
#include <postgrescluster.h>
#include <serverconfig.h>
#include <serverprocess.h>

#include <QCommandLineParser>
#include <QCoreApplication>
#include <QElapsedTimer>
#include <QTemporaryDir>

#include <algorithm>
#include <csignal>
#include <cstdio>

using namespace Qt::StringLiterals;
using namespace AgentDeck::Testing;

namespace {

struct Replicas
{
    QString binary;
    QUrl database;
    int ttlMs = 0; // 0: the server's default
    QTemporaryDir dirs;
    int started = 0;

    std::unique_ptr<ServerProcess> start()
    {
        const QString name = u"replica-%1"_s.arg(++started);
        QStringList arguments{
            u"--database"_s, database.toString(), u"--replica-id"_s, name, u"--shutdown-grace"_s,
            u"0"_s,          u"--runtime"_s,      u"process"_s};
        if (ttlMs > 0)
            arguments << u"--lease-ttl"_s << u"%1ms"_s.arg(ttlMs);
        auto replica = std::make_unique<ServerProcess>(binary, dirs.filePath(name), arguments);
        if (!replica->startReady()) {
            std::fprintf(stderr, "%s did not start: %s\n", qPrintable(name),
                         qPrintable(replica->stderrText()));
            std::exit(1);
        }
        return replica;
    }
};

// One round: `owner` runs a long command, gets `signal`; the time until `other` serves /recover.
qint64 handover(ServerProcess &owner, ServerProcess &other, int signal)
{
    const QUuid id =
        owner.create(QJsonObject{{u"agent"_s, QJsonObject{{u"kind"_s, u"shell"_s}}},
                                 {u"initial_message"_s, userMessage(u"sleep 60"_s, true)}});
    if (id.isNull() || !owner.waitForStatus(id, u"running"_s, 10'000))
        return -1;
    QElapsedTimer timer;
    timer.start();
    owner.sendSignal(signal);
    const bool served = QTest::qWaitFor(
        [&] { return other.post(conversationPath(id, u"recover"_s)).status == 200; }, 60'000);
    const qint64 elapsed = timer.elapsed();
    other.post(conversationPath(id, u"interrupt"_s));
    owner.waitForExit(10'000);
    return served ? elapsed : -1;
}

qint64 median(QList<qint64> values)
{
    std::sort(values.begin(), values.end());
    return values.isEmpty() ? -1 : values[values.size() / 2];
}

} // namespace

int main(int argc, char **argv)
{
    QCoreApplication app(argc, argv);
    QCommandLineParser parser;
    parser.addHelpOption();
    const QCommandLineOption rounds(u"rounds"_s, u"Rounds per signal (default 10)."_s, u"N"_s,
                                    u"10"_s);
    const QCommandLineOption ttl(
        u"lease-ttl-ms"_s, u"Lease TTL of the replicas (default: the server's own)."_s, u"MS"_s);
    const QCommandLineOption binary(u"binary"_s, u"The agentdeck binary."_s, u"PATH"_s,
                                    QStringLiteral(AGENTDECK_BENCH_DEFAULT_BINARY));
    parser.addOptions({rounds, ttl, binary});
    parser.process(app);

    PostgresCluster cluster;
    QString error;
    if (!cluster.start(&error)) {
        std::fprintf(stderr, "%s\n", qPrintable(error));
        return 1;
    }
    Replicas replicas;
    replicas.binary = parser.value(binary);
    replicas.ttlMs = parser.isSet(ttl) ? parser.value(ttl).toInt() : 0;
    replicas.database = cluster.createDatabase(u"handover"_s, &error);
    if (replicas.database.isEmpty()) {
        std::fprintf(stderr, "%s\n", qPrintable(error));
        return 1;
    }

    const int n = parser.value(rounds).toInt();
    const int ttlMs =
        replicas.ttlMs > 0 ? replicas.ttlMs : int(AgentDeck::ServerConfig().leaseTtl.count());
    const int renewalMs = ttlMs / 3;
    std::printf("handover between two replicas, lease TTL %d ms (%s), renewal every %d ms, %d "
                "rounds\n",
                ttlMs, replicas.ttlMs > 0 ? "given" : "the default", renewalMs, n);
    auto survivor = replicas.start();
    for (const auto &[signal, name, goalMs] :
         {std::tuple{SIGTERM, "SIGTERM", qint64(1000)},
          std::tuple{SIGKILL, "SIGKILL",
                     replicas.ttlMs > 0 ? qint64(ttlMs + renewalMs) : qint64(5000)}}) {
        QList<qint64> times;
        for (int round = 0; round < n; ++round) {
            auto owner = replicas.start();
            const qint64 ms = handover(*owner, *survivor, signal);
            if (ms < 0) {
                std::fprintf(stderr, "%s round %d: no handover\n", name, round);
                return 1;
            }
            times.append(ms);
        }
        const qint64 med = median(times);
        std::printf("%-8s median %5lld ms  min %5lld  max %5lld  goal < %lld ms (%s); ratio to "
                    "goal %.2f\n",
                    name, static_cast<long long>(med),
                    static_cast<long long>(*std::min_element(times.cbegin(), times.cend())),
                    static_cast<long long>(*std::max_element(times.cbegin(), times.cend())),
                    static_cast<long long>(goalMs), med < goalMs ? "met" : "NOT met",
                    double(med) / double(goalMs));
        std::fflush(stdout);
    }
    return 0;
}
