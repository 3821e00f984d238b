#include "ctlinvocation.h"

#include "commandline.h"
#include "consoleserverfile.h"

#include <QCommandLineParser>

#include <algorithm>

using namespace Qt::StringLiterals;

namespace AgentDeck {

const QString DefaultCtlServer = u"http://127.0.0.1:8000"_s;

const QList<CommandSpec> &commandSpecs()
{
    static const QList<CommandSpec> specs{
        {"list"_L1, Command::List, false, false, {u"archived"_s, u"all"_s, u"status"_s, u"json"_s}},
        {"show"_L1, Command::Show, true, false, {u"json"_s}},
        {"create"_L1,
         Command::Create,
         false,
         true,
         {u"title"_s, u"agent"_s, u"confirm"_s, u"json"_s}},
        {"events"_L1, Command::Events, true, false, {u"follow"_s, u"json"_s}},
        {"run"_L1, Command::Run, true, false, {u"json"_s}},
        {"pause"_L1, Command::Pause, true, false, {u"json"_s}},
        {"interrupt"_L1, Command::Interrupt, true, false, {u"json"_s}},
        {"accept"_L1, Command::Accept, true, false, {u"json"_s}},
        {"reject"_L1, Command::Reject, true, false, {u"reason"_s, u"json"_s}},
        {"archive"_L1, Command::Archive, true, false, {u"force"_s, u"json"_s}},
        {"unarchive"_L1, Command::Unarchive, true, false, {u"json"_s}},
        {"recover"_L1, Command::Recover, true, false, {u"json"_s}},
        {"retry"_L1, Command::Retry, true, false, {u"json"_s}},
        {"dismiss"_L1, Command::Dismiss, true, false, {u"json"_s}},
        {"reprovision"_L1, Command::Reprovision, true, false, {u"json"_s}},
        {"start-fresh"_L1, Command::StartFresh, true, false, {u"json"_s}},
        {"delete"_L1, Command::Delete, true, false, {u"yes"_s, u"json"_s}},
        {"send"_L1, Command::Send, true, true, {u"run"_s, u"json"_s}},
        {"replicas"_L1, Command::Replicas, false, false, {u"json"_s}},
    };
    return specs;
}

std::optional<Invocation> parseInvocation(const QStringList &arguments, QString *error,
                                          Information *asked)
{
    Information ignored;
    if (!asked)
        asked = &ignored;
    QCommandLineParser parser;
    parser.setOptionsAfterPositionalArgumentsMode(QCommandLineParser::ParseAsOptions);
    const QCommandLineOption server(u"server"_s, {}, u"URL"_s);
    const QCommandLineOption key(u"session-api-key"_s, {}, u"K"_s);
    const QCommandLineOption help(QStringList{u"h"_s, u"help"_s});
    const QCommandLineOption status(u"status"_s, {}, u"S"_s);
    const QCommandLineOption timeout(u"timeout"_s, {}, u"DURATION"_s);
    const QCommandLineOption reason(u"reason"_s, {}, u"TEXT"_s);
    const QCommandLineOption title(u"title"_s, {}, u"T"_s);
    const QCommandLineOption agent(u"agent"_s, {}, u"KIND"_s);
    const QCommandLineOption version(u"version"_s);
    parser.addOptions({server, key, help, version, status, timeout, reason, title, agent});
    for (const QString &flag : {u"json"_s, u"follow"_s, u"yes"_s, u"force"_s, u"run"_s,
                                u"archived"_s, u"all"_s, u"confirm"_s})
        parser.addOption(QCommandLineOption(flag));

    if (!parser.parse(QStringList{u"agentdeck ctl"_s} + arguments)) {
        *error = parser.errorText();
        return std::nullopt;
    }
    QStringList positional = parser.positionalArguments();
    if (parser.isSet(version)) {
        error->clear();
        asked->version = true;
        return std::nullopt;
    }
    if (parser.isSet(help) || positional.value(0) == u"help"_s) {
        error->clear();
        const QString topic = positional.value(positional.value(0) == u"help"_s ? 1 : 0);
        const bool known = std::any_of(commandSpecs().cbegin(), commandSpecs().cend(),
                                       [&topic](const CommandSpec &s) { return s.name == topic; });
        asked->command = known ? topic : QString();
        return std::nullopt;
    }
    if (positional.isEmpty()) {
        *error = u"a command is missing"_s;
        return std::nullopt;
    }

    const QString name = positional.takeFirst();
    const auto spec = std::find_if(commandSpecs().cbegin(), commandSpecs().cend(),
                                   [&name](const CommandSpec &s) { return s.name == name; });
    if (spec == commandSpecs().cend()) {
        *error = u"unknown command \"%1\""_s.arg(name);
        return std::nullopt;
    }
    const QStringList global{u"server"_s, u"session-api-key"_s, u"timeout"_s, u"h"_s, u"help"_s};
    for (const QString &option : parser.optionNames()) {
        if (!global.contains(option) && !spec->options.contains(option)) {
            *error = u"%1 does not take --%2"_s.arg(name, option);
            return std::nullopt;
        }
    }

    Invocation invocation;
    invocation.command = spec->command;
    // Without --server: $AGENTDECK_SERVER, else a console's embedded server of this user, if one
    // runs (with its key), else the default address of a headless one.
    const QString named =
        parser.isSet(server) ? parser.value(server) : qEnvironmentVariable("AGENTDECK_SERVER");
    const std::optional<ConsoleServer> console =
        named.isEmpty() ? runningConsoleServer() : std::nullopt;
    const auto url =
        console ? std::optional(console->url)
                : ServerConnection::baseUrlFrom(named.isEmpty() ? DefaultCtlServer : named);
    if (!url) {
        *error = (parser.isSet(server) ? u"--server"_s : u"AGENTDECK_SERVER"_s) +
                 u" takes an http:// or https:// URL, e.g. "_s + DefaultCtlServer;
        return std::nullopt;
    }
    invocation.server = *url;
    if (console)
        invocation.serverChoice = u"the console's server, found in "_s + console->file;
    else if (!parser.isSet(server) && !named.isEmpty())
        invocation.serverChoice = u"$AGENTDECK_SERVER"_s;
    else if (!parser.isSet(server))
        invocation.serverChoice = u"no console's server runs; --server names another"_s;
    // As the server takes it: HTTP drops the blanks around a header's value.
    invocation.apiKey = parser.isSet(key) ? parser.value(key)
                        : qEnvironmentVariableIsSet("AGENTDECK_API_KEY")
                            ? qEnvironmentVariable("AGENTDECK_API_KEY")
                        : qEnvironmentVariableIsSet("AGENTDECK_SESSION_API_KEY")
                            ? qEnvironmentVariable("AGENTDECK_SESSION_API_KEY")
                        : console ? console->apiKey
                                  : QString();
    invocation.apiKey = invocation.apiKey.trimmed();
    if (!ServerConnection::isSendableApiKey(invocation.apiKey)) {
        *error = u"the session API key cannot contain control characters (a line break, a tab)"_s;
        return std::nullopt;
    }
    if (parser.isSet(timeout)) {
        const auto duration = parseDuration(parser.value(timeout));
        // A followed stream's check of the silence is a timer, and Qt's take an int of ms: at
        // 75d it was refused, and a frozen server was followed for good.
        if (!duration || duration->count() <= 0 || *duration > MaxTimerDuration) {
            *error = u"--timeout takes a duration such as 10s or 2m, at most 24d"_s;
            return std::nullopt;
        }
        invocation.timeout = *duration;
    }

    if (spec->takesId) {
        if (positional.isEmpty()) {
            *error = u"%1 needs a conversation ID"_s.arg(name);
            return std::nullopt;
        }
        const QString idText = positional.takeFirst();
        const auto id = parseWireId(idText);
        if (!id) {
            *error =
                u"\"%1\" is not a conversation ID (a UUID, dashed or 32 hex digits)"_s.arg(idText);
            return std::nullopt;
        }
        invocation.id = *id;
    }
    if (spec->takesText) {
        // Words after the ID form the text, so that `send ID echo hello` works unquoted.
        invocation.text = positional.join(u' ');
        positional.clear();
        if (invocation.text.isEmpty() && spec->command != Command::Create) {
            *error = u"%1 needs the text of the message"_s.arg(name);
            return std::nullopt;
        }
    }
    if (!positional.isEmpty()) {
        *error = u"unexpected argument \"%1\""_s.arg(positional.first());
        return std::nullopt;
    }

    if (parser.isSet(u"archived"_s) && parser.isSet(u"all"_s)) {
        *error = u"--archived and --all exclude each other"_s;
        return std::nullopt;
    }
    invocation.filter.archive = parser.isSet(u"all"_s)        ? ArchiveFilter::All
                                : parser.isSet(u"archived"_s) ? ArchiveFilter::Archived
                                                              : ArchiveFilter::Active;
    if (parser.isSet(status)) {
        invocation.filter.status = executionStatusFromString(parser.value(status));
        if (!invocation.filter.status) {
            *error = u"--status takes idle, running, paused, waiting_for_confirmation, "
                     "finished, error or stuck"_s;
            return std::nullopt;
        }
    }
    invocation.reason = parser.value(reason);
    invocation.title = parser.value(title);
    if (parser.isSet(agent))
        invocation.agent = parser.value(agent);
    invocation.confirm = parser.isSet(u"confirm"_s);
    invocation.json = parser.isSet(u"json"_s);
    invocation.follow = parser.isSet(u"follow"_s);
    invocation.yes = parser.isSet(u"yes"_s);
    invocation.force = parser.isSet(u"force"_s);
    invocation.run = parser.isSet(u"run"_s);
    return invocation;
}

} // namespace AgentDeck
