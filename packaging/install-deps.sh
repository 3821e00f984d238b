#!/usr/bin/env bash
# Installs the Debian 12 packages AgentDeck needs to build, run and test, when they are missing.
# Idempotent and quiet when everything is already there. Needs root (or sudo) only to install.
set -euo pipefail

packages=(
    build-essential cmake ninja-build ccache pkg-config
    qt6-base-dev qt6-websockets-dev qt6-declarative-dev
    libqt6sql6-sqlite libqt6sql6-psql libsqlite3-dev qcoro-qt6-dev libsystemd-dev
    qtkeychain-qt6-dev gnome-keyring dbus-daemon libcurl4-openssl-dev curl
    qml6-module-qtquick qml6-module-qtquick-controls qml6-module-qtquick-layouts
    qml6-module-qtquick-templates qml6-module-qtquick-window qml6-module-qtqml-workerscript
    postgresql xvfb xauth bubblewrap slirp4netns procps e2fsprogs
    dpkg-dev file systemd python3 desktop-file-utils appstream lintian
    docker.io busybox-static openssl
    qemu-system-x86 debootstrap
)

missing=()
# The compat suite (tests/compat) runs on the machine's Node.js and npm; Debian's where there are none.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "Installing: ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
