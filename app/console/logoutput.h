#pragma once

#include <QString>

#include <optional>

namespace AgentDeck::LogOutput {

// Where and how the process's log lines go (Qt's message handler), one shape for all of them:
// - text (default): "2026-12-06T03:40:12.345+00:00 warning agentdeck.server: MESSAGE", the
//   local time with its offset from UTC;
// - json: one object a line, {"time", "level", "category", "message"}, for log shippers;
// - under systemd (JOURNAL_STREAM names this process's stderr) straight to the journal, with the
//   priority of the level (journalctl -p warning picks warnings out) and the category in
//   AGENTDECK_CATEGORY; a journal that does not take a line gets it on stderr instead.
// Ids print plain ("3f2a…"), not as QUuid("{…}") as QDebug writes them.
enum class Format
{
    Text,
    Json
};

std::optional<Format> formatFromString(const QString &text);

// Installs the handler; called again, changes the format.
void install(Format format = Format::Text);

} // namespace AgentDeck::LogOutput
