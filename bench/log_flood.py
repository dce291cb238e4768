"""What a container flooding its log costs Guardian (issue 45): a real `guardian run` scoped to
one container that writes RATE lines a second (one write each), its CPU read from
/proc/<pid>/stat over WINDOW seconds, with a log rule on that container (followed) and without
(not followed: no follower thread at all). The engine's own CPU (dockerd) over the same window is
shown beside, for what the follow costs the host.

    PYTHONPATH=. .venv/bin/python -m bench.log_flood [--rate 10000] [--window 30]
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path

import docker

from bench.probes import GuardianRun, cpu_seconds, rss_mb, wait_for

IMAGE = "guardian-test-python-base:bookworm"  # tests/images/build-python-base.sh
# RATE lines a second in batches every 10 ms, one os.write per line (each one a log message of
# its own, as a chatty application writes them); the count written is kept in /tmp/count.
FLOOD = """
import os, sys, time
rate = int(sys.argv[1]); batch = max(1, rate // 100); n = 0; t = time.monotonic()
fatal_at = t + float(sys.argv[2]) if float(sys.argv[2]) > 0 else None
line = b"INFO worker 0042 handled request /api/v1/items?page=17 in 3.2 ms status=200\\n"
while True:
    for _ in range(batch):
        os.write(1, line)
    n += batch
    if fatal_at is not None and time.monotonic() >= fatal_at:
        os.write(1, b"FATAL: pool exhausted\\n")
        fatal_at = None
    if n % (batch * 100) == 0:
        with open("/tmp/count", "w") as f:
            f.write(str(n))
    t += 0.01
    time.sleep(max(0.0, t - time.monotonic()))
"""
RULE = "FATAL|OutOfMemoryError|too many open files"  # never in the flood: every line is read


def threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


def dockerd_pid() -> int | None:
    out = subprocess.run(["pidof", "dockerd"], capture_output=True, text=True).stdout.split()
    return int(out[0]) if out else None


def written(api: docker.APIClient, cid: str) -> int:
    raw = api.exec_start(api.exec_create(cid, ["cat", "/tmp/count"])).decode().strip()
    return int(raw) if raw.isdigit() else 0


def measure(
    api: docker.APIClient, rate: int, window: float, rule: bool, tmp: Path, fatal: float = 0
) -> dict:
    run_id = uuid.uuid4().hex[:8]
    labels = {"guardian.enable": "true", "guardian.bench": run_id}
    if rule:
        labels["guardian.logs.match"] = RULE
    cid = api.create_container(
        IMAGE,
        ["python3", "-c", FLOOD, str(rate), str(fatal)],
        name=f"gbench-logflood-{run_id}",
        labels=labels,
        host_config=api.create_host_config(log_config={"type": "json-file"}),
    )["Id"]
    try:
        api.start(cid)
        url = api.base_url.replace("http+docker://localhost", "unix:///var/run/docker.sock")
        with GuardianRun(tmp / run_id, url, f"guardian.bench={run_id}") as g:
            if rule:
                wait_for(lambda: "log followed" in g.log(), 30, "the log followed")
            if fatal:
                return {"restart_after_line_s": restart_after_line(api, cid, fatal + 30)}
            time.sleep(3)  # past the start: the first sweep, the attach
            engine = dockerd_pid()
            lines0, cpu0, t0 = written(api, cid), cpu_seconds(g.pid), time.monotonic()
            engine0 = cpu_seconds(engine) if engine else 0.0
            time.sleep(window)
            cpu1, t1, lines1 = cpu_seconds(g.pid), time.monotonic(), written(api, cid)
            engine1 = cpu_seconds(engine) if engine else 0.0
            elapsed = t1 - t0
            return {
                "rule": rule,
                "lines_per_s": (lines1 - lines0) / elapsed,
                "guardian_cpu_pct": 100 * (cpu1 - cpu0) / elapsed,
                "dockerd_cpu_pct": 100 * (engine1 - engine0) / elapsed if engine else None,
                "threads": threads(g.pid),
                "rss_mb": rss_mb(g.pid),
                "skipped": g.log().count("backlog dropped"),
                "matched": g.log().count("log rule matched"),
            }
    finally:
        with contextlib.suppress(docker.errors.APIError):
            api.remove_container(cid, force=True)


def restart_after_line(api: docker.APIClient, cid: str, timeout: float) -> float:
    """Seconds from the engine's stamp of the FATAL line to the engine's kill event."""
    started = time.time()
    events = api.events(filters={"container": cid, "event": "kill"}, decode=True)
    try:
        for event in events:
            if event.get("Action") == "kill":
                killed = event["timeNano"] / 1e9
                break
            if time.time() - started > timeout:
                return float("nan")
    finally:
        events.close()
    raw = api.logs(cid, timestamps=True, tail=200_000).decode(errors="replace")
    stamp = next(ln.split(" ", 1)[0] for ln in raw.splitlines() if "FATAL" in ln)
    head, _, frac = stamp.rstrip("Z").partition(".")
    said = datetime.fromisoformat(f"{head}.{frac[:6]:0<6}+00:00").timestamp()
    return killed - said


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rate", type=int, default=10_000, help="lines a second (default 10000)")
    p.add_argument("--window", type=float, default=30.0, help="seconds measured (default 30)")
    p.add_argument(
        "--fatal-after",
        type=float,
        default=10.0,
        help="seconds into the flood one FATAL line is written, for the time to the restart "
        "(0: skip that run)",
    )
    args = p.parse_args()
    api = docker.APIClient(version="auto", timeout=60)
    tmp = Path(tempfile.mkdtemp(prefix="gbench-logflood-"))
    for rule in (True, False):
        r = measure(api, args.rate, args.window, rule, tmp)
        engine = f"{r['dockerd_cpu_pct']:.1f}%" if r["dockerd_cpu_pct"] is not None else "n/a"
        print(
            f"{'with a rule   ' if rule else 'without a rule'}: {r['lines_per_s']:.0f} lines/s "
            f"written; guardian {r['guardian_cpu_pct']:.2f}% of a core over {args.window:.0f}s, "
            f"{r['threads']} threads, RSS {r['rss_mb']:.0f} MiB, backlogs dropped "
            f"{r['skipped']}, matches {r['matched']}; dockerd {engine}"
        )
    if args.fatal_after:
        r = measure(api, args.rate, 0, True, tmp, fatal=args.fatal_after)
        print(
            f"a FATAL line {args.fatal_after:.0f}s into the flood: killed "
            f"{r['restart_after_line_s']:.2f}s after the engine stamped the line"
        )


if __name__ == "__main__":
    main()
