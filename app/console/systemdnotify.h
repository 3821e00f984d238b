#pragma once

class QString;

namespace AgentDeck {

// Readiness for systemd (Type=notify). Outside a notify service (NOTIFY_SOCKET unset) both are
// no-ops, so tests and hand-started daemons are unaffected.

// READY=1, with a one-line STATUS= shown by `systemctl status`: the API is listening and
// recovery is done, so `systemctl start` may return.
void notifySystemdReady(const QString &status);

// STOPPING=1: a graceful stop has begun.
void notifySystemdStopping();

} // namespace AgentDeck
