#!/usr/bin/env bash
# Runs AgentDeck, installing and building what it needs on first use.
# Arguments go to agentdeck, e.g. --headless --listen 127.0.0.1:8000 --data-dir /var/lib/agentdeck
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/packaging/build.sh" "$root/build" >&2
exec "$root/build/app/agentdeck" "$@"
