#pragma once

namespace AgentDeck {

// Chooses the mode from the arguments and runs it. The whole of main().
int runApplication(int argc, char *argv[]);

} // namespace AgentDeck
