#!/usr/bin/env bash
# Runs the whole test suite (unit, api, system) on a fresh Debian 12 machine: installs what is
# missing, builds with warnings as errors, then runs ctest. Extra arguments go to ctest
# (e.g. -L unit).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-tests
"$root/packaging/build.sh" "$build" -DAGENTDECK_WERROR=ON
cd "$build"
ctest --output-on-failure --timeout 600 -j2 "$@"
