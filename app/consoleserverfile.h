#pragma once

#include <QString>
#include <QUrl>

#include <optional>

namespace AgentDeck {

// How `agentdeck ctl` finds the server of the user's console without --server: the console
// writes where its embedded server listens, and the key it asks for, into a file only its user
// can read, and removes it when it stops.
//
// The file lives where no other user and no other login can write or read: the session's
// runtime dir ($XDG_RUNTIME_DIR/agentdeck-console) where there is one, otherwise the console's
// default data dir (0700, beside the catalog). Never in a directory shared between sessions:
// a file in /tmp/runtime-root, which every root process shares, led ctl to another console's
// server.
struct ConsoleServer
{
    QUrl url;
    QString apiKey;
    QString file; // where it was found
};

// Where the console with this data dir writes its file.
QString consoleServerFile(const QString &dataDir);
bool writeConsoleServer(const QString &dataDir, const QUrl &url, const QString &apiKey);
void removeConsoleServer(const QString &dataDir);
// The running console's server, as ctl looks for it (the console's default data dir); nothing
// when there is none (no file, or its process is gone).
std::optional<ConsoleServer> runningConsoleServer();

// The session API key of the console's embedded server: made once for its data dir, random,
// kept in DATA/console.key (0600). Empty, with *error, when it can be neither read nor made.
QString consoleApiKey(const QString &dataDir, QString *error);

// The data dir of a console started without --data-dir.
QString defaultDataDir();

} // namespace AgentDeck
