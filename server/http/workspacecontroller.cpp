#include "apierror.h"
#include "controllers.h"
#include "conversationservice.h"
#include "router.h"
#include "runtime/workspacesandbox.h"
#include "storage/conversationstore.h"
#include "streams/bashevents.h"
#include "wiretypes.h"

#include <QDateTime>
#include <QDir>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QUuid>

#include <algorithm>
#include <memory>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {

// The ids one batch get of bash events may ask for: as many as the events kept.
constexpr qsizetype MaxBatchIds = BashEventLog::MaxEvents;

// A command line is one argument of `bash -c` (at most 128 KiB on Linux): uploads go in base64
// chunks well under that. Downloads come back in chunks whose base64 stays under the 1 MiB of
// output a command keeps.
constexpr qsizetype UploadChunkBase64Chars = 96 * 1024;
constexpr qint64 DownloadChunkBytes = 512 * 1024;
constexpr std::chrono::seconds FileCommandTimeout{60};
constexpr int DefaultCommandTimeoutSeconds = 300; // OpenHands' default
constexpr int MaxCommandTimeoutSeconds = 24 * 3600;
// The sandbox's answers to the path check (see pathCheck).
constexpr int RefusedExit = 126;
constexpr int MissingExit = 3;
constexpr int NotAFileExit = 4;

QString quoted(const QString &text)
{
    QString escaped = text;
    escaped.replace(u'\'', u"'\\''"_s);
    return u'\'' + escaped + u'\'';
}

ApiError refused(const QString &path, const QString &why)
{
    return {403, u"path_refused"_s, u"%1: %2"_s.arg(path, why)};
}

// `path` as the server sees it: absolute, without `..`, the symbolic links of the part that
// exists followed. Returns the real path (the missing rest appended).
QString resolveOnHost(const QString &path)
{
    if (path.isEmpty())
        throw ApiError::invalidParameter(u"path is required"_s);
    if (!QDir::isAbsolutePath(path))
        throw ApiError::badRequest(u"Path must be absolute"_s);
    const QStringList segments = path.split(u'/', Qt::SkipEmptyParts);
    if (segments.contains(u".."_s))
        throw refused(path, u"a path may not contain `..`"_s);
    // The deepest part that exists, resolved; the rest as given.
    QStringList rest;
    QStringList existing = segments;
    QString real;
    for (;;) {
        const QString candidate = u'/' + existing.join(u'/');
        const QFileInfo info(candidate);
        if (info.exists() || existing.isEmpty()) {
            real = existing.isEmpty() ? u"/"_s : info.canonicalFilePath();
            break;
        }
        if (info.isSymLink()) // a dangling link: where it points is not known to be inside
            throw refused(path, u"it is a symbolic link to nothing"_s);
        rest.prepend(existing.takeLast());
    }
    if (real.isEmpty())
        throw refused(path, u"it cannot be resolved"_s);
    return QDir::cleanPath(real + u'/' + rest.join(u'/'));
}

bool isInside(const QString &path, const QString &root)
{
    return path == root || path.startsWith(root + u'/');
}

QString realDirectory(const QString &path)
{
    const QString real = QFileInfo(path).canonicalFilePath();
    return real.isEmpty() ? QDir::cleanPath(QFileInfo(path).absoluteFilePath()) : real;
}

struct Workspaces
{
    WorkspaceSandbox &sandbox;
    ConversationService &service;
    ConversationStore &store;
    qint64 maxDownloadBytes = 0;
};

// A path and the sandbox it is reached through: the server workspace's, or that of the
// conversation whose workspace holds it.
struct Target
{
    QString path; // real
    QString root; // the workspace holding it, real
    std::optional<ConversationInfo> conversation;
};

