#!/usr/bin/env bash
# Installs what is missing, then configures (Ninja, ccache) and builds incrementally, saying on
# stderr what it is doing.
# Usage: packaging/build.sh [--target TARGET]... [BUILD_DIR] [extra cmake args...]
# Without --target it builds everything the build dir configures (with the tests, unless
# -DAGENTDECK_BUILD_TESTS=OFF); the cmake arguments apply when the build dir is configured.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
targets=() target_args=()
while [ "${1-}" = --target ]; do
    targets+=("$2")
    target_args+=(--target "$2")
    shift 2
done
build=${1:-$root/build}
shift || true
say() { echo "build.sh: $*" >&2; }

"$root/packaging/install-deps.sh"
if [ ! -f "$build/build.ninja" ]; then
    say "configuring $build"
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
fi
# A dry run counts what is out of date, once CMake has brought build.ninja up to date (a dry run
# stops there, and always where globs are re-checked: the test build's). Each compile is a moment
# on a compiler-cache hit (packaging/compile.sh), seconds on a miss.
if ! regenerated=$(ninja -C "$build" build.ninja 2>&1); then
    echo "$regenerated" >&2
    exit 1
fi
count=$(ninja -C "$build" -n "${targets[@]}" | grep -c ' Building CXX object ' || true)
objects=$([ "$count" -eq 0 ] || echo "$count objects ")
say "building ${objects}in $build${targets[*]:+ for ${targets[*]}}"
cmake --build "$build" "${target_args[@]}" -- -j"$(nproc)"
