#include "mountaliases.h"

#include <QFile>
#include <QFileInfo>

#include <sys/stat.h>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {
struct Mount
{
    QByteArray device; // major:minor
    QString root;      // the mounted directory, as a path within its file system
    QString point;     // where it is mounted
};

// mountinfo writes space, tab, newline and backslash in paths as octal escapes (\040).
QString unescaped(const QByteArray &field)
{
    QByteArray path;
    path.reserve(field.size());
    for (qsizetype i = 0; i < field.size(); ++i) {
        if (field[i] == '\\' && i + 3 < field.size()) {
            bool ok = false;
            const int code = field.mid(i + 1, 3).toInt(&ok, 8);
            if (ok) {
                path += char(code);
                i += 3;
                continue;
            }
        }
        path += field[i];
    }
    return QFile::decodeName(path);
}

QList<Mount> readMounts(const QString &mountInfo)
{
    QFile file(mountInfo);
    QList<Mount> mounts;
    if (!file.open(QIODevice::ReadOnly))
        return mounts;
    for (const QByteArray &line : file.readAll().split('\n')) {
        // ID PARENT MAJOR:MINOR ROOT MOUNT-POINT OPTIONS ...
        const QList<QByteArray> fields = line.split(' ');
        if (fields.size() >= 5)
            mounts.append({fields[2], unescaped(fields[3]), unescaped(fields[4])});
    }
    return mounts;
}

// `path` beneath `base`, as the rest of it ("" for base itself); nullopt when not beneath.
std::optional<QString> beneath(const QString &path, const QString &base)
{
    if (base == u"/"_s)
        return path == u"/"_s ? QString() : path;
    if (path == base)
        return QString();
    if (path.startsWith(base) && path.at(base.size()) == u'/')
        return path.mid(base.size());
    return std::nullopt;
}

QString joined(const QString &base, const QString &rest)
{
    if (rest.isEmpty())
        return base;
    return base == u"/"_s ? rest : base + rest;
}

bool sameInode(const QString &path, const struct stat &target)
{
    struct stat status
    {};
    return ::stat(QFile::encodeName(path).constData(), &status) == 0 &&
           status.st_dev == target.st_dev && status.st_ino == target.st_ino;
}
} // namespace

QStringList mountAliasesOf(const QString &dir, const QString &mountInfo)
{
    const QString canonical = QFileInfo(dir).canonicalFilePath();
    struct stat target
    {};
    if (canonical.isEmpty() || ::stat(QFile::encodeName(canonical).constData(), &target) != 0)
        return {};
    const QList<Mount> mounts = readMounts(mountInfo);
    // The mount the directory is reached through: the last of those with the longest point
    // above it (a later mount on the same point covers an earlier one).
    const Mount *home = nullptr;
    for (const Mount &mount : mounts) {
        if (beneath(canonical, mount.point) && (!home || mount.point.size() >= home->point.size()))
            home = &mount;
    }
    if (!home)
        return {};
    // The directory as a path within its file system.
    const QString inFileSystem = joined(home->root, *beneath(canonical, home->point));
    QStringList aliases;
    for (const Mount &mount : mounts) {
        if (mount.device != home->device)
            continue;
        const std::optional<QString> rest = beneath(inFileSystem, mount.root);
        if (!rest)
            continue;
        const QString alias = joined(mount.point, *rest);
        if (alias != canonical && !aliases.contains(alias) && sameInode(alias, target))
            aliases.append(alias);
    }
    return aliases;
}

} // namespace AgentDeck
