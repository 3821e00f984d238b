#!/usr/bin/env bash
# Runs AgentDeck, installing and building what it needs on first use: the binary alone, without
# the tests, with the flags of the test build (packaging/test.sh), so that either build's
# compiler cache serves the other.
# Arguments go to agentdeck, e.g. --headless --listen 127.0.0.1:8000 --data-dir /var/lib/agentdeck
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/packaging/build.sh" --target agentdeck "$root/build" -DAGENTDECK_BUILD_TESTS=OFF >&2
echo "run.sh: starting build/app/agentdeck $*" >&2
exec "$root/build/app/agentdeck" "$@"
