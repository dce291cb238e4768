"""CLI start-up: the time `python -X importtime` reports for `guardian --version` and
`guardian config validate`, all imports of the interpreter's start included.

Measured as installed: the package and its dependencies on plain sys.path entries, as a wheel
install puts them. The development checkout's editable install adds an import hook (pip's
`__editable___guardian_*_finder`, ~15 ms) that no installed Guardian has; it is shown apart."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench.engine import REPO

FLOOR_MS = 80.0
HEAVY = ("docker", "requests", "prometheus_client", "apscheduler", "waitress")
CLI = ("-m", "guardian.entrypoints.cli")
BARE = ("-c", "pass")  # the interpreter alone


@dataclass
class ImportResult:
    command: str
    ms: float  # median over the runs, as installed
    heavy: list[str]
    editable_ms: float = 0.0  # the same from the editable development install
    # The bare interpreter's imports (`python -c pass`), alternated with the command's: the
    # same work every run, so it shows the machine's speed at the time (a shared host's slow
    # phases slow every import alike).
    bare_ms: float = 0.0


def installed_venv(root: Path) -> str:
    """A fresh venv whose one .pth file puts the repository and this venv's packages on
    sys.path as plain entries, as a wheel install does: the development venv's own .pth files
    (the editable finder) are not run. Returns its interpreter."""
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    python = root / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    lines = [str(REPO), sysconfig.get_paths()["purelib"]]
    (Path(purelib) / "guardian-bench.pth").write_text("\n".join(lines) + "\n")
    return str(python)


def import_ms(python: str, *args: str, argv: tuple[str, ...] = CLI) -> tuple[float, set[str]]:
    """Milliseconds of imports (top-level entries of -X importtime), and the modules."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GUARDIAN_", "PYTHON"))}
    done = subprocess.run(
        [python, "-X", "importtime", *argv, *args],
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


def measure(runs: int = 11) -> list[ImportResult]:
    with tempfile.TemporaryDirectory() as tmp:
        installed = installed_venv(Path(tmp) / "venv")
        config = Path(tmp) / "config.yaml"
        config.write_text("watch:\n  interval: 10s\n")
        commands = {
            "guardian --version": ("--version",),
            "guardian config validate": ("config", "validate", "--config", str(config)),
        }
        out = []
        for label, args in commands.items():
            times, editable, bare, modules = [], [], [], set()
            for _ in range(max(1, runs)):  # alternated, so load hits all alike
                ms, modules = import_ms(installed, *args)
                times.append(ms)
                editable.append(import_ms(sys.executable, *args)[0])
                bare.append(import_ms(installed, argv=BARE)[0])
            heavy = sorted(m for m in modules if m.split(".")[0] in HEAVY)
            median = statistics.median
            out.append(ImportResult(label, median(times), heavy, median(editable), median(bare)))
        return out


def render(results: list[ImportResult]) -> list[str]:
    if not results:
        return []
    out = [
        "## CLI start-up imports",
        "",
        "`python -X importtime -m guardian.entrypoints.cli ...`: the sum of the top-level "
        "imports (the interpreter's own start-up included), median of 11 runs, as installed "
        "(the package and its dependencies on plain path entries, as a wheel install has "
        "them); beside it the development checkout's editable install, whose import hook no "
        "installed Guardian has. `python -c pass`: the bare interpreter's imports, alternated "
        "with the command's, the same work in every run: it shows the machine's speed at the "
        "time (a shared host's slow phases slow every import alike).",
        "",
        "| command | imports, as installed | floor ≤ 80 ms | `python -c pass` | editable install "
        "| Docker SDK, requests, prometheus_client, APScheduler, waitress loaded |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        floor = "met" if r.ms <= FLOOR_MS else "**missed**"
        out.append(
            f"| `{r.command}` | {r.ms:.0f} ms | {floor} | {r.bare_ms:.1f} ms | "
            f"{r.editable_ms:.0f} ms | "
            f"{', '.join(r.heavy) or 'none'} |"
        )
    return [*out, ""]
