#!/usr/bin/env bash
# Builds the Debian 12 image that the VM test boots, out of Debian's packages only: debootstrap of
# bookworm from the Debian mirror of this machine's apt sources, the kernel (linux-image-amd64),
# systemd, and the packages named as arguments (what the .deb under test depends on). No
# bootloader: qemu boots DIR/vmlinuz and DIR/initrd.img with DIR/rootfs.img as /dev/vda.
#
#   build-image.sh DIR [PACKAGE...]
#
# Cached in DIR: the debootstrap result (DIR/base, rebuilt when this script or the mirror changes)
# and the downloaded packages (DIR/debs) are reused, and nothing is done when DIR/stamp holds the
# hash of the whole recipe. Needs root (debootstrap, chroot).
#
# The image runs DIR's payload agent at boot: /dev/vdb, a tar, is unpacked to /run/vmtest and its
# run.sh runs as root with its output on the second serial port (ttyS1); then the VM powers off.
set -euo pipefail

dir=$1
shift
packages=("$@")
self=$(readlink -f "$0")

# The mirrors of Debian's suites in the apt sources (deb822 .sources files or one-line lists).
mirror_of() {
    local suite=$1
    {
        cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk -v suite="$suite" '
            /^$/ { if (uri != "" && found) print uri; uri = ""; found = 0; next }
            /^URIs:/ { uri = $2 }
            /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == suite) found = 1 }
            END { if (uri != "" && found) print uri }'
        cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
            awk -v suite="$suite" '$1 == "deb" && $0 !~ /\[/ && $3 == suite { print $2 }'
    } | head -n 1 || true
}
mirror=$(mirror_of bookworm)
security=$(mirror_of bookworm-security)
if [ -z "$mirror" ]; then
    echo "build-image.sh: no Debian bookworm mirror in the apt sources" >&2
    exit 1
fi

hash_of() { sha256sum | cut -c1-16; }
base_recipe=$({
    sed -n '/^# BASE-BEGIN/,/^# BASE-END/p' "$self"
    echo "$mirror $security"
} | hash_of)
recipe=$({
    cat "$self"
    echo "$mirror $security"
    printf '%s\n' "${packages[@]}"
} | hash_of)
if [ -f "$dir/stamp" ] && [ "$(cat "$dir/stamp")" = "$recipe" ] && [ -f "$dir/rootfs.img" ]; then
    exit 0
fi
mkdir -p "$dir/debs"
rm -f "$dir/stamp"
started=$SECONDS

mounted=()
unmount_all() {
    local i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
        umount -l "${mounted[$i]}" 2>/dev/null || true
    done
    mounted=()
}
trap unmount_all EXIT
mount_chroot() {
    local root=$1
    mount -t proc proc "$root/proc" && mounted+=("$root/proc")
    mount -t sysfs sysfs "$root/sys" && mounted+=("$root/sys")
    mount --bind /dev "$root/dev" && mounted+=("$root/dev")
    mount --bind "$dir/debs" "$root/var/cache/apt/archives" && mounted+=("$root/var/cache/apt/archives")
}
in_chroot() {
    chroot "$1" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
        LANG=C.UTF-8 "${@:2}"
}

# BASE-BEGIN: what the base layer holds (a change here rebuilds it).
base_packages=systemd,systemd-sysv,udev,dbus,kmod,linux-image-amd64,initramfs-tools,procps,curl,
base_packages+=ca-certificates,less,psmisc
if [ ! -f "$dir/base.stamp" ] || [ "$(cat "$dir/base.stamp")" != "$base_recipe" ]; then
    echo "build-image.sh: debootstrap of bookworm from $mirror" >&2
    rm -rf "$dir/base" "$dir/base.tmp"
    mkdir -p "$dir/base.tmp/var/cache/apt/archives"
    # Packages already downloaded are reused (debootstrap looks in the target's apt cache).
    cp -l "$dir"/debs/*.deb "$dir/base.tmp/var/cache/apt/archives/" 2>/dev/null || true
    debootstrap --variant=minbase --include="$base_packages" bookworm "$dir/base.tmp" "$mirror" \
        >"$dir/debootstrap.log" 2>&1 || {
        tail -n 30 "$dir/debootstrap.log" >&2
        exit 1
    }
    mv -f "$dir/base.tmp"/var/cache/apt/archives/*.deb "$dir/debs/" 2>/dev/null || true
    {
        echo "deb $mirror bookworm main"
        echo "deb $mirror bookworm-updates main"
        [ -z "$security" ] || echo "deb $security bookworm-security main"
    } >"$dir/base.tmp/etc/apt/sources.list"
    echo 'APT::Install-Recommends "0";' >"$dir/base.tmp/etc/apt/apt.conf.d/99no-recommends"
    echo vmtest >"$dir/base.tmp/etc/hostname"
    echo '/dev/vda / ext4 rw,errors=remount-ro 0 1' >"$dir/base.tmp/etc/fstab"
    # The payload agent: runs the tar on /dev/vdb, then powers off.
    cat >"$dir/base.tmp/usr/local/sbin/vmtest-agent" <<'EOF'
#!/bin/bash
exec >/dev/ttyS1 2>&1
echo "VMTEST BOOTED"
mkdir -p /run/vmtest
if tar -xf /dev/vdb -C /run/vmtest; then
    bash /run/vmtest/run.sh
    echo "VMTEST EXIT $?"
else
    echo "VMTEST EXIT no payload"
fi
systemctl poweroff --no-block
EOF
    chmod 755 "$dir/base.tmp/usr/local/sbin/vmtest-agent"
    cat >"$dir/base.tmp/etc/systemd/system/vmtest-agent.service" <<'EOF'
[Unit]
Description=Runs the VM test's payload and powers off
After=multi-user.target
[Service]
Type=oneshot
ExecStart=/usr/local/sbin/vmtest-agent
[Install]
WantedBy=multi-user.target
EOF
    in_chroot "$dir/base.tmp" systemctl enable vmtest-agent.service >/dev/null 2>&1
    # Nothing waits for a network or a login on the console.
    in_chroot "$dir/base.tmp" systemctl mask serial-getty@ttyS0.service getty@tty1.service \
        systemd-networkd-wait-online.service >/dev/null 2>&1
    in_chroot "$dir/base.tmp" passwd -d root >/dev/null
    echo "$base_recipe" >"$dir/base.tmp/.base-stamp"
    mv "$dir/base.tmp" "$dir/base"
    echo "$base_recipe" >"$dir/base.stamp"
fi
# BASE-END

echo "build-image.sh: image with ${packages[*]:-no further packages}" >&2
rm -rf "$dir/rootfs"
cp -a "$dir/base" "$dir/rootfs"
if [ ${#packages[@]} -gt 0 ]; then
    mount_chroot "$dir/rootfs"
    in_chroot "$dir/rootfs" apt-get update -qq >"$dir/apt.log" 2>&1 &&
        in_chroot "$dir/rootfs" apt-get install -y -qq "${packages[@]}" >>"$dir/apt.log" 2>&1 || {
        tail -n 30 "$dir/apt.log" >&2
        exit 1
    }
    unmount_all
fi
cp -L "$dir/rootfs/vmlinuz" "$dir/vmlinuz"
cp -L "$dir/rootfs/initrd.img" "$dir/initrd.img"
rm -f "$dir/rootfs.img"
mke2fs -q -F -t ext4 -L vmroot -d "$dir/rootfs" "$dir/rootfs.img" 4G
rm -rf "$dir/rootfs"
echo "$recipe" >"$dir/stamp"
echo "build-image.sh: image built in $((SECONDS - started))s" >&2
