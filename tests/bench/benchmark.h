#pragma once

#include "httpconnection.h"
#include "procinfo.h"
#include "samples.h"
#include "serverprocess.h"

#include <QCoroTask>
#include <QHash>
#include <QObject>
#include <QStringList>
#include <QUuid>

#include <memory>

namespace AgentDeck::Bench {

struct BenchOptions
{
    QString binary;
    QString workDir;
    bool quick = false;
    bool fanoutOnly = false; // figure 2 alone, on a server with an empty catalogue
    bool boundsOnly = false; // figures 6 and 7 alone
    bool keepData = false;
    bool sandboxOnly = false; // the sandbox figures alone (sandboxfigures.h)
    bool httpOnly = false;    // figure 1 alone, on a catalogue of referenceConversations
    int sandboxConversations = 30;
    bool dockerOnly = false; // the docker figures alone (dockerfigures.h)
    int dockerSamples = 20;
    qint64 conversations = 100'000;
    qint64 referenceConversations = 1'000;

    int seedConnections = 16;
    int throughputConnections = 50;
    // wrk's threads. One by default: on a 2-CPU machine the server and one load thread each
    // have a CPU, and the figure is the server's; with two, three busy threads share two CPUs,
    // and where the scheduler puts them decides the rate more than either server does.
    int loadThreads = 1;
    int throughputRounds = 3;
    std::chrono::milliseconds throughputWarmup{500};
    std::chrono::milliseconds throughputWindow{3000};
    int subscribers = 100;
    int subscriberThreads = 1;
    int eventsPerSecond = 1000;
    std::chrono::milliseconds fanoutWarmup{500};
    std::chrono::milliseconds fanoutWindow{5000};
    int firstPageRepeats = 50;
    int minPageSamples = 200; // pages of full walks (new connections)
    int deepPageSamples = 50; // deep pages asked on a keep-alive connection

    // The smaller settings of --quick.
    void makeQuick();
};

// One goal of docs/PERFORMANCE.md: a ratio (or a latency) and whether it meets its bound.
struct GoalResult
{
    QString name;
    QString figure;
    QString goal;
    bool measured = false;
    bool met = false;
    // The most CPU other processes took during the measurement, in cores: a shared machine
    // makes a figure less trustworthy, and the report says so.
    double otherCpu = 0;
};

// Latencies of search pages (limit 100) over one catalogue, in one connection mode.
struct SearchFigures
{
    bool freshConnections = false; // a new connection per request instead of one kept alive
    Samples firstPage;             // the first page, asked repeatedly
    Samples deepPages;             // pages in the second half of the catalogue
    // Full walks following next_page_id (new connections only).
    Samples allPages;
    qint64 pagesPerWalk = 0;
    int walks = 0;
    bool complete = false;         // the first walk saw every conversation exactly once
    QList<QByteArray> deepCursors; // page ids of the second half of the first walk
    QString problem;
};

struct CatalogueFigures
{
    qint64 conversations = 0;
    double seedPerSecond = 0;
    SearchFigures searchKeepAlive;
    SearchFigures searchFresh;
    std::optional<ProcessMemory> memoryAtStart;
    std::optional<ProcessMemory> memoryAfterSeed;
    std::optional<ProcessMemory> memoryAfterWalk;
    // After a restart on the same data dir, and after a few search pages there.
    qint64 restartStartupNs = 0;
    qint64 integrityCheckMs = -1; // the server's check after the restart, as it logs it
    std::optional<ProcessMemory> memoryAfterRestart;
    std::optional<ProcessMemory> memoryAfterRestartSample;
};

// Runs every measurement against real agentdeck processes and prints the figures as it goes.
class Benchmark : public QObject
{
    Q_OBJECT
public:
    explicit Benchmark(BenchOptions options, QObject *parent = nullptr);
    ~Benchmark() override;

    // 0: every measurement ran; 1: a measurement could not run (the reason is printed).
    QCoro::Task<int> run();
    const QList<GoalResult> &goals() const { return m_goals; }
    // Kills the servers still running (watchdog, early exit).
    void abort();

private:
    // Coroutines take by value what a caller may pass as a temporary.
    QCoro::Task<bool> startServer(std::unique_ptr<ServerProcess> &server, QString dataDir);
    QCoro::Task<bool> seed(ServerProcess &server, qint64 count, CatalogueFigures &figures,
                           QList<QUuid> *ids);
    // Asks each target in turn, on one keep-alive connection or on a new one each time; the
    // first `uncounted` answers warm up and are not recorded.
    QCoro::Task<bool> timePages(Endpoint endpoint, QList<QByteArray> targets, bool fresh,
                                Samples *latencies, QString *problem, int uncounted = 0);
    // New connections: the first page, then full walks following next_page_id.
    QCoro::Task<SearchFigures> walkSearch(Endpoint endpoint, qint64 expected);
    // One keep-alive connection: the first page, then deep pages by the walk's page ids.
    QCoro::Task<SearchFigures> sampleSearch(Endpoint endpoint, QList<QByteArray> deepCursors);
    void reportSearch(const SearchFigures &search, const QString &timing);
    QCoro::Task<bool> measureCatalogue(QString label, QString dataDir, qint64 count,
                                       CatalogueFigures &figures, QList<QUuid> *ids);
    QCoro::Task<bool> restartAndSample(QString label, QString dataDir, CatalogueFigures &figures);
    QCoro::Task<bool> measureThroughput(ServerProcess &server, const QList<QUuid> &ids);
    QCoro::Task<bool> measureFanout(ServerProcess &server);
    // The same fan-out from bare sockets in the bench; the subscribers' write -> read samples.
    QCoro::Task<Samples> measureFanoutReference(qsizetype payloadBytes);
    QCoro::Task<> measureFanoutAlone(QString dataDir);
    QCoro::Task<> measureHttpAlone(QString dataDir);
    // Figures 6 and 7 (bounds.h), each on a server of its own under `root`.
    QCoro::Task<> measureBounds(QString root);
    QCoro::Task<> measureSandboxes(QString dataDir);
    QCoro::Task<> measureDocker(QString dataDir);

    void reportSearchAndMemory(const CatalogueFigures &reference, const CatalogueFigures &large);
    // The server's integrity check after startup on both catalogues, and PRAGMA quick_check
    // and integrity_check timed on their files here, with no server running.
    void reportStartupCheck(const CatalogueFigures &reference, const CatalogueFigures &large,
                            const QString &referenceDir, const QString &largeDir);
    void printSummary() const;
    void addGoal(GoalResult goal, int number);
    // Remembers how much CPU other processes took during a phase of goal `number`.
    void noteInterference(int number, const CpuMeter &cpu);

    BenchOptions m_options;
    std::unique_ptr<ServerProcess> m_server;
    QList<GoalResult> m_goals;
    QHash<int, double> m_interference;
    QStringList m_failures;
};

void say(const QString &line);

} // namespace AgentDeck::Bench
