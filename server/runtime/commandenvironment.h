#pragma once

#include <QProcessEnvironment>

namespace AgentDeck {

// The environment commands run with, in either runtime, and the sandbox hosts themselves: an
// allow-list of what a shell needs of the server's (PATH, HOME, LANG, LC_*, TERM, TZ), nothing
// else. Whatever else the service has (AGENTDECK_*, PGPASSWORD, AWS_*, a token) stays with the
// server: without bubblewrap a command could read a host's from /proc/$PPID/environ.
QProcessEnvironment commandEnvironment();

} // namespace AgentDeck
