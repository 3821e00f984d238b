#!/usr/bin/env bash
# Renders the console with sample data to docs/screenshots/console.png, All servers (one of
# them down) to docs/screenshots/fleet.png, and the Activity view to docs/screenshots/activity.png
# (offscreen platform).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/packaging/install-deps.sh"
export CCACHE_BASEDIR="$root"
[ -f "$root/build/build.ninja" ] || cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$root/build" --target agentdeck agentdeck_screenshot
mkdir -p "$root/docs/screenshots"
QT_QPA_PLATFORM=offscreen "$root/build/tests/agentdeck_screenshot" "$root/docs/screenshots/console.png"
QT_QPA_PLATFORM=offscreen "$root/build/tests/agentdeck_screenshot" "$root/docs/screenshots/fleet.png" --fleet
QT_QPA_PLATFORM=offscreen "$root/build/tests/agentdeck_screenshot" "$root/docs/screenshots/activity.png" --activity
