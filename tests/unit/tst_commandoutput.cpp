// What an observation carries of a command's output: bounded, cut between characters, and
// marked when cut or when the command ran out of time.
#include "runtime/commandoutput.h"

#include <QRegularExpression>
#include <QTest>

#include <algorithm>

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

    // A command that prints without end: the collector keeps one byte past the limit (which
    // says that there was more) and hands back only what it kept, for the host's record.
    void aCollectorKeepsOnlyWhatAnObservationCarries()
    {
        OutputCollector collector;
        const QByteArray chunk(64 * 1024, 'x');
        qsizetype handedBack = 0;
        for (int i = 0; i < 48; ++i) // 3 MiB
            handedBack += collector.add(chunk).size();
        QCOMPARE(collector.kept().size(), MaxCommandOutputBytes + 1);
        QCOMPARE(handedBack, MaxCommandOutputBytes + 1);
        QCOMPARE(collector.result(false),
                 QString(MaxCommandOutputBytes, u'x') + u"\n[output truncated]\n"_s);

        OutputCollector exact;
        exact.add(QByteArray(MaxCommandOutputBytes, 'y'));
        QCOMPARE(exact.result(false), QString(MaxCommandOutputBytes, u'y'));
    }

    void aTimeoutIsALineOfItsOwn()
    {
        QCOMPARE(commandOutput("partial", true), u"partial\n[command timed out]\n"_s);
    }

    // Live output goes in pieces of whole lines: the first at once, the next ones at most one
    // per interval, however many writes came between; a line without its end waits for it
    // unless it grows past what is held back.
    void liveOutputGoesInPiecesOfWholeLines()
    {
        QStringList pieces;
        LiveOutput live([&](const QString &piece) { pieces.append(piece); });
        live.add("one\ntw");
        QCOMPARE(pieces, QStringList{u"one\n"_s});
        live.add("o\n");
        live.add("three\nfou");
        QCOMPARE(pieces.size(), 1); // within the interval: later, together
        QTRY_COMPARE_WITH_TIMEOUT(pieces.size(), 2, 5000);
        QCOMPARE(pieces.last(), u"two\nthree\n"_s);
        // "fou" had no end: it waited for it, and goes with it.
        live.add("r\n");
        QTRY_COMPARE_WITH_TIMEOUT(pieces.size(), 3, 5000);
        QCOMPARE(pieces.last(), u"four\n"_s);

        // A line longer than what is held back goes, cut before a character.
        live.add(QByteArray(QByteArray(LiveOutput::MaxHeldBytes - 3, 'x') + "\xc3\xa9\xc3\xa9"));
        QTRY_COMPARE_WITH_TIMEOUT(pieces.size(), 4, 5000);
        QCOMPARE(pieces.last(), QString(LiveOutput::MaxHeldBytes - 3, u'x') + u"\u00e9"_s);
    }

    // A command printing far more between two pieces than a piece carries: the next piece is
    // its latest lines, from a line's start, after one saying how much more was printed. Live
    // output stopped at the first MiB (it was fed what the result keeps), and unbounded it
    // would have held all that came within an interval.
    void liveOutputIsTheLatestOfWhatWasPrinted()
    {
        QStringList pieces;
        LiveOutput live([&](const QString &piece) { pieces.append(piece); });
        live.add("first\n");
        QCOMPARE(pieces.size(), 1);
        QByteArray printed;
        for (int line = 0; printed.size() < 10 * 1024 * 1024; ++line)
            printed += "line " + QByteArray::number(line) + '\n';
        for (qsizetype at = 0; at < printed.size(); at += 100'000)
            live.add(QByteArrayView(printed).sliced(
                at, std::min<qsizetype>(100'000, printed.size() - at)));
        QTRY_COMPARE_WITH_TIMEOUT(pieces.size(), 2, 5000);
        const QString piece = pieces.last();
        const qsizetype markerEnd = piece.indexOf(u'\n') + 1;
        const QString marker = piece.left(markerEnd);
        QVERIFY2(marker.startsWith(u"[… "_s) &&
                     marker.endsWith(u" bytes more were printed meanwhile]\n"_s),
                 qPrintable(marker));
        const QString shown = piece.mid(markerEnd);
        QVERIFY(shown.size() <= LiveOutput::MaxPieceBytes);
        QVERIFY(shown.size() > LiveOutput::MaxPieceBytes - 100);
        QVERIFY(printed.endsWith(shown.toUtf8()));
        QVERIFY(shown.startsWith(u"line "_s)); // a whole line
        const qint64 skipped = marker.mid(3).section(u' ', 0, 0).toLongLong();
        QCOMPARE(skipped + shown.toUtf8().size(), printed.size());
    }

    // A secret where the output is cut, at every byte of it: between two reads of the output,
    // at the result's limit, at the front of the live window (a command printing more between
    // two pieces than a piece carries) and at the end of a piece of a line too long to hold.
    // Masked after the cut, each showed all of the value but what fell on the other side.
    void noPartOfASecretShows_data()
    {
        QTest::addColumn<QString>("boundary");
        QTest::addColumn<int>("cut"); // bytes of the value before the boundary
        for (const char *boundary : {"read", "result limit", "live window", "long line"}) {
            for (int cut = 1; cut < Secret.size(); ++cut)
                QTest::addRow("%s, %d bytes before it", boundary, cut)
                    << QString::fromLatin1(boundary) << cut;
        }
    }
    void noPartOfASecretShows()
    {
        QFETCH(QString, boundary);
        QFETCH(int, cut);
        QStringList pieces;
        CommandOutputSink output({{u"TOKEN"_s, QString::fromLatin1(Secret)}},
                                 [&](const QString &piece) { pieces.append(piece); });
        qsizetype wanted = 1; // live pieces
        const auto add = [&output](const QByteArray &printed) { output.add(printed); };
        if (boundary == u"read") {
            add("before " + Secret.first(cut));
            add(Secret.sliced(cut) + " after\n");
        } else if (boundary == u"result limit") {
            add(QByteArray(MaxCommandOutputBytes - cut, 'x') + Secret + '\n');
        } else if (boundary == u"live window") {
            add("first\n");
            QCOMPARE(pieces.size(), 1);
            // The window's front falls `cut` bytes into what this prints.
            add(Secret + QByteArray(LiveOutput::MaxPieceBytes + cut - Secret.size() - 1, 'x') +
                '\n');
            wanted = 2;
        } else {
            add(QByteArray(LiveOutput::MaxHeldBytes - cut, 'x') + Secret.first(cut));
            add(Secret.sliced(cut) + '\n');
        }
        QTRY_VERIFY_WITH_TIMEOUT(pieces.size() >= wanted, 5000);
        output.finish();
        const auto digits = [](QString text) {
            // The line saying how much the live window skipped is the only one with digits.
            static const QRegularExpression skipped(
                u"\\[… \\d+ bytes more were printed meanwhile\\]"_s);
            text.remove(skipped);
            return std::count_if(text.cbegin(), text.cend(), [](QChar c) { return c.isDigit(); });
        };
        const QString result = output.result(false);
        QCOMPARE(digits(result), 0);
        QCOMPARE(digits(pieces.join(QString())), 0);
        if (boundary != u"result limit")
            QVERIFY(result.contains(HiddenSecret));
    }

private:
    inline static const QByteArray Secret = "31415926535897"_ba;
};

QTEST_GUILESS_MAIN(CommandOutputTest)
#include "tst_commandoutput.moc"
