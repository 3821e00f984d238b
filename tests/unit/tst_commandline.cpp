// Where the daemon's options come from: the command line, AGENTDECK_* variables and a --config file
// (systemd's EnvironmentFile= syntax), in that order of precedence over the built-in defaults.
#include "commandline.h"

#include <QFile>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

using namespace Qt::StringLiterals;
using namespace AgentDeck;

class CommandLineTest : public QObject
{
    Q_OBJECT

private:
    QTemporaryDir m_dir;

    QString writeFile(const QString &name, const QByteArray &text)
    {
        QFile file(m_dir.filePath(name));
        if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate))
            return {};
        file.write(text);
        return file.fileName();
    }

    // Parses with exactly this environment, so the test's own never leaks in.
    static std::optional<Options> parse(const QStringList &arguments,
                                        const QList<std::pair<QString, QString>> &variables,
                                        QString *error)
    {
        QProcessEnvironment environment;
        for (const auto &[name, value] : variables)
            environment.insert(name, value);
        QString message;
        return parseOptions(arguments, error, &message, environment);
    }

private Q_SLOTS:
    void initTestCase() { QVERIFY(m_dir.isValid()); }

    void flagsOverEnvironmentOverFileOverDefaults_data()
    {
        QTest::addColumn<bool>("inFile");
        QTest::addColumn<bool>("inEnvironment");
        QTest::addColumn<bool>("onCommandLine");
        QTest::addColumn<int>("port");
        QTest::addRow("default") << false << false << false << 8000;
        QTest::addRow("file") << true << false << false << 8101;
        QTest::addRow("environment") << false << true << false << 8102;
        QTest::addRow("environment over file") << true << true << false << 8102;
        QTest::addRow("command line over both") << true << true << true << 8103;
        QTest::addRow("command line over file") << true << false << true << 8103;
    }
    void flagsOverEnvironmentOverFileOverDefaults()
    {
        QFETCH(bool, inFile);
        QFETCH(bool, inEnvironment);
        QFETCH(bool, onCommandLine);
        QFETCH(int, port);
        const QString conf =
            writeFile(u"precedence.conf"_s, inFile ? "AGENTDECK_LISTEN=127.0.0.1:8101\n"
                                                     "AGENTDECK_REPLICA_ID=from-file\n"
                                                   : "\n");
        QStringList arguments{u"--headless"_s, u"--config"_s, conf};
        if (onCommandLine)
            arguments << u"--listen"_s << u"127.0.0.1:8103"_s;
        QList<std::pair<QString, QString>> variables;
        if (inEnvironment)
            variables.append({u"AGENTDECK_LISTEN"_s, u"127.0.0.1:8102"_s});
        QString error;
        const auto options = parse(arguments, variables, &error);
        QVERIFY2(options, qPrintable(error));
        QCOMPARE(options->server.port, quint16(port));
        QCOMPARE(options->listenGiven, port != 8000);
        // One option from elsewhere leaves the file's others in place.
        QCOMPARE(options->server.replicaId, inFile ? u"from-file"_s : QString());
    }

    // Every option of --help has a variable, and the config file knows its key: an option added
    // to the table gets both.
    void everyOptionHasAKey()
    {
        QString error, message;
        QVERIFY(!parseOptions({u"--help"_s}, &error, &message, {}));
        static const QRegularExpression optionPattern(u"^  (?:-\\w, )?--([a-z-]+)"_s,
                                                      QRegularExpression::MultilineOption);
        QStringList names;
        for (auto match = optionPattern.globalMatch(message); match.hasNext();)
            names.append(match.next().captured(1));
        QVERIFY2(names.size() > 30, qPrintable(message));
        QByteArray text;
        for (const QString &name : std::as_const(names)) {
            if (name == u"help"_s || name == u"version"_s || name == u"config"_s)
                continue;
            const QString variable = optionVariable(name);
            QVERIFY2(message.contains(variable) ||
                         variable == u"AGENTDECK_"_s + name.toUpper().replace(u'-', u'_'),
                     qPrintable(variable));
            text += variable.toUtf8() + "=\n";
        }
        text += "AGENTDECK_LLM_API_KEY=\n";
        const QString conf = writeFile(u"every.conf"_s, text);
        QVERIFY2(parse({u"--headless"_s, u"--config"_s, conf}, {}, &error), qPrintable(error));
        // The help says where options come from, and in which order.
        for (const QString &words :
             {u"AGENTDECK_<OPTION>"_s, u"The command line wins over the environment, the "
                                       "environment over the file, the file over the defaults."_s})
            QVERIFY2(message.simplified().contains(words), qPrintable(words));
    }

    void optionVariableFollowsTheRule_data()
    {
        QTest::addColumn<QString>("option");
        QTest::addColumn<QString>("variable");
        QTest::addRow("plain") << u"listen"_s << u"AGENTDECK_LISTEN"_s;
        QTest::addRow("dashes") << u"sandbox-idle-timeout"_s << u"AGENTDECK_SANDBOX_IDLE_TIMEOUT"_s;
        QTest::addRow("key file") << u"llm-api-key-file"_s << u"AGENTDECK_LLM_API_KEY_FILE"_s;
        // The packaged conf's names.
        QTest::addRow("keys") << u"session-api-key"_s << u"AGENTDECK_SESSION_API_KEYS"_s;
        QTest::addRow("origins") << u"allow-origin"_s << u"AGENTDECK_ALLOW_ORIGINS"_s;
        QTest::addRow("hosts") << u"allow-host"_s << u"AGENTDECK_ALLOW_HOSTS"_s;
        QTest::addRow("database") << u"database"_s << u"AGENTDECK_DATABASE_URL"_s;
        QTest::addRow("egress") << u"sandbox-egress-allow"_s << u"AGENTDECK_SANDBOX_EGRESS_ALLOW"_s;
    }
    void optionVariableFollowsTheRule()
    {
        QFETCH(QString, option);
        QFETCH(QString, variable);
        QCOMPARE(optionVariable(option), variable);
    }

    // Lists are comma-separated, blanks around items dropped; a list from a higher source
    // replaces a lower one's instead of adding to it.
    void listsAreCommaSeparatedAndReplaced()
    {
        const QString conf = writeFile(
            u"lists.conf"_s, "AGENTDECK_ALLOW_ORIGINS = https://a.example, "
                             "https://b.example\n"
                             "AGENTDECK_SANDBOX_EGRESS_ALLOW=10.20.0.0/16,192.168.7.0/24\n"
                             "AGENTDECK_SESSION_API_KEYS=file-key\n");
        QString error;
        auto options = parse({u"--headless"_s, u"--config"_s, conf},
                             {{u"AGENTDECK_SESSION_API_KEYS"_s, u" one , two,"_s}}, &error);
        QVERIFY2(options, qPrintable(error));
        QCOMPARE(options->server.allowedOrigins,
                 QStringList({u"https://a.example"_s, u"https://b.example"_s}));
        QCOMPARE(options->server.sandboxEgressAllow,
                 QStringList({u"10.20.0.0/16"_s, u"192.168.7.0/24"_s}));
        QCOMPARE(options->server.apiKeys, QStringList({u"one"_s, u"two"_s}));
        options = parse({u"--headless"_s, u"--config"_s, conf, u"--session-api-key"_s, u"flag"_s},
                        {{u"AGENTDECK_SESSION_API_KEYS"_s, u"one"_s}}, &error);
        QVERIFY2(options, qPrintable(error));
        QCOMPARE(options->server.apiKeys, QStringList({u"flag"_s}));
    }

    void flagsTakeYesOrNo_data()
    {
        QTest::addColumn<QString>("inFile");
        QTest::addColumn<QString>("inEnvironment");
        QTest::addColumn<bool>("required");
        for (const char *word : {"yes", "true", "1", "YES"})
            QTest::addRow("file %s", word) << QString::fromLatin1(word) << QString() << true;
        for (const char *word : {"no", "false", "0"})
            QTest::addRow("file %s", word) << QString::fromLatin1(word) << QString() << false;
        QTest::addRow("empty: the default") << QString() << QString() << false;
        QTest::addRow("environment no over file yes") << u"yes"_s << u"no"_s << false;
        QTest::addRow("environment yes over file no") << u"no"_s << u"yes"_s << true;
    }
    void flagsTakeYesOrNo()
    {
        QFETCH(QString, inFile);
        QFETCH(QString, inEnvironment);
        QFETCH(bool, required);
        const QString conf =
            writeFile(u"flag.conf"_s, "AGENTDECK_REQUIRE_ISOLATION=" + inFile.toUtf8() + '\n');
        QList<std::pair<QString, QString>> variables;
        if (!inEnvironment.isEmpty())
            variables.append({u"AGENTDECK_REQUIRE_ISOLATION"_s, inEnvironment});
        QString error;
        const auto options = parse({u"--headless"_s, u"--config"_s, conf}, variables, &error);
        QVERIFY2(options, qPrintable(error));
        QCOMPARE(options->server.requireIsolation, required);
    }

    // systemd's EnvironmentFile= syntax: comments, blanks, quotes.
    void readsTheEnvironmentFileSyntax()
    {
        const QString conf =
            writeFile(u"syntax.conf"_s, "# a comment\n"
                                        "; another\n"
                                        "\n"
                                        "   AGENTDECK_REPLICA_ID = \"quoted-id\"  \n"
                                        "AGENTDECK_LLM_MODEL='a model'\n"
                                        "AGENTDECK_LLM_BASE_URL=http://127.0.0.1:8080/v1\r\n");
        QString error;
        const auto options = parse({u"--headless"_s, u"--config"_s, conf}, {}, &error);
        QVERIFY2(options, qPrintable(error));
        QCOMPARE(options->server.replicaId, u"quoted-id"_s);
        QCOMPARE(options->server.llmModel, u"a model"_s);
        QCOMPARE(options->server.llmBaseUrl, u"http://127.0.0.1:8080/v1"_s);
    }

    // A mistake in the file names the file, the line and the key; none is ignored.
    void fileMistakesAreNamed_data()
    {
        QTest::addColumn<QByteArray>("text");
        QTest::addColumn<QStringList>("words");
        QTest::addRow("unknown key")
            << "# ok\nAGENTDECK_LISTEN=127.0.0.1:0\nAGENTDECK_LISTN=127.0.0.1:1\n"_ba
            << QStringList{u":3: unknown key AGENTDECK_LISTN"_s};
        QTest::addRow("singular of a list")
            << "AGENTDECK_ALLOW_HOST=deck.lan\n"_ba
            << QStringList{u":1: unknown key AGENTDECK_ALLOW_HOST"_s, u"AGENTDECK_ALLOW_HOSTS?"_s};
        QTest::addRow("not an AGENTDECK key")
            << "PGPASSWORD=x\n"_ba << QStringList{u":1: unknown key PGPASSWORD"_s};
        QTest::addRow("bad value") << "\nAGENTDECK_LISTEN=8000\n"_ba
                                   << QStringList{u":2: AGENTDECK_LISTEN: --listen takes"_s};
        QTest::addRow("bad duration")
            << "AGENTDECK_COMMAND_TIMEOUT=soon\n"_ba
            << QStringList{u":1: AGENTDECK_COMMAND_TIMEOUT: --command-timeout takes a duration"_s};
        QTest::addRow("bad size") << "AGENTDECK_SANDBOX_MEMORY=lots\n"_ba
                                  << QStringList{
                                         u":1: AGENTDECK_SANDBOX_MEMORY: --sandbox-memory takes"_s};
        QTest::addRow("bad flag") << "AGENTDECK_REQUIRE_ISOLATION=maybe\n"_ba
                                  << QStringList{u":1: AGENTDECK_REQUIRE_ISOLATION: takes yes or "
                                                 "no, not \"maybe\""_s};
        QTest::addRow("bad database") << "AGENTDECK_DATABASE_URL=mysql://db.example/agentdeck\n"_ba
                                      << QStringList{u":1: AGENTDECK_DATABASE_URL: "_s};
        QTest::addRow("list of nothing")
            << "AGENTDECK_SESSION_API_KEYS=, ,\n"_ba
            << QStringList{u":1: AGENTDECK_SESSION_API_KEYS holds no key"_s};
        QTest::addRow("not KEY=value")
            << "AGENTDECK_LISTEN\n"_ba << QStringList{u":1: not a KEY=value line"_s};
        QTest::addRow("twice") << "AGENTDECK_LISTEN=127.0.0.1:1\nAGENTDECK_LISTEN=127.0.0.1:2\n"_ba
                               << QStringList{u":2: AGENTDECK_LISTEN is set twice (first on "
                                              "line 1)"_s};
        QTest::addRow("extra options")
            << "AGENTDECK_EXTRA_OPTIONS=--runtime process\n"_ba
            << QStringList{u":1: AGENTDECK_EXTRA_OPTIONS: is not read"_s};
        QTest::addRow("the config file itself")
            << "AGENTDECK_CONFIG=/etc/other.conf\n"_ba
            << QStringList{u":1: unknown key AGENTDECK_CONFIG"_s};
    }
    void fileMistakesAreNamed()
    {
        QFETCH(QByteArray, text);
        QFETCH(QStringList, words);
        const QString conf = writeFile(u"mistake.conf"_s, text);
        QString error;
        QVERIFY(!parse({u"--headless"_s, u"--config"_s, conf}, {}, &error));
        QVERIFY2(error.startsWith(conf + u':'), qPrintable(error));
        for (const QString &word : std::as_const(words))
            QVERIFY2(error.contains(word), qPrintable(error));
    }

    void mistakesElsewhereAreNamed()
    {
        QString error;
        QVERIFY(!parse({u"--headless"_s}, {{u"AGENTDECK_MAX_SANDBOXES"_s, u"many"_s}}, &error));
        QVERIFY2(error.startsWith(u"AGENTDECK_MAX_SANDBOXES: --max-sandboxes takes"_s),
                 qPrintable(error));
        QVERIFY(!parse({u"--headless"_s, u"--max-sandboxes"_s, u"many"_s}, {}, &error));
        QVERIFY2(error.startsWith(u"--max-sandboxes takes"_s), qPrintable(error));
        QVERIFY(!parse({u"--headless"_s, u"--config"_s, m_dir.filePath(u"missing.conf"_s)}, {},
                       &error));
        QVERIFY2(error.contains(u"cannot read the config file"_s), qPrintable(error));
    }

    // AGENTDECK_CONFIG names the file when --config does not.
    void configFileFromTheEnvironment()
    {
        const QString conf = writeFile(u"env.conf"_s, "AGENTDECK_REPLICA_ID=from-env-file\n");
        QString error;
        auto options = parse({u"--headless"_s}, {{u"AGENTDECK_CONFIG"_s, conf}}, &error);
        QVERIFY2(options, qPrintable(error));
        QCOMPARE(options->server.replicaId, u"from-env-file"_s);
        const QString other = writeFile(u"other.conf"_s, "AGENTDECK_REPLICA_ID=from-flag-file\n");
        options =
            parse({u"--headless"_s, u"--config"_s, other}, {{u"AGENTDECK_CONFIG"_s, conf}}, &error);
        QVERIFY2(options, qPrintable(error));
        QCOMPARE(options->server.replicaId, u"from-flag-file"_s);
    }

    // The LLM endpoint's key: from the environment, the file, or a file of its own.
    void llmApiKeyComesFromOnePlace_data()
    {
        QTest::addColumn<QString>("keyInConf");
        QTest::addColumn<QString>("keyInEnvironment");
        QTest::addColumn<QString>("keyFileFrom"); // "", "flag", "environment" or "conf"
        QTest::addColumn<QString>("key");         // empty: an error
        QTest::addRow("none") << QString() << QString() << QString() << QString();
        QTest::addRow("environment") << QString() << u"env-key"_s << QString() << u"env-key"_s;
        QTest::addRow("conf") << u"conf-key"_s << QString() << QString() << u"conf-key"_s;
        QTest::addRow("environment over conf")
            << u"conf-key"_s << u"env-key"_s << QString() << u"env-key"_s;
        QTest::addRow("key file flag over environment")
            << QString() << u"env-key"_s << u"flag"_s << u"file-key"_s;
        QTest::addRow("key file variable over conf")
            << u"conf-key"_s << QString() << u"environment"_s << u"file-key"_s;
        QTest::addRow("both in the environment")
            << QString() << u"env-key"_s << u"environment"_s << u"error"_s;
        QTest::addRow("both in the conf") << u"conf-key"_s << QString() << u"conf"_s << u"error"_s;
    }
    void llmApiKeyComesFromOnePlace()
    {
        QFETCH(QString, keyInConf);
        QFETCH(QString, keyInEnvironment);
        QFETCH(QString, keyFileFrom);
        QFETCH(QString, key);
        const QString keyFile = writeFile(u"llm.key"_s, "file-key\n");
        QByteArray text;
        if (!keyInConf.isEmpty())
            text += "AGENTDECK_LLM_API_KEY=" + keyInConf.toUtf8() + '\n';
        if (keyFileFrom == u"conf"_s)
            text += "AGENTDECK_LLM_API_KEY_FILE=" + keyFile.toUtf8() + '\n';
        const QString conf = writeFile(u"llm.conf"_s, text);
        QStringList arguments{u"--headless"_s, u"--config"_s, conf};
        if (keyFileFrom == u"flag"_s)
            arguments << u"--llm-api-key-file"_s << keyFile;
        QList<std::pair<QString, QString>> variables;
        if (!keyInEnvironment.isEmpty())
            variables.append({u"AGENTDECK_LLM_API_KEY"_s, keyInEnvironment});
        if (keyFileFrom == u"environment"_s)
            variables.append({u"AGENTDECK_LLM_API_KEY_FILE"_s, keyFile});
        QString error;
        const auto options = parse(arguments, variables, &error);
        if (key == u"error"_s) {
            QVERIFY(!options);
            QVERIFY2(error.contains(u"both give the LLM endpoint's key"_s), qPrintable(error));
            return;
        }
        QVERIFY2(options, qPrintable(error));
        QCOMPARE(options->server.llmApiKey, key);
    }

    void llmApiKeyFileMistakes()
    {
        QString error;
        QVERIFY(!parse({u"--headless"_s, u"--llm-api-key-file"_s, m_dir.filePath(u"none"_s)}, {},
                       &error));
        QVERIFY2(error.contains(u"--llm-api-key-file: cannot read"_s), qPrintable(error));
        const QString empty = writeFile(u"empty.key"_s, "\n");
        QVERIFY(!parse({u"--headless"_s}, {{u"AGENTDECK_LLM_API_KEY_FILE"_s, empty}}, &error));
        QVERIFY2(error.startsWith(u"AGENTDECK_LLM_API_KEY_FILE: --llm-api-key-file: "_s) &&
                     error.contains(u"is empty"_s),
                 qPrintable(error));
    }

    // Under systemd, StateDirectory= is the data dir unless one is given.
    void dataDirDefaultsToTheStateDirectory()
    {
        QString error;
        auto options =
            parse({u"--headless"_s},
                  {{u"STATE_DIRECTORY"_s, u"/var/lib/agentdeck:/var/lib/other"_s}}, &error);
        QVERIFY2(options, qPrintable(error));
        QCOMPARE(options->server.dataDir, u"/var/lib/agentdeck"_s);
        options = parse({u"--headless"_s},
                        {{u"STATE_DIRECTORY"_s, u"/var/lib/agentdeck"_s},
                         {u"AGENTDECK_DATA_DIR"_s, u"/srv/deck"_s}},
                        &error);
        QVERIFY2(options, qPrintable(error));
        QCOMPARE(options->server.dataDir, u"/srv/deck"_s);
        options = parse({u"--headless"_s}, {}, &error);
        QVERIFY2(options, qPrintable(error));
        QVERIFY(options->server.dataDir.endsWith(u"/agentdeck"_s));
        QVERIFY(!options->server.dataDir.startsWith(u"/var/lib"_s));
    }

    // --webhook URL and URL#actions=A+B, from the command line or, comma-separated, the
    // environment; one given twice is one webhook; the secret file's blanks are not the key's.
    void webhooksAndTheirFilters()
    {
        const QString secret = writeFile(u"webhook.secret"_s, "  k3y\n");
        QString error;
        auto options =
            parse({u"--headless"_s, u"--webhook"_s, u"https://a.example/h?t=1"_s, u"--webhook"_s,
                   u"http://b.example:81/h#actions=archive+delete"_s, u"--webhook"_s,
                   u"https://a.example/h?t=1"_s, u"--webhook-secret-file"_s, secret},
                  {}, &error);
        QVERIFY2(options, qPrintable(error));
        QCOMPARE(options->server.webhookSecret, "k3y"_ba);
        QCOMPARE(options->server.webhooks.size(), 2);
        QCOMPARE(options->server.webhooks.at(0).url, QUrl(u"https://a.example/h?t=1"_s));
        QVERIFY(options->server.webhooks.at(0).actions.isEmpty());
        QCOMPARE(options->server.webhooks.at(1).url, QUrl(u"http://b.example:81/h"_s));
        QCOMPARE(options->server.webhooks.at(1).actions, (QStringList{u"archive"_s, u"delete"_s}));
        QCOMPARE(options->server.webhooks.at(1).spec,
                 u"http://b.example:81/h#actions=archive+delete"_s);

        options = parse({u"--headless"_s},
                        {{u"AGENTDECK_WEBHOOK"_s, u"https://a.example/1, https://a.example/2"_s},
                         {u"AGENTDECK_WEBHOOK_SECRET_FILE"_s, secret}},
                        &error);
        QVERIFY2(options, qPrintable(error));
        QCOMPARE(options->server.webhooks.size(), 2);
        QCOMPARE(options->server.webhooks.at(1).url, QUrl(u"https://a.example/2"_s));

        QVERIFY(!parse({u"--headless"_s}, {{u"AGENTDECK_WEBHOOK"_s, u"https://a.example/1"_s}},
                       &error));
        QVERIFY2(error.startsWith(u"AGENTDECK_WEBHOOK: --webhook needs --webhook-secret-file"_s),
                 qPrintable(error));
    }
};

QTEST_GUILESS_MAIN(CommandLineTest)
#include "tst_commandline.moc"
