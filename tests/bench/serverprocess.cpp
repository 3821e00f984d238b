#include "serverprocess.h"

#include "samples.h"

#include <QCoroProcess>
#include <QCoroSignal>
#include <QCoroTimer>
#include <QRegularExpression>

#include <csignal>
#include <sys/prctl.h>
#include <sys/resource.h>

using namespace Qt::StringLiterals;

namespace AgentDeck::Bench {

namespace {
constexpr int RecentLines = 20;
}

ServerProcess::ServerProcess(QString binary, QString dataDir, QObject *parent)
    : QObject(parent)
    , m_binary(std::move(binary))
    , m_dataDir(std::move(dataDir))
{
    m_process.setProcessChannelMode(QProcess::SeparateChannels);
    m_process.setStandardOutputFile(QProcess::nullDevice());
    // A bench that dies (watchdog, Ctrl-C, crash) takes its servers with it.
    m_process.setChildProcessModifier([] { ::prctl(PR_SET_PDEATHSIG, SIGKILL); });
    connect(&m_process, &QProcess::readyReadStandardError, this, &ServerProcess::readStderr);
}

void ServerProcess::setOpenFileLimit(qint64 limit)
{
    m_process.setChildProcessModifier([limit] {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        const rlimit files{rlim_t(limit), rlim_t(limit)};
        ::setrlimit(RLIMIT_NOFILE, &files);
    });
}

ServerProcess::~ServerProcess()
{
    if (m_process.state() != QProcess::NotRunning) {
        m_process.kill();
        m_process.waitForFinished(5000); // not in a coroutine: the last resort on the way out
    }
}

void ServerProcess::readStderr()
{
    m_partialLine.append(m_process.readAllStandardError());
    qsizetype start = 0;
    for (qsizetype end = m_partialLine.indexOf('\n'); end >= 0;
         end = m_partialLine.indexOf('\n', start)) {
        const QString line = QString::fromUtf8(m_partialLine.sliced(start, end - start));
        start = end + 1;
        if (m_port == 0) {
            static const QRegularExpression listening(
                u"agentdeck\\.server: listening on http://127\\.0\\.0\\.1:(\\d+)"_s);
            const auto match = listening.match(line);
            if (match.hasMatch()) {
                m_port = quint16(match.captured(1).toUInt());
                Q_EMIT portKnown();
            }
        }
        static const QRegularExpression checked(u"checked the catalog's integrity in (\\d+) ms"_s);
        if (const auto match = checked.match(line); match.hasMatch()) {
            m_integrityCheckMs = match.captured(1).toLongLong();
            Q_EMIT integrityChecked();
        }
        if (line.contains(u" warning "_s) || line.contains(u" critical "_s) ||
            line.contains(u" fatal "_s))
            ++m_warnings;
        m_recent.append(line);
        if (m_recent.size() > RecentLines)
            m_recent.removeFirst();
    }
    m_partialLine.remove(0, start);
}

QCoro::Task<bool> ServerProcess::start(std::chrono::milliseconds timeout)
{
    const qint64 launchNs = nowNs();
    const qint64 deadlineNs = launchNs + std::chrono::nanoseconds(timeout).count();
    const auto left = [deadlineNs] {
        return std::chrono::milliseconds(std::max<qint64>(1, (deadlineNs - nowNs()) / 1'000'000));
    };
    m_process.setProgram(m_binary);
    m_process.setArguments(
        QStringList{u"--headless"_s, u"--listen"_s, u"127.0.0.1:0"_s, u"--data-dir"_s, m_dataDir} +
        m_extraArguments);
    auto portKnown = qCoro(this, &ServerProcess::portKnown, timeout);
    m_process.start();
    const bool started = co_await qCoro(m_process).waitForStarted(timeout);
    if (!started) {
        m_error = u"cannot start %1: %2"_s.arg(m_binary, m_process.errorString());
        co_return false;
    }
    const auto port = co_await std::move(portKnown);
    if (!port) {
        m_error = u"%1 did not print \"listening on ...\" in time; last lines:\n%2"_s.arg(
            m_binary, m_recent.join(u'\n'));
        co_return false;
    }
    HttpConnection probe(endpoint());
    while (nowNs() < deadlineNs) {
        auto asking = probe.request(probe.makeRequest("GET", "/ready"), left());
        const HttpResult ready = co_await std::move(asking);
        if (ready.status == 200) {
            m_startupNs = nowNs() - launchNs;
            co_return true;
        }
        co_await QCoro::sleepFor(std::chrono::milliseconds(20));
    }
    m_error = u"%1 did not become ready in time"_s.arg(m_binary);
    co_return false;
}

QCoro::Task<qint64> ServerProcess::integrityCheckMs(std::chrono::milliseconds timeout)
{
    if (m_integrityCheckMs < 0)
        co_await qCoro(this, &ServerProcess::integrityChecked, timeout);
    co_return m_integrityCheckMs;
}

QCoro::Task<> ServerProcess::stop(std::chrono::milliseconds grace)
{
    if (m_process.state() == QProcess::NotRunning)
        co_return;
    m_process.terminate();
    const bool exited = co_await qCoro(m_process).waitForFinished(grace);
    if (!exited) {
        m_process.kill();
        co_await qCoro(m_process).waitForFinished(std::chrono::seconds(5));
    }
}

} // namespace AgentDeck::Bench
