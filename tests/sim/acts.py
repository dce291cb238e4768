"""What Guardian made of a person's stop, kill or removal, for the oracle to name the known bug
behind a restart that undid one: the act's own events (by identity: a restart the engine
completed just before emits the same actions), when a run of Guardian heard one of them, and
whether it took them for its own restart's while a restart awaited its verdict (F14).
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
    taken_verifying: dict[str, Moment] = field(default_factory=dict)  # taken for own: F14

    def acted(self, container_id: str, events: tuple[EngineEvent, ...]) -> None:
        """A person's act emitted these events (the engine keeps them, so their ids last)."""
        for event in events:
            self.events[id(event)] = container_id

    def heard_event(self, event: EngineEvent, own: bool, claimed: bool) -> None:
        """Guardian's event stream handed it `event`; `own`: taken for its own restart's,
        `claimed`: while Guardian held a claim to restart that container (its call sent: the
        restart's own stop and kill come then, fixed F12 told the rest)."""
        cid = event.container_id
        if self.events.get(id(event)) != cid:
            return
        now = self.frame.now()
        self.heard[cid] = now
        if own and not claimed:
            self.taken_verifying[cid] = now

    def taken_for_own(self, container_id: str, held: Moment | None) -> str:
        """The known bug that took the person's act at `held` for a restart's own: F14 when a
        restart awaited its verdict (F4's fix tells a person's stop once the restart's start was
        heard: this one's was not); "" otherwise (fixed F12: while a restart was decided, its
        call waiting for its worker)."""
        if held is None:
            return ""
        verifying = self.taken_verifying.get(container_id)
        return "F14" if verifying is not None and verifying > held else ""

    def unheard(self, container_id: str, held: Moment | None) -> str:
        """F3 (while it is known) when this run of Guardian never heard the act's own events,
        though it may have heard another stop of the container since (its restart's, replayed)."""
        heard = self.heard.get(container_id)
        missed = held is not None and (heard is None or heard < self.frame.runs[-1])
        return "F3" if missed and "F3" in KNOWN else ""