Target locate(const Workspaces &workspaces, const QString &given)
{
    const QString path = resolveOnHost(given);
    // The conversations whose workspace holds the path: their working dirs are among its
    // ancestors, as resolved or as given. The deepest wins.
    QStringList ancestors;
    for (const QString &start : {path, QDir::cleanPath(given)}) {
        for (QString dir = start; !dir.isEmpty() && dir != u"/"_s; dir = QFileInfo(dir).path()) {
            if (!ancestors.contains(dir))
                ancestors.append(dir);
        }
    }
    QList<QPair<QUuid, QString>> owners = workspaces.store.withWorkingDirs(ancestors.mid(0, 100));
    std::sort(owners.begin(), owners.end(),
              [](const auto &a, const auto &b) { return a.second.size() > b.second.size(); });
    std::optional<ConversationInfo> archived;
    for (const auto &[id, dir] : std::as_const(owners)) {
        std::optional<ConversationInfo> info;
        try {
            info = workspaces.service.get(id);
        } catch (const ApiError &) {
            continue; // removed meanwhile
        }
        const QString root = realDirectory(info->workingDir);
        if (!isInside(path, root))
            continue;
        if (info->isArchived()) {
            archived = info;
            continue;
        }
        return {path, root, info};
    }
    if (!archived && isInside(path, workspaces.sandbox.directory()))
        return {path, workspaces.sandbox.directory(), std::nullopt};
    if (archived)
        throw ApiError::conflict(u"conversation_archived"_s,
                                 u"%1 is in the workspace of archived conversation %2"_s.arg(
                                     given, toWireId(archived->id)));
    throw refused(given, u"it is neither inside a conversation's workspace nor inside the server "
                         "workspace (%1)"_s.arg(workspaces.sandbox.directory()));
}

QCoro::Task<WorkspaceCommandResult> runAt(WorkspaceSandbox &sandbox, const Target &target,
                                          QString command, std::chrono::milliseconds timeout)
{
    if (target.conversation)
        return sandbox.runIn(*target.conversation, std::move(command), timeout);
    return sandbox.run(std::move(command), timeout);
}

// Shell lines that set $p to the real path of `path` as the sandbox sees it, and refuse it when
// it is not inside `root` there: the host's check may be raced by a command that moves a link.
QString pathCheck(const QString &path, const QString &root)
{
    return u"w=$(realpath -m -- %1) && p=$(realpath -m -- %2) || exit 1\n"
           "case \"$p\" in \"$w\"|\"$w\"/*) ;; *) printf '%s is outside the workspace' %2; "
           "exit %3;; esac\n"_s.arg(quoted(root), quoted(path), QString::number(RefusedExit));
}

// Runs a command of the file routes; an unavailable sandbox is 503.
QCoro::Task<CommandResult> runOrThrow(WorkspaceSandbox &sandbox, Target target, QString command,
                                      std::chrono::milliseconds timeout)
{
    auto running = runAt(sandbox, target, std::move(command), timeout);
    WorkspaceCommandResult outcome = co_await std::move(running);
    if (!outcome.result) {
        ApiError error{503, u"sandbox_unavailable"_s,
                       u"The workspace sandbox is not available: "_s + outcome.error.message};
        if (outcome.atLimit)
            error.retryAfterSeconds = 5;
        throw error;
    }
    co_return *outcome.result;
}

void throwForExit(const CommandResult &result, const QString &path)
{
    if (result.exitCode == 0 && !result.interrupted)
        return;
    if (result.exitCode == RefusedExit)
        throw refused(path, u"it is not inside the workspace"_s);
    if (result.exitCode == MissingExit)
        throw ApiError::notFound(u"File not found: "_s + path);
    if (result.exitCode == NotAFileExit)
        throw ApiError::badRequest(u"Path is not a file: "_s + path);
    throw ApiError{500, u"file_transfer_failed"_s, result.output.trimmed().right(2000)};
}

struct Part
{
    QByteArray name;
    QByteArray content;
};

