#pragma once

#include "logoutput.h"

#include "serverconfig.h"

#include <QProcessEnvironment>
#include <QStringList>
#include <QUrl>

#include <optional>

namespace AgentDeck {

enum class Mode
{
    Console,
    Connect,
    Headless
};

struct Options
{
    Mode mode = Mode::Console;
    ServerConfig server;
    QUrl connectUrl;         // the server of Mode::Connect (the first one given)
    QList<QUrl> connectUrls; // every --connect: two or more open the All servers window
    bool listenGiven = false;
    LogOutput::Format logFormat = LogOutput::Format::Text;
};

// "90s", "15m", "12h", "7d" or plain seconds.
std::optional<std::chrono::milliseconds> parseDuration(const QString &text);

// "64MiB", "512KiB", "1GiB" (K, M and G are the same binary units) or plain bytes.
std::optional<qint64> parseSize(const QString &text);

// The environment variable, and key of a --config file, of an option: AGENTDECK_ and its name
// in capitals with '_' for '-', but for the few the packaged agentdeck.conf names otherwise.
QString optionVariable(const QString &optionName);

// Parses the arguments after the program name, with the options' variables in `environment` and
// the config file that --config or AGENTDECK_CONFIG names (flags over environment over file over
// defaults). On a mistake returns nullopt with a sentence in *error; --help and --version fill
// *message and return nullopt with an empty *error.
std::optional<Options>
parseOptions(const QStringList &arguments, QString *error, QString *message,
             const QProcessEnvironment &environment = QProcessEnvironment::systemEnvironment());

} // namespace AgentDeck
