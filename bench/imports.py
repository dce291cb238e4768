"""CLI start-up: the time `python -X importtime` reports for `guardian --version` and
`guardian config validate`, all imports of the interpreter's start included."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench.engine import REPO

FLOOR_MS = 80.0
HEAVY = ("docker", "requests", "prometheus_client", "apscheduler", "waitress")


@dataclass
class ImportResult:
    command: str
    ms: float  # median over the runs
    heavy: list[str]


def import_ms(*args: str) -> tuple[float, set[str]]:
    """Milliseconds of imports (top-level entries of -X importtime), and the modules."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GUARDIAN_")}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "guardian.entrypoints.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=60,
        check=True,
    )
    total, modules = 0, set()
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or line.count("|") != 2:
            continue
        _, cumulative, name = line.split("|")
        modules.add(name.strip())
        if cumulative.strip().isdigit() and not name[1:].startswith(" "):
            total += int(cumulative)  # a top-level import: its time includes its children's
    return total / 1000, modules


def measure(runs: int = 5) -> list[ImportResult]:
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.yaml"
        config.write_text("watch:\n  interval: 10s\n")
        commands = {
            "guardian --version": ("--version",),
            "guardian config validate": ("config", "validate", "--config", str(config)),
        }
        out = []
        for label, args in commands.items():
            times, modules = [], set()
            for _ in range(max(1, runs)):
                ms, modules = import_ms(*args)
                times.append(ms)
            heavy = sorted(m for m in modules if m.split(".")[0] in HEAVY)
            out.append(ImportResult(label, statistics.median(times), heavy))
        return out


def render(results: list[ImportResult]) -> list[str]:
    if not results:
        return []
    out = [
        "## CLI start-up imports",
        "",
        "`python -X importtime -m guardian.entrypoints.cli ...`: the sum of the top-level "
        "imports (the interpreter's own start-up included), median of 5 runs.",
        "",
        "| command | imports | floor ≤ 80 ms | Docker SDK, requests, prometheus_client, "
        "APScheduler, waitress loaded |",
        "|---|---|---|---|",
    ]
    for r in results:
        floor = "met" if r.ms <= FLOOR_MS else "**missed**"
        out.append(f"| `{r.command}` | {r.ms:.0f} ms | {floor} | {', '.join(r.heavy) or 'none'} |")
    return [*out, ""]
