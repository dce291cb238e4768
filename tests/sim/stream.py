"""The engine's event stream as the daemon's events thread reads it (entrypoints/event_listener.py):
in the engine's order, live while it stays open, replayed out of the engine's ring from a time
when it (re)opens, so an event is lost only when it left the ring, and the last one handled
before a cut comes again (the replay starts at its time). What an event asks to be judged
becomes a look in the daemon's work queue (tests/sim/workers.py).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from datetime import datetime

from guardian.ports import EngineEvent
from tests.sim.engine import SimEngine


@dataclass
class Stream:
    """One subscription to the engine's events: `read()` hands the next one, and whether it was
    replayed (it happened before the stream opened)."""

    engine: SimEngine
    live: int = 0  # the next event of engine.emitted to hand once the replay is read
    replay: deque[EngineEvent] = field(default_factory=deque)
    open: bool = False
    lost: int = 0  # events that left the ring before a replay reached them

    def connect(self, since: datetime | None) -> None:
        """Open the stream: the engine replays what its ring keeps from `since` (None:
        nothing), then every event from now on."""
        kept = self.engine.kept
        self.replay = deque(e for e in kept if since is not None and e.at >= since)
        if since is not None and self.live < len(self.engine.emitted):
            # What was emitted while no stream was open and left the ring is lost.
            missed = self.engine.emitted[self.live :]
            self.lost += sum(1 for e in missed if e.at >= since and e not in kept)
        self.live = len(self.engine.emitted)
        self.open = True

    def cut(self) -> None:
        """The stream is cut: nothing more is read until it connects again."""
        self.open = False
        self.replay.clear()

    def pending(self) -> int:
        """Events the engine sent that were not read yet."""
        if not self.open:
            return 0
        return len(self.replay) + len(self.engine.emitted) - self.live

    def read(self) -> tuple[EngineEvent, bool] | None:
        """The next event and whether it was replayed; None when nothing is waiting."""
        if not self.open:
            return None
        if self.replay:
            return self.replay.popleft(), True
        if self.live < len(self.engine.emitted):
            self.live += 1
            return self.engine.emitted[self.live - 1], False
        return None
