"""CgroupReader: a container's memory and CPU from its cgroup files, the cheapest reading there
is (a few small file reads, no engine call).

`root` is where the host's cgroup tree is visible: /sys/fs/cgroup on the host, wherever the
sidecar mounts it read-only otherwise (resources.cgroup_root). Layouts tried, the first found
kept per container:
  cgroup v2: <root>/system.slice/docker-<id>.scope (systemd driver), <root>/docker/<id>
             (cgroupfs driver): memory.current less memory.stat inactive_file; cpu.stat
             usage_usec
  cgroup v1: <root>/memory/docker/<id> or <root>/memory/system.slice/docker-<id>.scope:
             memory.usage_in_bytes less memory.stat total_inactive_file; cpuacct.usage (ns)
             from the cpuacct (or cpu,cpuacct) hierarchy
"""

from __future__ import annotations

import re
from pathlib import Path

from guardian.core.detection.usage import Usage

MAX_READ = 64 * 1024  # memory.stat is about 1 KiB; a file that is not a cgroup's stays bounded
MAX_FOUND = 4096  # layouts remembered (one per container read)
_ID = re.compile(r"[0-9a-f]{64}")


def _read(path: Path) -> str | None:
    try:
        with path.open("rb") as f:
            return f.read(MAX_READ).decode("ascii", errors="replace")
    except OSError:
        return None


def _number(text: str | None) -> int | None:
    if text is None:
        return None
    text = text.strip()
    return int(text) if text.isdigit() and len(text) <= 20 else None


def _stat(text: str | None, key: str) -> int | None:
    """The value of `key` in a flat-keyed cgroup file (memory.stat, cpu.stat)."""
    for line in (text or "").splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return _number(value)
    return None


def _less_cache(usage: int | None, cache: int | None) -> int | None:
    if usage is None:
        return None
    return usage - cache if cache is not None and 0 <= cache <= usage else usage


class CgroupReader:
    """The ResourceReader port over the cgroup files under `root`."""

    def __init__(self, root: str | Path = "/sys/fs/cgroup") -> None:
        self.root = Path(root)
        # id -> (version, memory, cpu dir). No lock: the daemon reads from its resources job
        # alone (one run at a time), and each step is one dict operation (get, pop, clear, an
        # item set to an immutable tuple). An entry proves itself at each read: one that no
        # longer reads is dropped and looked for again, so a race could only cost a search.
        self._found: dict[str, tuple[str, Path, Path]] = {}

    def read(self, container_id: str) -> Usage | None:
        if not _ID.fullmatch(container_id):  # an id from the engine; never a path of its own
            return None
        found = self._found.get(container_id)
        if found is not None:
            usage = self._usage(*found)
            if usage is not None:
                return usage
            self._found.pop(container_id, None)  # gone: the container stopped, or moved
        for candidate in self._layouts(container_id):
            usage = self._usage(*candidate)
            if usage is not None:
                if len(self._found) >= MAX_FOUND:  # removed containers' entries: start over
                    self._found.clear()
                self._found[container_id] = candidate
                return usage
        return None

    def _layouts(self, cid: str) -> list[tuple[str, Path, Path]]:
        r = self.root
        v2 = [r / "system.slice" / f"docker-{cid}.scope", r / "docker" / cid]
        layouts = [("cgroup v2", d, d) for d in v2]
        for memory in (
            r / "memory" / "docker" / cid,
            r / "memory/system.slice" / f"docker-{cid}.scope",
        ):
            tail = memory.relative_to(r / "memory")
            for cpu in ("cpuacct", "cpu,cpuacct"):
                layouts.append(("cgroup v1", memory, r / cpu / tail))
        return layouts

    @staticmethod
    def _usage(version: str, memory: Path, cpu: Path) -> Usage | None:
        if version == "cgroup v2":
            current = _number(_read(memory / "memory.current"))
            if current is None:
                return None
            cache = _stat(_read(memory / "memory.stat"), "inactive_file")
            return Usage(
                _less_cache(current, cache), _stat(_read(cpu / "cpu.stat"), "usage_usec"), version
            )
        usage = _number(_read(memory / "memory.usage_in_bytes"))
        if usage is None:
            return None
        cache = _stat(_read(memory / "memory.stat"), "total_inactive_file")
        ns = _number(_read(cpu / "cpuacct.usage"))
        if ns is None and not cpu.exists():
            return None  # not this layout's CPU hierarchy: try the next
        return Usage(_less_cache(usage, cache), None if ns is None else ns // 1000, version)
