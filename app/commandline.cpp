#include "commandline.h"

#include "consoleserverfile.h"
#include "http/apiauth.h"
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
// Names the rule does not give, as the packaged agentdeck.conf spells them: the lists of
// repeatable options in the plural, the database by its URL. AGENTDECK_SESSION_API_KEY is the
// key a client sends (ctl, the console's --connect).
constexpr std::pair<const char *, const char *> NamedVariables[] = {
    {"session-api-key", "AGENTDECK_SESSION_API_KEYS"},
    {"allow-origin", "AGENTDECK_ALLOW_ORIGINS"},
    {"allow-host", "AGENTDECK_ALLOW_HOSTS"},
    {"database", "AGENTDECK_DATABASE_URL"},
};
} // namespace

QString optionVariable(const QString &optionName)
{
    for (const auto &[option, variable] : NamedVariables)
        if (optionName == QLatin1StringView(option))
            return QString::fromLatin1(variable);
    return u"AGENTDECK_"_s + optionName.toUpper().replace(u'-', u'_');
}

namespace {
// The options the environment and a --config file cannot set: they ask for something else than a
// server, or name the file itself.
bool hasVariable(const QString &name)
{
    return name != u"help"_s && name != u"version"_s && name != u"config"_s;
}

// Options given more than once add up; their variables take a comma-separated list.
bool isRepeatable(const QString &name)
{
    static const QStringList names{
        u"connect"_s,    u"workspace-root"_s,       u"session-api-key"_s, u"allow-origin"_s,
        u"allow-host"_s, u"sandbox-egress-allow"_s, u"sandbox-images"_s,  u"webhook"_s};
    return names.contains(name);
}

// The key of the LLM endpoint: a secret, so a variable and a key of the file, never an option.
constexpr auto LlmApiKeyVariable = "AGENTDECK_LLM_API_KEY";

bool parseBoolean(const QString &text, bool *value)
{
    const QString word = text.trimmed().toLower();
    if (word == u"yes"_s || word == u"true"_s || word == u"1"_s)
        *value = true;
    else if (word == u"no"_s || word == u"false"_s || word == u"0"_s)
        *value = false;
    else
        return false;
    return true;
}

struct FileValue
{
    QString value;
    int line = 0;
};

// KEY=value lines as systemd's EnvironmentFile= reads them: blanks around key and value are
// dropped, a value may be quoted, and lines starting with '#' or ';' are comments.
std::optional<QHash<QString, FileValue>>
readConfigFile(const QString &path, const QStringList &knownKeys, QString *error)
{
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly)) {
        *error = u"cannot read the config file %1: %2"_s.arg(path, file.errorString());
        return std::nullopt;
    }
    static const QRegularExpression keyPattern(u"^[A-Za-z_][A-Za-z0-9_]*$"_s);
    QHash<QString, FileValue> values;
    const QStringList lines = QString::fromUtf8(file.readAll()).split(u'\n');
    for (qsizetype index = 0; index < lines.size(); ++index) {
        const int number = int(index + 1);
        const QString line = lines.at(index).trimmed();
        if (line.isEmpty() || line.startsWith(u'#') || line.startsWith(u';'))
            continue;
        const QString at = u"%1:%2: "_s.arg(path).arg(number);
        const qsizetype equals = line.indexOf(u'=');
        const QString key = line.left(equals).trimmed();
        if (equals <= 0 || !keyPattern.match(key).hasMatch()) {
            *error = at + u"not a KEY=value line"_s;
            return std::nullopt;
        }
        QString value = line.mid(equals + 1).trimmed();
        if (value.size() >= 2 && (value.front() == u'"' || value.front() == u'\'') &&
            value.back() == value.front()) {
            const bool doubleQuoted = value.front() == u'"';
            value = value.mid(1, value.size() - 2);
            if (doubleQuoted)
                value.replace(u"\\\""_s, u"\""_s).replace(u"\\\\"_s, u"\\"_s);
        }
        // A packaged file of an older version, kept because the operator edited it: empty, the
        // key says nothing; with options in it, they would be dropped without a word.
        if (key == u"AGENTDECK_EXTRA_OPTIONS"_s) {
            if (value.isEmpty())
                continue;
            *error = at + key +
                     u": is not read; give each option a key of its own, "
                     "AGENTDECK_<OPTION> (agentdeck --help)"_s;
            return std::nullopt;
        }
        if (!knownKeys.contains(key)) {
            QString hint;
            for (const QString &near : {QString(key + u'S'), key.chopped(1)})
                if (key.size() > 1 && knownKeys.contains(near))
                    hint = u" (did you mean %1?)"_s.arg(near);
            *error =
                at + u"unknown key %1%2; the keys are AGENTDECK_<OPTION> (agentdeck --help)"_s.arg(
                         key, hint);
            return std::nullopt;
        }
        if (const auto earlier = values.constFind(key); earlier != values.cend()) {
            *error = at + u"%1 is set twice (first on line %2)"_s.arg(key).arg(earlier->line);
            return std::nullopt;
        }
        values.insert(key, {value, number});
    }
    return values;
}

