#include "trash.h"

#include "logging.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QUuid>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

using namespace Qt::StringLiterals;

namespace AgentDeck {

namespace {
namespace fs = std::filesystem;

// Deletes `root` and everything under it, files as they come and directories last, deepest
// first. Links are deleted as links. Directories are made writable first: a command may have
// left one read-only, and its entries could not be deleted. Returns whether it is all gone;
// false also when `stop` was set first.
bool deleteTree(const fs::path &root, const std::atomic_bool &stop)
{
    std::error_code error;
    // A link in the trash goes as a link: iterating it would empty what it points to.
    if (fs::is_symlink(fs::symlink_status(root, error)))
        return fs::remove(root, error);
    std::vector<fs::path> directories{root};
    fs::permissions(root, fs::perms::owner_all, fs::perm_options::add, error);
    for (fs::recursive_directory_iterator entry(root, error), end; !error && entry != end;
         entry.increment(error)) {
        if (stop.load(std::memory_order_relaxed))
            return false;
        std::error_code ignored;
        if (entry->is_directory(ignored) && !entry->is_symlink(ignored)) {
            fs::permissions(entry->path(), fs::perms::owner_all, fs::perm_options::add, ignored);
            directories.push_back(entry->path());
        } else {
            fs::remove(entry->path(), ignored);
        }
    }
    for (auto directory = directories.rbegin(); directory != directories.rend(); ++directory)
        fs::remove(*directory, error);
    return !fs::exists(fs::symlink_status(root, error));
}

bool deleteTreeAt(const QString &path, const std::atomic_bool &stop)
{
    return deleteTree(fs::path(QFile::encodeName(path).toStdString()), stop);
}
} // namespace

bool removeTreeNow(const QString &path)
{
    // QDir::removeRecursively() empties what a link points to, and then removes that too.
    if (QFileInfo(path).isSymLink())
        return QFile::remove(path);
    QDir dir(path);
    return !dir.exists() || dir.removeRecursively();
}

struct Trash::Worker
{
    explicit Worker(Deleter deleter)
        : deleter(std::move(deleter))
        , thread([this] { run(); })
    {}
    ~Worker()
    {
        {
            const std::lock_guard lock(mutex);
            stopping = true;
        }
        wake.notify_all();
        thread.join();
    }

    void run()
    {
        // Deleting is the disk's work, never more urgent than a request's.
        ::setpriority(PRIO_PROCESS, ::gettid(), 19);
        std::unique_lock lock(mutex);
        for (;;) {
            wake.wait(lock, [this] { return stopping || !queue.empty(); });
            if (stopping)
                return;
            const QString tree = queue.front();
            queue.pop_front();
            ++deleting;
            lock.unlock();
            if (!deleter(tree, stopping) && !stopping)
                qCWarning(lcServer)
                    << "could not delete all of" << tree << "; the next start tries again";
            lock.lock();
            --deleting;
        }
    }

    const Deleter deleter;
    std::mutex mutex;
    std::condition_variable wake;
    std::deque<QString> queue;
    int deleting = 0;
    std::atomic_bool stopping = false;
    std::thread thread; // last: it starts running at once
};

Trash::Trash(Deleter deleter)
    : m_worker(std::make_unique<Worker>(deleter ? std::move(deleter) : deleteTreeAt))
{}

Trash::~Trash() = default;

void Trash::enqueue(const QStringList &trees)
{
    {
        const std::lock_guard lock(m_worker->mutex);
        m_worker->queue.insert(m_worker->queue.end(), trees.cbegin(), trees.cend());
    }
    m_worker->wake.notify_one();
}

bool Trash::discard(const QString &path)
{
    const QFileInfo tree(path);
    if (!tree.exists() && !tree.isSymLink())
        return true;
    const QString trashDir = tree.absoluteDir().filePath(DirName);
    const QString target =
        QDir(trashDir).filePath(QUuid::createUuid().toString(QUuid::WithoutBraces));
    if (!QDir().mkpath(trashDir) || ::rename(QFile::encodeName(tree.absoluteFilePath()).constData(),
                                             QFile::encodeName(target).constData()) != 0) {
        qCWarning(lcServer).noquote()
            << u"cannot move %1 to the trash (%2); deleting it here"_s.arg(
                   path, QString::fromLocal8Bit(std::strerror(errno)));
        return removeTreeNow(path);
    }
    enqueue({target});
    return true;
}

void Trash::emptyLeftovers(const QStringList &roots)
{
    QStringList leftovers;
    for (const QString &root : roots) {
        const QDir trashDir(QDir(root).filePath(DirName));
        for (const QString &name : trashDir.entryList(QDir::AllEntries | QDir::Hidden |
                                                      QDir::System | QDir::NoDotAndDotDot))
            leftovers.append(trashDir.filePath(name));
    }
    if (leftovers.isEmpty())
        return;
    qCInfo(lcServer) << "deleting" << leftovers.size() << "trees left in the trash";
    enqueue(leftovers);
}

int Trash::pending() const
{
    const std::lock_guard lock(m_worker->mutex);
    return int(m_worker->queue.size()) + m_worker->deleting;
}

} // namespace AgentDeck
