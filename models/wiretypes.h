#pragma once

#include "sandboxpolicy.h"

#include <QDateTime>
#include <QJsonObject>
#include <QMap>
#include <QString>
#include <QUuid>

#include <optional>

namespace AgentDeck {

enum class ExecutionStatus
{
    Idle,
    Running,
    Paused,
    WaitingForConfirmation,
    Finished,
    Error,
    Stuck
};
enum class RuntimeStatus
{
    Available,
    Starting,
    Missing,
    Error,
    OwnershipLost,
    // A container frozen, or stopped with its disk kept, for being idle (--sandbox-idle-pause,
    // --sandbox-idle-stop): the next command brings it back by itself.
    Paused,
    Stopped
};

QString toString(ExecutionStatus status);
std::optional<ExecutionStatus> executionStatusFromString(QStringView text);
QString toString(RuntimeStatus status);
std::optional<RuntimeStatus> runtimeStatusFromString(QStringView text);

// ISO 8601 UTC with milliseconds and a trailing Z, as everywhere on the wire.
QString toWireTime(const QDateTime &time);
QString toWireTime(qint64 msecsSinceEpoch);
std::optional<QDateTime> parseWireTime(const QString &text);
// A time as the console shows it to people: UTC, saying so, as ctl prints it
// ("2026-12-03 07:18:32 UTC"); without the date when `dateUnlessToday` and it is today's.
// "-" for an invalid time.
QString toDisplayTime(const QDateTime &time, bool dateUnlessToday = false);

// A conversation's tags as the wire carries them: an object of strings.
QJsonObject toWireTags(const QMap<QString, QString> &tags);

// Dashed, lowercase, no braces. Accepts dashed or 32-hex forms when parsing.
QString toWireId(const QUuid &id);
std::optional<QUuid> parseWireId(QStringView text);
// Whether `text` is the nil UUID in one of those forms: well formed, and no one's id.
bool isNilWireId(QStringView text);

// At most the first `count` UTF-16 units of `text`, not cutting a character in two (a
// surrogate pair cut in half is text some providers' JSON parsers refuse).
QString leftWhole(const QString &text, qsizetype count);

// A flag of a query as the API takes it: true or false in any case, or 1 or 0.
std::optional<bool> parseWireBool(QStringView text);

// A count or sequence number as the API takes it: decimal digits only (no sign, no spaces),
// within qint64.
std::optional<qint64> parseWireCount(QStringView text);

struct RuntimeError
{
    QString code;
    QString message;
    friend bool operator==(const RuntimeError &, const RuntimeError &) = default;
};

// What a sandbox uses, as its engine last measured it (--runtime docker): runtime_info.usage.
struct SandboxUsage
{
    double cpuSeconds = 0;      // CPU time of all its processes since it started
    qint64 memoryBytes = 0;     // now, page cache and tmpfs included
    qint64 memoryPeakBytes = 0; // the most since it started; 0 where the engine does not say
    qint64 processes = 0;       // now
    // On disk: its workspace and home (as last walked, see SandboxDisk) and its container's
    // writable layer.
    qint64 diskBytes = 0;
    QDateTime at; // when it was measured

    QJsonObject toJson() const;
    static std::optional<SandboxUsage> fromJson(const QJsonValue &value);
    friend bool operator==(const SandboxUsage &, const SandboxUsage &) = default;
};

struct RuntimeInfo
{
    RuntimeStatus status = RuntimeStatus::Available;
    bool canResume = true;
    std::optional<RuntimeError> error;
    // The sandbox policy in force and how it is enforced (see SandboxIsolation::describe());
    // empty where the runtime has none to tell.
    QJsonObject sandbox;
    // `sandbox` as compact JSON, when whoever described it wrote that once for many reads;
    // toJsonBytes() then copies it instead of writing the object again.
    QByteArray sandboxJson;
    // The conversation's secrets (ConversationInfo::secretNames) this server has no value of: a
    // restart lost them, or another replica got them. Its commands run without them.
    QStringList missingSecrets;
    // Paused or Stopped: why ("idle for 30m") and since when.
    QString statusReason;
    std::optional<QDateTime> statusSince;
    std::optional<SandboxUsage> usage;

