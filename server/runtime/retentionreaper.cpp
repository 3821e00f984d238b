#include "retentionreaper.h"

#include "clock.h"
#include "logging.h"
#include "runtime.h"
#include "storage/conversationstore.h"
#include "storage/database.h"

namespace AgentDeck {

RetentionReaper::RetentionReaper(ConversationStore &store, RuntimeProvider &runtimes,
                                 const Clock &clock, std::chrono::milliseconds retention,
                                 RemoveTree removeTree, QObject *parent)
    : QObject(parent)
    , m_store(store)
    , m_runtimes(runtimes)
    , m_clock(clock)
    , m_retention(retention)
    , m_removeTree(std::move(removeTree))
{
    connect(&m_timer, &QTimer::timeout, this, [this] {
        try {
            runPass();
        } catch (const std::exception &error) {
            qCWarning(lcRuntime) << "retention pass failed:" << error.what();
        }
    });
}

void RetentionReaper::startPeriodic(std::chrono::milliseconds interval)
{
    m_timer.start(interval);
}

int RetentionReaper::runPass()
{
    const qint64 now = m_clock.nowMs();
    const qint64 inactiveBefore = now - m_retention.count();
    int freed = 0;
    int failed = 0;
    for (const ExpiryCandidate &candidate : m_store.expiryCandidates(inactiveBefore)) {
        if (m_keeper && m_keeper(candidate.id))
            continue;
        {
            // What onExpired writes (the history's event) commits with the expiry.
            Transaction transaction(m_store.database());
            if (!m_store.markExpired(candidate.id, inactiveBefore, now))
                continue;
            if (m_onExpired)
                m_onExpired(candidate.id);
            transaction.commit();
        }
        m_runtimes.release(candidate.id);
        bool removed = true;
        if (candidate.workspaceOwned && !candidate.workingDir.isEmpty())
            removed = m_removeTree(candidate.workingDir) && removed;
        if (const QString home = m_runtimes.runtimeDirectory(candidate.id); !home.isEmpty())
            removed = m_removeTree(home) && removed;
        if (removed) {
            m_store.markCleaned(candidate.id);
            ++freed;
        } else {
            ++failed;
        }
    }
    if (freed > 0 || failed > 0)
        qCInfo(lcRuntime) << "retention pass expired" << freed << "runtimes"
                          << (failed > 0 ? QStringLiteral("(%1 left for the next pass)").arg(failed)
                                         : QString());
    return freed;
}

} // namespace AgentDeck
