#include "workspacetargets.h"

#include "apierror.h"
#include "conversationservice.h"
#include "storage/conversationstore.h"

#include <QDir>
#include <QFileInfo>

using namespace Qt::StringLiterals;

namespace AgentDeck::WorkspaceTargets {

namespace {

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

} // namespace

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
        // Its sandbox is where its lease is: a second one here, on the same workspace, would
        // run beside the owner's.
        workspaces.service.requireSandboxHere(info->id);
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

} // namespace AgentDeck::WorkspaceTargets
