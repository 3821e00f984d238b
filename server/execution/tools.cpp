#include "tools.h"

#include "runtime/shellwords.h"
#include "serverconfig.h"

#include <QDir>
#include <QJsonObject>

#include <cmath>

using namespace Qt::StringLiterals;

namespace AgentDeck::Tools {

namespace {

// A command line is one argument of `bash -c`, and Linux limits one argument to 128 KiB: file
// contents are written in base64 chunks well under that.
constexpr qsizetype ChunkBase64Chars = 96 * 1024;
constexpr qint64 ReadLimitBytes = 256 * 1024;
constexpr qint64 EditLimitBytes = 512 * 1024;
constexpr int RefusedExitCode = 126;

QJsonObject function(const QString &name, const QString &description, const QJsonObject &properties,
                     const QStringList &required)
{
    return {{u"type"_s, u"function"_s},
            {u"function"_s,
             QJsonObject{{u"name"_s, name},
                         {u"description"_s, description},
                         {u"parameters"_s,
                          QJsonObject{{u"type"_s, u"object"_s},
                                      {u"properties"_s, properties},
                                      {u"required"_s, QJsonArray::fromStringList(required)}}}}}};
}

QJsonObject stringProperty(const QString &description)
{
    return {{u"type"_s, u"string"_s}, {u"description"_s, description}};
}

CommandResult refusal(const QString &sentence)
{
    return CommandResult{sentence, RefusedExitCode, false};
}

QString pathCheck(const QString &path, const QString &workingDir)
{
    return shellPathCheck(path, workingDir, u"Refused: %s is outside the workspace\n"_s,
                          RefusedExitCode);
}

QCoro::Task<CommandResult> writeContent(Runtime &runtime, QString path, QByteArray content,
                                        QString workingDir, std::chrono::milliseconds timeout)
{
    const QByteArray encoded = content.toBase64();
    qsizetype offset = 0;
    do {
        const bool first = offset == 0;
        const QString chunk = QString::fromLatin1(encoded.mid(offset, ChunkBase64Chars));
        offset += ChunkBase64Chars;
        QString command = pathCheck(path, workingDir) + u"set -e\n"_s;
        if (first)
            command += u"mkdir -p -- \"$(dirname -- \"$p\")\"\n"_s;
        command += u"printf '%s' %1 | base64 -d %2 \"$p\"\n"_s.arg(shellQuoted(chunk),
                                                                   first ? u">"_s : u">>"_s);
        auto execution = runtime.execute(CommandRequest{command, workingDir, timeout});
        const CommandResult result = co_await std::move(execution);
        if (result.interrupted || result.exitCode != 0)
            co_return result;
    } while (offset < encoded.size());
    co_return CommandResult{u"Wrote %1 bytes to %2"_s.arg(content.size()).arg(path), 0, false};
}

QCoro::Task<CommandResult> readFile(Runtime &runtime, QString path, QString workingDir,
                                    std::chrono::milliseconds timeout)
{
    const QString command =
        pathCheck(path, workingDir) +
        u"if [ -d \"$p\" ]; then ls -la -- \"$p\"; exit 0; fi\n"
        "size=$(stat -c %s -- \"$p\") || exit 1\n"
        "head -c %1 -- \"$p\" || exit 1\n"
        "if [ \"$size\" -gt %1 ]; then printf '\\n[file truncated: %s bytes, showing the first "
        "%1]\\n' \"$size\"; fi\n"_s.arg(ReadLimitBytes);
    auto execution = runtime.execute(CommandRequest{command, workingDir, timeout});
    co_return co_await std::move(execution);
}

QCoro::Task<CommandResult> replaceInFile(Runtime &runtime, QString path, QString oldText,
                                         QString newText, QString workingDir,
                                         std::chrono::milliseconds timeout)
{
    if (oldText.isEmpty())
        co_return refusal(u"old_str must not be empty"_s);
    const QString command =
        pathCheck(path, workingDir) +
        u"size=$(stat -c %s -- \"$p\") || exit 1\n"
        "if [ \"$size\" -gt %1 ]; then echo \"Refused: the file has $size bytes; str_replace "
        "edits files up to %1 bytes\"; exit 1; fi\n"
        "base64 -w0 -- \"$p\"\n"_s.arg(EditLimitBytes);
    auto reading = runtime.execute(CommandRequest{command, workingDir, timeout});
    const CommandResult read = co_await std::move(reading);
    if (read.interrupted || read.exitCode != 0)
        co_return read;
    const auto decoded = QByteArray::fromBase64Encoding(read.output.trimmed().toLatin1(),
                                                        QByteArray::AbortOnBase64DecodingErrors);
    if (!decoded)
        co_return CommandResult{u"Cannot read %1: its content did not come back intact"_s.arg(path),
                                1, false};
    const QByteArray content = *decoded;
    const QByteArray needle = oldText.toUtf8();
    const qsizetype count = content.count(needle);
    if (count == 0)
        co_return CommandResult{
            u"No replacement made: old_str does not occur in %1 (it must match exactly, "
            "whitespace included)"_s.arg(path),
            1, false};
    if (count > 1)
        co_return CommandResult{u"No replacement made: old_str occurs %1 times in %2; include "
                                "more surrounding text so that it is unique"_s.arg(count)
                                    .arg(path),
                                1, false};
    QByteArray updated = content;
    updated.replace(content.indexOf(needle), needle.size(), newText.toUtf8());
    auto writing = writeContent(runtime, path, updated, workingDir, timeout);
    const CommandResult written = co_await std::move(writing);
    if (written.interrupted || written.exitCode != 0)
        co_return written;
    co_return CommandResult{u"Replaced 1 occurrence in %1"_s.arg(path), 0, false};
}

} // namespace

QStringList names()
{
    return {Bash, ReadFile, WriteFile, StrReplace};
}

CommandResult notOffered(const QString &toolName)
{
    return refusal(u"This conversation's agent has no tool \"%1\"; use one of the tools it "
                   "was given"_s.arg(toolName));
}

QJsonArray schemas(const std::optional<QStringList> &offered)
{
    const QJsonObject path =
        stringProperty(u"Path of the file, relative to the workspace or absolute inside it"_s);
    const QJsonArray all{
        function(Bash,
                 u"Run a bash command in the workspace and get its output (stdout and stderr) "
                 "and exit code."_s,
                 {{u"command"_s, stringProperty(u"The command line to run with bash"_s)},
                  {u"timeout"_s,
                   QJsonObject{{u"type"_s, u"number"_s},
                               {u"description"_s, u"Stop the command after this many seconds"_s}}}},
                 {u"command"_s}),
        function(ReadFile, u"Read a text file of the workspace."_s, {{u"path"_s, path}},
                 {u"path"_s}),
        function(WriteFile,
                 u"Create or overwrite a file of the workspace with the given content "
                 "(parent directories are created)."_s,
                 {{u"path"_s, path},
                  {u"content"_s, stringProperty(u"The whole new content of the file"_s)}},
                 {u"path"_s, u"content"_s}),
        function(
            StrReplace,
            u"Replace the one exact occurrence of old_str in a file with new_str. Fails "
            "when old_str does not occur exactly once."_s,
            {{u"path"_s, path},
             {u"old_str"_s, stringProperty(u"The exact text to replace, unique in the file"_s)},
             {u"new_str"_s, stringProperty(u"The text to put in its place"_s)}},
            {u"path"_s, u"old_str"_s, u"new_str"_s}),
        function(Finish, u"Finish the task and give the final answer to the user."_s,
                 {{u"message"_s, stringProperty(u"The final answer for the user"_s)}},
                 {u"message"_s}),
    };
    if (!offered)
        return all;
    QJsonArray chosen;
    for (const QJsonValue &tool : all) {
        const QString name =
            tool.toObject().value(u"function"_s).toObject().value(u"name"_s).toString();
        if (name == Finish || offered->contains(name))
            chosen.append(tool);
    }
    return chosen;
}

std::optional<QString> resolveInWorkspace(const QString &path, const QString &workingDir)
{
    const QString root = QDir::cleanPath(workingDir);
    const QString resolved =
        QDir::cleanPath(QDir::isAbsolutePath(path) ? path : root + u'/' + path);
    if (resolved == root || resolved.startsWith(root + u'/'))
        return resolved;
    return std::nullopt;
}

QCoro::Task<CommandResult> run(Runtime &runtime, QString toolName, QJsonObject arguments,
                               QString workingDir, std::chrono::milliseconds serverTimeout,
                               QUuid actionId)
{
    if (arguments.size() == 1 && arguments.contains(u"raw_arguments"_s))
        co_return refusal(u"The arguments of %1 are not a JSON object: %2"_s.arg(
            toolName, leftWhole(arguments.value(u"raw_arguments"_s).toString(), 200)));
    if (toolName.isEmpty() || toolName == Bash) {
        const QJsonValue command = arguments.value(u"command"_s);
        if (!command.isString() || command.toString().trimmed().isEmpty())
            co_return refusal(u"bash needs a \"command\" string"_s);
        std::chrono::milliseconds timeout = serverTimeout;
        if (const double seconds = arguments.value(u"timeout"_s).toDouble(); seconds > 0) {
            // From 1 ms (0.0001 s came out as 0: no limit at all) to what a timer can wait
            // (1e300 s overflowed to a negative, no limit either).
            const double limit = std::chrono::duration<double>(MaxTimerDuration).count();
            const auto own =
                std::chrono::milliseconds(qint64(std::ceil(std::min(seconds, limit) * 1000)));
            timeout = serverTimeout.count() > 0 ? std::min(serverTimeout, own) : own;
        }
        auto execution =
            runtime.execute(CommandRequest{command.toString(), workingDir, timeout, actionId});
        co_return co_await std::move(execution);
    }
    if (toolName == Finish)
        co_return refusal(u"finish must be called on its own, after the other tools are done"_s);
    if (toolName != ReadFile && toolName != WriteFile && toolName != StrReplace)
        co_return refusal(u"Unknown tool \"%1\"; the tools are bash, read_file, write_file, "
                          "str_replace and finish"_s.arg(toolName));

    const QJsonValue pathValue = arguments.value(u"path"_s);
    if (!pathValue.isString() || pathValue.toString().isEmpty())
        co_return refusal(u"%1 needs a \"path\" string"_s.arg(toolName));
    const auto path = resolveInWorkspace(pathValue.toString(), workingDir);
    if (!path)
        co_return refusal(
            u"Refused: %1 is outside the workspace %2"_s.arg(pathValue.toString(), workingDir));
    if (toolName == ReadFile) {
        auto reading = readFile(runtime, *path, workingDir, serverTimeout);
        co_return co_await std::move(reading);
    }
    if (toolName == WriteFile) {
        const QJsonValue content = arguments.value(u"content"_s);
        if (!content.isString())
            co_return refusal(u"write_file needs a \"content\" string"_s);
        auto writing =
            writeContent(runtime, *path, content.toString().toUtf8(), workingDir, serverTimeout);
        co_return co_await std::move(writing);
    }
    const QJsonValue oldText = arguments.value(u"old_str"_s);
    const QJsonValue newText = arguments.value(u"new_str"_s);
    if (!oldText.isString() || !newText.isString())
        co_return refusal(u"str_replace needs \"old_str\" and \"new_str\" strings"_s);
    auto replacing = replaceInFile(runtime, *path, oldText.toString(), newText.toString(),
                                   workingDir, serverTimeout);
    co_return co_await std::move(replacing);
}

} // namespace AgentDeck::Tools
