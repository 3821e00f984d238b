#pragma once

#include "benchmark.h"

#include <QCoroTask>
#include <QStringList>

#include <memory>

namespace AgentDeck {
class DockerEngine;
namespace Testing {
class DockerDaemon;
}
} // namespace AgentDeck

namespace AgentDeck::Bench {

struct DockerFigureOptions
{
    QString binary;
    QString dataDir;
    int samples = 20;
    int warmups = 2; // conversations created first, not counted
    int warm = 2;    // the warm server's --sandbox-warm
};

struct DockerFigureResults
{
    QList<GoalResult> goals;
    QStringList failures;
};

// Issue #46, the warm pool: the time from a conversation's create (POST /api/conversations with
// a message to run) to its first command's end (the run finished), with a warm container
// (--sandbox-warm) and cold, beside a bare `docker run --rm --network none IMAGE true` through
// the Engine API, measured in the same run, and the floor of a command in a running container
// (an exec of `true`). Runs a dockerd and servers of its own; root only, as dockerd is.
class DockerFigures
{
public:
    explicit DockerFigures(DockerFigureOptions options);
    ~DockerFigures();

    QCoro::Task<DockerFigureResults> run();
    void abort();

private:
    struct Timing
    {
        qint64 answeredNs = 0; // the create's answer
        qint64 finishedNs = 0; // the run finished
        QByteArray id;
    };
    // Creates a shell conversation whose initial message runs `true`, and waits for its run.
    QCoro::Task<std::optional<Timing>> createAndRun(HttpConnection &server);
    // create + start + wait of `true` in a new container, removed afterwards (not timed).
    QCoro::Task<qint64> bareRun();
    QCoro::Task<qint64> execFloor(QString container);
    QCoro::Task<bool> waitForWarm(HttpConnection &server, int count);
    QCoro::Task<bool> startServer(std::unique_ptr<ServerProcess> &server, QString dataDir,
                                  QStringList arguments);
    void fail(const QString &problem);

    DockerFigureOptions m_options;
    std::unique_ptr<Testing::DockerDaemon> m_daemon;
    std::unique_ptr<DockerEngine> m_engine;
    std::unique_ptr<ServerProcess> m_cold;
    std::unique_ptr<ServerProcess> m_warm;
    std::unique_ptr<HttpConnection> m_coldHttp;
    std::unique_ptr<HttpConnection> m_warmHttp;
    DockerFigureResults m_results;
};

} // namespace AgentDeck::Bench
