"""What Guardian heard of a person's stop, kill or removal, for the oracle to name the known bug
behind a restart that undid one: the act's own events (by identity: a restart the engine
completed just before emits the same actions) and when a run of Guardian heard one of them.
(Fixed: F12 and F14, the act taken for a restart's own while the restart was decided, or
awaited its verdict with its start unheard.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from guardian.ports import EngineEvent
from tests.sim.frame import Frame, Moment
from tests.sim.known import KNOWN


@dataclass
class Acts:
    frame: Frame
    events: dict[int, str] = field(default_factory=dict)  # id(event) -> its container's id
    heard: dict[str, Moment] = field(default_factory=dict)  # one of its events, last heard

    def acted(self, container_id: str, events: tuple[EngineEvent, ...]) -> None:
        """A person's act emitted these events (the engine keeps them, so their ids last)."""
        for event in events:
            self.events[id(event)] = container_id

    def heard_event(self, event: EngineEvent) -> None:
        """Guardian's event stream handed it `event`."""
        cid = event.container_id
        if self.events.get(id(event)) == cid:
            self.heard[cid] = self.frame.now()

    def unheard(self, container_id: str, held: Moment | None) -> str:
        """F3 (while it is known) when this run of Guardian never heard the act's own events,
        though it may have heard another stop of the container since (its restart's, replayed)."""
        heard = self.heard.get(container_id)
        missed = held is not None and (heard is None or heard < self.frame.runs[-1])
        return "F3" if missed and "F3" in KNOWN else ""
