#!/usr/bin/env bash
# What one followed log costs: Guardian's and dockerd's memory and threads with N running
# containers whose own guardian.logs.match label asks for their output to be followed (a pattern
# that never matches), after 20 s. Usage: bench/log_slots.sh N [N ...]  (e.g. 0 64)
# Needs a Docker engine and the test image (tests/images/build-busybox.sh); removes what it made.
set -euo pipefail
cd "$(dirname "$0")/.."
GUARDIAN=${GUARDIAN:-.venv/bin/guardian}
IMAGE=guardian-test-busybox:latest
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rss() { awk '/VmRSS/{print $2}' "/proc/$1/status"; }
threads() { awk '/Threads/{print $2}' "/proc/$1/status"; }
for n in "$@"; do
    run="slots$$-$n"
    printf 'watch: {label: guardian.enable, interval: 2s, events: true, scope: "bench.run=%s"}\n' "$run" >"$work/config.yaml"
    printf 'store: {path: %s/%s.db}\nhttp: {listen: "127.0.0.1:0"}\n' "$work" "$run" >>"$work/config.yaml"
    for i in $(seq 1 "$n"); do
        docker run -d -q --name "$run-$i" --label "bench.run=$run" --label guardian.enable=true \
            --label 'guardian.logs.match=never-[0-9]{40}' "$IMAGE" sleep 86400 >/dev/null
    done
    engine=$(pidof dockerd); before=$(rss "$engine")
    "$GUARDIAN" run --config "$work/config.yaml" >"$work/$run.log" 2>&1 &
    pid=$!
    sleep 20  # a benchmark's settling time, not a test's wait
    echo "containers=$n guardian_rss_kib=$(rss $pid) guardian_threads=$(threads $pid)" \
        "followed=$(grep -c 'log followed' "$work/$run.log" || true)" \
        "dockerd_rss_delta_kib=$(( $(rss "$engine") - before ))"
    kill "$pid"; wait "$pid" || true
    ids=$(docker ps -aq --filter "label=bench.run=$run")
    [ -z "$ids" ] || docker rm -f $ids >/dev/null
done
