// The trash: a discarded tree leaves its place at once and is deleted in a thread of its own,
// links are not followed, read-only directories do not stop it, and what a stop or a crash
// left behind goes at the next start.
#include "trash.h"

#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include <condition_variable>
#include <mutex>

using namespace Qt::StringLiterals;
using namespace AgentDeck;

namespace {
// `files` empty files in directories of 100 under `path`.
bool makeTree(const QString &path, int files)
{
    for (int i = 0; i < files; ++i) {
        const QString dir = path + u"/d%1"_s.arg(i / 100);
        if (i % 100 == 0 && !QDir().mkpath(dir))
            return false;
        QFile file(dir + u"/f%1"_s.arg(i));
        if (!file.open(QIODevice::WriteOnly))
            return false;
    }
    return true;
}

bool isEmptyDir(const QString &path)
{
    return QDir(path).isEmpty(QDir::AllEntries | QDir::Hidden | QDir::System |
                              QDir::NoDotAndDotDot);
}
} // namespace

class TrashTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void aDiscardedTreeLeavesItsPlaceAtOnceAndGoes()
    {
        QTemporaryDir root;
        const QString workspace = root.filePath(u"workspaces/w1"_s);
        QVERIFY(makeTree(workspace, 300));
        // A directory a command left read-only, and a link out of the workspace.
        QVERIFY(QDir().mkpath(workspace + u"/locked/inner"_s));
        QVERIFY(QFile(workspace + u"/locked/inner/file"_s).open(QIODevice::WriteOnly));
        for (const QString &dir : {u"/locked/inner"_s, u"/locked"_s})
            QVERIFY(QFile::setPermissions(workspace + dir, QFile::ReadOwner | QFile::ExeOwner));
        const QString outside = root.filePath(u"outside"_s);
        QVERIFY(makeTree(outside, 3));
        QVERIFY(QFile::link(outside, workspace + u"/link"_s));

        Trash trash;
        QVERIFY(trash.discard(workspace));
        QVERIFY(!QFileInfo::exists(workspace));
        const QString trashDir = root.filePath(u"workspaces/"_s + Trash::DirName);
        QTRY_VERIFY_WITH_TIMEOUT(trash.pending() == 0 && isEmptyDir(trashDir), 30'000);
        QVERIFY(QFileInfo::exists(outside + u"/d0/f2"_s));
        QVERIFY(trash.discard(workspace)); // nothing there: nothing to do

        // A workspace that is itself a link (a command replaced it) goes as a link.
        QVERIFY(QFile::link(outside, workspace));
        QVERIFY(trash.discard(workspace));
        QVERIFY(!QFileInfo(workspace).isSymLink());
        QTRY_VERIFY_WITH_TIMEOUT(trash.pending() == 0 && isEmptyDir(trashDir), 30'000);
        QVERIFY(QFileInfo::exists(outside + u"/d0/f2"_s));
    }

    // The point of it: what holds up the caller is a rename. The deletion runs in the trash's
    // thread, held here until the test lets it go.
    void theCallerDoesNotWaitForTheDeletion()
    {
        QTemporaryDir root;
        const QString workspace = root.filePath(u"workspaces/w2"_s);
        QVERIFY(makeTree(workspace, 10));
        std::mutex mutex;
        std::condition_variable released;
        bool letGo = false;
        QStringList deleted;
        Trash trash([&](const QString &tree, const std::atomic_bool &) {
            std::unique_lock lock(mutex);
            released.wait(lock, [&] { return letGo; });
            deleted.append(tree);
            return removeTreeNow(tree);
        });
        QVERIFY(trash.discard(workspace));
        QVERIFY(!QFileInfo::exists(workspace));
        QCOMPARE(trash.pending(), 1);
        {
            const std::lock_guard lock(mutex);
            letGo = true;
        }
        released.notify_all();
        QTRY_COMPARE_WITH_TIMEOUT(trash.pending(), 0, 10'000);
        const std::lock_guard lock(mutex);
        QCOMPARE(deleted.size(), 1);
        QVERIFY2(deleted.first().startsWith(root.filePath(u"workspaces/"_s + Trash::DirName)),
                 qPrintable(deleted.first()));
        QVERIFY(!QFileInfo::exists(deleted.first()));
    }

    // Where the trash cannot be used, a link is removed as a link there too.
    void aLinkIsRemovedAsALink()
    {
        QTemporaryDir root;
        const QString outside = root.filePath(u"outside"_s);
        QVERIFY(makeTree(outside, 3));
        const QString link = root.filePath(u"workspace"_s);
        QVERIFY(QFile::link(outside, link));
        QVERIFY(removeTreeNow(link));
        QVERIFY(!QFileInfo(link).isSymLink());
        QVERIFY(QFileInfo::exists(outside + u"/d0/f2"_s));
    }

    void leftoversGoAtTheNextStart()
    {
        QTemporaryDir root;
        const QString roots[] = {root.filePath(u"workspaces"_s), root.filePath(u"runtimes"_s)};
        for (const QString &dir : roots)
            QVERIFY(makeTree(dir + u'/' + Trash::DirName + u"/left-by-a-crash"_s, 150));
        Trash trash;
        trash.emptyLeftovers({roots[0], roots[1], root.filePath(u"has-no-trash"_s)});
        QTRY_VERIFY_WITH_TIMEOUT(trash.pending() == 0, 30'000);
        for (const QString &dir : roots)
            QVERIFY(isEmptyDir(dir + u'/' + Trash::DirName));
    }
};

QTEST_GUILESS_MAIN(TrashTest)
#include "tst_trash.moc"