// The parts of a multipart/form-data body (RFC 7578), or 400.
QList<Part> formParts(const HttpRequest &request)
{
    const QByteArray type = request.header("content-type");
    const qsizetype at = type.indexOf("boundary=");
    if (!type.trimmed().toLower().startsWith("multipart/form-data") || at < 0)
        throw ApiError::badRequest(u"The body must be multipart/form-data"_s);
    QByteArray boundary = type.mid(at + 9);
    if (const qsizetype end = boundary.indexOf(';'); end >= 0)
        boundary.truncate(end);
    boundary = boundary.trimmed();
    if (boundary.startsWith('"') && boundary.endsWith('"') && boundary.size() >= 2)
        boundary = boundary.mid(1, boundary.size() - 2);
    if (boundary.isEmpty())
        throw ApiError::badRequest(u"The multipart boundary is empty"_s);
    const QByteArray delimiter = "--" + boundary;
    const QByteArray &body = request.body;
    QList<Part> parts;
    qsizetype pos = body.indexOf(delimiter);
    while (pos >= 0) {
        pos += delimiter.size();
        if (body.mid(pos, 2) == "--")
            return parts;
        if (body.mid(pos, 2) != "\r\n")
            break;
        pos += 2;
        const qsizetype headEnd = body.indexOf("\r\n\r\n", pos);
        if (headEnd < 0)
            break;
        const QByteArray head = body.mid(pos, headEnd - pos);
        const qsizetype contentStart = headEnd + 4;
        const qsizetype next = body.indexOf(QByteArray("\r\n" + delimiter), contentStart);
        if (next < 0)
            break;
        Part part;
        for (const QByteArray &line : head.split('\n')) {
            if (!line.trimmed().toLower().startsWith("content-disposition:"))
                continue;
            const qsizetype nameAt = line.indexOf("name=\"");
            if (nameAt >= 0) {
                const qsizetype start = nameAt + 6;
                part.name = line.mid(start, line.indexOf('"', start) - start);
            }
        }
        part.content = body.mid(contentStart, next - contentStart);
        parts.append(part);
        pos = next + 2;
    }
    throw ApiError::badRequest(u"The multipart body is malformed"_s);
}

// A command of /api/bash, as OpenHands' BashCommand; its script runs it in the sandbox.
struct BashCommand
{
    QUuid id = QUuid::createUuid();
    qint64 timestampMs = QDateTime::currentMSecsSinceEpoch();
    QString command;
    QString cwd; // as given
    int timeout = DefaultCommandTimeoutSeconds;
    Target target;
    // stdout and stderr come back in the one output of a command, stderr after a marker that
    // the command cannot guess.
    QString marker = u"\n[agentdeck-stderr-%1]\n"_s.arg(QUuid::createUuid().toString(QUuid::Id128));

    QJsonObject toJson() const
    {
        return {{u"kind"_s, u"BashCommand"_s},
                {u"id"_s, id.toString(QUuid::WithoutBraces)},
                {u"timestamp"_s, toWireTime(timestampMs)},
                {u"command"_s, command},
                {u"cwd"_s, cwd.isEmpty() ? QJsonValue(QJsonValue::Null) : QJsonValue(cwd)},
                {u"timeout"_s, timeout}};
    }

    QString script() const
    {
        return pathCheck(target.path, target.root) +
               u"[ -d \"$p\" ] || { printf 'cwd is not a directory'; exit %1; }\n"
               "cd -- \"$p\" || exit 1\n"
               "e=$(mktemp) || exit 1\n"
               "bash -c %2 2>\"$e\" </dev/null\n"
               "c=$?\n"
               "printf '%s' %3\n"
               "cat -- \"$e\"; rm -f -- \"$e\"\n"
               "exit $c\n"_s.arg(QString::number(NotAFileExit), quoted(command), quoted(marker));
    }
};

QJsonObject bashOutput(const CommandResult &result, const BashCommand &command)
{
    QString stdoutText = result.output;
    QString stderrText;
    const qsizetype at = stdoutText.lastIndexOf(command.marker);
    if (at >= 0) {
        stderrText = stdoutText.mid(at + command.marker.size());
        stdoutText.truncate(at);
    }
    // The marker comes once the command has ended: without it, 124 is the runtime's timeout.
    // A command that ran out of time or was interrupted has no exit code of its own.
    const bool timedOut = at < 0 && result.exitCode == 124;
    const int exitCode = result.interrupted || timedOut ? -1 : result.exitCode;
    return {{u"kind"_s, u"BashOutput"_s},
            {u"id"_s, QUuid::createUuid().toString(QUuid::WithoutBraces)},
            {u"timestamp"_s, toWireTime(QDateTime::currentMSecsSinceEpoch())},
            {u"command_id"_s, command.id.toString(QUuid::WithoutBraces)},
            {u"order"_s, 0},
            {u"exit_code"_s, exitCode},
            {u"stdout"_s, stdoutText},
            {u"stderr"_s, stderrText},
            {u"timeout_occurred"_s, timedOut}};
}

