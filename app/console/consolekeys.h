#pragma once

#include <QCoroTask>
#include <QString>
#include <QUrl>

#include <optional>

namespace AgentDeck::ConsoleKeys {

// The session API keys of the servers the console watches, kept in the desktop's secret store
// (QtKeychain: the Secret Service or KWallet, under the service "agentdeck" and the server's
// URL), never in a settings file. Where no store runs (a desktop without one, a container) a
// key given in the window serves for the session only, and the console says so.

// The key kept for `server`, if the store has one.
QCoro::Task<std::optional<QString>> read(QUrl server);
// Keeps `key` for `server`: empty when it is kept, else why the store could not keep it.
QCoro::Task<QString> write(QUrl server, QString key);

} // namespace AgentDeck::ConsoleKeys
