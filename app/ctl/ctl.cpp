#include "ctl.h"

#include "commandline.h"
#include "ctlformat.h"
#include "ctlinvocation.h"
#include "ctloutput.h"
#include "lifecycle.h"
#include "replicainfo.h"
#include "serverconnection.h"

#include <QCommandLineParser>
#include <QCoreApplication>
#include <QCoroSignal>
#include <QJsonArray>
#include <QJsonDocument>
#include <QSet>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <unistd.h>

using namespace Qt::StringLiterals;

namespace AgentDeck {

using namespace CtlOutput;

namespace {

constexpr int PageLimit = 100;

const QString Usage =
    uR"(Usage: agentdeck ctl [--server URL] [--session-api-key K] [--timeout DURATION]
                     COMMAND [ARGS]

Commands:
  list [--archived|--all] [--status S] [--json]
                        conversations, newest first (active ones unless --archived or --all;
                        S is idle, running, paused, waiting_for_confirmation, finished, error
                        or stuck)
  show ID [--json]      one conversation
  create [TEXT] [--title T] [--agent shell|echo|llm] [--confirm] [--json]
                        a new conversation (shell by default); TEXT, if given, is its first
                        message and runs at once; --confirm asks before each command
  events ID [--follow] [--json]
                        its history; --follow keeps printing live events (over the WebSocket,
                        resuming after its last seq when the connection drops) until interrupted
  run ID                start or continue its run (answers the open messages)
  pause ID              stop the run after the current step (the step finishes first)
  interrupt ID          stop the command in flight now
  accept ID             carry out the action waiting for confirmation and go on running
  reject ID [--reason TEXT]
                        refuse the action waiting for confirmation; the agent is told (with
                        TEXT as the reason) and goes on without it
  archive ID [--force]  stop its runtime, then archive it (history and workspace stay); one
                        running a command asks for y on a terminal, refuses without --force
                        otherwise
  unarchive ID          make it active again (starts nothing)
  recover ID            resolve stale state, bring the runtime up, continue the interrupted run
                        (a shell command cut short is offered to run again instead: retry);
                        says what it did, or that there was nothing to recover
  retry ID              run the interrupted command the outcome offers again
  dismiss ID            acknowledge a failed or interrupted outcome: it no longer needs
                        attention
  reprovision ID        replace its runtime with a fresh one
  start-fresh ID        start an expired runtime again, with an empty workspace
  delete ID [--yes]     delete it, its history and its server-owned workspace; asks for y on a
                        terminal, refuses without --yes otherwise
  send ID TEXT [--run]  send TEXT as a user message; --run also starts or continues the run
  replicas [--json]     the servers sharing this catalog: heartbeat, liveness, what each runs

ID is a conversation UUID, dashed or 32 hex digits.

Options:
  --server URL           the server (default: $AGENTDECK_SERVER, else the embedded server
                         of a console of this user that runs, else http://127.0.0.1:8000)
  --session-api-key K    its session API key (default: $AGENTDECK_API_KEY, else
                         $AGENTDECK_SESSION_API_KEY, else the console's)
  --timeout DURATION     give up on a server silent this long, e.g. 10s (default 30s, at
                         most 24d); a followed stream reconnects instead
  --json                 print the API's JSON instead of a table (events: one event per line)
  -h, --help             this text; after a command, that command's
  --version              the version

Exit codes: 0 done, 1 other error or declined, 2 usage, 3 not found (404), 4 conflict (409),
5 expired (410), 6 server unreachable or silent past --timeout (a request it got may still
take effect), 7 unauthorized (401).
)"_s;

// The help of one command: its entry in Usage's list (one text, so the two cannot drift), with
// the usage line and the options every command takes.
QString commandUsage(const QString &command)
{
    // An entry is its line ("  show ID [--json]      one conversation") and the more indented
    // lines that go on with it.
    QStringList entry;
    for (const QString &line : Usage.split(u'\n')) {
        if (entry.isEmpty()) {
            if (line.startsWith(u"  "_s + command + u' ') || line == u"  "_s + command)
                entry.append(line);
        } else if (line.startsWith(u"    "_s)) {
            entry.append(line);
        } else {
            break;
        }
    }
    const QString first = entry.value(0).trimmed();
    const qsizetype gap = first.indexOf(u"  "_s);
    const QString synopsis = gap < 0 ? first : first.left(gap);
    const qsizetype options = Usage.indexOf(u"\nOptions:"_s);
    return u"Usage: agentdeck ctl [--server URL] [--session-api-key K] [--timeout DURATION] "_s +
           synopsis + u"\n\n"_s + entry.join(u'\n') + u'\n' + Usage.mid(options);
}

// One run of one command. The coroutines only await the network; the one question to a person
// (delete's confirmation) is asked between two of them.
class Ctl
{
public:
    explicit Ctl(const Invocation &invocation)
        : m_invocation(invocation)
        , m_connection(invocation.server)
    {
        m_connection.setApiKey(invocation.apiKey);
        m_connection.setSilenceTimeout(invocation.timeout);
    }

    QCoro::Task<int> list()
    {
        QJsonArray items;
        QString pageId;
        QSet<QString> seenPages;
        for (;;) {
            QUrlQuery query;
            m_invocation.filter.writeTo(query);
            query.addQueryItem(u"limit"_s, QString::number(PageLimit));
            if (!pageId.isEmpty())
                query.addQueryItem(u"page_id"_s, pageId);
            auto searching = m_connection.get(u"/api/conversations/search"_s, query);
            const ApiReply reply = co_await std::move(searching);
            if (!reply.ok())
                co_return fail(reply);
            // A login page, or another web server on that port, is not an empty catalog: a
            // monitoring script asking for conversations in error was told there were none.
            const QJsonObject page = reply.json.toObject();
            if (!page.value(u"items"_s).isArray())
                co_return unexpectedAnswer(reply, u"a page of conversations"_s);
            for (const QJsonValue &item : page.value(u"items"_s).toArray())
                items.append(item);
            pageId = page.value(u"next_page_id"_s).toString();
            if (pageId.isEmpty() || seenPages.contains(pageId))
                break;
            seenPages.insert(pageId);
        }

        if (m_invocation.json) {
            // All pages in the shape of one complete page.
            printJson(QJsonObject{{u"items"_s, items}, {u"next_page_id"_s, QJsonValue::Null}});
            co_return CtlExit::Ok;
        }
        QList<ConversationInfo> conversations;
        for (const QJsonValue &item : std::as_const(items)) {
            if (auto info = ConversationInfo::fromJson(item.toObject()))
                conversations.append(std::move(*info));
        }
        if (conversations.isEmpty()) {
            const ConversationFilter &filter = m_invocation.filter;
            const bool narrowed = filter.status || !filter.text.isEmpty() || !filter.tags.isEmpty();
            const QString which = filter.archive == ArchiveFilter::Archived ? u"archived "_s
                                  : filter.archive == ArchiveFilter::Active ? u"active "_s
                                                                            : QString();
            writeOut(u"No %1conversations%2.\n"_s.arg(which, narrowed ? u" match"_s : QString()));
            co_return CtlExit::Ok;
        }
        writeOut(CtlFormat::conversationTable(conversations));
        co_return CtlExit::Ok;
    }

    QCoro::Task<int> replicas()
    {
        auto getting = m_connection.get(u"/api/replicas"_s);
        const ApiReply reply = co_await std::move(getting);
        if (!reply.ok())
            co_return fail(reply);
        // Every answer of ctl is checked for what AgentDeck sends: anything else (a login page,
        // another service on the port) was printed as an empty table, and the exit was 0.
        if (!reply.json.isArray())
            co_return unexpectedAnswer(reply, u"a list of replicas"_s);
        if (m_invocation.json) {
            printJson(reply.json);
            co_return CtlExit::Ok;
        }
        QList<QStringList> rows;
        for (const QJsonValue &value : reply.json.toArray()) {
            const ReplicaInfo replica = ReplicaInfo::fromJson(value);
            rows.append({replica.id + (replica.isSelf ? u" *"_s : QString()), replica.state(),
                         QString::number(replica.ownedConversations),
                         CtlFormat::shortTime(replica.lastHeartbeatAt), replica.advertiseUrl});
        }
        writeOut(CtlFormat::alignedTable(
            {u"REPLICA"_s, u"STATE"_s, u"RUNS"_s, u"LAST HEARTBEAT"_s, u"URL"_s}, rows));
        co_return CtlExit::Ok;
    }

    QCoro::Task<int> show()
    {
        auto getting = m_connection.get(ServerConnection::conversationPath(m_invocation.id));
        const ApiReply reply = co_await std::move(getting);
        co_return printConversation(reply, &CtlFormat::conversationDetails);
    }

    QCoro::Task<int> events()
    {
        // The header once the first page is in: an unknown id printed a header, then the error.
        bool headed = m_invocation.json;
        QString pageId;
        QSet<QString> seenPages;
        for (;;) {
            QUrlQuery query;
            query.addQueryItem(u"limit"_s, QString::number(PageLimit));
            if (!pageId.isEmpty())
                query.addQueryItem(u"page_id"_s, pageId);
            auto searching = m_connection.get(
                ServerConnection::conversationPath(m_invocation.id, u"events/search"), query);
            const ApiReply reply = co_await std::move(searching);
            if (!reply.ok())
                co_return fail(reply);
            const QJsonObject page = reply.json.toObject();
            if (!page.value(u"items"_s).isArray())
                co_return unexpectedAnswer(reply, u"a page of events"_s);
            if (!std::exchange(headed, true))
                writeOut(CtlFormat::eventHeader());
            for (const QJsonValue &item : page.value(u"items"_s).toArray())
                printEvent(item.toObject());
            pageId = page.value(u"next_page_id"_s).toString();
            if (pageId.isEmpty() || seenPages.contains(pageId))
                break;
            seenPages.insert(pageId);
        }
        co_return CtlExit::Ok;
    }

    // History and live events over the WebSocket: the stream replays everything after seq 0, then
    // goes live, and after a drop reconnects asking for what follows the last seq it delivered,
    // so each event is printed once. Ends only when the server refuses the stream for good.
    QCoro::Task<int> follow()
    {
        // An unknown id, a wrong key or a dead server are answered now rather than retried.
        auto getting = m_connection.get(ServerConnection::conversationPath(m_invocation.id));
        const ApiReply reply = co_await std::move(getting);
        if (!reply.ok())
            co_return fail(reply);
        if (!m_invocation.json)
            writeOut(CtlFormat::eventHeader());

        EventStream *stream = m_connection.openEventStream(m_invocation.id, 0, &m_connection);
        bool dropped = false;
        QObject::connect(stream, &EventStream::eventReceived, stream,
                         [this](const Event &event) { printEvent(event.toJson()); });
        // What the running command prints, as it comes (not in --json, which lists events).
        if (!m_invocation.json) {
            QObject::connect(stream, &EventStream::transientReceived, stream,
                             [output = CommandOutputFollower()](const QJsonObject &frame) mutable {
                                 if (const auto piece = output.take(frame); !piece.text.isEmpty())
                                     writeOut(CtlFormat::liveOutputLines(piece.text));
                             });
        }
        QObject::connect(stream, &EventStream::disconnected, stream, [stream, &dropped] {
            if (dropped)
                return; // one line per outage, not one per reconnection attempt
            dropped = true;
            writeErr(u"connection lost after seq %1; reconnecting"_s.arg(stream->lastSeq()));
        });
        QObject::connect(stream, &EventStream::connected, stream, [stream, &dropped] {
            if (!dropped)
                return;
            dropped = false;
            writeErr(u"reconnected; resuming after seq %1"_s.arg(stream->lastSeq()));
        });
        QObject::connect(stream, &EventStream::errorFrame, stream,
                         [](const QString &code, const QString &detail) {
                             writeErr(detail.isEmpty() ? code : detail);
                         });
        const auto [code, reason] = co_await qCoro(stream, &EventStream::closedByServer);
        writeErr(reason.isEmpty() ? u"the server closed the event stream (%1)"_s.arg(code)
                                  : reason);
        co_return code == 4004 ? CtlExit::NotFound
        : code == 4001         ? CtlExit::Unauthorized
                               : CtlExit::Failed;
    }

    // Run, runtime and archive actions answer with the conversation as it now is. `done` says
    // what happened, with %1 for the conversation's id.
    QCoro::Task<int> action(QString suffix, QString done)
    {
        auto reporting =
            reportAction(m_connection.conversationAction(m_invocation.id, suffix), done);
        co_return co_await std::move(reporting);
    }

    // Recover says what it did (the answer's `actions`), or that there was nothing to recover
    // and what there is to do instead.
    QCoro::Task<int> recover()
    {
        auto recovering = m_connection.conversationAction(m_invocation.id, u"recover"_s);
        const ApiReply reply = co_await std::move(recovering);
        const QString id = toWireId(m_invocation.id);
        const std::optional<QStringList> actions = recoveryActionsOf(reply.json.toObject());
        const auto format = [&](const ConversationInfo &info) -> QString {
            QString headline;
            if (!actions) { // a server that does not say
                headline = u"Recovered %1."_s.arg(id);
            } else if (actions->isEmpty()) {
                headline = u"Nothing to recover: %1 is %2 and its runtime %3."_s.arg(
                    id, Lifecycle::executionText(info), Lifecycle::runtimeLabel(info));
                if (Lifecycle::canRunAgain(info).enabled)
                    headline +=
                        u" `agentdeck ctl retry %1` runs the interrupted command again."_s.arg(id);
            } else {
                headline = u"Recovered %1: %2."_s.arg(id, Lifecycle::recoveryText(*actions));
            }
            return headline + u'\n' + CtlFormat::conversationTable({info});
        };
        co_return printConversation(reply, format);
    }

    // Archiving an archived conversation, or unarchiving one that is not, changes nothing, and
    // is said so: "Unarchived" was said of a conversation never archived.
    // `before`: the conversation as read just now (read()).
    QCoro::Task<int> archiveAction(bool archiving, ApiReply before)
    {
        const auto info = conversationIn(before);
        if (info && info->isArchived() == archiving) {
            const QString already =
                archiving ? u"%1 is archived already."_s : u"%1 is not archived."_s;
            co_return printConversation(before, [&](const ConversationInfo &current) -> QString {
                return already.arg(toWireId(current.id)) + u'\n' +
                       CtlFormat::conversationTable({current});
            });
        }
        auto acting = action(archiving ? u"archive"_s : u"unarchive"_s,
                             archiving ? u"Archived %1."_s : u"Unarchived %1."_s);
        co_return co_await std::move(acting);
    }

    // Pause and interrupt act on a run: with none going, the answer says so rather than that
    // something was asked of it. `paused`, if given, is said when the answer is `paused`: a
    // pause of a conversation waiting for confirmation (or left running by a server that
    // stopped) is done at once, and was said to have found no run.
    QCoro::Task<int> runAction(QString suffix, QString done, QString noRun, QString paused = {})
    {
        auto reporting = reportAction(m_connection.conversationAction(m_invocation.id, suffix),
                                      done, std::move(noRun), std::move(paused));
        co_return co_await std::move(reporting);
    }

    QCoro::Task<int> respondToConfirmation(bool accept)
    {
        QJsonObject answer{{u"accept"_s, accept}};
        if (!m_invocation.reason.isEmpty())
            answer.insert(u"reason"_s, m_invocation.reason);
        auto reporting =
            reportAction(m_connection.post(ServerConnection::conversationPath(
                                               m_invocation.id, u"events/respond_to_confirmation"),
                                           answer),
                         accept ? u"Accepted the pending action of %1."_s
                                : u"Rejected the pending action of %1."_s);
        co_return co_await std::move(reporting);
    }

    // `noRun`, if given, is said instead of `done` when the answer shows no run going, and
    // `paused`, if given, when it shows the conversation paused.
    QCoro::Task<int> reportAction(QCoro::Task<ApiReply> acting, QString done, QString noRun = {},
                                  QString paused = {})
    {
        const ApiReply reply = co_await std::move(acting);
        const QString id = toWireId(m_invocation.id);
        // -> QString: a QStringBuilder returned would refer to the table, gone by then.
        const auto format = [&](const ConversationInfo &info) -> QString {
            const ExecutionStatus status = info.executionStatus;
            const QString headline = noRun.isEmpty() || status == ExecutionStatus::Running
                                         ? done.arg(id)
                                     : !paused.isEmpty() && status == ExecutionStatus::Paused
                                         ? paused.arg(id)
                                         : noRun.arg(id, toString(status));
            return headline + u'\n' + CtlFormat::conversationTable({info});
        };
        co_return printConversation(reply, format);
    }

    QCoro::Task<int> create()
    {
        CreateConversationRequest request;
        request.title = m_invocation.title;
        if (m_invocation.agent)
            request.agentKind = *m_invocation.agent;
        request.alwaysConfirm = m_invocation.confirm;
        if (!m_invocation.text.isEmpty())
            request.initialMessage = MessageRequest{u"user"_s, m_invocation.text, true};
        auto creating = m_connection.createConversation(std::move(request));
        const ApiReply reply = co_await std::move(creating);
        const auto format = [](const ConversationInfo &created) -> QString {
            return u"Created %1.\n"_s.arg(toWireId(created.id)) +
                   CtlFormat::conversationTable({created});
        };
        co_return printConversation(reply, format);
    }

    QCoro::Task<int> send()
    {
        MessageRequest message;
        message.text = m_invocation.text;
        message.run = m_invocation.run;
        auto sending = m_connection.sendMessage(m_invocation.id, message);
        const ApiReply reply = co_await std::move(sending);
        if (!reply.ok())
            co_return fail(reply);
        if (!Event::fromJson(reply.json.toObject()))
            co_return unexpectedAnswer(reply, u"an event"_s);
        if (m_invocation.json) {
            printJson(reply.json);
            co_return CtlExit::Ok;
        }
        writeOut(u"Sent to %1 as event %2%3.\n"_s.arg(
            toWireId(m_invocation.id),
            QString::number(reply.json.toObject().value(u"seq"_s).toInteger()),
            m_invocation.run ? u", and asked it to run"_s : QString()));
        co_return CtlExit::Ok;
    }

    // For delete's question: the conversation, so the person sees what they are deleting.
    // The conversation as it is; a failure is left to the action that follows to say.
    QCoro::Task<ApiReply> read()
    {
        auto reading = m_connection.get(ServerConnection::conversationPath(m_invocation.id));
        co_return co_await std::move(reading);
    }
    static std::optional<ConversationInfo> conversationIn(const ApiReply &reply)
    {
        return reply.ok() ? ConversationInfo::fromJson(reply.json.toObject()) : std::nullopt;
    }

    QCoro::Task<std::optional<ConversationInfo>> fetch(int *exitCode)
    {
        auto getting = read();
        const ApiReply reply = co_await std::move(getting);
        if (!reply.ok()) {
            *exitCode = fail(reply);
            co_return std::nullopt;
        }
        auto info = ConversationInfo::fromJson(reply.json.toObject());
        if (!info)
            *exitCode = unexpectedAnswer(reply);
        co_return info;
    }

    QCoro::Task<int> remove()
    {
        auto deleting =
            m_connection.deleteResource(ServerConnection::conversationPath(m_invocation.id));
        const ApiReply reply = co_await std::move(deleting);
        if (!reply.ok())
            co_return fail(reply);
        if (!reply.json.toObject().value(u"success"_s).toBool())
            co_return unexpectedAnswer(reply, u"a deletion"_s);
        if (m_invocation.json)
            printJson(reply.json);
        else
            writeOut(u"Deleted %1.\n"_s.arg(toWireId(m_invocation.id)));
        co_return CtlExit::Ok;
    }

private:
    void printEvent(const QJsonObject &object)
    {
        if (m_invocation.json) {
            writeOut(CtlFormat::jsonText(object, QJsonDocument::Compact) + u'\n');
            return;
        }
        if (const auto event = Event::fromJson(object))
            writeOut(CtlFormat::eventLine(*event));
    }

    // An answer that carries a conversation: as it came with --json, else as `format` writes
    // it. An error answer, or one that is no conversation, is reported instead.
    template<typename Format> int printConversation(const ApiReply &reply, Format format)
    {
        if (!reply.ok())
            return fail(reply);
        const auto info = ConversationInfo::fromJson(reply.json.toObject());
        if (!info)
            return unexpectedAnswer(reply);
        if (m_invocation.json) {
            printJson(reply.json);
            return CtlExit::Ok;
        }
        writeOut(format(*info));
        return CtlExit::Ok;
    }

    static int unexpectedAnswer(const ApiReply &reply,
                                const QString &expected = u"a conversation"_s)
    {
        writeErr(
            u"the server answered something that is not %1 (is it AgentDeck?): "_s.arg(expected) +
            QString::fromUtf8(reply.body.left(200)));
        return CtlExit::Failed;
    }

    Invocation m_invocation;
    ServerConnection m_connection;
};

bool confirmed(const QString &question)
{
    writeTo(stderr, question + u" [y/N] "_s);
    std::string answer;
    if (!std::getline(std::cin, answer))
        return false;
    const QString word = QString::fromStdString(answer).trimmed().toLower();
    return word == u"y"_s || word == u"yes"_s;
}

int runDelete(Ctl &ctl, const Invocation &invocation)
{
    if (!invocation.yes) {
        if (!::isatty(STDIN_FILENO)) {
            writeErr(u"delete is permanent: pass --yes to confirm (stdin is not a terminal to "
                     "ask on)"_s);
            return CtlExit::Usage;
        }
        int exitCode = CtlExit::Ok;
        const auto info = QCoro::waitFor(ctl.fetch(&exitCode));
        if (!info)
            return exitCode;
        const QString title = info->title.isEmpty() ? QString() : u" \""_s + info->title + u'"';
        if (!confirmed(u"Delete conversation %1%2, its history and its server-owned workspace "
                       "permanently?"_s.arg(toWireId(invocation.id), title))) {
            writeErr(u"not deleted"_s);
            return CtlExit::Failed;
        }
    }
    return QCoro::waitFor(ctl.remove());
}

// Archiving stops a command that runs: asked first, as the console asks.
int runArchive(Ctl &ctl, const Invocation &invocation)
{
    const ApiReply before = QCoro::waitFor(ctl.read());
    if (!invocation.force) {
        const auto info = Ctl::conversationIn(before);
        if (info && info->executionStatus == ExecutionStatus::Running && !info->isArchived()) {
            if (!::isatty(STDIN_FILENO)) {
                writeErr(
                    u"%1 is running: archiving stops its command. Pass --force to archive it "
                    "anyway (stdin is not a terminal to ask on)"_s.arg(toWireId(invocation.id)));
                return CtlExit::Usage;
            }
            const QString title = info->title.isEmpty() ? QString() : u" \""_s + info->title + u'"';
            if (!confirmed(u"Conversation %1%2 is running: archive it and stop its command?"_s.arg(
                    toWireId(invocation.id), title))) {
                writeErr(u"not archived"_s);
                return CtlExit::Failed;
            }
        }
    }
    return QCoro::waitFor(ctl.archiveAction(true, before));
}

int run(const Invocation &invocation)
{
    Ctl ctl(invocation);
    switch (invocation.command) {
    case Command::List:
        return QCoro::waitFor(ctl.list());
    case Command::Show:
        return QCoro::waitFor(ctl.show());
    case Command::Create:
        return QCoro::waitFor(ctl.create());
    case Command::Events:
        return QCoro::waitFor(invocation.follow ? ctl.follow() : ctl.events());
    case Command::Run:
        return QCoro::waitFor(ctl.action(u"run"_s, u"Asked %1 to run."_s));
    case Command::Pause:
        return QCoro::waitFor(ctl.runAction(u"pause"_s,
                                            u"Asked %1 to pause after its current step."_s,
                                            u"%1 is %2: no run to pause."_s, u"%1 is paused."_s));
    case Command::Interrupt:
        return QCoro::waitFor(ctl.runAction(u"interrupt"_s,
                                            u"Asked %1 to stop its command in flight."_s,
                                            u"%1 is %2: no command to interrupt."_s));
    case Command::Accept:
        return QCoro::waitFor(ctl.respondToConfirmation(true));
    case Command::Reject:
        return QCoro::waitFor(ctl.respondToConfirmation(false));
    case Command::Archive:
        return runArchive(ctl, invocation);
    case Command::Unarchive:
        return QCoro::waitFor(ctl.archiveAction(false, QCoro::waitFor(ctl.read())));
    case Command::Recover:
        return QCoro::waitFor(ctl.recover());
    case Command::Retry:
        return QCoro::waitFor(
            ctl.action(u"outcome/retry"_s, u"Asked %1 to run its command again."_s));
    case Command::Dismiss:
        return QCoro::waitFor(ctl.action(u"outcome/dismiss"_s, u"Dismissed the outcome of %1."_s));
    case Command::Reprovision:
        return QCoro::waitFor(ctl.action(u"runtime/reprovision"_s, u"Reprovisioned %1."_s));
    case Command::StartFresh:
        return QCoro::waitFor(
            ctl.action(u"runtime/start_fresh"_s, u"Started %1 again with an empty workspace."_s));
    case Command::Delete:
        return runDelete(ctl, invocation);
    case Command::Send:
        return QCoro::waitFor(ctl.send());
    case Command::Replicas:
        return QCoro::waitFor(ctl.replicas());
    }
    return CtlExit::Failed;
}

} // namespace

int runCtl(int argc, char *argv[])
{
    QCoreApplication app(argc, argv);
    app.setApplicationName(u"agentdeck"_s);
    app.setApplicationVersion(QStringLiteral(AGENTDECK_VERSION));
    ServerConnection::setClientName(u"ctl"_s);

    QStringList arguments;
    for (int i = 2; i < argc; ++i)
        arguments.append(QString::fromLocal8Bit(argv[i]));
    QString error;
    Information asked;
    const auto invocation = parseInvocation(arguments, &error, &asked);
    if (!invocation) {
        if (asked.version) {
            writeOut(u"agentdeck ctl "_s + app.applicationVersion() + u'\n');
            return CtlExit::Ok;
        }
        if (error.isEmpty()) {
            writeOut(asked.command.isEmpty() ? Usage : commandUsage(asked.command));
            return CtlExit::Ok;
        }
        writeErr(error + u"\nTry agentdeck ctl --help."_s);
        return CtlExit::Usage;
    }
    // Which server answers is never a guess: one not named is said.
    if (!invocation->serverChoice.isEmpty())
        writeErr(u"asking %1 (%2)"_s.arg(invocation->server.toString(), invocation->serverChoice));
    return run(*invocation);
}

} // namespace AgentDeck