// The value of each option, from the command line, the environment or the config file, whichever
// comes first; and where it came from, for the messages about it.
class GivenOptions
{
public:
    struct Given
    {
        QStringList values;
        QString origin; // empty on the command line, else the variable or FILE:LINE: KEY
        int rank = 0;   // 3 command line, 2 environment, 1 file
    };

    bool isSet(const QCommandLineOption &option) const { return m_given.contains(name(option)); }
    QString value(const QCommandLineOption &option) const
    {
        const QStringList all = values(option);
        return all.isEmpty() ? QString() : all.constLast();
    }
    QStringList values(const QCommandLineOption &option) const
    {
        return m_given.value(name(option)).values;
    }
    int rank(const QCommandLineOption &option) const { return m_given.value(name(option)).rank; }
    QString origin(const QCommandLineOption &option) const
    {
        const QString origin = m_given.value(name(option)).origin;
        return origin.isEmpty() ? u"--"_s + name(option) : origin;
    }
    // What a message about the option starts with: nothing for the command line.
    QString where(const QCommandLineOption &option) const
    {
        const QString origin = m_given.value(name(option)).origin;
        return origin.isEmpty() ? QString() : origin + u": "_s;
    }
    void set(const QString &optionName, const Given &given) { m_given.insert(optionName, given); }

private:
    static QString name(const QCommandLineOption &option) { return option.names().constLast(); }
    QHash<QString, Given> m_given;
};

// Every option of the parser, from wherever it was given, in the order of precedence.
bool resolveOptions(const QCommandLineParser &parser, const QList<QCommandLineOption> &options,
                    const QProcessEnvironment &environment,
                    const QHash<QString, FileValue> &fileValues, const QString &filePath,
                    GivenOptions &given, QString *error)
{
    for (const QCommandLineOption &option : options) {
        const QString name = option.names().constLast();
        const bool flag = option.valueName().isEmpty();
        if (parser.isSet(option)) {
            given.set(name, {flag ? QStringList() : parser.values(option), {}, 3});
            continue;
        }
        if (!hasVariable(name))
            continue;
        const QString variable = optionVariable(name);
        GivenOptions::Given found;
        if (const QString text = environment.value(variable); !text.isEmpty()) {
            found = {{text}, variable, 2};
        } else if (const FileValue entry = fileValues.value(variable); !entry.value.isEmpty()) {
            found = {{entry.value}, u"%1:%2: %3"_s.arg(filePath).arg(entry.line).arg(variable), 1};
        } else {
            continue;
        }
        if (flag) {
            bool on = false;
            if (!parseBoolean(found.values.constFirst(), &on)) {
                *error = found.origin + u": takes yes or no, not \"%1\""_s.arg(found.values[0]);
                return false;
            }
            if (on)
                given.set(name, {{}, found.origin, found.rank});
            continue;
        }
        if (isRepeatable(name)) {
            QStringList items;
            for (const QString &item : found.values.constFirst().split(u','))
                if (!item.trimmed().isEmpty())
                    items.append(item.trimmed());
            // "$KEY1,$KEY2" with neither set would run a server open while its operator believes
            // it keyed.
            if (items.isEmpty()) {
                *error = u"%1 holds no %2 (only blanks and commas); leave it empty for the "
                         "default"_s.arg(found.origin, option.valueName().toLower());
                return false;
            }
            found.values = items;
        }
        given.set(name, found);
    }
    return true;
}

