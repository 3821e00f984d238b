// The other names of a directory through the mount table, read from a mountinfo written here:
// a bind mount of the directory itself, of a directory above it, and mounts that only look
// alike (another device, a bind of a sibling) that are not aliases.
#include "runtime/mountaliases.h"

#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QTest>

using namespace Qt::StringLiterals;
using namespace AgentDeck;

class MountAliasesTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    // A tree of its own for each row.
    void init()
    {
        m_root = std::make_unique<QTemporaryDir>();
        QVERIFY(m_root->isValid());
        m_base = QDir(m_root->path()).canonicalPath();
        for (const QString &dir :
             {u"fs/var/lib/agentdeck"_s, u"fs/var/lib/other"_s, u"mnt"_s, u"elsewhere"_s})
            QVERIFY(QDir().mkpath(m_base + u'/' + dir));
    }

    void aliasesAreFoundByTheirMounts_data()
    {
        QTest::addColumn<QString>("mounts"); // ROOT POINT DEVICE, one a line; %B: the base
        QTest::addColumn<QString>("link");   // made as a link to the data dir (a bind's effect)
        QTest::addColumn<QStringList>("expected");
        const QString fs = u"/ %B/fs 8:1\n"_s;
        QTest::addRow("no other mount") << fs << QString() << QStringList{};
        QTest::addRow("the dir bound elsewhere")
            << fs + u"/var/lib/agentdeck %B/mnt/alias 8:1\n"_s << u"mnt/alias"_s
            << QStringList{u"%B/mnt/alias"_s};
        QTest::addRow("a dir above it bound elsewhere")
            << fs + u"/var/lib %B/elsewhere/lib 8:1\n"_s << u"elsewhere/lib/agentdeck"_s
            << QStringList{u"%B/elsewhere/lib/agentdeck"_s};
        QTest::addRow("a sibling bound elsewhere")
            << fs + u"/var/lib/other %B/mnt/alias 8:1\n"_s << QString() << QStringList{};
        QTest::addRow("another device with the same paths")
            << fs + u"/var/lib/agentdeck %B/mnt/alias 8:2\n"_s << u"mnt/alias"_s << QStringList{};
        QTest::addRow("a name in the table that is not the same dir")
            << fs + u"/var/lib/agentdeck %B/mnt/alias 8:1\n"_s << QString() << QStringList{};
    }
    void aliasesAreFoundByTheirMounts()
    {
        QFETCH(QString, mounts);
        QFETCH(QString, link);
        QFETCH(QStringList, expected);
        mounts.replace(u"%B"_s, m_base);
        for (QString &alias : expected)
            alias.replace(u"%B"_s, m_base);
        const QString dataDir = m_base + u"/fs/var/lib/agentdeck"_s;
        if (!link.isEmpty()) {
            const QString at = m_base + u'/' + link;
            QDir().mkpath(QFileInfo(at).path());
            QVERIFY(QDir(at).removeRecursively());
            QVERIFY(QFile::link(dataDir, at));
        }
        QFile table(m_root->filePath(u"mountinfo"_s));
        QVERIFY(table.open(QIODevice::WriteOnly));
        int id = 20;
        for (const QString &line : mounts.split(u'\n', Qt::SkipEmptyParts)) {
            const QStringList fields = line.split(u' ');
            table.write(u"%1 1 %2 %3 %4 rw,relatime - ext4 /dev/x rw\n"_s.arg(id++)
                            .arg(fields[2], fields[0], fields[1])
                            .toUtf8());
        }
        table.close();
        QCOMPARE(mountAliasesOf(dataDir, table.fileName()), expected);
    }

private:
    std::unique_ptr<QTemporaryDir> m_root;
    QString m_base;
};

QTEST_GUILESS_MAIN(MountAliasesTest)
#include "tst_mountaliases.moc"
