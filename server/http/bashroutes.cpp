#include "apierror.h"
#include "router.h"
#include "runtime/shellwords.h"
#include "streams/bashevents.h"
#include "workspacetargets.h"

#include <QDateTime>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QScopeGuard>
#include <QUuid>

#include <algorithm>
#include <memory>

using namespace Qt::StringLiterals;

// The /api/bash routes of the remote workspace: commands, and their bash events.

namespace AgentDeck::WorkspaceTargets {

namespace {

// The ids one batch get of bash events may ask for: as many as the events kept.
constexpr qsizetype MaxBatchIds = BashEventLog::MaxEvents;
// Started commands (start_bash_command, the bash-events socket) not ended yet, server-wide. A
// sandbox runs one command at a time, so the others wait, each a coroutine holding its command:
// without a bound a client could queue commands until the server ran out of memory.
constexpr int MaxStartedCommands = 64;

// A command of /api/bash, as OpenHands' BashCommand; its script runs it in the sandbox.
struct BashCommand
{
    QUuid id = QUuid::createUuid();
    qint64 timestampMs = QDateTime::currentMSecsSinceEpoch();
    QString command;
    QString cwd; // as given
    int timeout = DefaultCommandTimeoutSeconds;
    Target target;
    // stdout and stderr come back in the one output of a command, stderr after a marker that
    // the command cannot guess.
    QString marker = u"\n[agentdeck-stderr-%1]\n"_s.arg(QUuid::createUuid().toString(QUuid::Id128));

    QJsonObject toJson() const
    {
        return {{u"kind"_s, u"BashCommand"_s},
                {u"id"_s, id.toString(QUuid::WithoutBraces)},
                {u"timestamp"_s, toWireTime(timestampMs)},
                {u"command"_s, command},
                {u"cwd"_s, cwd.isEmpty() ? QJsonValue(QJsonValue::Null) : QJsonValue(cwd)},
                {u"timeout"_s, timeout}};
    }

