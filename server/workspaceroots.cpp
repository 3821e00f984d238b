#include "workspaceroots.h"

#include "apierror.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <sys/stat.h>

using namespace Qt::StringLiterals;

namespace AgentDeck {

WorkspaceRoots::WorkspaceRoots(const QStringList &dirs)
{
    for (const QString &dir : dirs) {
        if (dir.isEmpty() || !QFileInfo(dir).isDir())
            continue;
        const QString named = QDir::cleanPath(QFileInfo(dir).absoluteFilePath());
        const QString real = realPath(named);
        if (real.isEmpty())
            continue;
        if (!m_dirs.contains(real))
            m_dirs.append(real);
        if (named != real)
            m_named.append({named, real});
    }
}

bool WorkspaceRoots::holds(const QString &real) const
{
    return std::any_of(m_dirs.cbegin(), m_dirs.cend(),
                       [&real](const QString &dir) { return isInside(real, dir); });
}

ApiError WorkspaceRoots::outside(const QString &given) const
{
    ApiError error{422, u"workspace_outside_roots"_s,
                   u"%1 is not under a workspace root (%2); an operator adds one with "
                   "--workspace-root"_s.arg(given, m_dirs.join(u", "_s))};
    error.extra.insert(u"workspace_roots"_s, QJsonArray::fromStringList(m_dirs));
    return error;
}

QStringList WorkspaceRoots::aliasesOf(const QString &real) const
{
    QStringList aliases;
    for (const auto &[named, root] : m_named) {
        if (isInside(real, root)) {
            const QString alias = QDir::cleanPath(named + real.mid(root.size()));
            if (alias != real && !aliases.contains(alias))
                aliases.append(alias);
        }
    }
    return aliases;
}

QString WorkspaceRoots::realPath(const QString &path)
{
    // realpath(3) of the longest part that exists, taken as written: `root/link/..` is the
    // parent of where the link leads, not `root`, to the kernel and so to the sandbox.
    QStringList rest;
    QString existing = path;
    for (;;) {
        char resolved[PATH_MAX];
        const QByteArray name = QFile::encodeName(existing);
        if (::realpath(name.constData(), resolved))
            return QDir::cleanPath(QFile::decodeName(resolved) + u'/' + rest.join(u'/'));
        // Something is there and cannot be resolved (a link to nothing, a dir not to be
        // entered): where it leads is not known.
        struct stat status
        {};
        if (::lstat(name.constData(), &status) == 0 || (errno != ENOENT && errno != ENOTDIR))
            return {};
        const qsizetype slash = existing.lastIndexOf(u'/');
        if (slash < 0)
            return QDir::cleanPath(path);
        rest.prepend(existing.mid(slash + 1));
        existing = slash == 0 ? u"/"_s : existing.left(slash);
    }
}

bool WorkspaceRoots::isInside(const QString &path, const QString &dir)
{
    return path == dir || dir == u"/"_s || path.startsWith(dir + u'/');
}

} // namespace AgentDeck
