#pragma once

#include <QByteArray>
#include <QString>

namespace AgentDeck {

// What an observation carries of a command's output: at most this many bytes of it, cut before
// a character rather than inside one, with a line that says so; and a line for a command that
// ran out of time. The in-server runtime and the sandbox host both use it.
inline constexpr qsizetype MaxCommandOutputBytes = 1024 * 1024;
QString commandOutput(QByteArray output, bool timedOut);

} // namespace AgentDeck
