#include "commandline.h"

#include "consoleserverfile.h"
#include "runtime/dockerengine.h"
#include "runtime/egressfilter.h"
#include "serverconnection.h"
#include "storage/database.h"
#include "workspacedisks.h"

#include <QCommandLineParser>
#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QProcessEnvironment>
#include <QRegularExpression>

#include <algorithm>

using namespace Qt::StringLiterals;

namespace AgentDeck {

std::optional<std::chrono::milliseconds> parseDuration(const QString &text)
{
    static const QRegularExpression pattern(u"^(\\d+)(ms|s|m|h|d)?$"_s);
    const auto match = pattern.match(text.trimmed());
    if (!match.hasMatch())
        return std::nullopt;
    const QString unit = match.captured(2);
    const qint64 unitMs = unit == u"ms"_s  ? 1
                          : unit == u"m"_s ? 60'000
                          : unit == u"h"_s ? 3'600'000
                          : unit == u"d"_s ? 86'400'000
                                           : 1'000;
    // A hundred years at most: larger values overflowed into negative durations, which turned
    // a timeout off.
    constexpr qint64 MaxMs = qint64(100) * 365 * 86'400'000;
    bool readable = false;
    const qint64 value = match.captured(1).toLongLong(&readable);
    if (!readable || value > MaxMs / unitMs)
        return std::nullopt;
    return std::chrono::milliseconds(value * unitMs);
}

std::optional<qint64> parseSize(const QString &text)
{
    static const QRegularExpression pattern(u"^(\\d{1,12})\\s*(?:([KMG])(?:iB)?)?$"_s,
                                            QRegularExpression::CaseInsensitiveOption);
    const auto match = pattern.match(text.trimmed());
    if (!match.hasMatch())
        return std::nullopt;
    const int shift = match.captured(2).isEmpty()
                          ? 0
                          : 10 * int(u"KMG"_s.indexOf(match.captured(2).toUpper()) + 1);
    return match.captured(1).toLongLong() << shift;
}

namespace {
bool parseListen(const QString &text, ServerConfig &config)
{
    const qsizetype colon = text.lastIndexOf(u':');
    if (colon <= 0)
        return false;
    QString host = text.left(colon);
    if (host.startsWith(u'[') && host.endsWith(u']'))
        host = host.mid(1, host.size() - 2);
    bool ok = false;
    const uint port = text.mid(colon + 1).toUInt(&ok);
    if (!ok || port > 65535)
        return false;
    const QHostAddress address =
        host == u"localhost"_s ? QHostAddress(QHostAddress::LocalHost) : QHostAddress(host);
    if (address.isNull())
        return false;
    config.address = address;
    config.port = quint16(port);
    return true;
}
// The server's sandbox policy from its --sandbox-* options.
bool parseSandboxPolicy(const QCommandLineParser &parser, const QCommandLineOption &network,
                        const QCommandLineOption &memory, const QCommandLineOption &processes,
                        const QCommandLineOption &cpu, const QCommandLineOption &fileSize,
                        SandboxPolicy &policy, QString *error)
{
    if (parser.isSet(network)) {
        const auto mode = sandboxNetworkFromString(parser.value(network));
        if (!mode) {
            *error = u"--sandbox-network takes none, egress or host"_s;
            return false;
        }
        policy.network = *mode;
    }
    // Below a few MiB of address space not even bash starts: every command would fail.
    constexpr qint64 MinMemory = qint64(16) << 20;
    if (parser.isSet(memory)) {
        const auto size = parseSize(parser.value(memory));
        if (!size || (*size != 0 && *size < MinMemory)) {
            *error = u"--sandbox-memory takes a size of 16MiB or more, e.g. 2GiB (0: no limit)"_s;
            return false;
        }
        policy.memoryBytes = *size;
    }
    if (parser.isSet(fileSize)) {
        const auto size = parseSize(parser.value(fileSize));
        if (!size) {
            *error = u"--sandbox-file-size takes a size, e.g. 1GiB (0: no limit)"_s;
            return false;
        }
        policy.fileSizeBytes = *size;
    }
    if (parser.isSet(processes)) {
        bool ok = false;
        const qint64 count = parser.value(processes).toLongLong(&ok);
        // A command is a process or two of the sandbox's own (bash, bubblewrap's init).
        if (!ok || count < 0 || (count > 0 && count < 8) || count > 4'000'000) {
            *error = u"--sandbox-processes takes a number from 8 to 4000000 (0: no limit)"_s;
            return false;
        }
        policy.processes = count;
    }
    if (parser.isSet(cpu)) {
        const auto duration = parseDuration(parser.value(cpu));
        if (!duration) {
            *error = u"--sandbox-cpu takes a duration such as 90s or 15m (0: no limit)"_s;
            return false;
        }
        // The kernel counts whole seconds: part of one is one.
        policy.cpuSeconds = (duration->count() + 999) / 1000;
    }
    return true;
}

} // namespace

std::optional<Options> parseOptions(const QStringList &arguments, QString *error, QString *message)
{
    QCommandLineParser parser;
    // "-headless" is --headless, as Qt's own options take one dash (-platform); read as
    // compacted short options (-h -e -a ...), it printed the help.
    parser.setSingleDashWordOptionMode(QCommandLineParser::ParseAsLongOptions);
    parser.setApplicationDescription(
        u"AgentDeck: an agent server and the operator console that watches it."_s);
    const QCommandLineOption help({u"h"_s, u"help"_s}, u"Show this help."_s);
    const QCommandLineOption version(u"version"_s, u"Show the version."_s);
    const QCommandLineOption headless(u"headless"_s,
                                      u"Run the server as a daemon, without a window."_s);
    const QCommandLineOption connect(
        u"connect"_s,
        u"Watch the server at URL (console only). Given twice or more: "
        "the All servers window, which remembers them."_s,
        u"URL"_s);
    const QCommandLineOption listen(u"listen"_s,
                                    u"Address to listen on (default 127.0.0.1:8000; port 0 picks "
                                    "a free one)."_s,
                                    u"HOST:PORT"_s);
    const QCommandLineOption dataDir(u"data-dir"_s, u"Where the catalog and workspaces live."_s,
                                     u"DIR"_s);
    const QCommandLineOption workspaceDir(
        u"workspace-dir"_s,
        u"The server workspace: where /api/bash and /api/file reach outside conversations' "
        "workspaces (default DATA/workspace)."_s,
        u"DIR"_s);
    const QCommandLineOption workspaceRoot(
        u"workspace-root"_s,
        u"A directory under which clients may name a conversation's workspace.working_dir "
        "(repeatable; beside the server workspace)."_s,
        u"DIR"_s);
    const QCommandLineOption key(u"session-api-key"_s,
                                 u"Require this key in X-Session-API-Key (repeatable; also "
                                 "AGENTDECK_SESSION_API_KEYS, comma-separated)."_s,
                                 u"KEY"_s);
    const QCommandLineOption allowOrigin(u"allow-origin"_s,
                                         u"Let web pages at ORIGIN (e.g. https://tools.example) "
                                         "call the API; others are refused (repeatable; * for "
                                         "any)."_s,
                                         u"ORIGIN"_s);
    const QCommandLineOption allowHost(u"allow-host"_s,
                                       u"Without a key, accept requests addressed to host NAME "
                                       "too, beside localhost, IP addresses and this machine's "
                                       "name (repeatable)."_s,
                                       u"NAME"_s);
    const QCommandLineOption commandTimeout(u"command-timeout"_s,
                                            u"Stop a command after this long (e.g. 10m; default: "
                                            "no limit)."_s,
                                            u"DURATION"_s);
    const QCommandLineOption shutdownGrace(u"shutdown-grace"_s,
                                           u"How long a graceful stop waits for runs to reach a "
                                           "safe point (default 10s)."_s,
                                           u"DURATION"_s);
    const QCommandLineOption runtime(u"runtime"_s,
                                     u"Where commands run: local (a sandbox process per "
                                     "conversation, default), docker (a container per "
                                     "conversation, see --sandbox-image) or process (inside the "
                                     "server)."_s,
                                     u"KIND"_s);
    const QCommandLineOption idleTimeout(u"sandbox-idle-timeout"_s,
                                         u"Stop a sandbox idle for this long (default 30m)."_s,
                                         u"DURATION"_s);
    const QCommandLineOption maxSandboxes(u"max-sandboxes"_s,
                                          u"Keep at most N sandboxes at once; at the limit the "
                                          "one idle the longest is stopped (default 256; with "
                                          "--runtime local, it and --sandbox-processes must fit "
                                          "kernel.pid_max)."_s,
                                          u"N"_s);
    const QCommandLineOption retention(u"runtime-retention"_s,
                                       u"Expire runtimes inactive for longer than this, deleting "
                                       "server-owned workspaces (e.g. 7d; default: off)."_s,
                                       u"DURATION"_s);
    const QCommandLineOption leaseTtl(u"lease-ttl"_s,
                                      u"How long a run's lease lasts without renewal (default "
                                      "3s; renewed every third of it)."_s,
                                      u"DURATION"_s);
    const QCommandLineOption replicaId(u"replica-id"_s,
                                       u"Name of this server among the replicas (default: host "
                                       "name and a random suffix)."_s,
                                       u"NAME"_s);
    const QCommandLineOption database(u"database"_s,
                                      u"Share a PostgreSQL catalog with other replicas: "
                                      "postgresql://USER@HOST:PORT/DB (password from the URL or "
                                      "PGPASSWORD; also AGENTDECK_DATABASE_URL). Default: SQLite "
                                      "in the data dir."_s,
                                      u"URL"_s);
    const QCommandLineOption advertiseUrl(u"advertise-url"_s,
                                          u"Where clients reach this replica, as other replicas "
                                          "name it (default: from --listen)."_s,
                                          u"URL"_s);
    const QCommandLineOption walLimit(u"wal-limit"_s,
                                      u"SQLite: start the write-ahead log over once it passes "
                                      "this size (default 64MiB; 64KiB to 16GiB)."_s,
                                      u"SIZE"_s);
    parser.addOptions({help,          version,      headless,    connect,      listen,
                       dataDir,       key,          allowOrigin, allowHost,    commandTimeout,
                       shutdownGrace, replicaId,    database,    advertiseUrl, runtime,
                       idleTimeout,   maxSandboxes, retention,   leaseTtl,     walLimit,
                       workspaceDir,  workspaceRoot});
    const QCommandLineOption llmBaseUrl(u"llm-base-url"_s,
                                        u"Default OpenAI-compatible endpoint of llm agents (e.g. "
                                        "http://127.0.0.1:8080/v1); the key comes from "
                                        "AGENTDECK_LLM_API_KEY."_s,
                                        u"URL"_s);
    const QCommandLineOption llmModel(u"llm-model"_s, u"Default model of llm agents."_s, u"NAME"_s);
    const QCommandLineOption llmTimeout(
        u"llm-timeout"_s, u"Default timeout of one model request (default 120s)."_s, u"DURATION"_s);
    parser.addOptions({llmBaseUrl, llmModel, llmTimeout});
    const QCommandLineOption sandboxNetwork(
        u"sandbox-network"_s,
        u"What network commands get: none (default), egress (public addresses only, not the "
        "host's) or host."_s,
        u"MODE"_s);
    const QCommandLineOption sandboxMemory(
        u"sandbox-memory"_s,
        u"Memory (address space) of each process of a command, e.g. 2GiB (default and 0: no "
        "limit)."_s,
        u"SIZE"_s);
    const QCommandLineOption sandboxProcesses(
        u"sandbox-processes"_s,
        u"Processes and threads a sandbox may have at once (default 1024, or what fits "
        "kernel.pid_max with --max-sandboxes sandboxes)."_s,
        u"N"_s);
    const QCommandLineOption sandboxCpu(
        u"sandbox-cpu"_s,
        u"CPU time of each process of a command, e.g. 10m (default and 0: no limit)."_s,
        u"DURATION"_s);
    const QCommandLineOption sandboxFileSize(
        u"sandbox-file-size"_s,
        u"The largest file a command may write, e.g. 1GiB (default and 0: no limit)."_s, u"SIZE"_s);
    const QCommandLineOption sandboxDisk(
        u"sandbox-disk"_s,
        u"The size of each conversation's workspace the server makes, e.g. 4GiB (at least 16MiB; "
        "default and 0: no limit). Enforced by a root server with loop devices and mkfs.ext4."_s,
        u"SIZE"_s);
    const QCommandLineOption sandboxEgressAllow(
        u"sandbox-egress-allow"_s,
        u"An IPv4 range (CIDR) the egress network reaches although it is not public, e.g. "
        "10.20.0.0/16 (repeatable)."_s,
        u"CIDR"_s);
    const QCommandLineOption dockerHost(
        u"docker-host"_s,
        u"The Docker engine of --runtime docker: unix:///PATH or tcp://HOST:PORT (default: "
        "$DOCKER_HOST, else unix:///var/run/docker.sock)."_s,
        u"URL"_s);
    const QCommandLineOption sandboxImage(
        u"sandbox-image"_s,
        u"The image of --runtime docker's containers, on the engine already (needs a shell; "
        "bash for the shell agent)."_s,
        u"IMAGE"_s);
    const QCommandLineOption sandboxImages(
        u"sandbox-images"_s,
        u"An image a conversation may ask for (sandbox.image) besides --sandbox-image; * and ? "
        "match any text and one character (repeatable)."_s,
        u"PATTERN"_s);
    const QCommandLineOption idlePause(
        u"sandbox-idle-pause"_s,
        u"--runtime docker: freeze a container idle for this long (the engine's pause); the next "
        "command thaws it (default: never)."_s,
        u"DURATION"_s);
    const QCommandLineOption idleStop(
        u"sandbox-idle-stop"_s,
        u"--runtime docker: stop a container idle for this long, keeping its disk; the next "
        "command starts it again (default: never)."_s,
        u"DURATION"_s);
    const QCommandLineOption requireIsolation(
        u"require-isolation"_s,
        u"Refuse to start when commands cannot be isolated (no bubblewrap, no namespaces)."_s);
    parser.addOptions({sandboxNetwork, sandboxMemory, sandboxProcesses, sandboxCpu, sandboxFileSize,
                       sandboxDisk, sandboxEgressAllow, dockerHost, sandboxImage, sandboxImages,
                       idlePause, idleStop, requireIsolation});
    const QCommandLineOption logFormat(
        u"log-format"_s,
        u"How log lines are written to stderr: text (default: time with its UTC offset, level, "
        "category, message) or json (one object a line). Under systemd they go to the journal, "
        "with their priorities."_s,
        u"FORMAT"_s);
    parser.addOption(logFormat);

    if (!parser.parse(QStringList{u"agentdeck"_s} + arguments)) {
        *error = parser.errorText();
        return std::nullopt;
    }
    if (parser.isSet(help)) {
        // Made before any QCoreApplication exists, Qt's help named the program
        // "<executable_name>".
        *message = parser.helpText().replace(u"<executable_name>"_s, u"agentdeck"_s) +
                   u"\nThe command-line client: agentdeck ctl --help\n"_s;
        return std::nullopt;
    }
    if (parser.isSet(version)) {
        *message = u"agentdeck " AGENTDECK_VERSION "\n"_s;
        return std::nullopt;
    }
    if (!parser.positionalArguments().isEmpty()) {
        *error = u"unexpected argument \"%1\""_s.arg(parser.positionalArguments().first());
        return std::nullopt;
    }

    // Each would have been dropped without a word: the daemon watches nothing, and an empty
    // directory was the current one.
    if (parser.isSet(headless) && parser.isSet(connect)) {
        *error = u"--connect is for the console; --headless serves a server of its own"_s;
        return std::nullopt;
    }
    if (parser.isSet(dataDir) && parser.value(dataDir).trimmed().isEmpty()) {
        *error = u"--data-dir cannot be empty"_s;
        return std::nullopt;
    }

    Options options;
    options.mode = parser.isSet(headless)  ? Mode::Headless
                   : parser.isSet(connect) ? Mode::Connect
                                           : Mode::Console;
    for (const QString &given : parser.values(connect)) {
        const auto url = ServerConnection::baseUrlFrom(given);
        if (!url) {
            *error = u"--connect takes HOST:PORT or an http:// or https:// URL, e.g. "
                     "http://127.0.0.1:8000"_s;
            return std::nullopt;
        }
        if (!options.connectUrls.contains(*url))
            options.connectUrls.append(*url);
    }
    if (!options.connectUrls.isEmpty())
        options.connectUrl = options.connectUrls.first();
    options.listenGiven = parser.isSet(listen);
    if (parser.isSet(listen) && !parseListen(parser.value(listen), options.server)) {
        *error = u"--listen takes HOST:PORT, e.g. 127.0.0.1:8000"_s;
        return std::nullopt;
    }
    options.server.dataDir = parser.isSet(dataDir) ? parser.value(dataDir) : defaultDataDir();
    if (parser.isSet(workspaceDir)) {
        if (parser.value(workspaceDir).trimmed().isEmpty()) {
            *error = u"--workspace-dir cannot be empty"_s;
            return std::nullopt;
        }
        options.server.workspaceDir = parser.value(workspaceDir);
    }
    for (const QString &root : parser.values(workspaceRoot)) {
        if (!QDir::isAbsolutePath(root) || !QFileInfo(root).isDir()) {
            *error = u"--workspace-root %1 must be an existing directory, named by an absolute "
                     "path"_s.arg(root);
            return std::nullopt;
        }
        options.server.workspaceRoots.append(root);
    }
    // A key is compared with the header as HTTP hands it over, without the blanks around it; an
    // empty one would turn the check off while the operator believes it is on.
    for (const QString &given : parser.values(key)) {
        if (given.trimmed().isEmpty()) {
            *error = u"--session-api-key cannot be empty"_s;
            return std::nullopt;
        }
        options.server.apiKeys.append(given.trimmed());
    }
    options.server.allowedOrigins = parser.values(allowOrigin);
    options.server.allowedHosts = parser.values(allowHost);
    // Left empty (as in agentdeck.conf) the variable means no key; set to blanks and commas only,
    // it is most likely a list whose parts were not filled in.
    const QString envKeys = qEnvironmentVariable("AGENTDECK_SESSION_API_KEYS");
    QStringList fromEnvironment;
    for (const QString &envKey : envKeys.split(u',')) {
        if (!envKey.trimmed().isEmpty())
            fromEnvironment.append(envKey.trimmed());
    }
    if (fromEnvironment.isEmpty() && !envKeys.isEmpty()) {
        *error = u"AGENTDECK_SESSION_API_KEYS holds no key (only blanks and commas); leave it "
                 "empty to run without one"_s;
        return std::nullopt;
    }
    options.server.apiKeys += fromEnvironment;
    // Watching another server, the console is a client like ctl, and reads the client's
    // variable first.
    const QString clientKey = qEnvironmentVariable("AGENTDECK_SESSION_API_KEY").trimmed();
    if (options.mode == Mode::Connect && !parser.isSet(key) && !clientKey.isEmpty())
        options.server.apiKeys.prepend(clientKey);
    // A client cannot send such a key as a header, and the console would have sent it.
    if (!std::all_of(options.server.apiKeys.cbegin(), options.server.apiKeys.cend(),
                     ServerConnection::isSendableApiKey)) {
        *error = u"a session API key cannot contain control characters (a line break, a tab)"_s;
        return std::nullopt;
    }
    // What a timer waits for is at most MaxTimerDuration: Qt's timers take an int of
    // milliseconds, and a command timeout of 30d stopped nothing. The retention is compared with
    // timestamps and may be longer; a model request is given a day at most.
    using std::chrono::milliseconds;
    constexpr milliseconds NoLimit = milliseconds::max();
    for (const auto &[option, target, limit, limitText] :
         {std::tuple{&commandTimeout, &options.server.commandTimeout, MaxTimerDuration, "24d"},
          std::tuple{&shutdownGrace, &options.server.shutdownGrace, MaxTimerDuration, "24d"},
          std::tuple{&idleTimeout, &options.server.sandboxIdleTimeout, MaxTimerDuration, "24d"},
          std::tuple{&idlePause, &options.server.sandboxIdlePause, MaxTimerDuration, "24d"},
          std::tuple{&idleStop, &options.server.sandboxIdleStop, MaxTimerDuration, "24d"},
          std::tuple{&retention, &options.server.runtimeRetention, NoLimit, ""},
          std::tuple{&leaseTtl, &options.server.leaseTtl, MaxTimerDuration, "24d"},
          std::tuple{&llmTimeout, &options.server.llmTimeout, MaxLlmTimeout, "1d"}}) {
        if (!parser.isSet(*option))
            continue;
        const QString name = option->names().constFirst();
        const auto duration = parseDuration(parser.value(*option));
        if (!duration) {
            *error = u"--%1 takes a duration such as 90s, 15m, 12h or 7d"_s.arg(name);
            return std::nullopt;
        }
        if (*duration > limit) {
            *error = u"--%1 is at most %2"_s.arg(name, QLatin1StringView(limitText));
            return std::nullopt;
        }
        *target = *duration;
    }
    // Renewed every third of it: a shorter lease lapsed between renewals (1ms was taken), the
    // replica called itself silent, and another one took its live runs over.
    if (parser.isSet(leaseTtl) && options.server.leaseTtl < std::chrono::seconds(1)) {
        *error = u"--lease-ttl is at least 1s"_s;
        return std::nullopt;
    }
    if (parser.isSet(llmTimeout) && options.server.llmTimeout.count() <= 0) {
        *error = u"--llm-timeout must be longer than 0"_s;
        return std::nullopt;
    }
    if (parser.isSet(walLimit)) {
        constexpr qint64 Min = qint64(64) << 10, Max = qint64(16) << 30;
        const auto size = parseSize(parser.value(walLimit));
        if (!size || *size < Min || *size > Max) {
            *error = u"--wal-limit takes a size from 64KiB to 16GiB, e.g. 256MiB"_s;
            return std::nullopt;
        }
        options.server.walLimitBytes = *size;
    }
    if (parser.isSet(maxSandboxes)) {
        bool ok = false;
        const int count = parser.value(maxSandboxes).toInt(&ok);
        if (!ok || count < 0 || count > MaxSandboxes) {
            *error = u"--max-sandboxes takes a number from 0 (no limit) to %1"_s.arg(MaxSandboxes);
            return std::nullopt;
        }
        options.server.maxSandboxes = count;
    }
    if (!parseSandboxPolicy(parser, sandboxNetwork, sandboxMemory, sandboxProcesses, sandboxCpu,
                            sandboxFileSize, options.server.sandboxPolicy, error))
        return std::nullopt;
    if (parser.isSet(logFormat)) {
        const auto format = LogOutput::formatFromString(parser.value(logFormat));
        if (!format) {
            *error = u"--log-format takes text or json"_s;
            return std::nullopt;
        }
        options.logFormat = *format;
    }
    if (parser.isSet(sandboxDisk)) {
        const auto size = parseSize(parser.value(sandboxDisk));
        if (!size || (*size != 0 && *size < WorkspaceDisks::MinBytes)) {
            *error = u"--sandbox-disk takes a size of 16MiB or more, e.g. 4GiB (0: no limit)"_s;
            return std::nullopt;
        }
        options.server.sandboxDiskBytes = *size;
    }
    for (const QString &text : parser.values(sandboxEgressAllow)) {
        const auto range = Ipv4Range::parse(text);
        if (!range) {
            *error = u"--sandbox-egress-allow takes an IPv4 range such as 10.20.0.0/16 (egress has "
                     "no IPv6), not \"%1\""_s.arg(text);
            return std::nullopt;
        }
        if (!options.server.sandboxEgressAllow.contains(range->toString()))
            options.server.sandboxEgressAllow.append(range->toString());
    }
    options.server.fitSandboxProcesses = !parser.isSet(sandboxProcesses);
    options.server.requireIsolation = parser.isSet(requireIsolation);
    options.server.replicaId = parser.value(replicaId);
    if (options.server.replicaId.contains(u'/') || options.server.replicaId.contains(u' ')) {
        *error = u"--replica-id cannot contain '/' or spaces"_s;
        return std::nullopt;
    }
    // From the environment too, so that a password in the URL stays off the command line.
    const QString databaseEnv = qEnvironmentVariable("AGENTDECK_DATABASE_URL");
    if (parser.isSet(database) || !databaseEnv.isEmpty()) {
        const bool fromOption = parser.isSet(database);
        const QUrl url(fromOption ? parser.value(database) : databaseEnv, QUrl::StrictMode);
        if (const QString problem = Database::checkPostgresUrl(url); !problem.isEmpty()) {
            *error = (fromOption ? u"--database: "_s : u"AGENTDECK_DATABASE_URL: "_s) + problem;
            return std::nullopt;
        }
        options.server.databaseUrl = url;
    }
    if (parser.isSet(advertiseUrl)) {
        const QUrl url(parser.value(advertiseUrl), QUrl::StrictMode);
        if (!url.isValid() || url.host().isEmpty() ||
            (url.scheme() != u"http"_s && url.scheme() != u"https"_s)) {
            *error = u"--advertise-url takes an http(s) URL, e.g. http://host-a:8000"_s;
            return std::nullopt;
        }
        options.server.advertiseUrl = url.toString();
    }
    options.server.llmBaseUrl = parser.value(llmBaseUrl);
    options.server.llmModel = parser.value(llmModel);
    options.server.llmApiKey =
        QProcessEnvironment::systemEnvironment().value(u"AGENTDECK_LLM_API_KEY"_s);
    if (parser.isSet(runtime)) {
        if (parser.value(runtime) == u"local"_s) {
            options.server.runtime = ServerConfig::RuntimeKind::Local;
        } else if (parser.value(runtime) == u"process"_s) {
            options.server.runtime = ServerConfig::RuntimeKind::Process;
        } else if (parser.value(runtime) == u"docker"_s) {
            options.server.runtime = ServerConfig::RuntimeKind::Docker;
        } else {
            *error = u"--runtime takes local, docker or process"_s;
            return std::nullopt;
        }
    }
    options.server.dockerHost =
        parser.isSet(dockerHost) ? parser.value(dockerHost) : DockerEngine::defaultHost();
    options.server.sandboxPolicy.image = parser.value(sandboxImage);
    options.server.sandboxPolicy.imagePatterns = parser.values(sandboxImages);
    const bool docker = options.server.runtime == ServerConfig::RuntimeKind::Docker;
    if (docker && options.server.sandboxPolicy.image.isEmpty()) {
        *error = u"--runtime docker needs --sandbox-image IMAGE: the image of its containers"_s;
        return std::nullopt;
    }
    if (!docker &&
        (parser.isSet(sandboxImage) || parser.isSet(sandboxImages) || parser.isSet(dockerHost))) {
        *error = u"--docker-host, --sandbox-image and --sandbox-images are for --runtime docker"_s;
        return std::nullopt;
    }
    if (const QString problem = DockerEngine(options.server.dockerHost).hostError();
        docker && !problem.isEmpty()) {
        *error = u"--docker-host: "_s + problem;
        return std::nullopt;
    }
    return options;
}

} // namespace AgentDeck
