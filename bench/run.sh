#!/usr/bin/env bash
# The benchmark's entry point: a private dockerd (so hundreds of containers never load a shared
# engine), the full measurement, bench/RESULTS.md. Needs root (dockerd) and the repo's .venv
# (scripts/test.sh creates it). Extra arguments go to `python -m bench`, e.g.
#   bench/run.sh --trials 3 --sizes 10,50 --idle-seconds 10 --storm-containers 10
# Use `--engine-url unix:///var/run/docker.sock` (without --private-engine) via python -m bench
# to measure against an existing engine instead.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || { echo "bench: $PY missing; run scripts/test.sh once to create .venv" >&2; exit 1; }
command -v dockerd >/dev/null || { echo "bench: dockerd not installed (apt-get install docker.io)" >&2; exit 1; }
export BENCH_COMMAND="bench/run.sh${*:+ $*}"
exec "$PY" -m bench --private-engine "$@"
