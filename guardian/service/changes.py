"""Changes: a version that goes up whenever something a person would see changed (an incident,
an action, a silence, a container's state, the engine's reachability), and a condition to wait
on it. The status page's live stream waits here; nobody waiting costs nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from guardian.core.model import ContainerSnapshot
from guardian.ports import EngineEvent

# The engine events that change what a container's row shows (state or health).
_SHOWN = frozenset({"health_status", "die", "start", "stop", "kill", "oom", "pause", "unpause"})


class Changes:
    """A version counter and a condition; `changed()` from any thread, `wait()` from readers."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.version = 0
        self.written = 0  # the version of the last change the store saw (see wrote())
        self.closed = False
        self._seen: frozenset[tuple[str, str, str]] = frozenset()
        self._engine_up: bool | None = None

    def changed(self) -> None:
        """Something a person sees changed outside the store (a container's state or health)."""
        with self._cond:
            self.version += 1
            self._cond.notify_all()

    def wrote(self) -> None:
        """A write landed in the store (an incident, an action, a silence)."""
        with self._cond:
            self.version += 1
            self.written = self.version
            self._cond.notify_all()

    def wait(self, after: int, timeout: float) -> int:
        """The version once it passes `after`, or when `timeout` seconds or close() came first."""
        with self._cond:
            self._cond.wait_for(lambda: self.version > after or self.closed, timeout)
            return self.version

    def close(self) -> None:
        """Wake every reader for good (Guardian stops)."""
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    # -- what the loop tells (Pipeline hooks, see bootstrap) --------------------------------

    def on_event(self, event: EngineEvent) -> None:
        if event.action.split(":")[0] in _SHOWN:
            self.changed()

    def listed(self, watched: Sequence[ContainerSnapshot]) -> None:
        """A sweep's containers: a change only when a state or health differs from the last."""
        seen = frozenset((c.name, c.state, c.health or "") for c in watched)
        if seen != self._seen:
            self._seen = seen
            self.changed()

    def engine_state(self, up: bool, _error: str) -> None:
        if up != self._engine_up:
            self._engine_up = up
            self.changed()
