#pragma once

#include "runtime/runtime.h"

#include <QJsonArray>
#include <QStringList>

#include <chrono>
#include <optional>

namespace AgentDeck {

// The tools an agent's actions name, executed in the conversation's runtime. Every tool is
// turned into bash commands run through Runtime::execute (file contents travel base64-encoded),
// so tools work wherever the sandbox is. A tool that cannot be done (bad arguments, a path
// outside the workspace, a non-unique match) answers with an explanation and a non-zero exit
// code: the agent sees it as an observation, the run goes on.
namespace Tools {

inline constexpr QLatin1StringView Bash{"bash"};
inline constexpr QLatin1StringView ReadFile{"read_file"};
inline constexpr QLatin1StringView WriteFile{"write_file"};
inline constexpr QLatin1StringView StrReplace{"str_replace"};
inline constexpr QLatin1StringView Finish{"finish"};

// The tools an llm agent may be given (finish, which it always has, aside).
QStringList names();

// The chat completions `tools` array: one function with a JSON schema per tool of `offered`
// (nothing: every tool), and finish.
QJsonArray schemas(const std::optional<QStringList> &offered = std::nullopt);

// The observation of an action whose tool the conversation's agent does not have.
CommandResult notOffered(const QString &toolName);

// Runs the action (an ActionEvent's tool_name and action object) in the runtime.
// `serverTimeout` bounds every command (0: no limit); bash's own `timeout` may only shorten it.
// A bash command carries the action's id, so that the runtime can keep what it prints for a
// server that is killed before it ends.
QCoro::Task<CommandResult> run(Runtime &runtime, QString toolName, QJsonObject arguments,
                               QString workingDir, std::chrono::milliseconds serverTimeout,
                               QUuid actionId);

// `path` resolved against the workspace, or nothing when it leaves the workspace (lexically;
// the commands check symbolic links again where they run).
std::optional<QString> resolveInWorkspace(const QString &path, const QString &workingDir);

} // namespace Tools

} // namespace AgentDeck