    QJsonObject toJson() const;
    // A missing object means the local defaults: available and resumable.
    static RuntimeInfo fromJson(const QJsonValue &value);
    friend bool operator==(const RuntimeInfo &, const RuntimeInfo &) = default;
};

// How the last action of a conversation's run ended: the `outcome` of ConversationInfo, a fact
// beside execution, runtime and archive. A finished run whose command exited 2 is not a
// success, and a run paused by a crash is not an ordinary pause.
struct RunOutcome
{
    enum class Kind
    {
        Succeeded,   // the command exited 0
        Failed,      // it exited non-zero
        Interrupted, // it (or the run between steps) was cut short: see interruptedBy
        TimedOut,    // the command ran into its timeout
        Limit,       // the run stopped at a limit (max_iterations)
        Error        // the run ended in error (a model or storage failure)
    };
    Kind kind = Kind::Succeeded;
    std::optional<int> exitCode;
    // For Interrupted: "restart" (the server stopped), "operator" (an interrupt, archive,
    // runtime stop), "takeover" (another owner resolved a run whose owner went away) or
    // "sandbox_lost" (the sandbox went away under the command).
    QString interruptedBy;
    QString code;   // the AgentErrorEvent's code, for Limit and Error
    QString detail; // one sentence for people
    // The command `POST .../outcome/retry` runs again (the shell agent's interrupted command);
    // empty when nothing is offered (an llm agent continues from the interrupted observation).
    QString retryCommand;
    QDateTime at;
    // When the command it is of began (its action's time); invalid for a run that ended between
    // commands. `at` less this is how long the command ran.
    QDateTime startedAt;
    // The operator acknowledged it (dismissed it, or ran the conversation again).
    bool dismissed = false;

    // Anything but a success, not acknowledged yet.
    bool needsAttention() const { return kind != Kind::Succeeded && !dismissed; }
    QJsonObject toJson() const;
    static std::optional<RunOutcome> fromJson(const QJsonValue &value);
    friend bool operator==(const RunOutcome &, const RunOutcome &) = default;
};
QString toString(RunOutcome::Kind kind);
namespace InterruptCause {
inline constexpr QLatin1StringView Restart{"restart"};
inline constexpr QLatin1StringView Operator{"operator"};
inline constexpr QLatin1StringView Takeover{"takeover"};
inline constexpr QLatin1StringView SandboxLost{"sandbox_lost"};
} // namespace InterruptCause
std::optional<RunOutcome::Kind> outcomeKindFromString(QStringView text);

struct ConversationInfo
{
    QUuid id;
    QString title;
    QMap<QString, QString> tags;
    QDateTime createdAt;
    QDateTime updatedAt;
    std::optional<QDateTime> archivedAt;
    ExecutionStatus executionStatus = ExecutionStatus::Idle;
    QString agentKind;
    // The rest of the `agent` object (for "llm": llm settings, system_prompt, ...). Never holds a
    // secret: an API key is kept in memory only and shown as "********".
    QJsonObject agentConfig;
    QString workingDir;
    bool workspaceOwnedByServer = true;
    bool alwaysConfirm = false;
    // The conversation's own `sandbox` object as created, the server's policy filling in what
    // it left out; none: the server's policy, whatever it is when a command runs.
    std::optional<SandboxPolicy> sandbox;
    RuntimeInfo runtime;
    std::optional<RunOutcome> outcome; // null until a run's action ended
    // The names of the secrets it was given (never their values), sorted.
    QStringList secretNames;
    qint64 eventCount = 0;
    std::optional<QDateTime> lastEventAt;
    // When it began running; none while it does not run.
    std::optional<QDateTime> runningSince;
    // Language model usage, accumulated over the conversation's life.
    qint64 promptTokens = 0;
    qint64 completionTokens = 0;
    qint64 llmRequests = 0;
    qint64 llmRetries = 0;

    bool isArchived() const { return archivedAt.has_value(); }
    // The `agent` object: {"kind": ...} and the agent's settings.
    QJsonObject agentJson() const;
    QJsonObject toJson() const;
    // The same document as toJson(), written straight to compact UTF-8: the hot read routes
    // answer with it without building a QJsonObject.
    QByteArray toJsonBytes() const;
    // Rejects a payload that does not speak the contract (no id, no archived_at field at all).
    static std::optional<ConversationInfo> fromJson(const QJsonObject &object);
};

// The answer of POST /recover: the conversation's fields, and beside them `actions`, what the
// recovery did, in the order it did it (an empty list: there was nothing to recover). Each
// action is also in the history, as a ConversationStateUpdateEvent {"key": "recovery",
// "value": action}.
namespace RecoveryAction {
// The conversation was `running` with no live executor: resolved to `paused` (the interrupted
// observation, the `run_interrupted` error).
inline constexpr QLatin1StringView ResolvedStaleRun{"resolved_stale_run"};
// No sandbox was up (missing, lost, or a failed start): one was started.
inline constexpr QLatin1StringView StartedRuntime{"started_runtime"};
// The run a stop, a failure or a resolution left was continued.
inline constexpr QLatin1StringView ContinuedRun{"continued_run"};
} // namespace RecoveryAction
// The key of the events a recovery writes.
inline constexpr QLatin1StringView RecoveryEventKey{"recovery"};
// The `actions` of an answer of POST /recover; nothing when it has none (a server that does
// not say).
std::optional<QStringList> recoveryActionsOf(const QJsonObject &answer);

// A conversation's title and tags as a create or update body gives them: absent or null leave
// one unset. The limits keep a catalog row small enough to list by the hundred; past them the
// server answers 422.
struct ConversationLabels
{
    static constexpr qsizetype MaxTitleLength = 256; // characters (code points)
    static constexpr qsizetype MaxTags = 50;
    static constexpr qsizetype MaxTagNameLength = 64; // non-empty
    static constexpr qsizetype MaxTagValueLength = 256;

