#include "conversationservice.h"

#include "apierror.h"
#include "execution/conversationrunner.h"
#include "logging.h"
#include "runtime/runtime.h"
#include "runtime/warmsandboxes.h"
#include "storage/replicastore.h"

#include <QCoroTimer>
#include <QDir>
#include <QDirIterator>
#include <QFileInfo>
#include <QPointer>

using namespace Qt::StringLiterals;

// ConversationService: deleting conversations (the row first, their files after), deletions
// another replica made, and the sweep of directories no conversation owns.

namespace AgentDeck {

namespace {

// When a directory was made: its birth time where the file system keeps one, else the last
// change of its entries.
qint64 bornAtMs(const QString &path)
{
    const QFileInfo info(path);
    const QDateTime born = info.birthTime();
    return (born.isValid() ? born : info.lastModified()).toMSecsSinceEpoch();
}

} // namespace

QCoro::Task<> ConversationService::remove(QUuid id)
{
    const ConversationInfo info = require(id);
    const QString runtimeDir = releaseLocalParts(id);
    // Marked first, in its own transaction: from here the conversation is gone to every request,
    // and a server stopped or killed before the end finishes the delete when it starts again.
    if (!m_store.beginRemoval(id, m_settings.leaseOwner))
        throw ApiError::notFound(u"Conversation %1 does not exist"_s.arg(toWireId(id)));
    Q_EMIT deleted(id);
    auto erasing = eraseRemoved(info, runtimeDir);
    co_await std::move(erasing);
}

QCoro::Task<> ConversationService::eraseRemoved(ConversationInfo info, QString runtimeDir)
{
    // One statement for a long history held the thread: 220,000 events took 5.3 s, with every
    // other request waiting.
    const QUuid id = info.id;
    QPointer<ConversationService> self(this);
    while (m_store.removeNewestEvents(id, DeleteBatch) == DeleteBatch) {
        auto turn = QCoro::sleepFor(std::chrono::milliseconds(0));
        co_await std::move(turn);
        if (!self || m_stopping)
            co_return; // the next start finishes it
    }
    m_store.remove(id);
    // The row is the source of truth and is gone; the files follow. A crash in between leaves a
    // directory nothing refers to, never a conversation without its workspace.
    removeFilesOf(info, runtimeDir);
    qCInfo(lcServer) << "deleted conversation" << id;
}

void ConversationService::resumeRemovals()
{
    // Alone on its catalog, a server takes every delete left: it began them all. Replicas take
    // those whose server stopped beating (at start, its own earlier instance's too); a live one
    // is still at its own.
    const auto left = m_store.takeOverRemovals(m_settings.leaseOwner, !m_settings.sharedCatalog,
                                               m_replicas.livenessWindow());
    for (const ConversationInfo &info : left) {
        qCInfo(lcServer) << "finishing the delete of" << info.id
                         << "that a stopped server left half done";
        eraseRemoved(info, releaseLocalParts(info.id));
    }
}

QCoro::Task<OrphanSweep> ConversationService::removeOrphanedDirs(QStringList roots,
                                                                 qint64 catalogCreatedMs)
{
    constexpr qsizetype Batch = 100;
    QPointer<ConversationService> self(this);
    OrphanSweep sweep;
    for (const QString &root : std::as_const(roots)) {
        QDirIterator entries(root, QDir::Dirs | QDir::NoDotAndDotDot);
        while (entries.hasNext()) {
            QList<QUuid> batch;
            while (batch.size() < Batch && entries.hasNext()) {
                if (const auto id = parseWireId(entries.next().section(u'/', -1)))
                    batch.append(*id);
            }
            // Checked when removed: a create makes its directory and its row in one turn.
            const QSet<QUuid> existing = m_store.existingIds(batch);
            for (const QUuid &id : std::as_const(batch)) {
                // A warm container's reservation: a conversation to be.
                if (existing.contains(id) || (m_settings.warm && m_settings.warm->isReserved(id)))
                    continue;
                const QString path = QDir(root).filePath(toWireId(id));
                // Made before the catalog, it is not this catalog's to remove: the catalog was
                // lost, emptied or replaced, and the files may be all that is left.
                if (bornAtMs(path) <= catalogCreatedMs) {
                    ++sweep.kept;
                    continue;
                }
                m_runtimes.release(id);
                if (m_settings.removeTree(path))
                    ++sweep.removed;
            }
            // A pause, not only a turn of the loop: a request takes several turns, and with the
            // next batch in each of them, search pages took 10-13 ms instead of 2-3 while a
            // sweep of 100,000 directories ran (now ~4 ms; the sweep takes ~3 s).
            auto turn = QCoro::sleepFor(std::chrono::milliseconds(2));
            co_await std::move(turn);
            if (!self || m_stopping)
                co_return sweep;
        }
    }
    co_return sweep;
}

QString ConversationService::releaseLocalParts(const QUuid &id)
{
    // A run starting, or an end waiting for storage, is of the conversation being deleted: a
    // conversation created again with the same id is not to be run, or ended, by them.
    if (ConversationLifecycle *lifecycle = m_lifecycles.find(id)) {
        if (ConversationRunner *runner = lifecycle->forget())
            runner->abandon();
        m_lifecycles.settle(id);
    }
    m_secrets.remove(id);
    m_commandSecrets.remove(id);
    m_runtimes.release(id);
    return m_runtimes.runtimeDirectory(id);
}

void ConversationService::removeFilesOf(const ConversationInfo &info, const QString &runtimeDir)
{
    if (!runtimeDir.isEmpty())
        m_settings.removeTree(runtimeDir);
    if (info.workspaceOwnedByServer && !info.workingDir.isEmpty())
        m_settings.removeTree(info.workingDir);
}

void ConversationService::forgetDeletedElsewhere(const QUuid &id)
{
    const QString runtimeDir = releaseLocalParts(id);
    if (!runtimeDir.isEmpty())
        m_settings.removeTree(runtimeDir);
    qCInfo(lcServer) << "conversation" << id << "was deleted by another replica";
    Q_EMIT deleted(id);
}

} // namespace AgentDeck
