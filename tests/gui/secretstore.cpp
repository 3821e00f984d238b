// The session API key of a watched server in the desktop's secret store (QtKeychain): written
// once the server took it, and read back at the next start so that nobody types it again.
// Run by ctest under tests/gui/with-secret-store.sh, which gives it a Secret Service.
#include "consolecontroller.h"
#include "consolekeys.h"
#include "consolesettings.h"
#include "embeddedserver.h"
#include "fleetwindow.h"
#include "guitestmain.h"

#include <QFile>
#include <QRandomGenerator>
#include <QStandardPaths>
#include <QTableView>
#include <QTemporaryDir>

using namespace Qt::StringLiterals;
using namespace AgentDeck;

class SecretStoreTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { AGENTDECK_GUI_TEST_INIT(); }

    void aKeptKeyIsUsedAtTheNextStart()
    {
        const QString key = u"kept-%1"_s.arg(QRandomGenerator::global()->generate());
        QTemporaryDir dir;
        ServerConfig config;
        config.port = 0;
        config.dataDir = dir.path();
        config.sandboxProgram = qEnvironmentVariable("AGENTDECK_BINARY");
        config.apiKeys = {key};
        EmbeddedServer server(config);
        QString error;
        const QUrl url = server.start(&error);
        QVERIFY2(!url.isEmpty(), qPrintable(error));
        ServerConnection client(url);
        client.setApiKey(key);
        CreateConversationRequest request;
        request.title = u"behind a kept key"_s;
        QVERIFY(QCoro::waitFor(client.createConversation(request)).ok());

        QCOMPARE(QCoro::waitFor(ConsoleKeys::read(url)), std::nullopt);
        const QString problem = QCoro::waitFor(ConsoleKeys::write(url, key));
        if (!problem.isEmpty()) {
            if (qEnvironmentVariableIsSet("AGENTDECK_TEST_SECRET_STORE"))
                QFAIL(qPrintable(u"the secret store did not keep the key: "_s + problem));
            QSKIP(qPrintable(u"no secret store runs here: "_s + problem));
        }
        // The same server however its URL is typed.
        QCOMPARE(QCoro::waitFor(ConsoleKeys::read(QUrl(url.toString() + u"/"_s))),
                 std::optional(key));

        // A console started without the key finds it in the store.
        {
            FleetWindow fleet;
            fleet.addServer(url);
            QTRY_COMPARE_WITH_TIMEOUT(fleet.conversationsView()->model()->rowCount(), 1, 10000);
            QVERIFY(!fleet.controllerOf(url)->needsKey());
        }
        consoleSettings()->sync();
        QFile settings(consoleSettings()->fileName());
        QVERIFY(!settings.open(QIODevice::ReadOnly) || !settings.readAll().contains(key.toUtf8()));
        server.stop();
    }
};

AGENTDECK_GUI_TEST_MAIN(SecretStoreTest)

#include "secretstore.moc"
