#!/usr/bin/env bash
# Build a local Debian bookworm image that boots systemd as PID 1 (no registry is reachable here),
# for tests/integration/test_systemd_boot.py. Cached by tag: the test tags it with a hash of this
# file, so a changed script builds a new image and an unchanged one is never rebuilt.
set -euo pipefail
IMAGE=${1:-guardian-test-systemd:bookworm}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
if docker image inspect "$IMAGE" >/dev/null 2>&1; then exit 0; fi
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase --include=systemd,systemd-sysv,python3,python3-venv,dbus \
    bookworm "$root" "$MIRROR" >/dev/null
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
# A container has no consoles, udev or kernel modules to wait for; boot only what the test uses.
for unit in getty.target console-getty.service systemd-udevd.service systemd-udev-trigger.service \
    systemd-modules-load.service systemd-remount-fs.service sys-kernel-debug.mount \
    sys-kernel-tracing.mount dev-hugepages.mount dev-mqueue.mount systemd-firstboot.service; do
    ln -sf /dev/null "$root/etc/systemd/system/$unit"
done
: > "$root/etc/machine-id"
tar -C "$root" -c . | docker import -c 'CMD ["/lib/systemd/systemd"]' \
    -c 'ENV container=docker' \
    -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$IMAGE" >/dev/null
echo "built $IMAGE" >&2
