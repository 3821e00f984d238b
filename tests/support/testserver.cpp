#include "testserver.h"

#include "dockerdaemon.h"
#include "postgrescluster.h"

#include <QCoroSignal>
#include <QDeadlineTimer>
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QTest>

#include <csignal>
#include <unistd.h>

using namespace Qt::StringLiterals;

namespace AgentDeck::Testing {

namespace {
// With AGENTDECK_TEST_POSTGRES=1 every data dir gets a database of its own (a server restarted
// on the same data dir finds its catalog again) in one throwaway cluster, started on first use
// and stopped when the application ends.
QUrl postgresDatabaseFor(const QString &dataDir, QString *error)
{
    static PostgresCluster *cluster = nullptr;
    static int databases = 0;
    static QHash<QString, QUrl> byDataDir;
    if (const QUrl known = byDataDir.value(dataDir); known.isValid())
        return known;
    if (!cluster) {
        cluster = new PostgresCluster;
        if (!cluster->start(error)) {
            delete std::exchange(cluster, nullptr);
            return {};
        }
        qAddPostRoutine([] { delete std::exchange(cluster, nullptr); });
    }
    const QUrl url = cluster->createDatabase(u"test_%1"_s.arg(++databases), error);
    if (url.isValid())
        byDataDir.insert(dataDir, url);
    return url;
}

// With AGENTDECK_TEST_DOCKER=1 the sandboxes are containers (--runtime docker) of one dockerd,
// started with its image on first use and stopped when the application ends.
QString dockerHostForTests(QString *error)
{
    static DockerDaemon *daemon = nullptr;
    if (!daemon) {
        daemon = new DockerDaemon;
        if (!daemon->startWithTestImage(error)) {
            delete std::exchange(daemon, nullptr);
            return {};
        }
        qAddPostRoutine([] { delete std::exchange(daemon, nullptr); });
    }
    return daemon->host();
}
} // namespace

bool TestServer::usesDocker()
{
    return qEnvironmentVariable("AGENTDECK_TEST_DOCKER") == u"1"_s;
}

bool TestServer::usesPostgres()
{
    return qEnvironmentVariable("AGENTDECK_TEST_POSTGRES") == u"1"_s;
}

TestServer::TestServer(TestServerOptions options)
    : m_options(std::move(options))
{}

TestServer::~TestServer()
{
    stop();
}

bool TestServer::start()
{
    if (m_options.dataDir.isEmpty()) {
        m_tempDir = std::make_unique<QTemporaryDir>();
        m_options.dataDir = m_tempDir->path();
    }
    ServerConfig config;
    config.address = QHostAddress::LocalHost;
    config.port = 0;
    config.dataDir = m_options.dataDir;
    config.apiKeys = m_options.apiKeys;
    if (!m_options.namedKeys.isEmpty()) {
        QFile keys(QDir(m_options.dataDir).filePath(u"keys"_s));
        if (!QDir().mkpath(m_options.dataDir) ||
            !keys.open(QIODevice::WriteOnly | QIODevice::Truncate)) {
            m_error = u"cannot write %1"_s.arg(keys.fileName());
            return false;
        }
        for (const auto &[name, key] : std::as_const(m_options.namedKeys))
            keys.write((name + u' ' + key + u'\n').toUtf8());
        m_options.apiKeyFile = keys.fileName();
    }
    config.apiKeyFile = m_options.apiKeyFile;
    config.workspaceRoots = m_options.workspaceRoots;
    config.workspaceDir = m_options.workspaceDir;
    config.streamBudgetBytes = m_options.streamBudgetBytes;
    config.streamTotalBudgetBytes = m_options.streamTotalBudgetBytes;
    config.streamAuthTimeoutMs = m_options.streamAuthTimeoutMs;
    config.streamStallTimeoutMs = m_options.streamStallTimeoutMs;
    config.shutdownGrace = m_options.shutdownGrace;
    config.runtimeRetention = m_options.runtimeRetention;
    config.retentionInterval = m_options.retentionInterval;
    config.auditRetention = m_options.auditRetention;
    config.sandboxIdleTimeout = m_options.sandboxIdleTimeout;
    config.maxSandboxes = m_options.maxSandboxes;
    config.httpRequestTimeout = m_options.httpRequestTimeout;
    config.httpIdleTimeout = m_options.httpIdleTimeout;
    config.llmBaseUrl = m_options.llmBaseUrl;
    config.llmModel = m_options.llmModel;
    config.llmApiKey = m_options.llmApiKey;
    // Real sandboxes need the real binary (ctest passes it); without it, commands run in-process.
    config.sandboxProgram = qEnvironmentVariable("AGENTDECK_BINARY");
    config.runtime = config.sandboxProgram.isEmpty() || m_options.inProcessRuntime
                         ? ServerConfig::RuntimeKind::Process
                         : ServerConfig::RuntimeKind::Local;
    if (usesDocker() && config.runtime == ServerConfig::RuntimeKind::Local) {
        config.runtime = ServerConfig::RuntimeKind::Docker;
        config.dockerHost = dockerHostForTests(&m_error);
        if (config.dockerHost.isEmpty())
            return false;
        config.sandboxPolicy.image = QString::fromLatin1(DockerDaemon::TestImage);
    }
    if (usesPostgres()) {
        config.databaseUrl = postgresDatabaseFor(config.dataDir, &m_error);
        if (config.databaseUrl.isEmpty())
            return false;
    }
    m_server = std::make_unique<AgentDeckServer>(config, std::move(m_options.parts));
    if (!m_server->start(&m_error))
        return false;
    if (!m_server->isReady() && !QTest::qWaitFor([this] { return m_server->isReady(); }, 10'000)) {
        m_error = u"server did not become ready"_s;
        return false;
    }
    m_client = std::make_unique<ServerConnection>(m_server->url());
    if (!m_options.apiKeys.isEmpty())
        m_client->setApiKey(m_options.apiKeys.first());
    return true;
}

void TestServer::stopKeepingSandboxes()
{
    if (!m_server)
        return;
    QCoro::waitFor(m_server->stop());
    m_client.reset();
    m_server.reset();
}

void TestServer::stop()
{
    if (!m_server)
        return;
    stopKeepingSandboxes();
    // Sandboxes outlive a stopped server by design; a test's must not outlive the test.
    const QDir runtimes(QDir(m_options.dataDir).filePath(u"runtimes"_s));
    for (const QString &name : runtimes.entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
        QFile pidFile(runtimes.filePath(name + u"/sandbox.pid"_s));
        if (pidFile.open(QIODevice::ReadOnly)) {
            const qint64 pid = pidFile.readAll().trimmed().toLongLong();
            if (pid > 0)
                ::kill(static_cast<pid_t>(pid), SIGKILL);
        }
    }
}

QUrl TestServer::url() const
{
    return m_server->url();
}

bool TestServer::usesSandboxes() const
{
    return m_server->config().runtime != ServerConfig::RuntimeKind::Process;
}

QString TestServer::dataDir() const
{
    return m_options.dataDir;
}

ApiReply TestServer::call(const QByteArray &method, const QString &path, const QJsonValue &body,
                          const QUrlQuery &query)
{
    QByteArray bytes;
    if (body.isObject())
        bytes = QJsonDocument(body.toObject()).toJson(QJsonDocument::Compact);
    else if (body.isArray())
        bytes = QJsonDocument(body.toArray()).toJson(QJsonDocument::Compact);
    return QCoro::waitFor(m_client->request(method, path, query, bytes));
}

ApiReply TestServer::get(const QString &path, const QUrlQuery &query)
{
    return call("GET"_ba, path, {}, query);
}

ApiReply TestServer::post(const QString &path, const QJsonValue &body)
{
    return call("POST"_ba, path, body.isUndefined() ? QJsonValue(QJsonObject()) : body);
}

QUuid TestServer::create(const QJsonObject &body)
{
    const ApiReply reply = post(u"/api/conversations"_s, withAgent(body));
    if (!reply.ok())
        return {};
    return parseWireId(reply.json.toObject().value(u"id"_s).toString()).value_or(QUuid());
}

QJsonObject TestServer::withAgent(QJsonObject body)
{
    if (!body.contains(u"agent"_s))
        body.insert(u"agent"_s, QJsonObject{{u"kind"_s, u"shell"_s}});
    return body;
}

QString TestServer::status(const QUuid &id)
{
    return get(ServerConnection::conversationPath(id))
        .json.toObject()
        .value(u"execution_status"_s)
        .toString();
}

bool TestServer::ownAsUser(const QString &dir)
{
    constexpr uid_t Nobody = 65534;
    return ::geteuid() != 0 || ::chown(QFile::encodeName(dir).constData(), Nobody, Nobody) == 0;
}

QString TestServer::workingDir(const QUuid &id)
{
    return get(ServerConnection::conversationPath(id))
        .json.toObject()
        .value(u"workspace"_s)
        .toObject()
        .value(u"working_dir"_s)
        .toString();
}

bool TestServer::waitForStatus(const QUuid &id, const QString &wanted, int timeoutMs)
{
    return QTest::qWaitFor([&] { return status(id) == wanted; }, timeoutMs);
}

QList<QJsonObject> TestServer::events(const QUuid &id, const QUrlQuery &query)
{
    QList<QJsonObject> events;
    QUrlQuery pageQuery = query;
    for (;;) {
        const ApiReply reply =
            get(ServerConnection::conversationPath(id, u"events/search"), pageQuery);
        if (!reply.ok())
            return events;
        for (const QJsonValue &item : reply.json.toObject().value(u"items"_s).toArray())
            events.append(item.toObject());
        const QString next = reply.json.toObject().value(u"next_page_id"_s).toString();
        if (next.isEmpty())
            return events;
        pageQuery.removeAllQueryItems(u"page_id"_s);
        pageQuery.addQueryItem(u"page_id"_s, next);
    }
}

QJsonObject TestServer::message(const QString &text, bool run)
{
    return MessageRequest{u"user"_s, text, run}.toJson();
}

QJsonObject TestServer::shellConversation(const QString &command, bool run)
{
    return {{u"agent"_s, QJsonObject{{u"kind"_s, u"shell"_s}}},
            {u"initial_message"_s, message(command, run)}};
}

ApiReply TestServer::send(const QUuid &id, const QString &text, bool run)
{
    return post(ServerConnection::conversationPath(id, u"events"_s), message(text, run));
}

} // namespace AgentDeck::Testing
