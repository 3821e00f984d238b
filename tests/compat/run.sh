#!/usr/bin/env bash
# Runs the OpenHands client compatibility suite: the published @openhands/typescript-client
# (pinned by package-lock.json) against the real binary, $AGENTDECK_BINARY (default:
# build-tests/app/agentdeck), and a scripted chat-completions model, all on loopback.
# Extra arguments go to `node --test` (e.g. --test-name-pattern=socket).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "run.sh: node and npm are needed (packaging/install-deps.sh installs them)" >&2
    exit 1
fi
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 18 ]; then
    echo "run.sh: Node.js 18 or later is needed, this is $(node --version)" >&2
    exit 1
fi

# npm ci from the lockfile, only when node_modules is not what it pins; from npm's cache first.
stamp=node_modules/.agentdeck-lock
if ! cmp -s package-lock.json "$stamp" 2>/dev/null; then
    npm ci --prefer-offline --ignore-scripts --no-audit --no-fund --loglevel=error
    cp package-lock.json "$stamp"
fi

export AGENTDECK_BINARY=${AGENTDECK_BINARY:-$here/../../build-tests/app/agentdeck}
exec node --test "$@" openhands.test.mjs
