#pragma once

#include <QString>
#include <QStringList>

#include <atomic>
#include <functional>
#include <memory>

namespace AgentDeck {

// Deletes directory trees without holding up the thread that discards them. Deleting a
// workspace of 100,000 files took 1.7 s, with every request waiting (the DELETE of a
// conversation, an orphan sweep, a retention pass).
//
// A tree is first renamed into the trash dir beside it (`.agentdeck-trash` in its parent, on
// the same file system, so the rename is instant): its path is free at once, for a
// conversation created again with the same id, and nothing outside the trash is touched
// afterwards. A thread of the trash's own then deletes it. Symbolic links are removed, never
// followed. What a stop or a crash leaves in a trash dir is deleted by emptyLeftovers() at the
// next start.
class Trash
{
public:
    // Deletes one tree that is in the trash; returns whether it is all gone. It should give up
    // soon after `stop` is set. The default deletes files as they come, directories last.
    using Deleter = std::function<bool(const QString &tree, const std::atomic_bool &stop)>;

    explicit Trash(Deleter deleter = {});
    // Stops after the file being deleted; the rest stays for the next start.
    ~Trash();

    static constexpr QLatin1StringView DirName{".agentdeck-trash"};

    // Takes the tree at `path` out of its place and deletes it in the background. False when it
    // could not be moved (a mount point, a parent that is not writable) and could not be deleted
    // here either. True when there is nothing at `path`.
    bool discard(const QString &path);
    // Deletes, in the background, what earlier instances left in the trash dirs of `roots`.
    void emptyLeftovers(const QStringList &roots);
    // Trees waiting or being deleted.
    int pending() const;

private:
    void enqueue(const QStringList &trees);

    struct Worker;
    std::unique_ptr<Worker> m_worker;
};

// How the services remove a tree: Trash::discard in the server, a synchronous delete where no
// trash is given.
using RemoveTree = std::function<bool(const QString &path)>;
bool removeTreeNow(const QString &path);

} // namespace AgentDeck
