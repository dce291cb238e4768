"""What a container uses, as read from its cgroup or the engine's stats, and the judgement of
one sample against the limits that apply to it (core.detection.resources).

Memory is the cgroup's usage less its inactive file cache, as `docker stats` shows it; CPU is
the cgroup's cumulative CPU time between two samples over the wall time between them, measured
on the monotonic clock (100% = one core busy). Times here are monotonic seconds, passed in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from guardian.core.detection.resources import CPU, MEMORY, Limit, format_size
from guardian.core.durations import format_elapsed


@dataclass(frozen=True)
class Usage:
    """One reading: `memory` in bytes (cache excluded), `cpu_usec` the cumulative CPU time of
    the container's cgroup in microseconds; None where the source did not tell."""

    memory: int | None
    cpu_usec: int | None
    source: str = ""  # cgroup v1 | cgroup v2 | stats


@dataclass
class Sampled:
    """A container's samples so far against its limits: the last reading (and when, monotonic),
    and for each limit since when it has been exceeded at every sample (None: it is not)."""

    last: Usage | None = None
    last_at: float = 0.0
    since: list[float | None] = field(default_factory=list)
    figures: list[float | None] = field(default_factory=list)


def figure(
    kind: str, before: Usage | None, before_at: float, now: Usage, at: float
) -> float | None:
    """The figure a limit of `kind` is judged on: bytes of memory, or percent of one core
    since the previous sample (None on the first sample, or when the counter went back: a new
    cgroup, so a new container start)."""
    if kind == MEMORY:
        return None if now.memory is None else float(now.memory)
    if before is None or before.cpu_usec is None or now.cpu_usec is None or at <= before_at:
        return None
    used = now.cpu_usec - before.cpu_usec
    if used < 0:
        return None
    return used / 1e6 / (at - before_at) * 100.0


def observe(sampled: Sampled, limits: tuple[Limit, ...], usage: Usage | None, at: float) -> None:
    """Take one reading (None: none could be made) taken at monotonic `at` into `sampled`.

    A limit's breach begins at the first sample above it and lasts while every sample is; a
    sample at or below it, a failed reading, or a counter that went back starts it from zero
    (so a breach is judged later, never sooner)."""
    if len(sampled.since) != len(limits):
        sampled.since = [None] * len(limits)
        sampled.figures = [None] * len(limits)
    if usage is None:
        sampled.last, sampled.since = None, [None] * len(limits)
        sampled.figures = [None] * len(limits)
        return
    for i, limit in enumerate(limits):
        value = figure(limit.kind, sampled.last, sampled.last_at, usage, at)
        sampled.figures[i] = value
        if value is None or value <= limit.max:
            sampled.since[i] = None
        elif sampled.since[i] is None:
            sampled.since[i] = at
    sampled.last, sampled.last_at = usage, at


def breached(sampled: Sampled, limits: tuple[Limit, ...], at: float) -> int | None:
    """The index of the first limit exceeded at every sample for its whole `held`, or None."""
    for i, limit in enumerate(limits):
        since = sampled.since[i] if i < len(sampled.since) else None
        if since is not None and at - since >= limit.held.total_seconds():
            return i
    return None


def detail(limit: Limit, value: float, lasted: float) -> str:
    """The incident's detail, with the figures: "memory 301 MiB above guardian.memory.max
    256 MiB for 2m (held 2m4s; inactive file cache excluded)"."""
    held = format_elapsed(timedelta(seconds=lasted))
    if limit.kind == CPU:
        return f"cpu {value:.0f}% of a core above {limit.describe()} (held {held})"
    shown = format_size(int(value))
    return f"memory {shown} above {limit.describe()} (held {held}; inactive file cache excluded)"
