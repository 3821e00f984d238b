// The catalog's room on the data dir's file system: a file held while there is room, freed when
// the file system is nearly full (a workspace filled it), held again once there is room.
#include "diskreserve.h"

#include <QFileInfo>
#include <QTemporaryDir>
#include <QTest>

#include <sys/stat.h>

using namespace Qt::StringLiterals;
using namespace AgentDeck;

class DiskReserveTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void isFreedWhenTheDiskFillsAndHeldAgainAfter()
    {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const QString path = dir.filePath(u"disk-reserve"_s);
        constexpr qint64 Bytes = 1 << 20;
        qint64 available = 100 * Bytes;
        DiskReserve reserve(path, Bytes, [&available] { return available; });
        reserve.start();
        QVERIFY(reserve.isHeld());
        QCOMPARE(QFileInfo(path).size(), Bytes);
        // Allocated, not a hole: its blocks are the room it gives back.
        QVERIFY(QFileInfo(path).exists());

        available = Bytes / 2 - 1; // a workspace filled the file system
        reserve.check();
        QVERIFY(!reserve.isHeld());
        QVERIFY(!QFileInfo::exists(path));

        available = Bytes; // some room, not enough to take it back
        reserve.check();
        QVERIFY(!QFileInfo::exists(path));

        available = 2 * Bytes; // the workspace was cleaned
        reserve.check();
        QVERIFY(reserve.isHeld());
        QCOMPARE(QFileInfo(path).size(), Bytes);
    }

    // On the real file system: the file's blocks are allocated.
    void theFileHasItsBlocks()
    {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const QString path = dir.filePath(u"disk-reserve"_s);
        DiskReserve reserve(path, 4 << 20);
        reserve.start();
        QVERIFY(reserve.isHeld());
        struct stat info
        {};
        QCOMPARE(::stat(QFile::encodeName(path).constData(), &info), 0);
        QVERIFY(qint64(info.st_blocks) * 512 >= 4 << 20);
    }
};

QTEST_GUILESS_MAIN(DiskReserveTest)
#include "tst_diskreserve.moc"
