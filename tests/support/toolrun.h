#pragma once

// A tool of the machine (cpack, dpkg, qemu-img, lintian...) run to its end, for tests that
// drive the packaging and the VM: its exit code and what it printed, both streams together.
#include <QProcess>
#include <QString>
#include <QStringList>

namespace AgentDeck::Testing {

inline constexpr int ToolTimeoutMs = 60'000;

struct ToolResult
{
    int exitCode = -1; // -1: it did not start, did not end in time, or crashed
    QString output;

    bool ok() const { return exitCode == 0; }
};

inline ToolResult runTool(const QString &program, const QStringList &arguments,
                          int timeoutMs = ToolTimeoutMs, const QString &workingDir = {})
{
    using namespace Qt::StringLiterals;
    QProcess process;
    process.setProcessChannelMode(QProcess::MergedChannels);
    if (!workingDir.isEmpty())
        process.setWorkingDirectory(workingDir);
    process.start(program, arguments);
    if (!process.waitForStarted())
        return {-1, program + u": "_s + process.errorString()};
    if (!process.waitForFinished(timeoutMs)) {
        process.kill();
        process.waitForFinished();
        return {-1, program + u" timed out: "_s + QString::fromLocal8Bit(process.readAll())};
    }
    const int code = process.exitStatus() == QProcess::NormalExit ? process.exitCode() : -1;
    return {code, QString::fromLocal8Bit(process.readAll())};
}

} // namespace AgentDeck::Testing
