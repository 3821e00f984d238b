#pragma once

namespace AgentDeck {

struct Options;

// The console: with an embedded server in its own thread, or watching a remote one (--connect).
int runConsole(int argc, char *argv[], const Options &options);

} // namespace AgentDeck
