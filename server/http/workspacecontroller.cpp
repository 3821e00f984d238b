#include "apierror.h"
#include "controllers.h"
#include "conversationservice.h"
#include "router.h"
#include "runtime/shellwords.h"
#include "runtime/workspacesandbox.h"
#include "storage/conversationstore.h"
#include "wiretypes.h"
#include "workspacetargets.h"

#include <QFileInfo>
#include <QJsonArray>
#include <QJsonObject>

#include <algorithm>
#include <memory>

using namespace Qt::StringLiterals;

namespace AgentDeck {

using namespace WorkspaceTargets;

namespace {

// A command line is one argument of `bash -c` (at most 128 KiB on Linux): uploads go in base64
// chunks well under that. Downloads come back in chunks whose base64 stays under the 1 MiB of
// output a command keeps.
constexpr qsizetype UploadChunkBase64Chars = 96 * 1024;
constexpr qint64 DownloadChunkBytes = 512 * 1024;
constexpr std::chrono::seconds FileCommandTimeout{60};

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

// A container's image may have no git: said, rather than taken for "not a repository".
constexpr int NoGitExit = 6;

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
    if (result.exitCode == NoGitExit)
        throw ApiError{404, u"not_offered"_s,
                       u"git is not installed where the commands of %1 run (the sandbox's "
                       "image has none)"_s.arg(path)};
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
            shellQuoted(chunk), first ? u">"_s : u">>"_s);
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
    // The file goes out a part at a time as the client reads it, each part read in the sandbox
    // when the one before is mostly sent: never all of it in the server's memory. One that
    // changed size meanwhile ends the connection short (the length is in the head).
    HttpResponse response;
    response.contentType = "application/octet-stream";
    response.streamedLength = size;
    response.nextPart = [workspaces, target, check, given,
                         offset = qint64(0)]() mutable -> QCoro::Task<std::optional<QByteArray>> {
        const QString command =
            check + u"[ -f \"$p\" ] || exit %1\n"
                    "tail -c +%2 -- \"$p\" | head -c %3 | base64 -w0\n"_s.arg(MissingExit)
                        .arg(offset + 1)
                        .arg(DownloadChunkBytes);
        auto reading = runOrThrow(workspaces.sandbox, target, command, FileCommandTimeout);
        const CommandResult read = co_await std::move(reading);
        throwForExit(read, given);
        auto decoded = QByteArray::fromBase64Encoding(read.output.trimmed().toLatin1(),
                                                      QByteArray::AbortOnBase64DecodingErrors);
        if (!decoded)
            co_return std::nullopt;
        offset += decoded.decoded.size();
        co_return std::move(decoded.decoded);
    };
    QString name = QFileInfo(path).fileName();
    name.replace(u'"', u'_');
    response.headers.append(
        {"Content-Disposition", "attachment; filename=\"" + name.toUtf8() + '"'});
    co_return response;
}

// A shell function running git in the sandbox: any owner's repository (a root server's
// commands run as a uid of their own), paths as they are, no pager.
constexpr qint64 DiffSideLimitBytes = 360 * 1024; // both sides' base64 within the output limit
constexpr int TooLargeExit = 5;
const QString GitFunction =
    u"command -v git >/dev/null 2>&1 || exit %1\n"
    "g() { git -c safe.directory='*' -c core.quotepath=off --no-pager \"$@\"; }\n"_s.arg(NoGitExit);

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
                                         qint64 maxDownloadBytes, const WorkspaceRoots &roots)
{
    using Method = Router::Method;
    const Workspaces workspaces{sandbox, service, store, maxDownloadBytes, roots};
    registerBashRoutes(router, workspaces, std::move(events));
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
