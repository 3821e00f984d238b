#!/bin/sh
# Makes the man pages agentdeck(1) and agentdeck-ctl(1) (plain and gzipped) and the bash and zsh
# completions from the --help of the built binary: the option tables of app/commandline.cpp and
# app/ctl are the only source, so the three cannot drift from --help. Run by the build
# (packaging/CMakeLists.txt, target agentdeck_clidocs).
# Usage: clidocs.sh BINARY OUTPUT_DIR
set -eu
here=$(cd "$(dirname "$0")" && pwd)
binary=$1
out=$2
mkdir -p "$out"
version=$("$binary" --version)
"$binary" --help | awk -f "$here/parsehelp.awk" >"$out/agentdeck.records"
"$binary" ctl --help | awk -f "$here/parsehelp.awk" >"$out/agentdeck-ctl.records"

awk -f "$here/man.awk" -v name=agentdeck -v version="$version" \
    -v seealso='.BR agentdeck-ctl (1)' "$out/agentdeck.records" >"$out/agentdeck.1"
awk -f "$here/man.awk" -v name=agentdeck-ctl -v version="$version" \
    -v summary="the command-line client of an AgentDeck server" \
    -v seealso='.BR agentdeck (1)' "$out/agentdeck-ctl.records" >"$out/agentdeck-ctl.1"
for page in agentdeck agentdeck-ctl; do
    # -n: no name or time stamp in the archive, so that builds are reproducible.
    gzip -9nc "$out/$page.1" >"$out/$page.1.gz"
done

awk -f "$here/completion.awk" -v dir="$here" -v shell=bash "$out/agentdeck.records" "$out/agentdeck-ctl.records" \
    >"$out/agentdeck.bash"
awk -f "$here/completion.awk" -v dir="$here" -v shell=zsh "$out/agentdeck.records" "$out/agentdeck-ctl.records" \
    >"$out/_agentdeck"
