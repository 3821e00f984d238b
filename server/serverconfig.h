#pragma once

#include "sandboxpolicy.h"

#include <QByteArray>
#include <QHostAddress>
#include <QList>
#include <QString>
#include <QStringList>
#include <QUrl>

#include <chrono>

namespace AgentDeck {

// The longest a timer waits: Qt's timers count milliseconds in an int (24.8 days), and a longer
// interval overflowed into a timeout that never fired, or fired at once.
constexpr std::chrono::milliseconds MaxTimerDuration = std::chrono::days(24);
// The most --max-sandboxes takes: far past what a machine runs, short of an int's overflow.
constexpr int MaxSandboxes = 1'000'000;
// The longest one model request may take (--llm-timeout, agent.llm.timeout).
constexpr std::chrono::milliseconds MaxLlmTimeout = std::chrono::days(1);

// No network, and a bound on processes that a fork loop meets long before the host does.
inline SandboxPolicy defaultSandboxPolicy()
{
    SandboxPolicy policy;
    policy.processes = 1024;
    return policy;
}

// A --webhook: where the feed's records are posted, and which actions it wants (empty: all).
struct WebhookTarget
{
    QString spec; // the option's value as given: the webhook's identity in the catalog
    QUrl url;     // without the filter
    QStringList actions;
};

struct ServerConfig
{
    QHostAddress address = QHostAddress::LocalHost;
    quint16 port = 8000;
    QString dataDir;
    // The server workspace: where the remote workspace routes may reach outside a
    // conversation's workspace. Empty: DATA/workspace.
    QString workspaceDir;
    // Further dirs a caller's working_dir, and so the paths of the remote workspace routes, may
    // lie under (--workspace-root), beside the server workspace and DATA/workspaces.
    QStringList workspaceRoots;
    QStringList apiKeys;
    // --api-key-file: named keys, read again when the file changes (see ApiAuth).
    QString apiKeyFile;
    // Web pages (origins) that may call /api and the sockets, and host names a server without a
    // key may be addressed by, beside the local ones (see ApiAuth).
    QStringList allowedOrigins;
    QStringList allowedHosts;
    QString replicaId;
    // Empty: SQLite in the data dir. postgresql://...: a catalog shared by several replicas.
    QUrl databaseUrl;
    // Where clients reach this replica (named in 409 answers); empty: derived from --listen.
    QString advertiseUrl;
    std::chrono::milliseconds commandTimeout{0};
    std::chrono::milliseconds shutdownGrace{10'000};
    // Short: a dead replica's runs are taken over within seconds (fencing keeps a replica that
    // only stalled from writing once it has lost them).
    std::chrono::milliseconds leaseTtl{3'000};
    qint64 streamBudgetBytes = 16 * 1024 * 1024;
    qint64 streamTotalBudgetBytes = 128 * 1024 * 1024; // every stream's unsent bytes together
    int streamAuthTimeoutMs = 10'000;
    int streamStallTimeoutMs = 30'000; // see StreamSettings::stallTimeoutMs
    qsizetype maxBodyBytes = 4 * 1024 * 1024;
    // GET /api/file/download: the largest file it sends.
    qint64 maxDownloadBytes = qint64(1024) * 1024 * 1024;
    // HTTP connections (see HttpLimits).
    std::chrono::milliseconds httpRequestTimeout{60'000};
    std::chrono::milliseconds httpIdleTimeout{300'000};
    // SQLite only: past this size the write-ahead log is copied into the database and starts
    // over (see WalCheckpointer); it is also the size the log file is cut back to.
    qint64 walLimitBytes = 64 * 1024 * 1024;

    enum class RuntimeKind
    {
        Local,
        Docker,
        Process
    };
    RuntimeKind runtime = RuntimeKind::Local;
    // `--runtime docker`: the engine (--docker-host); the images are the sandbox policy's.
    QString dockerHost;
    QString dockerTlsDirectory; // --docker-tls-dir: client certificates of a TLS engine
    // `--runtime docker`: freeze, or stop keeping the disk, a container idle this long
    // (--sandbox-idle-pause, --sandbox-idle-stop); 0: never.
    std::chrono::milliseconds sandboxIdlePause{0};
    std::chrono::milliseconds sandboxIdleStop{0};
    // `--runtime docker`: containers of the default image kept started for new conversations
    // (--sandbox-warm, WarmSandboxes).
    int sandboxWarm = 0;
    // The binary started as `agentdeck sandbox-host`; empty: this executable.
    QString sandboxProgram;
    std::chrono::milliseconds sandboxIdleTimeout{30 * 60 * 1000};
    // `--runtime local`: sandbox hosts at once (see LocalSandboxSettings::maxSandboxes).
    int maxSandboxes = 256;
    // What commands may use (--sandbox-*): the default and the most of every conversation.
    SandboxPolicy sandboxPolicy = defaultSandboxPolicy();
    // The size of each workspace the server makes (--sandbox-disk; 0: no limit), where the
    // machine can enforce it (WorkspaceDisks).
    qint64 sandboxDiskBytes = 0;
    // The ranges an `egress` network reaches beside the public addresses
    // (--sandbox-egress-allow; IPv4 CIDRs, host bits cleared).
    QStringList sandboxEgressAllow;
    // The operator did not give --sandbox-processes: the server lowers the default to what fits
    // the host with --max-sandboxes sandboxes (fitSandboxProcesses()).
    bool fitSandboxProcesses = true;
    // Refuse to start when commands cannot be isolated (--require-isolation).
    bool requireIsolation = false;
    // Off (0) by default.
    std::chrono::milliseconds runtimeRetention{0};
    std::chrono::milliseconds retentionInterval{0}; // 0: derived from the retention
    // --audit-retention: audit records older than this are deleted; 0: kept for ever.
    std::chrono::milliseconds auditRetention{std::chrono::days(90)};
    // --webhook and the key their payloads are signed with (--webhook-secret-file).
    QList<WebhookTarget> webhooks;
    QByteArray webhookSecret;

    // Server-wide defaults of the llm agent (--llm-base-url, --llm-model, --llm-timeout,
    // AGENTDECK_LLM_API_KEY); a conversation's own settings win.
    QString llmBaseUrl;
    QString llmModel;
    QString llmApiKey;
    std::chrono::milliseconds llmTimeout{120'000};
};

} // namespace AgentDeck
