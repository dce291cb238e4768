#!/usr/bin/env bash
# Run Guardian's whole test suite against a real Docker engine.
# Installs what is missing (as root, from Debian), starts dockerd when no engine answers,
# builds the local test image, creates .venv with the package and its test extra, lints, tests.
# Extra arguments go to pytest, e.g. scripts/test.sh tests/unit -x
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

log() { printf '== %s\n' "$*" >&2; }

# 1. System packages the tests use. Only root can install; others must have them already.
missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
dpkg -s busybox-static >/dev/null 2>&1 || missing+=(busybox-static)
for tool in $(cat scripts/test-packages.txt 2>/dev/null | grep -v '^#' || true); do
    pkg=${tool%%:*}; cmd=${tool#*:}
    command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then
        log "installing ${missing[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    else
        log "missing packages (run as root to install): ${missing[*]}"
    fi
fi

# 2. A Docker engine: use the one that answers, else start dockerd.
if ! docker info >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v dockerd >/dev/null 2>&1; then
        log "starting dockerd"
        mkdir -p "$ROOT/.ci/logs"
        setsid nohup dockerd >"$ROOT/.ci/logs/dockerd.log" 2>&1 < /dev/null &
        for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
    fi
fi
docker info >/dev/null 2>&1 && log "docker engine: $(docker version --format '{{.Server.Version}}')" \
    || log "no docker engine reachable (integration tests will fail when required)"

# 3. The local test image (no registry is reachable).
if docker info >/dev/null 2>&1; then
    tests/images/build-busybox.sh
fi

# 4. A virtualenv with the package and its test extra.
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/pip install -q --disable-pip-version-check -e '.[test]' 2>&1 | grep -v '^WARNING: Location' || true

# 5. Lint and types, then the suite.
log "ruff, mypy, import contracts"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/lint-imports --no-cache >/dev/null
log "pytest"
export GUARDIAN_REQUIRE_DOCKER=1
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