    std::optional<QString> title;
    std::optional<QMap<QString, QString>> tags;

    // Names the offending field and the limit in *error.
    static std::optional<ConversationLabels> fromJson(const QJsonObject &object, QString *error);
    // What is set, as a create or update body gives it.
    QJsonObject toJson() const;
};

namespace EventKind {
inline constexpr QLatin1StringView Message{"MessageEvent"};
inline constexpr QLatin1StringView Action{"ActionEvent"};
inline constexpr QLatin1StringView Observation{"ObservationEvent"};
inline constexpr QLatin1StringView AgentError{"AgentErrorEvent"};
inline constexpr QLatin1StringView StateUpdate{"ConversationStateUpdateEvent"};
inline constexpr QLatin1StringView Pause{"PauseEvent"};
inline constexpr QLatin1StringView UserReject{"UserRejectObservation"};
bool isKnown(QStringView kind);
} // namespace EventKind

namespace EventSource {
inline constexpr QLatin1StringView User{"user"};
inline constexpr QLatin1StringView Agent{"agent"};
inline constexpr QLatin1StringView Environment{"environment"};
bool isKnown(QStringView source);
} // namespace EventSource

// One event of a conversation's history. `fields` holds the kind-specific members; the common
// members live in the struct so that storage can index them.
struct Event
{
    QUuid id;
    QString kind;
    QString source;
    QDateTime timestamp;
    qint64 seq = 0;
    QJsonObject fields;

    QJsonObject toJson() const;
    // The same document as toJson(), written directly (the common members first): each event
    // is serialised once, to be stored and sent, and building the object took a fifth of the
    // work of an appended message.
    QByteArray toJsonBytes() const;
    static std::optional<Event> fromJson(const QJsonObject &object);

    static Event message(const QString &source, const QString &role, const QString &text);
    static Event action(const QString &toolName, const QString &command,
                        const QString &thought = {});
    // A tool call of a language model: `arguments` become the `action` object.
    static Event toolCall(const QString &toolName, const QString &toolCallId,
                          const QJsonObject &arguments, const QString &thought = {});
    static Event observation(const Event &action, const QString &output, int exitCode,
                             bool interrupted);
    static Event userReject(const Event &action, const QString &reason);
    static Event agentError(const QString &code, const QString &error);
    // `cause`: who made the change and why ({"actor", "client", "actor_display", "reason"}),
    // beside the key and value; none for what the run itself did (it finished, it failed).
    static Event stateUpdate(const QString &key, const QJsonValue &value,
                             const QJsonObject &cause = {});
    static Event pause();

    // Concatenated text parts of a MessageEvent; empty for other kinds.
    QString messageText() const;
    QString messageRole() const;
    QString toolCallId() const
    {
        return fields.value(QLatin1StringView("tool_call_id")).toString();
    }
    QString actionId() const { return fields.value(QLatin1StringView("action_id")).toString(); }
};

// The body of "send a message": {"role": "user", "content": [{"type": "text", "text": ...}],
// "run"}.
struct MessageRequest
{
    QString role = QStringLiteral("user");
    QString text;
    bool run = false;

    QJsonObject toJson() const;
    // Returns an error sentence when the object is not a valid message.
    static std::optional<MessageRequest> fromJson(const QJsonObject &object, QString *error);
};

// Whether `code` is a bidirectional formatting character (U+061C, U+200E, U+200F,
// U+202A-U+202E, U+2066-U+2069): it reorders the text after it, and a title written
// "deploy <RLO>evil<PDF> today" reads "deploy live today".
bool isBidiControl(char16_t code);
// `text` with the characters `matches` picks written as \uNNNN.
QString withCharactersEscaped(const QString &text, bool (*matches)(char16_t));
// `text` with its bidirectional formatting characters shown as \uNNNN rather than obeyed: what
// users and agents wrote, as the console and ctl show it.
QString withBidiControlsShown(const QString &text);
// The same for a one-line label (a title, a tag): control characters too, a line break among
// them (a title "cleanup\nPROD DATABASE DROP" took two lines of a one-line row).
QString withControlsShown(const QString &text);
// Characters as people count them (code points): the limits on titles, tags and search texts
// are in these, not in UTF-16 units, of which an emoji is two.
qsizetype codePoints(QStringView text);

} // namespace AgentDeck
