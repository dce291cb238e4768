"""Helpers of the hook tests: hook scripts, the processes of a group, a pid a hook wrote."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import wait_until


def script(tmp: Path, name: str, body: str) -> str:
    path = tmp / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def live_members(pgid: int) -> list[int]:
    """The processes of group `pgid` that still run (zombies left for their reaper excepted)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state, _ppid, pgrp = stat.rpartition(")")[2].split()[:3]
        if int(pgrp) == pgid and state != "Z":
            members.append(int(entry.name))
    return members


def read_pid(path: Path) -> int:
    return int(wait_until(lambda: path.exists() and path.read_text().strip(), 30, 0.05, path))


def group_gone(pgid: int) -> bool:
    """Whether group `pgid` has no process left that runs, within a second: a SIGKILL is sent
    at once, but the kernel takes a moment to end a process."""
    wait_until(lambda: live_members(pgid) == [], 1.0, 0.02, f"process group {pgid} gone")
    return True
