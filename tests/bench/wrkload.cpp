#include "wrkload.h"

#include <QCoroProcess>
#include <QProcess>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTemporaryFile>

using namespace Qt::StringLiterals;

namespace AgentDeck::Bench {

QString wrkBinary()
{
    return QStandardPaths::findExecutable(u"wrk"_s);
}

namespace {

QCoro::Task<WrkResult> runOnce(QString script, Endpoint endpoint, int threads, int connections,
                               std::chrono::milliseconds duration)
{
    WrkResult result;
    QProcess wrk;
    const QString seconds = QString::number(std::max<qint64>(1, duration.count() / 1000)) + u's';
    wrk.start(wrkBinary(),
              {u"-t%1"_s.arg(threads), u"-c%1"_s.arg(connections), u"-d"_s + seconds, u"-s"_s,
               script, u"http://%1:%2/"_s.arg(endpoint.host).arg(endpoint.port)});
    auto waiting = qCoro(wrk).waitForFinished(duration + std::chrono::seconds(30));
    const bool finished = co_await std::move(waiting);
    const QString output = QString::fromUtf8(wrk.readAllStandardOutput());
    if (!finished || wrk.exitCode() != 0) {
        wrk.kill();
        result.problem =
            u"wrk failed: "_s + QString::fromUtf8(wrk.readAllStandardError()).trimmed();
        co_return result;
    }
    const auto number = [&output](const QString &pattern) {
        const QRegularExpressionMatch match = QRegularExpression(pattern).match(output);
        return match.hasMatch() ? match.captured(1).toDouble() : 0.0;
    };
    result.ran = true;
    result.perSecond = number(u"Requests/sec:\\s+([0-9.]+)"_s);
    result.errors = qint64(number(u"Non-2xx or 3xx responses:\\s+([0-9]+)"_s));
    const QRegularExpressionMatch socket =
        QRegularExpression(
            u"Socket errors: connect (\\d+), read (\\d+), write (\\d+), timeout (\\d+)"_s)
            .match(output);
    for (int i = 1; socket.hasMatch() && i <= 4; ++i)
        result.errors += socket.captured(i).toLongLong();
    co_return result;
}

} // namespace

QCoro::Task<WrkResult> runWrk(Endpoint endpoint, QList<QByteArray> targets, int threads,
                              int connections, std::chrono::milliseconds duration)
{
    // Each connection goes through the targets in turn, from a place of its own.
    QTemporaryFile script;
    if (!script.open())
        co_return WrkResult{false, 0, 0, u"cannot write wrk's script"_s};
    QByteArray lua = "local targets = {\n";
    for (const QByteArray &target : std::as_const(targets))
        lua += "  \"" + target + "\",\n";
    lua += "}\nlocal n = 0\n"
           "function setup(thread) n = n + 1; thread:set(\"first\", n * 7919) end\n"
           "function init(args) at = first end\n"
           "function request()\n"
           "  at = at % #targets + 1\n"
           "  return wrk.format(\"GET\", targets[at])\n"
           "end\n";
    script.write(lua);
    script.flush();
    auto running = runOnce(script.fileName(), endpoint, threads, connections, duration);
    co_return co_await std::move(running);
}

} // namespace AgentDeck::Bench
