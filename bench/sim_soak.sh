#!/usr/bin/env bash
# The deterministic simulator (tests/sim/), longer than CI runs it: more seeds, from a base that
# changes with each run unless given, so each soak explores seeds CI never tried.
#   bench/sim_soak.sh                        # 2000 seeds x 1 h, from a base taken from the time
#   SEEDS=300 HOURS=4 BASE=7000 bench/sim_soak.sh
# Prints the figures: seeds, simulated hours, steps, the steps and faults of each kind (the work
# queue's among them: worker turns, restart calls queued and run, looks when due, steps beside a
# call in flight, crashes beside one), invariants checked, the known bugs hit (and by which
# seeds), and every seed that broke a promise with the one command that replays it. Exits 1
# when a seed found something new.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || { echo "sim_soak: $PY missing; run scripts/test.sh once (or PYTHON=...)" >&2; exit 1; }
SEEDS=${SEEDS:-2000}
HOURS=${HOURS:-1}
BASE=${BASE:-$(( $(date +%s) % 1000000 * 1000 ))}
JOBS=${JOBS:-$(nproc)}
echo "sim_soak: $SEEDS seeds from $BASE, $HOURS h each, $JOBS processes" >&2
exec "$PY" -m tests.sim --seeds "$SEEDS" --base "$BASE" --hours "$HOURS" --jobs "$JOBS" "$@"
