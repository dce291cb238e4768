#!/usr/bin/env bash
# Build guardian-test-busybox:latest from the machine's static busybox (no registry needed).
set -euo pipefail
IMAGE=${1:-guardian-test-busybox:latest}
# busybox-static installs /bin/busybox; a plain `busybox` package may be dynamically linked.
BUSYBOX=/bin/busybox
[ -x "$BUSYBOX" ] || BUSYBOX=$(command -v busybox)
if docker image inspect "$IMAGE" >/dev/null 2>&1; then exit 0; fi
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/bin" "$root/tmp" "$root/run" "$root/www" "$root/etc"
cp "$BUSYBOX" "$root/bin/busybox"
for applet in $("$root/bin/busybox" --list); do
    [ "$applet" = busybox ] || ln -sf busybox "$root/bin/$applet"
done
echo 'root:x:0:0:root:/:/bin/sh' > "$root/etc/passwd"
echo ok > "$root/www/healthz"
tar -C "$root" -c . | docker import -c 'CMD ["sleep", "86400"]' -c 'ENV PATH=/bin' - "$IMAGE" >/dev/null
echo "built $IMAGE" >&2
