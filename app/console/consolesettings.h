#pragma once

#include <memory>

class QSettings;

namespace AgentDeck {

// What the console remembers between starts (the window's layout), in
// ~/.config/agentdeck/console.conf; under QStandardPaths' test mode, in ~/.qttest's place.
// Never a key: those belong to the desktop's secret store.
std::unique_ptr<QSettings> consoleSettings();

} // namespace AgentDeck
