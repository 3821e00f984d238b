#pragma once

#include "serverconnection.h"

#include <QStringList>
#include <QUrl>
#include <QUuid>

#include <chrono>
#include <optional>

namespace AgentDeck {

// What `agentdeck ctl` was asked to do: its command line, read and checked.
enum class Command
{
    List,
    Show,
    Create,
    Events,
    Run,
    Pause,
    Interrupt,
    Accept,
    Reject,
    Archive,
    Unarchive,
    Recover,
    Retry,
    Dismiss,
    Reprovision,
    StartFresh,
    Delete,
    Send,
    Replicas
};

struct CommandSpec
{
    QLatin1StringView name;
    Command command;
    bool takesId;
    bool takesText;
    QStringList options; // besides --server, --session-api-key and --help
};

// Every command ctl knows, with what each takes.
const QList<CommandSpec> &commandSpecs();

struct Invocation
{
    Command command = Command::List;
    QUrl server;
    // How the server was chosen when --server did not name it, for ctl to say which it asks:
    // the console's (and the file it was found in), or the default.
    QString serverChoice;
    QString apiKey;
    std::chrono::milliseconds timeout = ServerConnection::DefaultSilenceTimeout;
    QUuid id;
    QString text;
    QString reason;               // reject's
    QString title;                // create's
    std::optional<QString> agent; // the request's default (shell) unless given
    bool confirm = false;
    ConversationFilter filter;
    bool json = false;
    bool follow = false;
    bool yes = false;
    bool force = false; // archive's, of a running conversation
    bool run = false;
};

// Where ctl goes without --server.
extern const QString DefaultCtlServer;

// What was asked for instead of a command: help (of one command, when `command` names it), or
// the version.
struct Information
{
    bool version = false;
    QString command; // `agentdeck ctl list --help`, `agentdeck ctl help list`
};

// Parses the arguments after "ctl". Returns nullopt with a sentence in *error, or with an empty
// *error when the user asked for help or the version (*asked says which).
std::optional<Invocation> parseInvocation(const QStringList &arguments, QString *error,
                                          Information *asked = nullptr);

} // namespace AgentDeck
