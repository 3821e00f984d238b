#pragma once

#include <QJsonObject>
#include <QString>

#include <optional>

namespace AgentDeck {

// OpenHands' agent spec, as its clients (@openhands/typescript-client, the Python SDK) send it to
// create a conversation: {"kind": "Agent", "llm": {"model", "api_key", "base_url", ...},
// "tools": [{"name": "terminal"}, {"name": "file_editor"}, ...]}, with `max_iterations` beside
// the agent in the request. It runs on AgentDeck's llm agent: the server stores and answers it
// as {"kind": "llm", ...}, so the console, ctl and every other client see an llm conversation.
namespace OpenHandsAgent {

inline constexpr QLatin1StringView Kind{"Agent"};

// The settings of the llm agent (its `agent` object without kind) that `agent` (OpenHands' spec,
// with or without its kind) asks for; `request` is the whole create body. Nothing when the spec
// asks for what AgentDeck does not have (a tool it lacks): *error names it.
std::optional<QJsonObject> toLlmConfig(const QJsonObject &agent, const QJsonObject &request,
                                       QString *error);

} // namespace OpenHandsAgent

} // namespace AgentDeck
