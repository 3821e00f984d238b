#pragma once

#include <QString>
#include <QStringList>

#include <utility>

namespace AgentDeck {

struct ApiError;

// The directories under which a client may name a path (a conversation's working_dir, a path of
// /api/file, /api/git, a cwd of /api/bash): the server workspace, the workspaces the server makes
// for its conversations (DATA/workspaces) and those the operator adds (--workspace-root). Held
// as real paths: a path lies under a root when its real path does.
class WorkspaceRoots
{
public:
    WorkspaceRoots() = default;
    // The real paths of `dirs`; one that does not exist is left out.
    explicit WorkspaceRoots(const QStringList &dirs);

    const QStringList &dirs() const { return m_dirs; }
    // Whether the real path `real` is one of the roots or lies under one.
    bool holds(const QString &real) const;
    // 422 workspace_outside_roots for `given`, naming the roots.
    ApiError outside(const QString &given) const;
    // The other names of the real dir `real` through roots named by a link (`/tmp/ws` for
    // `/srv/ws` when the operator named that root so): a sandbox shows its workspace by them too.
    QStringList aliasesOf(const QString &real) const;

    // `path` (absolute) as the kernel resolves it: the part that exists with its links and `..`
    // followed, the missing rest appended (its `..` taken as written, as mkdir would). Empty
    // when a part that is there cannot be resolved (a link to nothing, a dir it may not enter).
    static QString realPath(const QString &path);
    // Whether `path` is `dir` or lies under it (both real, clean).
    static bool isInside(const QString &path, const QString &dir);

private:
    QStringList m_dirs;
    QList<std::pair<QString, QString>> m_named; // as named (absolute, clean), real
};

} // namespace AgentDeck
