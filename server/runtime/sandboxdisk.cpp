#include "sandboxdisk.h"

#include <QByteArray>
#include <QFile>

#include <algorithm>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/statfs.h>

namespace AgentDeck::SandboxDisk {

namespace {

// nftw() takes a plain function: what it adds up is its thread's.
thread_local qint64 walked = 0;
thread_local const std::atomic<bool> *stopping = nullptr;

int add(const char *, const struct stat *status, int type, FTW *)
{
    if (type == FTW_F || type == FTW_D || type == FTW_SL)
        walked += qint64(status->st_blocks) * 512;
    return stopping->load(std::memory_order_relaxed) ? 1 : 0;
}

// The dir is a mount point: its device is not its parent's.
bool isFileSystemOfItsOwn(const QByteArray &dir)
{
    struct stat self
    {};
    struct stat parent
    {};
    return ::stat(dir.constData(), &self) == 0 &&
           ::stat(QByteArray(dir + "/..").constData(), &parent) == 0 &&
           self.st_dev != parent.st_dev;
}

} // namespace

Measured measure(const QStringList &dirs, const std::atomic<bool> &stop)
{
    const auto started = std::chrono::steady_clock::now();
    Measured measured;
    for (const QString &dir : dirs) {
        const QByteArray path = QFile::encodeName(dir);
        struct statfs fileSystem
        {};
        if (isFileSystemOfItsOwn(path) && ::statfs(path.constData(), &fileSystem) == 0) {
            measured.bytes +=
                qint64(fileSystem.f_blocks - fileSystem.f_bfree) * qint64(fileSystem.f_bsize);
            continue;
        }
        walked = 0;
        stopping = &stop;
        // Few descriptors: walks run beside a server that may be short of them.
        if (::nftw(path.constData(), add, 8, FTW_PHYS | FTW_MOUNT) != 0)
            measured.complete = false;
        measured.bytes += walked;
    }
    measured.took = std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::steady_clock::now() - started);
    return measured;
}

std::chrono::milliseconds nextAfter(std::chrono::microseconds took,
                                    std::chrono::milliseconds interval)
{
    return std::max(interval, std::chrono::duration_cast<std::chrono::milliseconds>(took * 100));
}

} // namespace AgentDeck::SandboxDisk