// What the sandbox answered, as the command's BashOutput, or the error of the answer.
QJsonObject outputOrThrow(const WorkspaceCommandResult &outcome, const BashCommand &command)
{
    if (!outcome.result) {
        ApiError error{503, u"sandbox_unavailable"_s,
                       u"The workspace sandbox is not available: "_s + outcome.error.message};
        if (outcome.atLimit)
            error.retryAfterSeconds = 5;
        throw error;
    }
    const CommandResult &result = *outcome.result;
    if (result.exitCode == RefusedExit && !result.output.contains(command.marker))
        throw refused(command.target.path, u"it is not inside the workspace"_s);
    if (result.exitCode == NotAFileExit && !result.output.contains(command.marker))
        throw ApiError::invalidParameter(u"cwd is not a directory: "_s + command.target.path);
    return bashOutput(result, command);
}

BashCommand bashCommand(const Workspaces &workspaces, const QJsonObject &body)
{
    const QJsonValue command = body.value(u"command"_s);
    if (!command.isString() || command.toString().isEmpty())
        throw ApiError::invalidParameter(u"command must be a non-empty string"_s);
    const QJsonValue cwd = body.value(u"cwd"_s);
    if (!cwd.isUndefined() && !cwd.isNull() && !cwd.isString())
        throw ApiError::invalidParameter(u"cwd must be a string"_s);
    BashCommand bash;
    bash.command = command.toString();
    const QJsonValue timeoutValue = body.value(u"timeout"_s);
    if (!timeoutValue.isUndefined() && !timeoutValue.isNull()) {
        const double seconds = timeoutValue.toDouble(-1);
        if (!timeoutValue.isDouble() || seconds < 1 || seconds > MaxCommandTimeoutSeconds)
            throw ApiError::invalidParameter(
                u"timeout must be a number of seconds from 1 to %1"_s.arg(
                    MaxCommandTimeoutSeconds));
        bash.timeout = int(seconds);
    }
    const QString directory = workspaces.sandbox.directory();
    bash.cwd = cwd.toString();
    bash.target = bash.cwd.isEmpty() ? Target{directory, directory, std::nullopt}
                                     : locate(workspaces, bash.cwd);
    return bash;
}

QCoro::Task<HttpResponse>
executeBashCommand(Workspaces workspaces, std::shared_ptr<BashEventLog> events, HttpRequest request)
{
    const BashCommand command = bashCommand(workspaces, request.jsonObject());
    auto running = runAt(workspaces.sandbox, command.target, command.script(),
                         std::chrono::seconds(command.timeout));
    const WorkspaceCommandResult outcome = co_await std::move(running);
    const QJsonObject output = outputOrThrow(outcome, command);
    events->add(command.toJson());
    events->add(output);
    co_return HttpResponse::json(output);
}

// Runs a started command to its end; nobody awaits it, so it throws nothing.
QCoro::Task<> runStarted(Workspaces workspaces, std::shared_ptr<BashEventLog> events,
                         BashCommand command)
{
    auto running = runAt(workspaces.sandbox, command.target, command.script(),
                         std::chrono::seconds(command.timeout));
    const WorkspaceCommandResult outcome = co_await std::move(running);
    QJsonObject output;
    try {
        output = outputOrThrow(outcome, command);
    } catch (const ApiError &error) {
        // OpenHands' BashError.
        output = {{u"kind"_s, u"BashError"_s},
                  {u"id"_s, QUuid::createUuid().toString(QUuid::WithoutBraces)},
                  {u"timestamp"_s, toWireTime(QDateTime::currentMSecsSinceEpoch())},
                  {u"command_id"_s, command.id.toString(QUuid::WithoutBraces)},
                  {u"code"_s, error.code},
                  {u"detail"_s, error.detail}};
    }
    events->add(output);
}

HttpResponse startBashCommand(const Workspaces &workspaces,
                              const std::shared_ptr<BashEventLog> &events,
                              const HttpRequest &request)
{
    BashCommand command = bashCommand(workspaces, request.jsonObject());
    const QJsonObject json = command.toJson();
    events->add(json);
    runStarted(workspaces, events, std::move(command));
    return HttpResponse::json(json);
}

