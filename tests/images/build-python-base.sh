#!/usr/bin/env bash
# Build a local Debian bookworm image with python3 (no registry is reachable here) and tag it,
# so the repo's Dockerfile can be built with --build-arg BASE_IMAGE=<tag>. Cached by tag.
set -euo pipefail
IMAGE=${1:-guardian-test-python-base:bookworm}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
if docker image inspect "$IMAGE" >/dev/null 2>&1; then exit 0; fi
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase --include=python3,python3-venv bookworm "$root" "$MIRROR" >/dev/null
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" -c . | docker import -c 'CMD ["python3"]' \
    -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$IMAGE" >/dev/null
echo "built $IMAGE" >&2
