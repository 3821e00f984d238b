// Runtime retention with an injected clock, provider and file remover.
#include "fakes.h"
#include "runtime/retentionreaper.h"
#include "storage/conversationstore.h"
#include "storage/database.h"

#include <QDir>
#include <QTemporaryDir>
#include <QTest>

using namespace Qt::StringLiterals;
using namespace AgentDeck;
using namespace AgentDeck::Testing;

namespace {
constexpr qint64 Hour = 3600 * 1000;

class RecordingProvider final : public RuntimeProvider
{
public:
    QCoro::Task<RuntimeAcquisition> acquire(ConversationInfo) override { co_return {}; }
    void release(const QUuid &id) override { released.append(id); }
    void describe(QList<ConversationInfo> &) const override {}
    QString runtimeDirectory(const QUuid &id) const override { return root + u'/' + toWireId(id); }

    QList<QUuid> released;
    QString root;
};
} // namespace

class RetentionTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void init()
    {
        m_dir = std::make_unique<QTemporaryDir>();
        QString error;
        m_db = Database::openSqlite(m_dir->filePath(u"db"_s), &error);
        QVERIFY(m_db);
        m_store = std::make_unique<ConversationStore>(*m_db);
        m_provider.root = m_dir->filePath(u"runtimes"_s);
        m_provider.released.clear();
        m_clock.set(100 * Hour);
    }
    void cleanup()
    {
        m_store.reset();
        m_db.reset();
        m_dir.reset();
    }

    void expiresOnlyInactiveRestingRuntimes()
    {
        const QUuid old = add(u"old"_s, 10 * Hour, ExecutionStatus::Finished, true);
        const QUuid supplied = add(u"supplied"_s, 10 * Hour, ExecutionStatus::Idle, false);
        const QUuid recent = add(u"recent"_s, 99 * Hour, ExecutionStatus::Finished, true);
        const QUuid running = add(u"running"_s, 10 * Hour, ExecutionStatus::Running, true);
        const QUuid waiting =
            add(u"waiting"_s, 10 * Hour, ExecutionStatus::WaitingForConfirmation, true);
        m_store->append(old, {Event::pause()}, std::nullopt, 10 * Hour);

        RetentionReaper reaper(*m_store, m_provider, m_clock, std::chrono::hours(24));
        QCOMPARE(reaper.runPass(), 2);

        QVERIFY(expired(old));
        QVERIFY(expired(supplied));
        QVERIFY(!expired(recent));
        QVERIFY(!expired(running));
        QVERIFY(!expired(waiting));
        QCOMPARE(QSet<QUuid>(m_provider.released.cbegin(), m_provider.released.cend()),
                 (QSet<QUuid>{old, supplied}));
        QVERIFY(!QDir(workspace(u"old"_s)).exists());
        QVERIFY(!QDir(m_provider.runtimeDirectory(old)).exists());
        QVERIFY(QDir(workspace(u"supplied"_s)).exists()); // never deleted
        QVERIFY(QDir(workspace(u"recent"_s)).exists());
        QCOMPARE(m_store->history(old, 0).size(), 1); // history stays

        const auto info = m_store->find(old);
        QVERIFY(info->runtime.status == RuntimeStatus::Missing);
        QVERIFY(!info->runtime.canResume);
        QCOMPARE(info->runtime.error->code, u"runtime_expired"_s);
        // A second pass has nothing left to do.
        QCOMPARE(reaper.runPass(), 0);
    }

    void aPassInterruptedBetweenMarkAndDeletionIsFinishedByTheNext()
    {
        const QUuid id = add(u"old"_s, 10 * Hour, ExecutionStatus::Idle, true);
        bool failing = true;
        QStringList attempts;
        RetentionReaper reaper(*m_store, m_provider, m_clock, std::chrono::hours(24),
                               [&](const QString &path) {
                                   attempts.append(path);
                                   return !failing && QDir(path).removeRecursively();
                               });
        QCOMPARE(reaper.runPass(), 0);
        QVERIFY(expired(id)); // marked first
        QVERIFY(QDir(workspace(u"old"_s)).exists());

        // The conversation's activity since does not undo the mark; the next pass deletes.
        failing = false;
        QCOMPARE(reaper.runPass(), 1);
        QVERIFY(!QDir(workspace(u"old"_s)).exists());
        QCOMPARE(reaper.runPass(), 0);
    }

    void archiveAndUnarchiveLeaveExpiryAlone()
    {
        const QUuid id = add(u"old"_s, 10 * Hour, ExecutionStatus::Idle, true);
        RetentionReaper reaper(*m_store, m_provider, m_clock, std::chrono::hours(24));
        QCOMPARE(reaper.runPass(), 1);
        const RuntimeInfo before = m_store->find(id)->runtime;
        QVERIFY(m_store->setArchived(id, m_clock.nowMs()));
        QVERIFY(m_store->find(id)->runtime == before);
        QVERIFY(m_store->setArchived(id, std::nullopt));
        QVERIFY(m_store->find(id)->runtime == before);
    }

private:
    QString workspace(const QString &name) const { return m_dir->filePath(u"ws-"_s + name); }

    QUuid add(const QString &name, qint64 updatedMs, ExecutionStatus status, bool owned)
    {
        ConversationInfo info{QUuid::createUuid(), name};
        info.createdAt = info.updatedAt = QDateTime::fromMSecsSinceEpoch(updatedMs, Qt::UTC);
        info.executionStatus = status;
        info.agentKind = u"shell"_s;
        info.workingDir = workspace(name);
        info.workspaceOwnedByServer = owned;
        QDir().mkpath(info.workingDir);
        QDir().mkpath(m_provider.runtimeDirectory(info.id) + u"/home"_s);
        m_store->insert(info);
        return info.id;
    }
    bool expired(const QUuid &id)
    {
        const auto info = m_store->find(id);
        return info->runtime.error && info->runtime.error->code == u"runtime_expired"_s;
    }

    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<Database> m_db;
    std::unique_ptr<ConversationStore> m_store;
    RecordingProvider m_provider;
    FakeClock m_clock;
};

QTEST_GUILESS_MAIN(RetentionTest)
#include "tst_retention.moc"
