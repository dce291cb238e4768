"""Resource rules against a real engine and a real `guardian run` (issue 45): a container whose
memory grows past guardian.memory.max (writing into its own tmpfs, in steps) is restarted once
the breach has lasted guardian.memory.for, not before, and not while it stays under the limit;
the incident states the figure; a container without a rule is never read. Judged by the
engine's events and Guardian's own record of its reads."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import wait_until
from tests.integration.conftest import Containers, EventRecorder
from tests.integration.see_more import rows

HOLD = 4.0  # guardian.memory.for, seconds
LIMIT_MIB = 64


def write_mib(containers: Containers, name: str, file: str, mib: int) -> None:
    """`mib` MiB into the container's tmpfs (/run): memory its cgroup is charged for."""
    api = containers.api
    run = api.exec_create(name, ["dd", "if=/dev/zero", f"of=/run/{file}", "bs=1M", f"count={mib}"])
    api.exec_start(run["Id"])
    assert api.exec_inspect(run["Id"])["ExitCode"] == 0


def reads(g: Any, name: str) -> list[str]:
    """Guardian's log lines of each reading of `name` (cgroup files or a stats call)."""
    return [line for line in g.lines("resources read") if f"container={name} " in line + " "]


@pytest.mark.parametrize("cgroups", ["visible", "hidden"])
def test_memory_held_above_its_limit_for_its_for_is_restarted_then_not_before(
    containers: Containers,
    guardian: Any,
    engine_events: EventRecorder,
    tmp_path: Path,
    cgroups: str,
):
    rule = {"guardian.memory.max": f"{LIMIT_MIB}MiB", "guardian.memory.for": f"{HOLD:g}s"}
    leak = containers.run("leak", labels=rule)
    plain = containers.run("plain")
    # Hidden: a cgroup root with nothing under it, as in a sidecar without the host's tree
    # mounted: Guardian falls back to one stats call per container per interval.
    root = str(tmp_path / "no-cgroups") if cgroups == "hidden" else "/sys/fs/cgroup"
    g = guardian(resources={"interval": "1s", "cgroup_root": root})

    write_mib(containers, leak, "a", LIMIT_MIB // 2)  # under the limit: no breach
    under = len(reads(g, leak))
    wait_until(lambda: len(reads(g, leak)) >= under + HOLD + 2, 30, message="reads under limit")
    assert engine_events.count(leak, "kill") == 0, "restarted while under its limit"

    began = time.time()  # under the limit until this write
    write_mib(containers, leak, "b", LIMIT_MIB)  # now over it
    written = time.time()
    killed = engine_events.first(leak, "kill", timeout=30)
    assert killed >= began + HOLD, f"restarted {killed - began:.1f}s after the breach began"
    assert killed <= written + HOLD + 5, f"restarted {killed - written:.1f}s after the write"
    engine_events.first(leak, "start", timeout=30)

    [incident] = rows(g.store_path, "SELECT type, detail FROM incidents WHERE container=?", leak)
    assert incident["type"] == "memory_high"
    assert f"above guardian.memory.max {LIMIT_MIB} MiB for {HOLD:g}s" in incident["detail"]
    figure = int(incident["detail"].split()[1])
    assert LIMIT_MIB < figure < LIMIT_MIB * 2, incident["detail"]
    # Visible: read from the cgroup files (this host's engine: cgroupfs driver, v1 or v2).
    sources = {line.split("source=")[1].split(" memory=")[0].strip('"') for line in reads(g, leak)}
    # "none": a reading while the container was stopped by its restart.
    if cgroups == "hidden":
        assert "stats" in sources and sources <= {"stats", "none"}, sources
    else:
        assert sources & {"cgroup v1", "cgroup v2"} and "stats" not in sources, sources
    assert reads(g, plain) == [], "a container without a rule was read"
    assert engine_events.count(plain, "kill") == 0