    QString script() const
    {
        return pathCheck(target.path, target.root) +
               u"[ -d \"$p\" ] || { printf 'cwd is not a directory'; exit %1; }\n"
               "cd -- \"$p\" || exit 1\n"
               "e=$(mktemp) || exit 1\n"
               "bash -c %2 2>\"$e\" </dev/null\n"
               "c=$?\n"
               "printf '%s' %3\n"
               "cat -- \"$e\"; rm -f -- \"$e\"\n"
               "exit $c\n"_s.arg(QString::number(NotAFileExit), shellQuoted(command),
                                 shellQuoted(marker));
    }
};

QJsonObject bashOutput(const CommandResult &result, const BashCommand &command)
{
    QString stdoutText = result.output;
    QString stderrText;
    const qsizetype at = stdoutText.lastIndexOf(command.marker);
    if (at >= 0) {
        stderrText = stdoutText.mid(at + command.marker.size());
        stdoutText.truncate(at);
    }
    // The marker comes once the command has ended: without it, 124 is the runtime's timeout.
    // A command that ran out of time or was interrupted has no exit code of its own.
    const bool timedOut = at < 0 && result.exitCode == 124;
    const int exitCode = result.interrupted || timedOut ? -1 : result.exitCode;
    return {{u"kind"_s, u"BashOutput"_s},
            {u"id"_s, QUuid::createUuid().toString(QUuid::WithoutBraces)},
            {u"timestamp"_s, toWireTime(QDateTime::currentMSecsSinceEpoch())},
            {u"command_id"_s, command.id.toString(QUuid::WithoutBraces)},
            {u"order"_s, 0},
            {u"exit_code"_s, exitCode},
            {u"stdout"_s, stdoutText},
            {u"stderr"_s, stderrText},
            {u"timeout_occurred"_s, timedOut}};
}

// What the sandbox answered, as the command's BashOutput, or the error of the answer.
QJsonObject outputOrThrow(const WorkspaceCommandResult &outcome, const BashCommand &command)
{
    if (!outcome.result) {
        ApiError error{503, u"sandbox_unavailable"_s,
                       u"The workspace sandbox is not available: "_s + outcome.error.message};
        if (outcome.atLimit)
            error.retryAfterSeconds = 5;
        throw error;
    }
    const CommandResult &result = *outcome.result;
    if (result.exitCode == RefusedExit && !result.output.contains(command.marker))
        throw refused(command.target.path, u"it is not inside the workspace"_s);
    if (result.exitCode == NotAFileExit && !result.output.contains(command.marker))
        throw ApiError::invalidParameter(u"cwd is not a directory: "_s + command.target.path);
    return bashOutput(result, command);
}

BashCommand bashCommand(const Workspaces &workspaces, const QJsonObject &body)
{
    const QJsonValue command = body.value(u"command"_s);
    if (!command.isString() || command.toString().isEmpty())
        throw ApiError::invalidParameter(u"command must be a non-empty string"_s);
    const QJsonValue cwd = body.value(u"cwd"_s);
    if (!cwd.isUndefined() && !cwd.isNull() && !cwd.isString())
        throw ApiError::invalidParameter(u"cwd must be a string"_s);
    BashCommand bash;
    bash.command = command.toString();
    const QJsonValue timeoutValue = body.value(u"timeout"_s);
    if (!timeoutValue.isUndefined() && !timeoutValue.isNull()) {
        const double seconds = timeoutValue.toDouble(-1);
        if (!timeoutValue.isDouble() || seconds < 1 || seconds > MaxCommandTimeoutSeconds)
            throw ApiError::invalidParameter(
                u"timeout must be a number of seconds from 1 to %1"_s.arg(
                    MaxCommandTimeoutSeconds));
        bash.timeout = int(seconds);
    }
    const QString directory = workspaces.sandbox.directory();
    bash.cwd = cwd.toString();
    bash.target = bash.cwd.isEmpty() ? Target{directory, directory, std::nullopt}
                                     : locate(workspaces, bash.cwd);
    return bash;
}

QCoro::Task<HttpResponse>
executeBashCommand(Workspaces workspaces, std::shared_ptr<BashEventLog> events, HttpRequest request)
{
    const BashCommand command = bashCommand(workspaces, request.jsonObject());
    auto running = runAt(workspaces.sandbox, command.target, command.script(),
                         std::chrono::seconds(command.timeout));
    const WorkspaceCommandResult outcome = co_await std::move(running);
    const QJsonObject output = outputOrThrow(outcome, command);
    events->add(command.toJson());
    events->add(output);
    co_return HttpResponse::json(output);
}

// Runs a started command to its end; nobody awaits it, so it throws nothing. `started` counts
// the commands started and not ended. The log is not held meanwhile: a server that goes while
// the command waits takes its log (and the catalog it writes to) with it.
QCoro::Task<> runStarted(Workspaces workspaces, std::weak_ptr<BashEventLog> log,
                         BashCommand command, std::shared_ptr<int> started)
{
    const auto ended = qScopeGuard([started] { --*started; });
    auto running = runAt(workspaces.sandbox, command.target, command.script(),
                         std::chrono::seconds(command.timeout));
    const WorkspaceCommandResult outcome = co_await std::move(running);
    const std::shared_ptr<BashEventLog> events = log.lock();
    if (!events)
        co_return;
    QJsonObject output;
    try {
        output = outputOrThrow(outcome, command);
    } catch (const ApiError &error) {
        // OpenHands' BashError.
        output = {{u"kind"_s, u"BashError"_s},
                  {u"id"_s, QUuid::createUuid().toString(QUuid::WithoutBraces)},
                  {u"timestamp"_s, toWireTime(QDateTime::currentMSecsSinceEpoch())},
                  {u"command_id"_s, command.id.toString(QUuid::WithoutBraces)},
                  {u"code"_s, error.code},
                  {u"detail"_s, error.detail}};
    }
    events->add(output);
}

// Starts the command `body` asks for (an ExecuteBashRequest) and returns its BashCommand event;
// throws what is wrong with it, and 429 while MaxStartedCommands have not ended.
QJsonObject startBashCommand(const Workspaces &workspaces,
                             const std::shared_ptr<BashEventLog> &events,
                             const std::shared_ptr<int> &started, const QJsonObject &body)
{
    BashCommand command = bashCommand(workspaces, body);
    if (*started >= MaxStartedCommands) {
        ApiError error{429, u"too_many_commands"_s,
                       u"%1 started commands have not ended yet; start more once they have"_s.arg(
                           MaxStartedCommands)};
        error.retryAfterSeconds = 1;
        throw error;
    }
    const QJsonObject json = command.toJson();
    events->add(json);
    ++*started;
    runStarted(workspaces, events, std::move(command), started);
    return json;
}

// GET /api/bash/bash_events/search: OpenHands' filters and pages.
HttpResponse searchBashEvents(const BashEventLog &events, const HttpRequest &request)
{
    const QString kind = request.query.queryItemValue(u"kind__eq"_s);
    if (!kind.isEmpty() && kind != u"BashCommand"_s && kind != u"BashOutput"_s)
        throw ApiError::invalidParameter(u"kind__eq must be BashCommand or BashOutput"_s);
    QString commandId = request.query.queryItemValue(u"command_id__eq"_s);
    if (!commandId.isEmpty()) {
        const QUuid id = QUuid::fromString(commandId);
        if (id.isNull())
            throw ApiError::invalidParameter(u"command_id__eq must be a UUID"_s);
        commandId = id.toString(QUuid::WithoutBraces);
    }
    const QString order = request.query.queryItemValue(u"sort_order"_s);
    if (!order.isEmpty() && order != u"TIMESTAMP"_s && order != u"TIMESTAMP_DESC"_s)
        throw ApiError::invalidParameter(u"sort_order must be TIMESTAMP or TIMESTAMP_DESC"_s);
    BashEventStore::Query query;
    query.kind = kind;
    query.commandId = commandId;
    query.descending = order == u"TIMESTAMP_DESC"_s;
    query.limit = request.intParam(u"limit"_s, 100, 1, 100);
    query.fromMs = request.timeParam(u"timestamp__gte"_s);
    query.beforeMs = request.timeParam(u"timestamp__lt"_s);
    query.offset = request.intParam(u"page_id"_s, 0, 0, int(BashEventStore::MaxStored));
    // Polling for what is new: outputs past a part already read (each command has one, 0).
    if (request.query.hasQueryItem(u"order__gt"_s)) {
        bool valid = false;
        query.orderAfter = request.stringParam(u"order__gt"_s).toInt(&valid);
        if (!valid)
            throw ApiError::invalidParameter(u"order__gt must be an integer"_s);
    }
    const auto [page, more] = events.search(query);
    QJsonArray items;
    for (const QJsonObject &event : page)
        items.append(event);
    return HttpResponse::json(QJsonObject{
        {u"items"_s, items},
        {u"next_page_id"_s,
         more ? QJsonValue(QString::number(query.offset + page.size())) : QJsonValue::Null}});
}

} // namespace

void registerBashRoutes(Router &router, const Workspaces &workspaces,
                        std::shared_ptr<BashEventLog> events)
{
    using Method = Router::Method;
    const auto started = std::make_shared<int>(0);
    // The commands the bash-events sockets ask for.
    events->setStarter([workspaces, weak = std::weak_ptr(events),
                        started](const QJsonObject &request,
                                 std::function<void(QString code, QString detail)> refused) {
        const std::shared_ptr<BashEventLog> log = weak.lock();
        if (!log)
            return;
        try {
            startBashCommand(workspaces, log, started, request);
        } catch (const ApiError &error) {
            refused(error.code, error.detail);
        }
    });
    router.addAsync(Method::Post, u"/api/bash/execute_bash_command"_s,
                    [workspaces, events](HttpRequest request) {
                        return executeBashCommand(workspaces, events, std::move(request));
                    });
    router.add(Method::Post, u"/api/bash/start_bash_command"_s,
               [workspaces, events, started](const HttpRequest &request) {
                   return HttpResponse::json(
                       startBashCommand(workspaces, events, started, request.jsonObject()));
               });
    router.add(Method::Get, u"/api/bash/bash_events/search"_s,
               [events](const HttpRequest &request) { return searchBashEvents(*events, request); });
    router.add(Method::Get, u"/api/bash/bash_events/{id}"_s, [events](const HttpRequest &request) {
        const QUuid id = QUuid::fromString(request.args.value(0));
        const auto event =
            id.isNull() ? std::nullopt : events->find(id.toString(QUuid::WithoutBraces));
        if (!event)
            throw ApiError::notFound(u"No bash event "_s + request.args.value(0));
        return HttpResponse::json(*event);
    });
    // OpenHands' batch get: a JSON array of ids in the body of a GET; null for one not kept.
    router.add(Method::Get, u"/api/bash/bash_events/"_s, [events](const HttpRequest &request) {
        const QJsonDocument body = QJsonDocument::fromJson(request.body);
        if (!request.body.trimmed().isEmpty() && !body.isArray())
            throw ApiError::invalidParameter(u"The body must be a JSON array of event ids"_s);
        const QJsonArray ids = body.array();
        if (ids.size() > MaxBatchIds)
            throw ApiError::invalidParameter(
                u"At most %1 ids in one batch, not %2"_s.arg(MaxBatchIds).arg(ids.size()));
        QJsonArray found;
        for (const QJsonValue &id : ids) {
            if (!id.isString())
                throw ApiError::invalidParameter(u"Each id must be a string"_s);
            const QUuid uuid = QUuid::fromString(id.toString());
            const auto event =
                uuid.isNull() ? std::nullopt : events->find(uuid.toString(QUuid::WithoutBraces));
            found.append(event ? QJsonValue(*event) : QJsonValue());
        }
        return HttpResponse::json(found);
    });
    router.add(Method::Delete, u"/api/bash/bash_events"_s, [events](const HttpRequest &) {
        return HttpResponse::json(QJsonObject{{u"cleared_count"_s, qint64(events->clear())}});
    });
}

} // namespace AgentDeck::WorkspaceTargets
