"""Crash loops: Docker's restart policy keeps restarting a container that keeps dying.

Seen as RestartCount rising `restarts` times within `window` (die events make Guardian inspect at
once, sweeps inspect containers in state `restarting`). The result is a `crash_loop` problem that
Guardian reports with the last exit codes and a log tail, and never restarts: Docker already does.

The count never scrolls out: RestartCount lasts the container's life and the window is
Guardian's own record, on the monotonic clock (a step of the wall clock moves no restart in or
out of it). A `die` event the engine's ring dropped costs the report an exit code,
never the count. Restarts before Guardian's first look are not counted: a loop is reported later,
never sooner.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from guardian.core.model import ContainerSnapshot, HealthCheckResult, ProblemType
from guardian.core.redaction import untrusted
from guardian.core.stamps import Reading
from guardian.ports import Clock, Engine, EngineEvent, EngineUnavailable
from guardian.service.state.present import drop_absent

MAX_DETAIL = 1500
MAX_TAIL = 800  # characters of log tail in an incident's detail
MAX_TAIL_READ = 64 * 1024


@dataclass(frozen=True)
class CrashLoopSettings:
    restarts: int = 3
    window: timedelta = timedelta(minutes=5)
    log_lines: int = 20


@dataclass
class _Track:
    """One container's restarts as seen. Written from the sweep's and the workers' judges and
    the events thread without a lock: each write is one operation that is atomic in CPython
    (a deque's append or popleft, an attribute's assignment), and each read works on a copy
    taken in one (list(deque))."""

    # (when, monotonic; RestartCount then), in the order appended: two judges at once may
    # append theirs in either order, so a read sorts its copy.
    seen: deque[tuple[float, int]] = field(default_factory=deque)
    exit_codes: deque[int] = field(default_factory=lambda: deque(maxlen=5))
    # The engine's `die` events carry each death's exit code: once one has, they are the
    # record (an inspect finds a fast loop running again, its exit code its start's 0).
    codes_from_events: bool = False
    log_tail: str | None = None  # fetched once per loop


class CrashLoops:
    """A judge of the loop: turns a container's result into `crash_loop` while it loops.

    Keeps no lock: a container's track is made once (dict.setdefault) and forgotten by the
    sweep in place (drop_absent); an observation is appended by whichever judge makes it
    (the sweep's, a worker's: never lost to a judge beside it), and those before the window
    but the baseline are popped from the front by the sweep alone (one at a time: no
    observation is popped twice). A read sorts its copy, so two judges appending in either
    order count the same."""

    def __init__(self, engine: Engine, settings: CrashLoopSettings, clock: Clock) -> None:
        self.engine = engine
        self.settings = settings
        self.clock = clock
        self._window = settings.window.total_seconds()
        self._tracks: dict[str, _Track] = {}

    def _moment(self, at: datetime) -> float:
        """`at` (a judgement's time, this run's wall clock as it reads now) on the monotonic
        clock."""
        return Reading(self.clock.now(), self.clock.monotonic()).mono_of(at)

    def _track(self, container_id: str) -> _Track:
        track = self._tracks.get(container_id)
        if track is None:  # two threads at once: both get the one setdefault kept
            track = self._tracks.setdefault(container_id, _Track())
        return track

    def on_event(self, event: EngineEvent) -> None:
        """A `die` event: the exit code of that death, for the report of a loop."""
        code = event.attributes.get("exitCode", "") if event.action == "die" else ""
        if not code.lstrip("-").isdigit() or len(code) > 10:
            return
        track = self._track(event.container_id)
        track.codes_from_events = True
        track.exit_codes.append(int(code))

    def rises(self, track: _Track, now: float) -> int:
        """Restarts within the window: the count `now` (monotonic) minus the count at the
        window's start."""
        seen = sorted(track.seen)  # a copy, taken in one operation, in time order
        start = now - self._window
        before = [c for t, c in seen if t <= start]
        inside = [c for t, c in seen if t > start]
        if not inside:
            return 0
        base = before[-1] if before else inside[0]
        return inside[-1] - base

    def still_looping(self, snap: ContainerSnapshot, now: datetime) -> bool:
        """A looping container that a sweep catches running for a moment (Podman restarts
        without a `restarting` state in between) is still looping: the sweep inspects it, or its
        incident would be resolved and reopened at every such glimpse."""
        at = self._moment(now)
        track = self._tracks.get(snap.id)
        rises = self.rises(track, at) if track is not None else 0
        return rises >= self.settings.restarts

    def judge(self, snap: ContainerSnapshot, result: HealthCheckResult) -> HealthCheckResult:
        if not snap.inspected:
            return result
        now = self._moment(result.observed_at)
        track = self._track(snap.id)
        seen = list(track.seen)
        if not seen or max(seen)[1] != snap.restart_count:
            track.seen.append((now, snap.restart_count))
            # A running container's exit code is its start's 0, not the crash's.
            if (
                snap.exit_code is not None
                and seen
                and snap.state != "running"
                and not track.codes_from_events
            ):
                track.exit_codes.append(snap.exit_code)
        rises = self.rises(track, now)
        if rises < self.settings.restarts:
            track.log_tail = None
            return result
        if track.log_tail is None:
            track.log_tail = self._tail(snap.id)
        return self._looping(snap, track, rises, result)

    def look(self, snap: ContainerSnapshot, result: HealthCheckResult) -> HealthCheckResult:
        """What judge() says from what is tracked already, changing nothing (no observation
        recorded, no log fetched): for `guardian status` and GET /api/v1/containers."""
        at = self._moment(result.observed_at)
        track = self._tracks.get(snap.id)
        rises = self.rises(track, at) if track is not None else 0
        if track is None or rises < self.settings.restarts:
            return result
        return self._looping(snap, track, rises, result)

    def _looping(
        self, snap: ContainerSnapshot, track: _Track, rises: int, result: HealthCheckResult
    ) -> HealthCheckResult:
        now = result.observed_at
        window = int(self.settings.window.total_seconds())
        codes = ", ".join(str(c) for c in list(track.exit_codes)) or "unknown"
        detail = (
            f"Docker restarted it {rises} times in {window}s (restart policy "
            f"{snap.restart_policy or 'none'}, RestartCount {snap.restart_count}); "
            f"last exit codes: {codes}"
        )
        if track.log_tail:
            detail += f"; log tail: {track.log_tail}"
        if len(detail) > MAX_DETAIL:
            detail = detail[: MAX_DETAIL - 1] + "…"
        return HealthCheckResult(
            snap.id, snap.name, now, ProblemType.CRASH_LOOP, detail, source=result.source
        )

    def _tail(self, container_id: str) -> str:
        if self.settings.log_lines <= 0:
            return ""
        try:
            text = self.engine.logs(container_id, self.settings.log_lines)
        except EngineUnavailable:
            return ""
        # Only the end matters, and redaction's cost grows with the text: cut first.
        lines = [line.strip() for line in text[-MAX_TAIL_READ:].splitlines() if line.strip()]
        return untrusted(" | ".join(lines)[-MAX_TAIL:], MAX_TAIL)

    def follow(self, snapshots: list[ContainerSnapshot]) -> None:
        """Forget the containers the last sweep no longer listed (none to forget while no
        container's starts are tracked: an idle host's sweep walks none); in place, beside
        the judges and the events that add tracks."""
        if not self._tracks:
            return
        drop_absent(self._tracks, {s.id for s in snapshots})
        start = self.clock.monotonic() - self._window
        for track in list(self._tracks.values()):
            # Keep one observation from before the window as the baseline (rises() reads no
            # other): the sweep alone pops, from the front; judges append at the back.
            while True:
                seen = list(track.seen)
                if len(seen) < 2 or seen[1][0] > start:
                    break
                track.seen.popleft()
