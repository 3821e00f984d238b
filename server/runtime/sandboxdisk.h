#pragma once

#include <QString>
#include <QStringList>

#include <atomic>
#include <chrono>

namespace AgentDeck {

// The disk a sandbox's host dirs (its workspace and home) take. A dir that is a file system of its
// own (a workspace disk, --sandbox-disk) counts as its file system's use, which statfs() gives at
// once; any other is walked, adding up the blocks its files take (links are not followed, file
// systems mounted below it not entered), which takes as long as the tree is big: a caller
// measures on a worker thread, and as much less often as a walk takes longer (nextAfter()).
namespace SandboxDisk {

struct Measured
{
    qint64 bytes = 0;
    std::chrono::microseconds took{0};
    bool complete = true; // false: `stop` said to stop, or a dir could not be read
};

// Blocking. Stops early (incomplete) once `stop` is true.
Measured measure(const QStringList &dirs, const std::atomic<bool> &stop);

// When to measure again after a measurement that took `took`: at least `interval` later, and a
// hundred times as long as it took, so that walks take at most 1% of a core however big the
// trees are.
std::chrono::milliseconds nextAfter(std::chrono::microseconds took,
                                    std::chrono::milliseconds interval);

} // namespace SandboxDisk

} // namespace AgentDeck
