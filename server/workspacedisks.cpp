#include "workspacedisks.h"

#include "logging.h"
#include "wiretypes.h"

#include <QCoroProcess>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QStandardPaths>

#include <fcntl.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {

constexpr std::chrono::seconds MkfsTimeout{60};

QString errorText(int error)
{
    return QString::fromLocal8Bit(std::strerror(error));
}

bool isMountPoint(const QString &dir)
{
    struct stat self
    {};
    struct stat parent
    {};
    return ::stat(QFile::encodeName(dir).constData(), &self) == 0 &&
           ::stat(QFile::encodeName(QFileInfo(dir).absolutePath()).constData(), &parent) == 0 &&
           self.st_dev != parent.st_dev;
}

// No blocks kept for root (the workspace is all the commands'), no discard of a file that is
// sparse already, inode tables left to read as the holes they are (mounted noinit_itable).
QStringList mkfsArguments(const QString &image)
{
    return {u"-q"_s, u"-F"_s, u"-m"_s, u"0"_s, u"-E"_s, u"nodiscard,lazy_itable_init=1"_s,
            u"--"_s, image};
}

// A sparse file of `bytes`, the server's alone; empty on success.
QString createImage(const QString &image, qint64 bytes)
{
    const int fd =
        ::open(QFile::encodeName(image).constData(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return u"cannot create %1: %2"_s.arg(image, errorText(errno));
    const bool sized = ::ftruncate(fd, bytes) == 0;
    const int why = errno;
    ::close(fd);
    if (sized)
        return {};
    QFile::remove(image);
    return u"cannot size %1: %2"_s.arg(image, errorText(why));
}

QString mkfsFailure(const QString &image, bool finished, QProcess &mkfs)
{
    if (finished && mkfs.exitStatus() == QProcess::NormalExit && mkfs.exitCode() == 0)
        return {};
    QFile::remove(image);
    const QString said = QString::fromLocal8Bit(mkfs.readAll()).trimmed().section(u'\n', 0, 0);
    return u"mkfs.ext4 could not make %1: %2"_s.arg(image, !finished        ? u"it did not finish"_s
                                                           : said.isEmpty() ? mkfs.errorString()
                                                                            : said);
}

// The loop device `image` is attached to already, if any: mounted in another mount namespace
// (a server before this one, under systemd). A second device on the same file would be two
// file systems writing one image; the same device mounted twice is one.
QString attachedLoop(const QString &image)
{
    const QDir block(u"/sys/block"_s);
    for (const QString &name : block.entryList({u"loop*"_s}, QDir::AllEntries | QDir::System)) {
        QFile backing(block.filePath(name + u"/loop/backing_file"_s));
        if (backing.open(QIODevice::ReadOnly) &&
            QFile::decodeName(backing.readAll().trimmed()) == image)
            return u"/dev/"_s + name;
    }
    return {};
}

// Attaches `image` to a free loop device that lets go of it once nothing holds it (its last
// mount gone). Returns the device, open, and its path in *device; -1 with *error otherwise.
int attachLoop(const QString &image, QString *device, QString *error)
{
    const int file = ::open(QFile::encodeName(image).constData(), O_RDWR | O_CLOEXEC);
    const int control = ::open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    int attached = -1;
    if (file < 0 || control < 0)
        *error = errorText(errno);
    // Another process may take the free device first: then the next one.
    for (int attempt = 0; attempt < 16 && file >= 0 && control >= 0 && attached < 0; ++attempt) {
        const int number = ::ioctl(control, LOOP_CTL_GET_FREE);
        if (number < 0) {
            *error = u"no free loop device: "_s + errorText(errno);
            break;
        }
        *device = u"/dev/loop%1"_s.arg(number);
        const int candidate = ::open(QFile::encodeName(*device).constData(), O_RDWR | O_CLOEXEC);
        if (candidate < 0) {
            *error = u"%1: %2"_s.arg(*device, errorText(errno));
            break;
        }
        loop_config config{};
        config.fd = uint32_t(file);
        config.info.lo_flags = LO_FLAGS_AUTOCLEAR;
        const QByteArray name = QFile::encodeName(image).left(LO_NAME_SIZE - 1);
        std::memcpy(config.info.lo_file_name, name.constData(), size_t(name.size()));
        if (::ioctl(candidate, LOOP_CONFIGURE, &config) == 0) {
            attached = candidate;
            break;
        }
        const int why = errno;
        ::close(candidate);
        if (why != EBUSY) {
            *error = u"%1: %2"_s.arg(*device, errorText(why));
            break;
        }
    }
    if (file >= 0)
        ::close(file);
    if (control >= 0)
        ::close(control);
    return attached;
}

// Mounts `image` on `dir`; empty on success.
QString mountImage(const QString &image, const QString &dir)
{
    QString device = attachedLoop(image);
    int held = -1;
    if (device.isEmpty()) {
        QString error;
        held = attachLoop(image, &device, &error);
        if (held < 0)
            return u"cannot attach %1 to a loop device (%2)"_s.arg(image, error);
    }
    const int mounted =
        ::mount(QFile::encodeName(device).constData(), QFile::encodeName(dir).constData(), "ext4",
                MS_NODEV | MS_NOSUID, "noinit_itable");
    const int why = errno;
    // The mount holds the device now; without one, this close lets it go.
    if (held >= 0)
        ::close(held);
    if (mounted != 0)
        return u"cannot mount %1 on %2: %3"_s.arg(image, dir, errorText(why));
    return {};
}

QString unmount(const QString &dir)
{
    // Lazily: a sandbox stopping may hold it a moment longer; the loop device goes with the last.
    while (isMountPoint(dir)) {
        if (::umount2(QFile::encodeName(dir).constData(), MNT_DETACH) != 0)
            return u"cannot unmount %1: %2"_s.arg(dir, errorText(errno));
    }
    return {};
}

} // namespace

WorkspaceDisks::WorkspaceDisks(QString workspacesDir, QString imagesDir, qint64 bytes,
                               QString fallback)
    : m_workspacesDir(QDir::cleanPath(workspacesDir))
    , m_imagesDir(QDir::cleanPath(imagesDir))
    , m_bytes(bytes)
    , m_fallback(std::move(fallback))
{}

void WorkspaceDisks::probe()
{
    const QDir images(m_imagesDir);
    for (const QFileInfo &file : images.entryInfoList({u"*.ext4"_s}, QDir::Files)) {
        if (const auto id = parseWireId(file.completeBaseName()))
            m_images.insert(*id, file.size());
    }
    m_mkfs = QStandardPaths::findExecutable(u"mkfs.ext4"_s);
    if (m_mkfs.isEmpty())
        m_mkfs = QStandardPaths::findExecutable(u"mkfs.ext4"_s, {u"/usr/sbin"_s, u"/sbin"_s});
    if (m_bytes <= 0) {
        m_whyNot = u"no --sandbox-disk"_s;
        return;
    }
    if (::geteuid() != 0) {
        m_whyNot = u"the server is not root (a loop mount needs root)"_s;
        return;
    }
    if (::access("/dev/loop-control", R_OK | W_OK) != 0) {
        m_whyNot = u"this machine has no loop devices (/dev/loop-control)"_s;
        return;
    }
    if (m_mkfs.isEmpty()) {
        m_whyNot = u"mkfs.ext4 (e2fsprogs) is not installed"_s;
        return;
    }
    // Root is not always allowed to mount (a container): a trial image says.
    QDir().mkpath(m_imagesDir);
    const QString trial = images.filePath(u".trial.ext4"_s);
    const QString trialDir = images.filePath(u".trial"_s);
    QFile::remove(trial);
    unmount(trialDir);
    QString failed = createImage(trial, qint64(1) << 20);
    if (failed.isEmpty()) {
        QProcess mkfs;
        mkfs.setProcessChannelMode(QProcess::MergedChannels);
        mkfs.start(m_mkfs, mkfsArguments(trial));
        const bool finished = mkfs.waitForFinished(
            int(std::chrono::duration_cast<std::chrono::milliseconds>(MkfsTimeout).count()));
        failed = mkfsFailure(trial, finished, mkfs);
    }
    if (failed.isEmpty() && QDir().mkpath(trialDir)) {
        failed = mountImage(trial, trialDir);
        if (failed.isEmpty())
            failed = unmount(trialDir);
    }
    QDir(m_imagesDir).rmdir(u".trial"_s);
    QFile::remove(trial);
    if (!failed.isEmpty())
        m_whyNot = u"a trial image could not be made and mounted: "_s + failed;
}

QString WorkspaceDisks::sizeText(qint64 bytes)
{
    for (const auto &[shift, unit] :
         {std::pair{30, u"GiB"_s}, std::pair{20, u"MiB"_s}, std::pair{10, u"KiB"_s}}) {
        if (bytes > 0 && bytes % (qint64(1) << shift) == 0)
            return u"%1 %2"_s.arg(bytes >> shift).arg(unit);
    }
    return u"%1 bytes"_s.arg(bytes);
}

QString WorkspaceDisks::describe(const QUuid &id, bool ownedByServer) const
{
    if (const auto image = m_images.constFind(id); ownedByServer && image != m_images.cend())
        return u"%1 (enforced)"_s.arg(sizeText(*image));
    const QString why =
        !ownedByServer ? u"the workspace is a directory the caller named, not one the server made"_s
        : enforced()   ? u"the workspace was made before the server had --sandbox-disk"_s
                       : m_whyNot;
    return u"not enforced: "_s + why + m_fallback;
}

QString WorkspaceDisks::describeServer() const
{
    return enforced() ? u"%1 (enforced)"_s.arg(sizeText(m_bytes))
                      : u"not enforced: "_s + m_whyNot + m_fallback;
}

QString WorkspaceDisks::imageOf(const QUuid &id) const
{
    return QDir(m_imagesDir).filePath(toWireId(id) + u".ext4"_s);
}

std::optional<QUuid> WorkspaceDisks::idOf(const QString &dir) const
{
    const QFileInfo workspace(QDir::cleanPath(dir));
    if (workspace.absolutePath() != m_workspacesDir)
        return std::nullopt;
    return parseWireId(workspace.fileName());
}

QCoro::Task<QString> WorkspaceDisks::make(QUuid id, QString dir)
{
    if (!enforced())
        co_return QString();
    const QString image = imageOf(id);
    if (QString failed = createImage(image, m_bytes); !failed.isEmpty()) {
        // Made by a create of the same id going on, or left by one: mounted if it is known.
        if (QFileInfo::exists(image))
            co_return mount(id, dir);
        co_return failed;
    }
    QProcess mkfs;
    mkfs.setProcessChannelMode(QProcess::MergedChannels);
    auto starting = qCoro(mkfs).start(m_mkfs, mkfsArguments(image));
    const bool started = co_await std::move(starting);
    auto finishing = qCoro(mkfs).waitForFinished(MkfsTimeout);
    const bool finished = started && co_await std::move(finishing);
    if (QString failed = mkfsFailure(image, finished, mkfs); !failed.isEmpty())
        co_return failed;
    m_images.insert(id, m_bytes);
    if (QString failed = mount(id, dir); !failed.isEmpty()) {
        m_images.remove(id);
        QFile::remove(image);
        co_return failed;
    }
    // The commands' own from the start: e2fsck makes lost+found again when it needs one.
    QDir(dir).rmdir(u"lost+found"_s);
    co_return QString();
}

QString WorkspaceDisks::mount(const QUuid &id, const QString &dir)
{
    if (!m_images.contains(id) || isMountPoint(dir))
        return {};
    if (!QDir().mkpath(dir))
        return u"cannot create %1"_s.arg(dir);
    return mountImage(imageOf(id), dir);
}

bool WorkspaceDisks::drop(const QString &dir)
{
    const auto id = idOf(dir);
    if (!id)
        return true;
    bool dropped = true;
    if (const QString failed = unmount(dir); !failed.isEmpty()) {
        qCWarning(lcServer).noquote() << failed;
        dropped = false;
    }
    const QString image = imageOf(*id);
    if (QFileInfo::exists(image) && !QFile::remove(image)) {
        qCWarning(lcServer) << "cannot remove the workspace's disk image" << image;
        dropped = false;
    }
    m_images.remove(*id);
    return dropped;
}

RemoveTree WorkspaceDisks::removing(RemoveTree remove)
{
    return [this, remove = std::move(remove)](const QString &path) {
        // Unmounted first: a mount point cannot be moved to the trash, nor removed.
        const bool dropped = drop(path);
        return remove(path) && dropped;
    };
}

} // namespace AgentDeck
