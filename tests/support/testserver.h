#pragma once

#include "agentdeckserver.h"
#include "serverconnection.h"

#include <QDir>
#include <QJsonObject>
#include <QTemporaryDir>

#include <memory>

namespace AgentDeck::Testing {

struct TestServerOptions
{
    QStringList apiKeys;
    QString apiKeyFile; // --api-key-file
    // Named keys (name, key): written to a key file in the data dir, given as --api-key-file.
    QList<std::pair<QString, QString>> namedKeys;
    qint64 streamBudgetBytes = 16 * 1024 * 1024;
    qint64 streamTotalBudgetBytes = 128 * 1024 * 1024;
    int streamAuthTimeoutMs = 10'000;
    int streamStallTimeoutMs = 30'000;
    std::chrono::milliseconds shutdownGrace{2'000};
    std::chrono::milliseconds runtimeRetention{0};
    std::chrono::milliseconds retentionInterval{0};
    std::chrono::milliseconds auditRetention{std::chrono::days(90)};
    bool inProcessRuntime = false; // force the in-server process runtime
    std::chrono::milliseconds sandboxIdleTimeout{30 * 60 * 1000};
    int maxSandboxes = 256;
    std::chrono::milliseconds httpRequestTimeout{60'000};
    std::chrono::milliseconds httpIdleTimeout{300'000};
    ServerParts parts;
    QString dataDir;      // empty: a fresh temporary dir
    QString workspaceDir; // --workspace-dir; empty: DATA/workspace
    // --workspace-root: the temporary dirs the tests make their callers' workspaces in.
    QStringList workspaceRoots{QDir::tempPath()};
    // Server-wide llm agent defaults.
    QString llmBaseUrl;
    QString llmModel;
    QString llmApiKey;
};

// An in-process server on a free loopback port with its own data dir, and a client for it.
// Every call blocks (QCoro::waitFor), so tests read top to bottom.
class TestServer
{
public:
    explicit TestServer(TestServerOptions options = {});
    ~TestServer();

    // Starts and waits until ready; returns false with the reason in errorString().
    bool start();
    // Stops the server, and the sandboxes it left (they would outlive the test).
    void stop();
    // Stops the server only: its sandboxes stay for the next server on the same data dir to
    // adopt (whose stop() then stops them).
    void stopKeepingSandboxes();
    QString errorString() const { return m_error; }

    AgentDeckServer &server() { return *m_server; }
    ServerConnection &client() { return *m_client; }
    QUrl url() const;
    QString dataDir() const;
    bool usesSandboxes() const;
    // AGENTDECK_TEST_POSTGRES=1: the catalog is a fresh PostgreSQL database instead of SQLite.
    static bool usesPostgres();
    // AGENTDECK_TEST_DOCKER=1: sandboxes are containers of a dockerd of the test's own
    // (--runtime docker) instead of bubblewrap's.
    static bool usesDocker();

    ApiReply call(const QByteArray &method, const QString &path, const QJsonValue &body = {},
                  const QUrlQuery &query = {});
    ApiReply get(const QString &path, const QUrlQuery &query = {});
    ApiReply post(const QString &path, const QJsonValue &body = {});
    // Creates a conversation and returns its id (null on failure); without an agent in `body`,
    // a shell conversation.
    QUuid create(const QJsonObject &body = {});
    // `body` with {"agent": {"kind": "shell"}} unless it names an agent: a create needs one.
    static QJsonObject withAgent(QJsonObject body);
    QString status(const QUuid &id);
    // The conversation's workspace.working_dir.
    QString workingDir(const QUuid &id);
    // Makes `dir` a user's, as a caller's own workspace is: a root server runs the commands in
    // it as its owner and gives away no directory it did not make. A root test gives it to
    // nobody (65534); otherwise it is the test's user's already. False when that fails.
    static bool ownAsUser(const QString &dir);
    bool waitForStatus(const QUuid &id, const QString &status, int timeoutMs = 30'000);
    // Events of a conversation as JSON objects, in seq order.
    QList<QJsonObject> events(const QUuid &id, const QUrlQuery &query = {});

    static QJsonObject message(const QString &text, bool run = false);
    // A create body: a shell conversation whose initial message is `command`.
    static QJsonObject shellConversation(const QString &command, bool run = true);
    // Sends a user message to the conversation (POST .../events).
    ApiReply send(const QUuid &id, const QString &text, bool run = false);

private:
    TestServerOptions m_options;
    std::unique_ptr<QTemporaryDir> m_tempDir;
    std::unique_ptr<AgentDeckServer> m_server;
    std::unique_ptr<ServerConnection> m_client;
    QString m_error;
};

} // namespace AgentDeck::Testing
