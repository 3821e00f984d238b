#!/bin/sh
# The compiler launcher of every build (CMAKE_CXX_COMPILER_LAUNCHER): runs the compiler through
# ccache, if given, with paths under the source tree hashed relative to the build dir, so that
# build dirs and clones share hits.
#
# With --werror a warning fails the compile, without -Werror on the compiler's command line:
# ccache hashes that command line, and the test build (AGENTDECK_WERROR=ON) and
# packaging/run.sh's build (warnings only) then share one cache. A cache hit replays the
# warnings, so they fail the test build whether compiled or not.
#
# Usage: compile.sh [--werror] -- [ccache] COMPILER ARGS...
werror=
if [ "${1-}" = --werror ]; then
    werror=1
    shift
fi
[ "${1-}" = -- ] && shift
CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(cd "$(dirname "$0")/.." && pwd)}
CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
export CCACHE_BASEDIR CCACHE_NOHASHDIR
[ -n "$werror" ] || exec "$@"

diagnostics=$(mktemp) || exit 1
"$@" 2>"$diagnostics"
status=$?
cat "$diagnostics" >&2
if [ "$status" -eq 0 ] && grep -q 'warning: ' "$diagnostics"; then
    echo "error: warnings are errors in this build (AGENTDECK_WERROR)" >&2
    # The object goes, so that the next build compiles it again rather than taking it as done.
    output=
    for argument in "$@"; do
        [ "$output" = next ] && output=$argument && break
        [ "$argument" = -o ] && output=next
    done
    [ -n "$output" ] && [ "$output" != next ] && rm -f "$output"
    status=1
fi
rm -f "$diagnostics"
exit "$status"
