#include "workspacetargets.h"

#include "apierror.h"
#include "conversationservice.h"
#include "runtime/shellwords.h"
#include "storage/conversationstore.h"

#include <QDir>
#include <QFile>
#include <QHash>
#include <QSet>

#include <cerrno>
#include <climits>
#include <functional>
#include <sys/stat.h>
#include <unistd.h>

using namespace Qt::StringLiterals;

namespace AgentDeck::WorkspaceTargets {

namespace {

// The most links one path may go through, as the kernel's (MAXSYMLINKS).
constexpr int MaxLinks = 40;

// 403 path_outside_workspace: a link in the workspace leads out of it.
ApiError leadsOut(const QString &path, const QString &workspace)
{
    return {403, u"path_outside_workspace"_s,
            u"%1: a symbolic link on the way leads out of the workspace %2"_s.arg(path, workspace)};
}

QString parentOf(const QString &dir)
{
    const qsizetype slash = dir.lastIndexOf(u'/');
    return slash <= 0 ? u"/"_s : dir.left(slash);
}

QString childOf(const QString &dir, const QString &name)
{
    return dir == u"/"_s ? QString(u'/' + name) : QString(dir + u'/' + name);
}

// The conversations whose workspace is a directory, by its real path. Rows are read for the
// directories asked about only, once each.
class WorkspaceIndex
{
public:
    explicit WorkspaceIndex(ConversationStore &store)
        : m_store(store)
    {}
    // Reads the rows of all of `dirs` at once.
    void prefetch(const QStringList &dirs)
    {
        QStringList unknown;
        for (const QString &dir : dirs) {
            if (!m_asked.contains(dir) && !unknown.contains(dir))
                unknown.append(dir);
        }
        for (qsizetype at = 0; at < unknown.size(); at += 100) {
            const QStringList batch = unknown.mid(at, 100);
            for (const QString &dir : batch)
                m_asked.insert(dir);
            for (const auto &[id, workingDir] : m_store.withWorkingDirs(batch)) {
                const QString real = WorkspaceRoots::realPath(workingDir);
                if (!real.isEmpty() && !m_owners[real].contains(id))
                    m_owners[real].append(id);
            }
        }
    }
    QList<QUuid> ownersOf(const QString &realDir)
    {
        prefetch({realDir});
        return m_owners.value(realDir);
    }

private:
    ConversationStore &m_store;
    QSet<QString> m_asked;
    QHash<QString, QList<QUuid>> m_owners;
};

// Where `given` (absolute, without `..`) leads: its real path, and the innermost workspace it
// entered on the way (empty: none). Links are followed one at a time as the kernel would; once
// the path has entered a workspace, a link that leads out of it is refused (leadsOut()). The
// missing rest of a path to be made is appended as written.
std::pair<QString, QString> walk(const QString &given, const QStringList &segments,
                                 const std::function<bool(const QString &)> &isWorkspace)
{
    QString current = u"/"_s;
    QString workspace;
    QStringList pending = segments;
    int links = 0;
    bool missing = false; // from here on the path is not there (yet): the rest as written
    while (!pending.isEmpty()) {
        const QString name = pending.takeFirst();
        if (name.isEmpty() || name == u"."_s)
            continue;
        if (name == u".."_s) { // from a link's target
            if (!workspace.isEmpty() && current == workspace)
                throw leadsOut(given, workspace);
            current = parentOf(current);
            continue;
        }
        const QString next = childOf(current, name);
        if (missing) {
            current = next;
            continue;
        }
        const QByteArray encoded = QFile::encodeName(next);
        struct stat status
        {};
        if (::lstat(encoded.constData(), &status) != 0) {
            // Not to be resolved in a workspace: refused. Before one, what the path names is
            // judged by the roots (a dir of the host the server may not enter, say).
            if (errno != ENOENT && errno != ENOTDIR && !workspace.isEmpty())
                throw refused(given, u"it cannot be resolved"_s);
            missing = true;
            current = next;
            continue;
        }
        if (!S_ISLNK(status.st_mode)) {
            current = next;
            if (S_ISDIR(status.st_mode) && isWorkspace(current))
                workspace = current; // within the one before: the walk never left it
            continue;
        }
        if (++links > MaxLinks)
            throw refused(given, u"it goes through too many symbolic links"_s);
        QByteArray target(PATH_MAX, Qt::Uninitialized);
        const ssize_t length = ::readlink(encoded.constData(), target.data(), target.size());
        if (length <= 0 || length >= target.size())
            throw refused(given, u"it cannot be resolved"_s);
        target.truncate(length);
        const QString to = QFile::decodeName(target);
        QStringList parts = to.split(u'/', Qt::SkipEmptyParts);
        if (to.startsWith(u'/')) {
            if (workspace.isEmpty()) {
                current = u"/"_s;
            } else {
                // Named by its real path, the workspace is not left on the way.
                const QStringList inside = workspace.split(u'/', Qt::SkipEmptyParts);
                if (parts.mid(0, inside.size()) != inside)
                    throw leadsOut(given, workspace);
                parts = parts.mid(inside.size());
                current = workspace;
            }
        }
        pending = parts + pending;
    }
    return {current, workspace};
}

} // namespace

ApiError refused(const QString &path, const QString &why)
{
    return {403, u"path_refused"_s, u"%1: %2"_s.arg(path, why)};
}

Target locate(const Workspaces &workspaces, const QString &given)
{
    if (given.isEmpty())
        throw ApiError::invalidParameter(u"path is required"_s);
    if (!QDir::isAbsolutePath(given))
        throw ApiError::badRequest(u"Path must be absolute"_s);
    const QStringList segments = given.split(u'/', Qt::SkipEmptyParts);
    if (segments.contains(u".."_s))
        throw refused(given, u"a path may not contain `..`"_s);
    // The rows of the workspaces on the way, at once: the directories the path names, as
    // written and as resolved.
    WorkspaceIndex index(workspaces.store);
    QStringList onTheWay;
    for (QString dir = QDir::cleanPath(given); dir != u"/"_s; dir = parentOf(dir)) {
        onTheWay.append(dir);
        if (const QString real = WorkspaceRoots::realPath(dir); !real.isEmpty())
            onTheWay.append(real);
    }
    index.prefetch(onTheWay);
    const QString server = workspaces.sandbox.directory();
    const auto [path, root] = walk(given, segments, [&](const QString &dir) {
        return dir == server || !index.ownersOf(dir).isEmpty();
    });
    // A workspace given before its root was taken away is out of reach too.
    if (!workspaces.roots.holds(path))
        throw workspaces.roots.outside(given);
    if (root.isEmpty())
        throw refused(given, u"it is neither inside a conversation's workspace nor inside the "
                             "server workspace (%1)"_s.arg(server));
    std::optional<ConversationInfo> archived;
    for (const QUuid &id : index.ownersOf(root)) {
        std::optional<ConversationInfo> info;
        try {
            info = workspaces.service.get(id);
        } catch (const ApiError &) {
            continue; // removed meanwhile
        }
        if (info->isArchived()) {
            archived = info;
            continue;
        }
        // Its sandbox is where its lease is: a second one here, on the same workspace, would
        // run beside the owner's.
        workspaces.service.requireSandboxHere(info->id);
        return {path, root, info};
    }
    if (archived)
        throw ApiError::conflict(u"conversation_archived"_s,
                                 u"%1 is in the workspace of archived conversation %2"_s.arg(
                                     given, toWireId(archived->id)));
    if (root == server)
        return {path, server, std::nullopt};
    throw refused(given, u"the conversation whose workspace holds it is gone"_s);
}

QCoro::Task<WorkspaceCommandResult> runAt(WorkspaceSandbox &sandbox, const Target &target,
                                          QString command, std::chrono::milliseconds timeout)
{
    if (target.conversation)
        return sandbox.runIn(*target.conversation, std::move(command), timeout);
    return sandbox.run(std::move(command), timeout);
}

QString pathCheck(const QString &path, const QString &root)
{
    return shellPathCheck(path, root, u"%s is outside the workspace"_s, RefusedExit);
}

} // namespace AgentDeck::WorkspaceTargets
