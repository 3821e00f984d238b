// What WorkspaceDisks says and does where no disk is made: the sizes it names, the reasons a
// workspace has no limit, and removals that pass through to the trash's.
#include "workspacedisks.h"

#include <QTemporaryDir>
#include <QTest>

using namespace Qt::StringLiterals;
using namespace AgentDeck;

class WorkspaceDisksTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void sizesAreNamedAsTheOptionTakesThem_data()
    {
        QTest::addColumn<qint64>("bytes");
        QTest::addColumn<QString>("text");
        QTest::addRow("GiB") << (qint64(4) << 30) << u"4 GiB"_s;
        QTest::addRow("MiB") << (qint64(16) << 20) << u"16 MiB"_s;
        QTest::addRow("MiB past a GiB") << (qint64(1536) << 20) << u"1536 MiB"_s;
        QTest::addRow("KiB") << qint64(17 * 1024) << u"17 KiB"_s;
        QTest::addRow("bytes") << qint64(16'777'217) << u"16777217 bytes"_s;
    }
    void sizesAreNamedAsTheOptionTakesThem()
    {
        QFETCH(qint64, bytes);
        QFETCH(QString, text);
        QCOMPARE(WorkspaceDisks::sizeText(bytes), text);
    }

    void withoutTheOptionNothingIsEnforced()
    {
        QTemporaryDir data;
        WorkspaceDisks disks(data.filePath(u"workspaces"_s), data.filePath(u"workspace-disks"_s), 0,
                             u"; the catalog keeps a 64 MiB reserve"_s);
        disks.probe();
        QVERIFY(!disks.enforced());
        const QString none =
            u"not enforced: no --sandbox-disk; the catalog keeps a 64 MiB reserve"_s;
        QCOMPARE(disks.describeServer(), none);
        const QUuid id = QUuid::createUuid();
        QCOMPARE(disks.describe(id, true), none);
        QCOMPARE(disks.describe(id, false),
                 u"not enforced: the workspace is a directory the caller named, not one the server "
                 "made; the catalog keeps a 64 MiB reserve"_s);
        // Nothing made, nothing mounted: the workspace is a plain directory.
        const QString dir = data.filePath(u"workspaces/"_s + id.toString(QUuid::WithoutBraces));
        QCOMPARE(QCoro::waitFor(disks.make(id, dir)), QString());
        QCOMPARE(disks.mount(id, dir), QString());
        QVERIFY(!QFileInfo::exists(data.filePath(u"workspace-disks"_s)));
    }

    // A removal goes on to the trash's for any tree, a workspace or not.
    void removalsPassThrough()
    {
        QTemporaryDir data;
        WorkspaceDisks disks(data.filePath(u"workspaces"_s), data.filePath(u"workspace-disks"_s), 0,
                             {});
        QStringList removed;
        const RemoveTree remove = disks.removing([&](const QString &path) {
            removed << path;
            return path.endsWith(u"ok"_s);
        });
        const QString workspace =
            data.filePath(u"workspaces/"_s + QUuid::createUuid().toString(QUuid::WithoutBraces));
        QVERIFY(!remove(workspace));
        QVERIFY(remove(data.filePath(u"runtimes/ok"_s)));
        QCOMPARE(removed, (QStringList{workspace, data.filePath(u"runtimes/ok"_s)}));
    }
};

QTEST_GUILESS_MAIN(WorkspaceDisksTest)
#include "tst_workspacedisks.moc"
