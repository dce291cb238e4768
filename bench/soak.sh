#!/usr/bin/env bash
# The fault suite, longer: more kill -9 cycles and more fuzzed inputs, same checks as CI.
# Writes the figures to bench/soak-report.json (bench/RESULTS.md quotes them).
#   bench/soak.sh                          # 100 kills, 10 containers, 5000 examples per property
#   KILLS=30 FUZZ=2000 bench/soak.sh       # a short soak
# Needs what scripts/test.sh sets up (.venv, a Docker engine, the test image); run that first.
set -euo pipefail
cd "$(dirname "$0")/.."
export GUARDIAN_FAULT_KILLS=${KILLS:-100}
export GUARDIAN_FAULT_CONTAINERS=${CONTAINERS:-10}
export GUARDIAN_FUZZ_EXAMPLES=${FUZZ:-5000}
export GUARDIAN_FAULT_REPORT=${REPORT:-$PWD/bench/soak-report.json}
export GUARDIAN_REQUIRE_DOCKER=1
[ -x .venv/bin/python ] || { echo "run scripts/test.sh first (creates .venv)" >&2; exit 1; }
rm -f "$GUARDIAN_FAULT_REPORT"
started=$(date -u +%FT%TZ)
t0=$(date +%s)
.venv/bin/python -m pytest -q -p no:cacheprovider -s tests/faults "$@"
python3 - "$GUARDIAN_FAULT_REPORT" "$started" "$(( $(date +%s) - t0 ))" <<'PY'
import json, sys
path, started, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3])
report = json.load(open(path))
report["run"] = {"started": started, "seconds": seconds, "result": "all checks passed"}
json.dump(report, open(path, "w"), indent=2, sort_keys=True)
print(json.dumps(report, indent=2, sort_keys=True))
PY
