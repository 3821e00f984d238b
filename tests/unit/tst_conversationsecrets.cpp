#include "conversationsecrets.h"

#include <QJsonDocument>
#include <QTest>

using namespace AgentDeck;
using namespace Qt::StringLiterals;

class ConversationSecretsTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void masking_data()
    {
        QTest::addColumn<QStringList>("values");
        QTest::addColumn<QString>("text");
        QTest::addColumn<QString>("masked");
        QTest::newRow("each occurrence") << QStringList{u"tok-1"_s} << u"a tok-1 b tok-1"_s
                                         << u"a <secret-hidden> b <secret-hidden>"_s;
        // Masked shortest first, "abc-long" would show as "<secret-hidden>-long".
        QTest::newRow("the longest first")
            << QStringList{u"abc"_s, u"abc-long"_s} << u"abc-long abc"_s
            << u"<secret-hidden> <secret-hidden>"_s;
        QTest::newRow("values under three characters stay")
            << QStringList{u"1"_s, u"ab"_s} << u"1 ab 12"_s << u"1 ab 12"_s;
        QTest::newRow("none") << QStringList{} << u"text"_s << u"text"_s;
        QTest::newRow("characters beyond ASCII")
            << QStringList{u"pässwörd"_s} << u"x pässwörd y"_s << u"x <secret-hidden> y"_s;
    }

    void masking()
    {
        QFETCH(QStringList, values);
        QFETCH(QString, text);
        QFETCH(QString, masked);
        QMap<QString, QString> secrets;
        for (qsizetype i = 0; i < values.size(); ++i)
            secrets.insert(u"S%1"_s.arg(i), values[i]);
        QCOMPARE(maskSecrets(text, secrets), masked);
        QCOMPARE(maskSecrets(text.toUtf8(), secrets), masked.toUtf8());
    }

    // Output comes in pieces, as a command prints it: a value split between two of them, at
    // any of its bytes (inside a character too), is masked all the same, and so is one that
    // comes a byte at a time.
    void aValueSplitBetweenPiecesIsMasked_data()
    {
        QTest::addColumn<QString>("value");
        QTest::addColumn<int>("cut");
        for (const QString &value : {u"31415926535897"_s, u"pässwörd"_s, u"abab-abac"_s}) {
            for (int cut = 1; cut < value.toUtf8().size(); ++cut)
                QTest::addRow("%s cut after byte %d", qPrintable(value), cut) << value << cut;
        }
    }
    void aValueSplitBetweenPiecesIsMasked()
    {
        QFETCH(QString, value);
        QFETCH(int, cut);
        const QMap<QString, QString> secrets{{u"A"_s, value}, {u"B"_s, u"aba"_s}};
        const QByteArray output = "before " + value.toUtf8() + " after aba\n";
        const QByteArray masked = "before <secret-hidden> after <secret-hidden>\n";
        QCOMPARE(maskSecrets(output, secrets), masked);

        SecretMasker masker(secrets);
        const QByteArray first = masker.add(QByteArrayView(output).first(7 + cut));
        QVERIFY2(first.size() <= 7, first.constData()); // what could begin a value waits
        QByteArray joined = first;
        joined += masker.add(QByteArrayView(output).sliced(7 + cut));
        joined += masker.finish();
        QCOMPARE(joined, masked);

        SecretMasker bytewise(secrets);
        QByteArray bytes;
        for (const char byte : output)
            bytes += bytewise.add(QByteArrayView(&byte, 1));
        bytes += bytewise.finish();
        QCOMPARE(bytes, masked);
    }

    // Only what could still begin a value is held back: output without one goes on at once,
    // and what was held goes with the end of the output.
    void onlyWhatCouldBeginAValueIsHeld()
    {
        SecretMasker masker({{u"A"_s, u"tok-123"_s}});
        QCOMPARE(masker.add("line\n"), "line\n"_ba);
        QCOMPARE(masker.add("a to"), "a "_ba);
        QCOMPARE(masker.heldBytes(), 2);
        QCOMPARE(masker.add("o"), "too"_ba);
        QCOMPARE(masker.add("tok-12"), ""_ba);
        QCOMPARE(masker.finish(), "tok-12"_ba);
        QCOMPARE(masker.heldBytes(), 0);
        SecretMasker none;
        QCOMPARE(none.add("tok"), "tok"_ba);
    }

    void aRequestIsReadAsOpenHandsSendsIt()
    {
        QString error;
        const auto secrets = ConversationSecrets::fromRequest(
            QJsonDocument::fromJson(
                R"({"secrets": {"A": "a", "B": {"kind": "StaticSecret", "value": "b"}, "C": {"value": "c"}}})")
                .object(),
            &error);
        QVERIFY2(secrets, qPrintable(error));
        const QMap<QString, QString> expected{{u"A"_s, u"a"_s}, {u"B"_s, u"b"_s}, {u"C"_s, u"c"_s}};
        QCOMPARE(secrets->values, expected);
    }

    // Merged, the whole is bounded, not each request.
    void theWholeIsBounded()
    {
        const QString half(ConversationSecrets::MaxBytes / 2, u'x');
        QString error;
        const ConversationSecrets first{{{u"A"_s, half}}};
        const auto once = first.merged({{{u"A"_s, half}}}, &error);
        QVERIFY2(once, qPrintable(error)); // the same name: replaced, not added
        QVERIFY(!first.merged({{{u"B"_s, half}}}, &error));
        QVERIFY2(error.contains(u"more than 65536 bytes"_s), qPrintable(error));
    }
};

QTEST_GUILESS_MAIN(ConversationSecretsTest)
#include "tst_conversationsecrets.moc"