// The key of the LLM endpoint: AGENTDECK_LLM_API_KEY (environment or file) or the file that
// --llm-api-key-file names, by the options' precedence.
bool readLlmApiKey(const GivenOptions &given, const QCommandLineOption &keyFile,
                   const QProcessEnvironment &environment,
                   const QHash<QString, FileValue> &fileValues, const QString &filePath,
                   QString *key, QString *error)
{
    const QString variable = QString::fromLatin1(LlmApiKeyVariable);
    const FileValue inFile = fileValues.value(variable);
    const QString fromEnvironment = environment.value(variable);
    const int rank = !fromEnvironment.isEmpty() ? 2 : !inFile.value.isEmpty() ? 1 : 0;
    if (rank > 0 && rank == given.rank(keyFile)) {
        const QString keyOrigin =
            rank == 2 ? variable : u"%1:%2: %3"_s.arg(filePath).arg(inFile.line).arg(variable);
        *error = u"%1 and %2 both give the LLM endpoint's key; keep one"_s.arg(
            given.origin(keyFile), keyOrigin);
        return false;
    }
    if (given.rank(keyFile) < rank) {
        *key = rank == 2 ? fromEnvironment : inFile.value;
        return true;
    }
    if (!given.isSet(keyFile))
        return true;
    QFile file(given.value(keyFile));
    if (!file.open(QIODevice::ReadOnly)) {
        *error = given.where(keyFile) + u"--llm-api-key-file: cannot read %1: %2"_s.arg(
                                            file.fileName(), file.errorString());
        return false;
    }
    *key = QString::fromUtf8(file.readAll()).trimmed();
    if (key->isEmpty()) {
        *error = given.where(keyFile) + u"--llm-api-key-file: %1 is empty"_s.arg(file.fileName());
        return false;
    }
    return true;
}

// Paragraphs broken into lines of at most 79 characters, as Qt's help is.
QString wrapped(const QStringList &paragraphs)
{
    QString text;
    for (const QString &paragraph : paragraphs) {
        text += u'\n';
        QString line;
        for (const QString &word : paragraph.split(u' ', Qt::SkipEmptyParts)) {
            if (!line.isEmpty() && line.size() + 1 + word.size() > 79) {
                text += line + u'\n';
                line.clear();
            }
            line += (line.isEmpty() ? QString() : u" "_s) + word;
        }
        text += line + u'\n';
    }
    return text;
}

// What --help says of the environment and the config file.
QString configurationHelp()
{
    QStringList named;
    for (const auto &[option, variable] : NamedVariables)
        named.append(u"%1 (--%2)"_s.arg(QLatin1StringView(variable), QLatin1StringView(option)));
    return wrapped(
        {u"Every option but --help, --version and --config also comes from the environment or "
         "from a config file (--config FILE, or AGENTDECK_CONFIG), as AGENTDECK_<OPTION>: the "
         "option's name in capitals, '_' for '-' (AGENTDECK_SANDBOX_IDLE_TIMEOUT=30m), but for "
         "%1. A repeatable option takes a comma-separated list, a flag yes or no (true/false, "
         "1/0); an empty value is the default. The command line wins over the environment, "
         "the environment over the file, the file over the defaults."_s.arg(named.join(u", "_s)),
         u"The file holds KEY=value lines as systemd's EnvironmentFile= reads them ('#' starts "
         "a comment line); a key it does not know, or a bad value, stops the start (exit "
         "status 2). Keys and passwords (AGENTDECK_SESSION_API_KEYS, AGENTDECK_DATABASE_URL, "
         "AGENTDECK_LLM_API_KEY) belong in the environment or the file: every local user can "
         "read a command line."_s});
}