// GET /api/bash/bash_events/search: OpenHands' filters and pages.
HttpResponse searchBashEvents(const BashEventLog &events, const HttpRequest &request)
{
    const QString kind = request.query.queryItemValue(u"kind__eq"_s);
    if (!kind.isEmpty() && kind != u"BashCommand"_s && kind != u"BashOutput"_s)
        throw ApiError::invalidParameter(u"kind__eq must be BashCommand or BashOutput"_s);
    QString commandId = request.query.queryItemValue(u"command_id__eq"_s);
    if (!commandId.isEmpty()) {
        const QUuid id = QUuid::fromString(commandId);
        if (id.isNull())
            throw ApiError::invalidParameter(u"command_id__eq must be a UUID"_s);
        commandId = id.toString(QUuid::WithoutBraces);
    }
    const QString order = request.query.queryItemValue(u"sort_order"_s);
    if (!order.isEmpty() && order != u"TIMESTAMP"_s && order != u"TIMESTAMP_DESC"_s)
        throw ApiError::invalidParameter(u"sort_order must be TIMESTAMP or TIMESTAMP_DESC"_s);
    const int limit = request.intParam(u"limit"_s, 100, 1, 100);
    const std::optional<qint64> after = request.timeParam(u"timestamp__gte"_s);
    const std::optional<qint64> before = request.timeParam(u"timestamp__lt"_s);
    const int offset = request.intParam(u"page_id"_s, 0, 0, int(BashEventLog::MaxEvents));
    // Polling for what is new: outputs past a part already read (each command has one, 0).
    const bool byOrder = request.query.hasQueryItem(u"order__gt"_s);
    bool orderValid = true;
    const int orderAfter = byOrder ? request.stringParam(u"order__gt"_s).toInt(&orderValid) : 0;
    if (!orderValid)
        throw ApiError::invalidParameter(u"order__gt must be an integer"_s);
    QList<QJsonObject> matching;
    for (const QJsonObject &event : events.all()) {
        if (!kind.isEmpty() && event.value(u"kind"_s).toString() != kind)
            continue;
        const QString id = event.value(u"kind"_s) == u"BashCommand"_s
                               ? event.value(u"id"_s).toString()
                               : event.value(u"command_id"_s).toString();
        if (!commandId.isEmpty() && id != commandId)
            continue;
        const qint64 at =
            QDateTime::fromString(event.value(u"timestamp"_s).toString(), Qt::ISODateWithMs)
                .toMSecsSinceEpoch();
        if ((after && at < *after) || (before && at >= *before))
            continue;
        if (byOrder && (event.value(u"kind"_s) != u"BashOutput"_s ||
                        event.value(u"order"_s).toInt() <= orderAfter))
            continue;
        matching.append(event);
    }
    if (order == u"TIMESTAMP_DESC"_s)
        std::reverse(matching.begin(), matching.end());
    QJsonArray items;
    for (qsizetype i = offset; i < matching.size() && items.size() < limit; ++i)
        items.append(matching.at(i));
    const qsizetype next = offset + items.size();
    return HttpResponse::json(
        QJsonObject{{u"items"_s, items},
                    {u"next_page_id"_s, next < matching.size() ? QJsonValue(QString::number(next))
                                                               : QJsonValue::Null}});
}

QCoro::Task<HttpResponse> upload(Workspaces workspaces, HttpRequest request)
{
    const QString given = request.query.queryItemValue(u"path"_s, QUrl::FullyDecoded);
    const Target target = locate(workspaces, given);
    const QString path = target.path;
    const QList<Part> parts = formParts(request);
    if (parts.size() != 1)
        throw ApiError::invalidParameter(
            u"the body must hold exactly one file (the part `file`)"_s);
    const QByteArray encoded = parts.first().content.toBase64();
    qsizetype offset = 0;
    do {
        const bool first = offset == 0;
        const QString chunk = QString::fromLatin1(encoded.mid(offset, UploadChunkBase64Chars));
        offset += UploadChunkBase64Chars;
        QString command = pathCheck(path, target.root);
        if (first)
            command += u"[ -d \"$p\" ] && { printf 'a directory'; exit %1; }\n"
                       "mkdir -p -- \"$(dirname -- \"$p\")\" || exit 1\n"_s.arg(NotAFileExit);
        command += u"printf '%s' %1 | base64 -d %2 \"$p\" || exit 1\n"_s.arg(
            quoted(chunk), first ? u">"_s : u">>"_s);
        auto running = runOrThrow(workspaces.sandbox, target, command, FileCommandTimeout);
        const CommandResult result = co_await std::move(running);
        throwForExit(result, given);
    } while (offset < encoded.size());
    co_return HttpResponse::json(QJsonObject{{u"success"_s, true}});
}

