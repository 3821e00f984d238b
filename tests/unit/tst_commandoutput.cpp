// What an observation carries of a command's output: bounded, cut between characters, and
// marked when cut or when the command ran out of time.
#include "runtime/commandoutput.h"

#include <QTest>

using namespace Qt::StringLiterals;
using namespace AgentDeck;

class CommandOutputTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void shortOutputIsKeptAsItIs() { QCOMPARE(commandOutput("hello\n", false), u"hello\n"_s); }

    // "é" is two bytes; with the limit falling between them the output ended in U+FFFD.
    void aCutFallsBetweenCharacters_data()
    {
        QTest::addColumn<int>("before"); // ASCII bytes before the first "é"
        QTest::addRow("limit inside a character") << 1;
        QTest::addRow("limit after a character") << 0;
    }
    void aCutFallsBetweenCharacters()
    {
        QFETCH(int, before);
        const QByteArray output =
            QByteArray(before, 'a') + QByteArray("\xc3\xa9").repeated(MaxCommandOutputBytes);
        const QString kept = commandOutput(output, false);
        QVERIFY(kept.endsWith(u"\n[output truncated]\n"_s));
        const QString text = kept.chopped(QStringView(u"\n[output truncated]\n").size());
        QVERIFY(!text.contains(QChar::ReplacementCharacter));
        QVERIFY(text.toUtf8().size() <= MaxCommandOutputBytes);
        QVERIFY(text.toUtf8().size() >= MaxCommandOutputBytes - 1);
        QVERIFY(text.endsWith(u'\u00e9'));
    }

    void aTimeoutIsALineOfItsOwn()
    {
        QCOMPARE(commandOutput("partial", true), u"partial\n[command timed out]\n"_s);
    }
};

QTEST_GUILESS_MAIN(CommandOutputTest)
#include "tst_commandoutput.moc"
