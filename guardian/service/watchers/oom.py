"""OOM kills the engine announced by an `oom` event but did not flag in State.OOMKilled.

Docker 20.10 sometimes records the exit (code 137) before the OOM notice, leaving OOMKilled
false; the 137 would then read as "stopped by a signal" and be left alone. The `oom` event is
remembered until the container starts again and turns such an exit into `oom_killed`.

The event stream's thread writes the set and the judging threads read it, each a single set
operation (add, discard, `in`) that CPython makes atomic; none reads and writes in two steps.
"""

from __future__ import annotations

from guardian.core.detection.checks import SIGNAL_EXIT_CODES, memory_detail
from guardian.core.model import ContainerSnapshot, HealthCheckResult, ProblemType
from guardian.ports import EngineEvent


class OomEvents:
    def __init__(self) -> None:
        self._killed: set[str] = set()  # container ids with an oom event since their last start

    def on_event(self, event: EngineEvent) -> None:
        if event.action == "oom":
            self._killed.add(event.container_id)
        elif event.action in ("start", "destroy"):
            self._killed.discard(event.container_id)

    def judge(self, snap: ContainerSnapshot, result: HealthCheckResult) -> HealthCheckResult:
        announced = snap.id in self._killed
        if (
            not announced
            or snap.oom_killed
            or snap.state not in ("exited", "dead")
            or snap.exit_code not in SIGNAL_EXIT_CODES
            or result.skipped not in ("stopped_by_signal", None)
        ):
            return result
        detail = (
            f"killed by the kernel OOM killer (exit {snap.exit_code}, from the engine's oom "
            f"event); {memory_detail(snap)}"
        )
        return HealthCheckResult(
            snap.id, snap.name, result.observed_at, ProblemType.OOM_KILLED, detail,
            source=result.source,
        )  # fmt: skip