QCoro::Task<HttpResponse> download(Workspaces workspaces, HttpRequest request)
{
    const qint64 maxBytes = workspaces.maxDownloadBytes;
    const QString given = request.query.queryItemValue(u"path"_s, QUrl::FullyDecoded);
    const Target target = locate(workspaces, given);
    const QString path = target.path;
    const QString check = pathCheck(path, target.root);
    auto sizing = runOrThrow(workspaces.sandbox, target,
                             check + u"[ -e \"$p\" ] || exit %1\n[ -f \"$p\" ] || exit %2\n"
                                     "stat -c %s -- \"$p\"\n"_s.arg(MissingExit)
                                         .arg(NotAFileExit),
                             FileCommandTimeout);
    const CommandResult sized = co_await std::move(sizing);
    throwForExit(sized, given);
    bool isNumber = false;
    const qint64 size = sized.output.trimmed().toLongLong(&isNumber);
    if (!isNumber)
        throw ApiError{500, u"file_transfer_failed"_s, u"cannot read the size of "_s + given};
    if (size > maxBytes)
        throw ApiError{
            413, u"file_too_large"_s,
            u"%1 has %2 bytes; downloads are limited to %3"_s.arg(given).arg(size).arg(maxBytes)};
    QByteArray content;
    content.reserve(size);
    for (qint64 offset = 0; offset < size; offset += DownloadChunkBytes) {
        const QString command =
            check + u"[ -f \"$p\" ] || exit %1\n"
                    "tail -c +%2 -- \"$p\" | head -c %3 | base64 -w0\n"_s.arg(MissingExit)
                        .arg(offset + 1)
                        .arg(DownloadChunkBytes);
        auto reading = runOrThrow(workspaces.sandbox, target, command, FileCommandTimeout);
        const CommandResult read = co_await std::move(reading);
        throwForExit(read, given);
        const auto decoded = QByteArray::fromBase64Encoding(
            read.output.trimmed().toLatin1(), QByteArray::AbortOnBase64DecodingErrors);
        if (!decoded)
            throw ApiError{500, u"file_transfer_failed"_s,
                           u"%1 did not come back intact"_s.arg(given)};
        content += *decoded;
        if (decoded.decoded.size() < DownloadChunkBytes)
            break; // it shrank meanwhile
    }
    HttpResponse response;
    response.contentType = "application/octet-stream";
    response.body = std::move(content);
    QString name = QFileInfo(path).fileName();
    name.replace(u'"', u'_');
    response.headers.append(
        {"Content-Disposition", "attachment; filename=\"" + name.toUtf8() + '"'});
    co_return response;
}

// A shell function running git in the sandbox: any owner's repository (a root server's
// commands run as a uid of their own), paths as they are, no pager.
const QString GitFunction =
    u"g() { git -c safe.directory='*' -c core.quotepath=off --no-pager \"$@\"; }\n"_s;
constexpr qint64 DiffSideLimitBytes = 360 * 1024; // both sides' base64 within the output limit
constexpr int TooLargeExit = 5;

