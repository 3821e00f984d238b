#!/usr/bin/env bash
# Writes the generated part of docs/API.md from the /openapi.json of a server of this tree:
# builds the binary and tst_system_docs in BUILD_DIR (default build-tests), then runs the check
# that compares them in the mode that writes instead.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-tests}
cmake --build "$build" --target agentdeck tst_system_docs
AGENTDECK_BINARY="$build/app/agentdeck" AGENTDECK_WRITE_API_REFERENCE=1 \
    "$build/tests/tst_system_docs" apiReferenceIsCurrent
