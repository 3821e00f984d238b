#pragma once

#include "trash.h"

#include <QCoroTask>
#include <QHash>
#include <QString>
#include <QUuid>

#include <optional>

namespace AgentDeck {

// The size limit of the workspaces the server makes (--sandbox-disk), where the machine can
// enforce it: each workspace DATA/workspaces/ID is a file system of its own, a sparse ext4 image
// of that size (DATA/workspace-disks/ID.ext4, the server's, 0600, no blocks reserved) loop-mounted
// on it with nodev,nosuid. A command that fills it gets ENOSPC; the data dir's file system, and so
// the catalog and the other workspaces, keep their room. Without a quota, one sandbox filled the
// catalog's file system and every other conversation's writes got 503 until it was cleaned.
//
// An image is mounted when it is made, and again when its workspace is next used after the mount
// went (a reboot): never all at startup, which would take a mount per conversation. It is
// unmounted and removed with its workspace (a delete, an expiry, an orphan's sweep), and kept
// with it otherwise (an archive). Images made before stay mounted and limited when the server
// runs without the option. A loop mount needs root: a server that is not root, a machine without
// loop devices or mkfs.ext4, and a workspace the caller named have no limit, and runtime_info
// says why.
class WorkspaceDisks
{
public:
    // `fallback`: what guards the other writes where there is no limit (", the catalog keeps
    // ..."); empty when nothing does.
    WorkspaceDisks(QString workspacesDir, QString imagesDir, qint64 bytes, QString fallback);

    // The smallest image worth a workspace: mkfs.ext4 and its journal take a few MiB of it.
    static constexpr qint64 MinBytes = qint64(16) << 20;

    // Finds out whether this machine can make and mount images (root, loop devices, mkfs.ext4,
    // a trial image mounted in the images dir), and which images there are.
    void probe();
    // Why new workspaces get no limit; empty when they do (or no limit was asked for).
    QString whyNotEnforced() const { return m_whyNot; }
    bool enforced() const { return m_bytes > 0 && m_whyNot.isEmpty(); }
    // runtime_info.sandbox.disk_limit of a conversation's workspace: "16 MiB (enforced)" or
    // "not enforced: WHY; FALLBACK". From memory: no file is looked at.
    QString describe(const QUuid &id, bool ownedByServer) const;
    // /server_info's: what the workspaces the server makes from now on get.
    QString describeServer() const;

    // Makes the image of a workspace the server makes, and mounts it on `dir`; nothing when
    // limits are not enforced. Returns what failed; empty on success.
    QCoro::Task<QString> make(QUuid id, QString dir);
    // Mounts the image of `id`'s workspace `dir` if it has one that is not mounted. Returns what
    // failed; empty on success (also when there is no image).
    QString mount(const QUuid &id, const QString &dir);
    // Unmounts and removes the image of the workspace at `dir`, if it has one.
    bool drop(const QString &dir);
    // `remove` preceded by drop() for the workspaces the server makes.
    RemoveTree removing(RemoveTree remove);

    static QString sizeText(qint64 bytes);

private:
    QString imageOf(const QUuid &id) const;
    std::optional<QUuid> idOf(const QString &dir) const;

    QString m_workspacesDir;
    QString m_imagesDir;
    qint64 m_bytes;
    QString m_fallback;
    QString m_whyNot;
    QString m_mkfs;
    // The images there are, and their sizes.
    QHash<QUuid, qint64> m_images;
};

} // namespace AgentDeck