// GET /api/git/changes?path=DIR: OpenHands' [{status, path}] of the repository holding DIR,
// against HEAD (the empty tree before the first commit), untracked files as ADDED; paths
// relative to the repository's top. Not a repository: [].
QCoro::Task<HttpResponse> gitChanges(Workspaces workspaces, HttpRequest request)
{
    const QString given = request.query.queryItemValue(u"path"_s, QUrl::FullyDecoded);
    const Target target = locate(workspaces, given);
    const QString command =
        pathCheck(target.path, target.root) + GitFunction +
        u"[ -e \"$p\" ] || exit %1\n[ -d \"$p\" ] || exit %2\ncd -- \"$p\" || exit 1\n"
        "g rev-parse --is-inside-work-tree >/dev/null 2>&1 || exit 0\n"
        "cd -- \"$(g rev-parse --show-toplevel)\" || exit 1\n"
        "if g rev-parse --verify -q HEAD >/dev/null; then ref=HEAD; "
        "else ref=$(g hash-object -t tree /dev/null); fi\n"
        "g diff --name-status -M \"$ref\" -- || exit 1\n"
        "g ls-files --others --exclude-standard | sed 's/^/A\\t/'\n"_s.arg(MissingExit)
            .arg(NotAFileExit);
    auto running = runOrThrow(workspaces.sandbox, target, command, FileCommandTimeout);
    const CommandResult result = co_await std::move(running);
    if (result.exitCode == NotAFileExit)
        throw ApiError::badRequest(u"Path is not a directory: "_s + given);
    throwForExit(result, given);
    QList<QPair<QString, QString>> changes; // path, status
    for (const QString &line : result.output.split(u'\n', Qt::SkipEmptyParts)) {
        const QStringList parts = line.split(u'\t');
        if (parts.size() < 2)
            continue;
        const QString status = parts.first();
        if ((status.startsWith(u'R') || status.startsWith(u'C')) && parts.size() >= 3) {
            if (status.startsWith(u'R'))
                changes.append({parts.at(1), u"DELETED"_s});
            changes.append({parts.at(2), u"ADDED"_s});
        } else if (status == u"A"_s) {
            changes.append({parts.at(1), u"ADDED"_s});
        } else if (status == u"D"_s) {
            changes.append({parts.at(1), u"DELETED"_s});
        } else {
            changes.append({parts.at(1), u"UPDATED"_s}); // M, T, U
        }
    }
    std::sort(changes.begin(), changes.end());
    QJsonArray items;
    for (const auto &[path, status] : std::as_const(changes))
        items.append(QJsonObject{{u"status"_s, status}, {u"path"_s, path}});
    co_return HttpResponse::json(items);
}

// GET /api/git/diff?path=FILE: OpenHands' {modified, original}: the file as it is and as HEAD
// has it, null where there is none (no repository: both null).
QCoro::Task<HttpResponse> gitDiff(Workspaces workspaces, HttpRequest request)
{
    const QString given = request.query.queryItemValue(u"path"_s, QUrl::FullyDecoded);
    const Target target = locate(workspaces, given);
    const QString command =
        pathCheck(target.path, target.root) + GitFunction +
        u"[ -d \"$p\" ] && exit %1\n"
        "cd -- \"$(dirname -- \"$p\")\" 2>/dev/null || exit 0\n"
        "g rev-parse --is-inside-work-tree >/dev/null 2>&1 || exit 0\n"
        "top=$(g rev-parse --show-toplevel) || exit 1\nrel=${p#\"$top\"/}\n"
        "if [ -f \"$p\" ]; then [ \"$(stat -c %s -- \"$p\")\" -le %2 ] || exit %3; "
        "printf 'M'; base64 -w0 -- \"$p\"; fi\nprintf '\\n'\n"
        "if s=$(g cat-file -s \"HEAD:$rel\" 2>/dev/null); then [ \"$s\" -le %2 ] || exit %3; "
        "printf 'O'; g show \"HEAD:$rel\" | base64 -w0; fi\nprintf '\\n'\n"_s.arg(NotAFileExit)
            .arg(DiffSideLimitBytes)
            .arg(TooLargeExit);
    auto running = runOrThrow(workspaces.sandbox, target, command, FileCommandTimeout);
    const CommandResult result = co_await std::move(running);
    if (result.exitCode == TooLargeExit)
        throw ApiError{413, u"file_too_large"_s,
                       u"%1 or its version in HEAD has more than %2 bytes"_s.arg(given).arg(
                           DiffSideLimitBytes)};
    throwForExit(result, given);
    QJsonObject diff{{u"modified"_s, QJsonValue::Null}, {u"original"_s, QJsonValue::Null}};
    for (const QString &line : result.output.split(u'\n', Qt::SkipEmptyParts)) {
        const QString key = line.startsWith(u'M')   ? u"modified"_s
                            : line.startsWith(u'O') ? u"original"_s
                                                    : QString();
        if (key.isEmpty())
            continue;
        const auto decoded = QByteArray::fromBase64Encoding(
            line.mid(1).toLatin1(), QByteArray::AbortOnBase64DecodingErrors);
        if (!decoded)
            throw ApiError{500, u"file_transfer_failed"_s,
                           u"%1 did not come back intact"_s.arg(given)};
        diff.insert(key, QString::fromUtf8(*decoded));
    }
    co_return HttpResponse::json(diff);
}

} // namespace

