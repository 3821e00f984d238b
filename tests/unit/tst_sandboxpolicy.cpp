// The sandbox policy: what a conversation may ask for within the server's, and the sentences
// that say what a machine cannot enforce.
#include "runtime/commandleader.h"
#include "runtime/sandboxisolation.h"
#include "sandboxpolicy.h"

#include <QJsonArray>
#include <QTest>

#include <csignal>

using namespace Qt::StringLiterals;
using namespace AgentDeck;

class SandboxPolicyTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void requestIsCheckedAgainstTheServer_data()
    {
        QTest::addColumn<QJsonObject>("request");
        QTest::addColumn<bool>("accepted");
        QTest::addColumn<QJsonObject>("inForce"); // the fields to compare
        QTest::addRow("nothing of its own")
            << QJsonObject{} << true
            << QJsonObject{{u"network"_s, u"egress"_s}, {u"processes"_s, 100}};
        QTest::addRow("tighter network") << QJsonObject{{u"network"_s, u"none"_s}} << true
                                         << QJsonObject{{u"network"_s, u"none"_s}};
        QTest::addRow("wider network")
            << QJsonObject{{u"network"_s, u"host"_s}} << false << QJsonObject{};
        QTest::addRow("a limit where the server has none")
            << QJsonObject{{u"memory_bytes"_s, 1 << 30}} << true
            << QJsonObject{{u"memory_bytes"_s, 1 << 30}};
        QTest::addRow("0 is the server's")
            << QJsonObject{{u"processes"_s, 0}} << true << QJsonObject{{u"processes"_s, 100}};
        QTest::addRow("null is the server's") << QJsonObject{{u"processes"_s, QJsonValue()}} << true
                                              << QJsonObject{{u"processes"_s, 100}};
        QTest::addRow("above the server's")
            << QJsonObject{{u"processes"_s, 101}} << false << QJsonObject{};
        QTest::addRow("fraction") << QJsonObject{{u"cpu_seconds"_s, 1.5}} << false << QJsonObject{};
        QTest::addRow("string") << QJsonObject{{u"cpu_seconds"_s, u"10"_s}} << false
                                << QJsonObject{};
        QTest::addRow("huge") << QJsonObject{{u"file_size_bytes"_s, 1e300}} << false
                              << QJsonObject{};
    }
    void requestIsCheckedAgainstTheServer()
    {
        QFETCH(QJsonObject, request);
        QFETCH(bool, accepted);
        QFETCH(QJsonObject, inForce);
        SandboxPolicy server;
        server.network = SandboxPolicy::Network::Egress;
        server.processes = 100;
        QString error;
        const auto policy = SandboxPolicy::fromRequest(request, server, &error);
        QCOMPARE(policy.has_value(), accepted);
        if (!accepted) {
            QVERIFY2(error.startsWith(u"sandbox."_s), qPrintable(error));
            return;
        }
        const QJsonObject json = policyInForce(policy, server).toJson();
        for (auto it = inForce.constBegin(); it != inForce.constEnd(); ++it)
            QCOMPARE(json.value(it.key()), it.value());
        QCOMPARE(SandboxPolicy::fromJson(json), *policy);
    }

    // A server whose limits are lowered after a conversation was created holds it to the new
    // ones; raised, the conversation keeps what it asked for.
    void withinTakesTheTighterOfEach()
    {
        SandboxPolicy own;
        own.network = SandboxPolicy::Network::Host;
        own.memoryBytes = 1000;
        own.processes = 0;
        SandboxPolicy server;
        server.network = SandboxPolicy::Network::Egress;
        server.memoryBytes = 2000;
        server.processes = 50;
        const SandboxPolicy inForce = own.within(server);
        QCOMPARE(toString(inForce.network), u"egress"_s);
        QCOMPARE(inForce.memoryBytes, qint64(1000));
        QCOMPARE(inForce.processes, qint64(50));
        QCOMPARE(inForce.cpuSeconds, qint64(0));
    }

    void weakIsolationNamesWhatItCannotEnforce()
    {
        SandboxIsolation none;
        none.reason = u"bubblewrap is not installed"_s;
        SandboxPolicy policy;
        policy.processes = 64;
        const QJsonObject described = none.describe(policy);
        QCOMPARE(described.value(u"isolation"_s).toString(), u"none"_s);
        const QStringList parts = described.value(u"not_enforced"_s).toVariant().toStringList();
        QVERIFY2(parts.join(u'\n').contains(u"bubblewrap is not installed"_s),
                 qPrintable(parts.join(u'\n')));
        QVERIFY(parts.join(u'\n').contains(u"network"_s));
        QVERIFY(parts.join(u'\n').contains(u"processes"_s));
        QVERIFY(!none.warning().isEmpty());

        SandboxIsolation bubblewrap;
        bubblewrap.mechanism = SandboxIsolation::Mechanism::Bubblewrap;
        QVERIFY(bubblewrap.unenforced(policy).isEmpty());
        QVERIFY(bubblewrap.warning().isEmpty());
        policy.network = SandboxPolicy::Network::Egress;
        QCOMPARE(bubblewrap.unenforced(policy).size(), 1);
    }

    void limitNotesNameTheLimit_data()
    {
        QTest::addColumn<int>("exitCode");
        QTest::addColumn<QString>("output");
        QTest::addColumn<QString>("note");
        QTest::addRow("cpu") << 128 + SIGXCPU << QString() << u"CPU time"_s;
        QTest::addRow("file size") << 128 + SIGXFSZ << QString() << u"per file"_s;
        QTest::addRow("file size, shell went on")
            << 0 << u"bash: line 1: 3 File size limit exceeded"_s << u"per file"_s;
        QTest::addRow("memory") << 1 << u"bash: xrealloc: cannot allocate 10 bytes"_s
                                << u"of memory"_s;
        QTest::addRow("processes")
            << 254 << u"bash: fork: Resource temporarily unavailable"_s << u"processes"_s;
        QTest::addRow("a plain failure") << 2 << u"make: *** [all] Error 2"_s << QString();
        QTest::addRow("success") << 0 << u"done"_s << QString();
    }
    void limitNotesNameTheLimit()
    {
        QFETCH(int, exitCode);
        QFETCH(QString, output);
        QFETCH(QString, note);
        SandboxPolicy policy;
        policy.memoryBytes = 1 << 28;
        policy.processes = 64;
        policy.cpuSeconds = 10;
        policy.fileSizeBytes = 1 << 20;
        const QString written = limitNote(policy, exitCode, output);
        if (note.isEmpty())
            QVERIFY2(written.isEmpty(), qPrintable(written));
        else
            QVERIFY2(written.contains(note), qPrintable(written));
        // Without the limit, no note.
        QVERIFY(limitNote(SandboxPolicy{}, exitCode, output).isEmpty());
    }

    void imagesAreTheServersToAllow_data()
    {
        QTest::addColumn<QString>("image");
        QTest::addColumn<QString>("error"); // empty: accepted
        QTest::addRow("the default") << u"debian:bookworm"_s << QString();
        QTest::addRow("a pattern's") << u"team/python:3.12"_s << QString();
        QTest::addRow("* spans /") << u"team/tools/node:22"_s << QString();
        QTest::addRow("? is one character") << u"ci:v7"_s << QString();
        QTest::addRow("? is not two") << u"ci:v17"_s << u"not one the server allows"_s;
        QTest::addRow("not listed") << u"alpine:3"_s << u"not one the server allows"_s;
        QTest::addRow("a pattern is no regular expression")
            << u"teamXpython:3"_s << u"not one the server allows"_s;
        QTest::addRow("blank") << u"debian bookworm"_s << u"takes an image name"_s;
        QTest::addRow("empty") << QString() << u"takes an image name"_s;
    }
    void imagesAreTheServersToAllow()
    {
        QFETCH(QString, image);
        QFETCH(QString, error);
        SandboxPolicy server;
        server.image = u"debian:bookworm"_s;
        server.imagePatterns = {u"team/*"_s, u"ci:v?"_s};
        QString problem;
        const auto policy =
            SandboxPolicy::fromRequest(QJsonObject{{u"image"_s, image}}, server, &problem);
        if (error.isEmpty()) {
            QVERIFY2(policy, qPrintable(problem));
            QCOMPARE(policy->image, image);
            QCOMPARE(policyInForce(policy, server).image, image);
            // Stored and read back, it is the same choice.
            QCOMPARE(SandboxPolicy::fromJson(policy->toJson()).image, image);
        } else {
            QVERIFY(!policy);
            QVERIFY2(problem.contains(error), qPrintable(problem));
        }
    }

    void imagesFollowTheServer()
    {
        SandboxPolicy server;
        server.image = u"debian:bookworm"_s;
        server.imagePatterns = {u"team/*"_s};
        QString problem;
        // A conversation that names none runs the server's, whatever it is at the time.
        const auto none = SandboxPolicy::fromRequest({}, server, &problem);
        QVERIFY(none && none->image.isEmpty());
        server.image = u"debian:trixie"_s;
        QCOMPARE(policyInForce(none, server).image, u"debian:trixie"_s);
        // One the server no longer allows falls back to the server's.
        SandboxPolicy own;
        own.image = u"team/python:3.12"_s;
        QCOMPARE(policyInForce(own, server).image, u"team/python:3.12"_s);
        server.imagePatterns.clear();
        QCOMPARE(policyInForce(own, server).image, u"debian:trixie"_s);
        // A server without containers takes no image at all.
        const auto refused = SandboxPolicy::fromRequest(
            QJsonObject{{u"image"_s, u"debian:trixie"_s}}, SandboxPolicy{}, &problem);
        QVERIFY(!refused);
        QVERIFY2(problem.contains(u"--runtime docker"_s), qPrintable(problem));
    }
};

QTEST_GUILESS_MAIN(SandboxPolicyTest)
#include "tst_sandboxpolicy.moc"
