#pragma once

namespace AgentDeck {

// `agentdeck ctl [--server URL] [--session-api-key K] COMMAND ...`: the operator CLI, a client of
// the REST and WebSocket API through ServerConnection. argv[1] is "ctl".
//
// Exit codes, one per kind of failure so that scripts can tell them apart:
namespace CtlExit {
inline constexpr int Ok = 0;
inline constexpr int Failed = 1;       // any other server error (400, 422, 503, ...), or declined
inline constexpr int Usage = 2;        // bad arguments; delete without --yes and no terminal
inline constexpr int NotFound = 3;     // 404: no such conversation
inline constexpr int Conflict = 4;     // 409: archived, already running, held by another replica
inline constexpr int Expired = 5;      // 410: the runtime expired
inline constexpr int Unreachable = 6;  // no answer from the server (refused, reset, DNS)
inline constexpr int Unauthorized = 7; // 401: missing or wrong session API key
} // namespace CtlExit

int runCtl(int argc, char *argv[]);

} // namespace AgentDeck