// URL or URL#actions=NAME+NAME: the fragment is never sent, so it is free to hold the filter.
std::optional<WebhookTarget> parseWebhook(const QString &text)
{
    const QString trimmed = text.trimmed();
    const qsizetype hash = trimmed.indexOf(u'#');
    const QUrl url(trimmed.left(hash), QUrl::StrictMode);
    if (!url.isValid() || url.host().isEmpty() ||
        (url.scheme() != u"http"_s && url.scheme() != u"https"_s))
        return std::nullopt;
    WebhookTarget target{trimmed, url, {}};
    if (hash >= 0) {
        static const QRegularExpression filter(u"^actions=([a-z_]+(?:\\+[a-z_]+)*)$"_s);
        const auto match = filter.match(trimmed.mid(hash + 1));
        if (!match.hasMatch())
            return std::nullopt;
        target.actions = match.captured(1).split(u'+');
    }
    return target;
}

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
bool parseSandboxPolicy(const GivenOptions &given, const QCommandLineOption &network,
                        const QCommandLineOption &memory, const QCommandLineOption &processes,
                        const QCommandLineOption &cpu, const QCommandLineOption &fileSize,
                        SandboxPolicy &policy, QString *error)
{
    if (given.isSet(network)) {
        const auto mode = sandboxNetworkFromString(given.value(network));
        if (!mode) {
            *error = given.where(network) + u"--sandbox-network takes none, egress or host"_s;
            return false;
        }
        policy.network = *mode;
    }
    // Below a few MiB of address space not even bash starts: every command would fail.
    constexpr qint64 MinMemory = qint64(16) << 20;
    if (given.isSet(memory)) {
        const auto size = parseSize(given.value(memory));
        if (!size || (*size != 0 && *size < MinMemory)) {
            *error = given.where(memory) +
                     u"--sandbox-memory takes a size of 16MiB or more, e.g. 2GiB (0: no limit)"_s;
            return false;
        }
        policy.memoryBytes = *size;
    }
    if (given.isSet(fileSize)) {
        const auto size = parseSize(given.value(fileSize));
        if (!size) {
            *error = given.where(fileSize) +
                     u"--sandbox-file-size takes a size, e.g. 1GiB (0: no limit)"_s;
            return false;
        }
        policy.fileSizeBytes = *size;
    }
    if (given.isSet(processes)) {
        bool ok = false;
        const qint64 count = given.value(processes).toLongLong(&ok);
        // A command is a process or two of the sandbox's own (bash, bubblewrap's init).
        if (!ok || count < 0 || (count > 0 && count < 8) || count > 4'000'000) {
            *error = given.where(processes) +
                     u"--sandbox-processes takes a number from 8 to 4000000 (0: no limit)"_s;
            return false;
        }
        policy.processes = count;
    }
    if (given.isSet(cpu)) {
        const auto duration = parseDuration(given.value(cpu));
        if (!duration) {
            *error = given.where(cpu) +
                     u"--sandbox-cpu takes a duration such as 90s or 15m (0: no limit)"_s;
            return false;
        }
        // The kernel counts whole seconds: part of one is one.
        policy.cpuSeconds = (duration->count() + 999) / 1000;
    }
    return true;
}

} // namespace

