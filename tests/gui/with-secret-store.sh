#!/usr/bin/env bash
# Runs a test on a D-Bus session of its own with a Secret Service (gnome-keyring) unlocked in
# it, in a home of its own: what the console keeps in the desktop's secret store is tested
# where CI has no desktop.
set -euo pipefail
home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
export HOME=$home XDG_DATA_HOME=$home/.local/share XDG_RUNTIME_DIR=$home/run
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
export AGENTDECK_TEST_SECRET_STORE=1
exec dbus-run-session -- sh -c '
    printf "%s" test-keyring | gnome-keyring-daemon --unlock --components=secrets >/dev/null
    exec "$@"' sh "$@"
