#pragma once

#include <QProcessEnvironment>

namespace AgentDeck {

// The environment commands run with, in either runtime, and the sandbox hosts themselves: the
// server's own, without its secrets and settings (AGENTDECK_*, the catalog's PGPASSWORD) and its
// systemd socket. A host kept them, and without bubblewrap a command read them from
// /proc/$PPID/environ.
QProcessEnvironment commandEnvironment();

} // namespace AgentDeck