void WorkspaceController::registerRoutes(Router &router, WorkspaceSandbox &sandbox,
                                         ConversationService &service, ConversationStore &store,
                                         std::shared_ptr<BashEventLog> events,
                                         qint64 maxDownloadBytes)
{
    using Method = Router::Method;
    const Workspaces workspaces{sandbox, service, store, maxDownloadBytes};
    // The commands the bash-events sockets ask for.
    events->setStarter(
        [workspaces, weak = std::weak_ptr(events)](
            const QJsonObject &request, std::function<void(QString code, QString detail)> refused) {
            const std::shared_ptr<BashEventLog> log = weak.lock();
            if (!log)
                return;
            try {
                BashCommand command = bashCommand(workspaces, request);
                log->add(command.toJson());
                runStarted(workspaces, log, std::move(command));
            } catch (const ApiError &error) {
                refused(error.code, error.detail);
            }
        });
    router.addAsync(Method::Post, u"/api/bash/execute_bash_command"_s,
                    [workspaces, events](HttpRequest request) {
                        return executeBashCommand(workspaces, events, std::move(request));
                    });
    router.add(Method::Post, u"/api/bash/start_bash_command"_s,
               [workspaces, events](const HttpRequest &request) {
                   return startBashCommand(workspaces, events, request);
               });
    router.add(Method::Get, u"/api/bash/bash_events/search"_s,
               [events](const HttpRequest &request) { return searchBashEvents(*events, request); });
    router.add(Method::Get, u"/api/bash/bash_events/{id}"_s, [events](const HttpRequest &request) {
        const QUuid id = QUuid::fromString(request.args.value(0));
        const auto event =
            id.isNull() ? std::nullopt : events->find(id.toString(QUuid::WithoutBraces));
        if (!event)
            throw ApiError::notFound(u"No bash event "_s + request.args.value(0));
        return HttpResponse::json(*event);
    });
    // OpenHands' batch get: a JSON array of ids in the body of a GET; null for one not kept.
    router.add(Method::Get, u"/api/bash/bash_events/"_s, [events](const HttpRequest &request) {
        const QJsonDocument body = QJsonDocument::fromJson(request.body);
        if (!request.body.trimmed().isEmpty() && !body.isArray())
            throw ApiError::invalidParameter(u"The body must be a JSON array of event ids"_s);
        const QJsonArray ids = body.array();
        if (ids.size() > MaxBatchIds)
            throw ApiError::invalidParameter(
                u"At most %1 ids in one batch, not %2"_s.arg(MaxBatchIds).arg(ids.size()));
        QJsonArray found;
        for (const QJsonValue &id : ids) {
            if (!id.isString())
                throw ApiError::invalidParameter(u"Each id must be a string"_s);
            const QUuid uuid = QUuid::fromString(id.toString());
            const auto event =
                uuid.isNull() ? std::nullopt : events->find(uuid.toString(QUuid::WithoutBraces));
            found.append(event ? QJsonValue(*event) : QJsonValue());
        }
        return HttpResponse::json(found);
    });
    router.add(Method::Delete, u"/api/bash/bash_events"_s, [events](const HttpRequest &) {
        return HttpResponse::json(QJsonObject{{u"cleared_count"_s, qint64(events->clear())}});
    });
    router.addAsync(Method::Post, u"/api/file/upload"_s, [workspaces](HttpRequest request) {
        return upload(workspaces, std::move(request));
    });
    router.addAsync(Method::Get, u"/api/file/download"_s, [workspaces](HttpRequest request) {
        return download(workspaces, std::move(request));
    });
    router.addAsync(Method::Get, u"/api/git/changes"_s, [workspaces](HttpRequest request) {
        return gitChanges(workspaces, std::move(request));
    });
    router.addAsync(Method::Get, u"/api/git/diff"_s, [workspaces](HttpRequest request) {
        return gitDiff(workspaces, std::move(request));
    });
}

} // namespace AgentDeck
