// agentdeck_bench: the project's benchmark. Starts the real agentdeck binary, drives it over
// loopback and prints each figure as a ratio against a reference measured in the same run.
// See docs/PERFORMANCE.md for what is measured and how.
#include "benchmark.h"

#include <QCommandLineParser>
#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QTimer>

#include <algorithm>
#include <cstdio>

using namespace Qt::StringLiterals;
using namespace AgentDeck::Bench;

int main(int argc, char *argv[])
{
    QCoreApplication app(argc, argv);
    app.setApplicationName(u"agentdeck_bench"_s);

    QCommandLineParser parser;
    parser.setApplicationDescription(
        u"Measures the agentdeck server: GET throughput, WebSocket fan-out latency, search pages "
        "and memory at a large catalogue, each against a reference from the same run."_s);
    parser.addHelpOption();
    const QCommandLineOption binary(u"binary"_s, u"The agentdeck binary to run."_s, u"PATH"_s,
                                    QStringLiteral(AGENTDECK_BENCH_DEFAULT_BINARY));
    const QCommandLineOption quick(u"quick"_s,
                                   u"A small smoke run: 5,000 conversations, short windows."_s);
    const QCommandLineOption conversations(
        u"conversations"_s, u"Size of the large catalogue (default 100000; 5000 with --quick)."_s,
        u"N"_s);
    const QCommandLineOption reference(u"reference-conversations"_s,
                                       u"Size of the reference catalogue (default 1000)."_s, u"N"_s,
                                       u"1000"_s);
    const QCommandLineOption workDir(u"work-dir"_s,
                                     u"Where the servers' data dirs are created (default: the "
                                     "system temporary dir)."_s,
                                     u"DIR"_s, QDir::tempPath());
    const QCommandLineOption keepData(u"keep-data"_s, u"Keep the data dirs afterwards."_s);
    const QCommandLineOption requireGoals(
        u"require-goals"_s, u"Exit with status 2 when a goal is not met or not measured."_s);
    const QCommandLineOption fanoutOnly(
        u"fanout-only"_s, u"Measure figure 2 (publish -> receive) alone, on an empty server."_s);
    const QCommandLineOption boundsOnly(
        u"bounds-only"_s, u"Measure figures 8 and 9 (server-wide bounds) alone: the growth with "
                          "100 subscribers that do not read, and /alive past 250 slow request "
                          "heads at 256 open files."_s);
    const QCommandLineOption httpOnly(
        u"http-only"_s, u"Measure figure 1 alone (GET by id, /alive and a search page of 10, "
                        "against nginx serving the same bytes), on a catalogue of "
                        "--reference-conversations."_s);
    const QCommandLineOption sandboxOnly(
        u"sandbox-only"_s,
        u"Measure the sandbox figures alone: cold resume with the policy in force, idle PSS."_s);
    const QCommandLineOption sandboxConversations(
        u"sandbox-conversations"_s, u"Conversations of the sandbox figures (default 30)."_s, u"N"_s,
        u"30"_s);
    const QCommandLineOption dockerOnly(
        u"docker-only"_s,
        u"Measure the docker figures alone (root only): a conversation's create to its first "
        "command's end with a warm container (--sandbox-warm) and cold, against a bare docker "
        "run, on a dockerd of the bench's own."_s);
    const QCommandLineOption dockerSamples(u"docker-samples"_s,
                                           u"Conversations of each docker figure (default 20)."_s,
                                           u"N"_s, u"20"_s);
    const QCommandLineOption readers(u"subscriber-threads"_s,
                                     u"Threads that read the fan-out's subscribers (default 1)."_s,
                                     u"N"_s, u"1"_s);
    const QCommandLineOption loadThreads(
        u"load-threads"_s,
        u"wrk's threads for figure 1 (default 1: one CPU for the load, one "
        "for the server on a 2-CPU machine)."_s,
        u"N"_s, u"1"_s);
    parser.addOptions({binary, quick, conversations, reference, workDir, keepData, requireGoals,
                       fanoutOnly, boundsOnly, readers, sandboxOnly, sandboxConversations, httpOnly,
                       loadThreads, dockerOnly, dockerSamples});
    parser.process(app);

    BenchOptions options;
    options.binary = parser.value(binary);
    options.workDir = parser.value(workDir);
    options.keepData = parser.isSet(keepData);
    options.fanoutOnly = parser.isSet(fanoutOnly);
    options.boundsOnly = parser.isSet(boundsOnly);
    options.subscriberThreads = std::max(1, parser.value(readers).toInt());
    options.loadThreads = std::clamp(parser.value(loadThreads).toInt(), 1, 64);
    options.sandboxOnly = parser.isSet(sandboxOnly);
    options.httpOnly = parser.isSet(httpOnly);
    options.dockerOnly = parser.isSet(dockerOnly);
    options.dockerSamples = std::clamp(parser.value(dockerSamples).toInt(), 1, 1000);
    options.sandboxConversations = std::clamp(parser.value(sandboxConversations).toInt(), 1, 1000);
    if (parser.isSet(quick)) {
        options.makeQuick();
        options.conversations = 5'000;
    }
    bool ok = true;
    if (parser.isSet(conversations))
        options.conversations = parser.value(conversations).toLongLong(&ok);
    bool referenceOk = true;
    options.referenceConversations = parser.value(reference).toLongLong(&referenceOk);
    if (!ok || !referenceOk || options.conversations < 100 ||
        options.referenceConversations < 100) {
        std::fputs("agentdeck_bench: catalogue sizes must be numbers of at least 100\n", stderr);
        return 2;
    }
    if (!QFileInfo(options.binary).isExecutable()) {
        std::fputs(qPrintable(u"agentdeck_bench: %1 is not an executable; pass --binary\n"_s.arg(
                       options.binary)),
                   stderr);
        return 2;
    }

    Benchmark benchmark(options);
    // Every wait in the bench has its own deadline; this one bounds the whole run regardless.
    const int watchdogMs = (options.quick ? 5 : 25) * 60'000 +
                           int(std::min<qint64>(options.conversations, 10'000'000) / 100);
    QTimer::singleShot(watchdogMs, &app, [&] {
        say(u"agentdeck_bench: the run took longer than %1 s; stopping"_s.arg(watchdogMs / 1000));
        benchmark.abort();
        app.exit(3);
    });
    QCoro::connect(benchmark.run(), &app, [&](int status) {
        if (status == 0 && parser.isSet(requireGoals)) {
            for (const GoalResult &goal : benchmark.goals()) {
                if (!goal.measured || !goal.met)
                    status = 2;
            }
        }
        app.exit(status);
    });
    return app.exec();
}