std::optional<Options> parseOptions(const QStringList &arguments, QString *error, QString *message,
                                    const QProcessEnvironment &environment)
{
    QCommandLineParser parser;
    QList<QCommandLineOption> table;
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
    const QCommandLineOption dataDir(u"data-dir"_s,
                                     u"Where the catalog and workspaces live (default: "
                                     "$STATE_DIRECTORY under systemd, else "
                                     "~/.local/share/agentdeck)."_s,
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
    table.append({help,     version,      headless,     connect,        listen,        dataDir,
                  key,      allowOrigin,  allowHost,    commandTimeout, shutdownGrace, replicaId,
                  database, advertiseUrl, runtime,      idleTimeout,    maxSandboxes,  retention,
                  leaseTtl, walLimit,     workspaceDir, workspaceRoot});
    const QCommandLineOption apiKeyFile(
        u"api-key-file"_s,
        u"Accept the named keys of FILE in X-Session-API-Key: lines NAME KEY, or NAME "
        "sha256:HEX (the key's SHA-256); each request is made by its key's name. Read again "
        "when it changes."_s,
        u"FILE"_s);
    const QCommandLineOption auditRetention(
        u"audit-retention"_s,
        u"Delete audit records (GET /api/audit) older than this (default 90d; 0: keep them)."_s,
        u"DURATION"_s);
    table.append({apiKeyFile, auditRetention});
    const QCommandLineOption webhook(
        u"webhook"_s,
        u"Post each change made (the audit log's records) as JSON to this http(s) URL, signed "
        "with --webhook-secret-file; URL#actions=NAME+NAME posts only those actions "
        "(repeatable)."_s,
        u"URL"_s);
    const QCommandLineOption webhookSecretFile(
        u"webhook-secret-file"_s,
        u"The key the webhooks' payloads are signed with (HMAC-SHA256): FILE's content without "
        "the blanks around it. Required with --webhook."_s,
        u"FILE"_s);
    table.append({webhook, webhookSecretFile});
    const QCommandLineOption llmBaseUrl(u"llm-base-url"_s,
                                        u"Default OpenAI-compatible endpoint of llm agents (e.g. "
                                        "http://127.0.0.1:8080/v1); its key comes from "
                                        "AGENTDECK_LLM_API_KEY or --llm-api-key-file."_s,
                                        u"URL"_s);
    const QCommandLineOption llmModel(u"llm-model"_s, u"Default model of llm agents."_s, u"NAME"_s);
    const QCommandLineOption llmTimeout(
        u"llm-timeout"_s, u"Default timeout of one model request (default 120s)."_s, u"DURATION"_s);
    table.append({llmBaseUrl, llmModel, llmTimeout});
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
    const QCommandLineOption dockerTlsDir(
        u"docker-tls-dir"_s,
        u"The client certificates of a tcp:// engine that requires TLS: DIR/ca.pem, cert.pem and "
        "key.pem (default: $DOCKER_CERT_PATH when $DOCKER_TLS_VERIFY is set)."_s,
        u"DIR"_s);
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
    const QCommandLineOption sandboxWarm(
        u"sandbox-warm"_s,
        u"--runtime docker: keep N containers of --sandbox-image started for new conversations "
        "that ask for no sandbox settings or working dir of their own (default 0; at most 100)."_s,
        u"N"_s);
    const QCommandLineOption requireIsolation(
        u"require-isolation"_s,
        u"Refuse to start when commands cannot be isolated (no bubblewrap, no namespaces)."_s);
    table.append({sandboxNetwork, sandboxMemory, sandboxProcesses, sandboxCpu, sandboxFileSize,
                  sandboxDisk, sandboxEgressAllow, dockerHost, dockerTlsDir, sandboxImage,
                  sandboxImages, idlePause, idleStop, requireIsolation});
    table.append(sandboxWarm);
    const QCommandLineOption logFormat(
        u"log-format"_s,
        u"How log lines are written to stderr: text (default: time with its UTC offset, level, "
        "category, message) or json (one object a line). Under systemd they go to the journal, "
        "with their priorities."_s,
        u"FORMAT"_s);
    table.append(logFormat);
    const QCommandLineOption config(
        u"config"_s,
        u"Read options from FILE: KEY=value lines, as systemd's EnvironmentFile= (also "
        "AGENTDECK_CONFIG; see below)."_s,
        u"FILE"_s);
    const QCommandLineOption llmApiKeyFile(
        u"llm-api-key-file"_s,
        u"Read the key of the LLM endpoint from FILE (or give it as AGENTDECK_LLM_API_KEY)."_s,
        u"FILE"_s);
    table.append({config, llmApiKeyFile});
    parser.addOptions(table);

    if (!parser.parse(QStringList{u"agentdeck"_s} + arguments)) {
        *error = parser.errorText();
        return std::nullopt;
    }
    if (parser.isSet(help)) {
        // Made before any QCoreApplication exists, Qt's help named the program
        // "<executable_name>".
        *message = parser.helpText().replace(u"<executable_name>"_s, u"agentdeck"_s) +
                   configurationHelp() + u"\nThe command-line client: agentdeck ctl --help\n"_s;
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

    // Flags over environment over file over defaults.
    const QString configPath =
        parser.isSet(config) ? parser.value(config) : environment.value(u"AGENTDECK_CONFIG"_s);
    QHash<QString, FileValue> fileValues;
    if (!configPath.isEmpty()) {
        QStringList knownKeys{QString::fromLatin1(LlmApiKeyVariable)};
        for (const QCommandLineOption &option : table)
            if (hasVariable(option.names().constLast()))
                knownKeys.append(optionVariable(option.names().constLast()));
        const auto read = readConfigFile(configPath, knownKeys, error);
        if (!read)
            return std::nullopt;
        fileValues = *read;
    }
    GivenOptions given;
    if (!resolveOptions(parser, table, environment, fileValues, configPath, given, error))
        return std::nullopt;

    // Each would have been dropped without a word: the daemon watches nothing, and an empty
    // directory was the current one.
    if (given.isSet(headless) && given.isSet(connect)) {
        *error = u"--connect is for the console; --headless serves a server of its own"_s;
        return std::nullopt;
    }
    if (given.isSet(dataDir) && given.value(dataDir).trimmed().isEmpty()) {
        *error = given.where(dataDir) + u"--data-dir cannot be empty"_s;
        return std::nullopt;
    }

    Options options;
    options.mode = given.isSet(headless)  ? Mode::Headless
                   : given.isSet(connect) ? Mode::Connect
                                          : Mode::Console;
    for (const QString &text : given.values(connect)) {
        const auto url = ServerConnection::baseUrlFrom(text);
        if (!url) {
            *error = given.where(connect) +
                     u"--connect takes HOST:PORT or an http:// or https:// URL, e.g. "
                     "http://127.0.0.1:8000"_s;
            return std::nullopt;
        }
        if (!options.connectUrls.contains(*url))
            options.connectUrls.append(*url);
    }
    if (!options.connectUrls.isEmpty())
        options.connectUrl = options.connectUrls.first();
    options.listenGiven = given.isSet(listen);
    if (given.isSet(listen) && !parseListen(given.value(listen), options.server)) {
        *error = given.where(listen) + u"--listen takes HOST:PORT, e.g. 127.0.0.1:8000"_s;
        return std::nullopt;
    }
    // Under systemd, StateDirectory= names it.
    const QString stateDirectory = environment.value(u"STATE_DIRECTORY"_s).section(u':', 0, 0);
    options.server.dataDir = given.isSet(dataDir)        ? given.value(dataDir)
                             : !stateDirectory.isEmpty() ? stateDirectory
                                                         : defaultDataDir();
    if (given.isSet(workspaceDir)) {
        if (given.value(workspaceDir).trimmed().isEmpty()) {
            *error = given.where(workspaceDir) + u"--workspace-dir cannot be empty"_s;
            return std::nullopt;
        }
        options.server.workspaceDir = given.value(workspaceDir);
    }
    for (const QString &root : given.values(workspaceRoot)) {
        if (!QDir::isAbsolutePath(root) || !QFileInfo(root).isDir()) {
            *error = given.where(workspaceRoot) +
                     u"--workspace-root %1 must be an existing directory, named by an absolute "
                     "path"_s.arg(root);
            return std::nullopt;
        }
        options.server.workspaceRoots.append(root);
    }
    // A key is compared with the header as HTTP hands it over, without the blanks around it; an
    // empty one would turn the check off while the operator believes it is on.
    for (const QString &text : given.values(key)) {
        if (text.trimmed().isEmpty()) {
            *error = given.where(key) + u"--session-api-key cannot be empty"_s;
            return std::nullopt;
        }
        options.server.apiKeys.append(text.trimmed());
    }
    if (given.isSet(apiKeyFile)) {
        const QString path = QFileInfo(given.value(apiKeyFile)).absoluteFilePath();
        QString problem;
        if (given.value(apiKeyFile).trimmed().isEmpty() || !ApiAuth::readKeyFile(path, &problem)) {
            *error = given.where(apiKeyFile) +
                     (problem.isEmpty() ? u"--api-key-file cannot be empty"_s : problem);
            return std::nullopt;
        }
        options.server.apiKeyFile = path;
    }
    if (given.isSet(auditRetention)) {
        const auto retention = parseDuration(given.value(auditRetention));
        if (!retention) {
            *error = given.where(auditRetention) +
                     u"--audit-retention takes a duration such as 30d, 12h or 0 (keep them)"_s;
            return std::nullopt;
        }
        options.server.auditRetention = *retention;
    }
    for (const QString &text : given.values(webhook)) {
        const auto target = parseWebhook(text);
        if (!target) {
            *error =
                given.where(webhook) +
                u"--webhook takes an http(s) URL, optionally with #actions=NAME+NAME (e.g. "
                "https://hooks.example/agentdeck#actions=archive+delete), not \"%1\""_s.arg(text);
            return std::nullopt;
        }
        // Given twice, it is one webhook: two deliveries of one cursor would post each record
        // twice.
        if (std::none_of(options.server.webhooks.cbegin(), options.server.webhooks.cend(),
                         [&](const WebhookTarget &known) { return known.spec == target->spec; }))
            options.server.webhooks.append(*target);
    }
    // Unsigned, a receiver could not tell the server's posts from anyone's.
    if (given.isSet(webhook) && !given.isSet(webhookSecretFile)) {
        *error = given.where(webhook) +
                 u"--webhook needs --webhook-secret-file FILE: the key its posts are signed with"_s;
        return std::nullopt;
    }
    if (given.isSet(webhookSecretFile)) {
        QFile file(given.value(webhookSecretFile));
        if (!file.open(QIODevice::ReadOnly)) {
            *error = given.where(webhookSecretFile) +
                     u"--webhook-secret-file: cannot read %1: %2"_s.arg(file.fileName(),
                                                                        file.errorString());
            return std::nullopt;
        }
        options.server.webhookSecret = file.readAll().trimmed();
        if (options.server.webhookSecret.isEmpty()) {
            *error = given.where(webhookSecretFile) +
                     u"--webhook-secret-file: %1 is empty"_s.arg(file.fileName());
            return std::nullopt;
        }
    }
    options.server.allowedOrigins = given.values(allowOrigin);
    options.server.allowedHosts = given.values(allowHost);
    // Watching another server, the console is a client like ctl, and reads the client's
    // variable first.
    const QString clientKey = environment.value(u"AGENTDECK_SESSION_API_KEY"_s).trimmed();
    if (options.mode == Mode::Connect && !given.isSet(key) && !clientKey.isEmpty())
        options.server.apiKeys.prepend(clientKey);
    // A client cannot send such a key as a header, and the console would have sent it.
    if (!std::all_of(options.server.apiKeys.cbegin(), options.server.apiKeys.cend(),
                     ServerConnection::isSendableApiKey)) {
        *error = given.where(key) +
                 u"a session API key cannot contain control characters (a line break, a tab)"_s;
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
        if (!given.isSet(*option))
            continue;
        const QString name = option->names().constFirst();
        const auto duration = parseDuration(given.value(*option));
        if (!duration) {
            *error = given.where(*option) +
                     u"--%1 takes a duration such as 90s, 15m, 12h or 7d"_s.arg(name);
            return std::nullopt;
        }
        if (*duration > limit) {
            *error = given.where(*option) +
                     u"--%1 is at most %2"_s.arg(name, QLatin1StringView(limitText));
            return std::nullopt;
        }
        *target = *duration;
    }
    // Renewed every third of it: a shorter lease lapsed between renewals (1ms was taken), the
    // replica called itself silent, and another one took its live runs over.
    if (given.isSet(leaseTtl) && options.server.leaseTtl < std::chrono::seconds(1)) {
        *error = given.where(leaseTtl) + u"--lease-ttl is at least 1s"_s;
        return std::nullopt;
    }
    if (given.isSet(llmTimeout) && options.server.llmTimeout.count() <= 0) {
        *error = given.where(llmTimeout) + u"--llm-timeout must be longer than 0"_s;
        return std::nullopt;
    }
    if (given.isSet(walLimit)) {
        constexpr qint64 Min = qint64(64) << 10, Max = qint64(16) << 30;
        const auto size = parseSize(given.value(walLimit));
        if (!size || *size < Min || *size > Max) {
            *error = given.where(walLimit) +
                     u"--wal-limit takes a size from 64KiB to 16GiB, e.g. 256MiB"_s;
            return std::nullopt;
        }
        options.server.walLimitBytes = *size;
    }
    if (given.isSet(maxSandboxes)) {
        bool ok = false;
        const int count = given.value(maxSandboxes).toInt(&ok);
        if (!ok || count < 0 || count > MaxSandboxes) {
            *error = given.where(maxSandboxes) +
                     u"--max-sandboxes takes a number from 0 (no limit) to %1"_s.arg(MaxSandboxes);
            return std::nullopt;
        }
        options.server.maxSandboxes = count;
    }
    if (!parseSandboxPolicy(given, sandboxNetwork, sandboxMemory, sandboxProcesses, sandboxCpu,
                            sandboxFileSize, options.server.sandboxPolicy, error))
        return std::nullopt;
    if (given.isSet(logFormat)) {
        const auto format = LogOutput::formatFromString(given.value(logFormat));
        if (!format) {
            *error = given.where(logFormat) + u"--log-format takes text or json"_s;
            return std::nullopt;
        }
        options.logFormat = *format;
    }
    if (given.isSet(sandboxDisk)) {
        const auto size = parseSize(given.value(sandboxDisk));
        if (!size || (*size != 0 && *size < WorkspaceDisks::MinBytes)) {
            *error = given.where(sandboxDisk) +
                     u"--sandbox-disk takes a size of 16MiB or more, e.g. 4GiB (0: no limit)"_s;
            return std::nullopt;
        }
        options.server.sandboxDiskBytes = *size;
    }
    for (const QString &text : given.values(sandboxEgressAllow)) {
        const auto range = Ipv4Range::parse(text);
        if (!range) {
            *error = given.where(sandboxEgressAllow) +
                     u"--sandbox-egress-allow takes an IPv4 range such as 10.20.0.0/16 (egress has "
                     "no IPv6), not \"%1\""_s.arg(text);
            return std::nullopt;
        }
        if (!options.server.sandboxEgressAllow.contains(range->toString()))
            options.server.sandboxEgressAllow.append(range->toString());
    }
    options.server.fitSandboxProcesses = !given.isSet(sandboxProcesses);
    options.server.requireIsolation = given.isSet(requireIsolation);
    options.server.replicaId = given.value(replicaId);
    if (options.server.replicaId.contains(u'/') || options.server.replicaId.contains(u' ')) {
        *error = given.where(replicaId) + u"--replica-id cannot contain '/' or spaces"_s;
        return std::nullopt;
    }
    // Best from the environment or the file, so that a password in the URL stays off the
    // command line.
    if (given.isSet(database)) {
        const QUrl url(given.value(database), QUrl::StrictMode);
        if (const QString problem = Database::checkPostgresUrl(url); !problem.isEmpty()) {
            *error = (given.where(database).isEmpty() ? u"--database: "_s : given.where(database)) +
                     problem;
            return std::nullopt;
        }
        options.server.databaseUrl = url;
    }
    if (given.isSet(advertiseUrl)) {
        const QUrl url(given.value(advertiseUrl), QUrl::StrictMode);
        if (!url.isValid() || url.host().isEmpty() ||
            (url.scheme() != u"http"_s && url.scheme() != u"https"_s)) {
            *error = given.where(advertiseUrl) +
                     u"--advertise-url takes an http(s) URL, e.g. http://host-a:8000"_s;
            return std::nullopt;
        }
        options.server.advertiseUrl = url.toString();
    }
    options.server.llmBaseUrl = given.value(llmBaseUrl);
    options.server.llmModel = given.value(llmModel);
    if (!readLlmApiKey(given, llmApiKeyFile, environment, fileValues, configPath,
                       &options.server.llmApiKey, error))
        return std::nullopt;
    if (given.isSet(runtime)) {
        if (given.value(runtime) == u"local"_s) {
            options.server.runtime = ServerConfig::RuntimeKind::Local;
        } else if (given.value(runtime) == u"process"_s) {
            options.server.runtime = ServerConfig::RuntimeKind::Process;
        } else if (given.value(runtime) == u"docker"_s) {
            options.server.runtime = ServerConfig::RuntimeKind::Docker;
        } else {
            *error = given.where(runtime) + u"--runtime takes local, docker or process"_s;
            return std::nullopt;
        }
    }
    options.server.dockerHost =
        given.isSet(dockerHost) ? given.value(dockerHost) : DockerEngine::defaultHost();
    options.server.dockerTlsDirectory =
        given.isSet(dockerTlsDir) ? given.value(dockerTlsDir) : DockerEngine::defaultTlsDirectory();
    options.server.sandboxPolicy.image = given.value(sandboxImage);
    options.server.sandboxPolicy.imagePatterns = given.values(sandboxImages);
    const bool docker = options.server.runtime == ServerConfig::RuntimeKind::Docker;
    if (docker && options.server.sandboxPolicy.image.isEmpty()) {
        *error = given.where(runtime) +
                 u"--runtime docker needs --sandbox-image IMAGE: the image of its containers"_s;
        return std::nullopt;
    }
    if (!docker &&
        (given.isSet(sandboxImage) || given.isSet(sandboxImages) || given.isSet(dockerHost) ||
         given.isSet(dockerTlsDir) || given.isSet(idlePause) || given.isSet(idleStop))) {
        *error = u"--docker-host, --docker-tls-dir, --sandbox-image, --sandbox-images, "
                 "--sandbox-idle-pause and --sandbox-idle-stop are for --runtime docker"_s;
        return std::nullopt;
    }
    if (given.isSet(sandboxWarm)) {
        constexpr int MaxWarm = 100;
        bool ok = false;
        const int count = given.value(sandboxWarm).toInt(&ok);
        if (!ok || count < 0 || count > MaxWarm) {
            *error = given.where(sandboxWarm) +
                     u"--sandbox-warm takes a number from 0 to %1"_s.arg(MaxWarm);
            return std::nullopt;
        }
        if (!docker && count > 0) {
            *error = given.where(sandboxWarm) + u"--sandbox-warm is for --runtime docker"_s;
            return std::nullopt;
        }
        options.server.sandboxWarm = count;
    }
    if (docker) {
        DockerEngine engine(options.server.dockerHost);
        engine.setTlsDirectory(options.server.dockerTlsDirectory);
        if (const QString problem = engine.hostError(); !problem.isEmpty()) {
            *error = given.where(given.isSet(dockerTlsDir) ? dockerTlsDir : dockerHost) +
                     u"--docker-host: "_s + problem;
            return std::nullopt;
        }
    }
    return options;
}

} // namespace AgentDeck
