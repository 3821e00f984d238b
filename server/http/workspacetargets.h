#pragma once

#include "runtime/workspacesandbox.h"
#include "wiretypes.h"
#include "workspaceroots.h"

#include <QCoroTask>
#include <QString>

#include <chrono>
#include <memory>
#include <optional>

// Where a path of the remote workspace routes (/api/bash, /api/file, /api/git) is, and the
// sandbox that reaches it: inside a conversation's workspace, that conversation's; inside the
// server workspace, its own. A path whose links lead out of the workspace it entered is refused
// (403 path_outside_workspace), one outside every workspace root too (422
// workspace_outside_roots), and anything else (403 path_refused).
namespace AgentDeck {

class BashEventLog;
class ConversationService;
class ConversationStore;
class Router;
struct ApiError;

namespace WorkspaceTargets {

inline constexpr int DefaultCommandTimeoutSeconds = 300; // OpenHands' default
inline constexpr int MaxCommandTimeoutSeconds = 24 * 3600;
// The sandbox's answers to the path check (see pathCheck()).
inline constexpr int RefusedExit = 126;
inline constexpr int MissingExit = 3;
inline constexpr int NotAFileExit = 4;

struct Workspaces
{
    WorkspaceSandbox &sandbox;
    ConversationService &service;
    ConversationStore &store;
    qint64 maxDownloadBytes = 0;
    WorkspaceRoots roots;
};

// A path and the sandbox it is reached through: the server workspace's, or that of the
// conversation whose workspace holds it: the innermost one the path entered, by a directory of
// its own, not by a link.
struct Target
{
    QString path; // real
    QString root; // the workspace holding it, real
    std::optional<ConversationInfo> conversation;
};

// 403 path_refused, with the reason.
ApiError refused(const QString &path, const QString &why);
// The target of `given` (an absolute path); throws what is wrong with it.
Target locate(const Workspaces &workspaces, const QString &given);
QCoro::Task<WorkspaceCommandResult> runAt(WorkspaceSandbox &sandbox, const Target &target,
                                          QString command, std::chrono::milliseconds timeout);
// shellPathCheck() with the routes' refusal (RefusedExit).
QString pathCheck(const QString &path, const QString &root);

// The /api/bash routes (bashroutes.cpp), with `events` the bash events they record.
void registerBashRoutes(Router &router, const Workspaces &workspaces,
                        std::shared_ptr<BashEventLog> events);

} // namespace WorkspaceTargets
} // namespace AgentDeck
