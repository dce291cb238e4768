"""What the read side asks the write side, all of it reads: the loop's judgement of containers
(the Healer answers) and the records a person reads (the Operator answers). A reader holds these
two narrow questions, never the loop's objects, so it cannot reach the loop's state.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Protocol

from guardian.core.assessment import Assessment
from guardian.core.history import History
from guardian.core.model import (
    ContainerSnapshot,
    EventPage,
    Incident,
    RemediationAction,
    Silence,
    Transition,
)
from guardian.ports import Clock


class Judgements(Protocol):
    """The loop's judgement of containers, asked without changing anything."""

    def watched(
        self, names: Collection[str] = ()
    ) -> tuple[list[ContainerSnapshot], list[ContainerSnapshot]]:
        """(every container listed, the watched ones) in one list request; `names`: of these
        containers only. Raises EngineUnavailable."""
        ...

    def look(self, snap: ContainerSnapshot, known: ContainerSnapshot | None = None) -> Assessment:
        """Judge and decide as the sweep does, changing nothing; `known`: the inspect of this
        very listing already made, used instead of asking again."""
        ...

    def notes(self, watched: list[ContainerSnapshot]) -> dict[str, tuple[str, ...]]:
        """What a reader should know of these watched containers that their judgement does
        not say (a log rule not followed), by name; judged over them together."""
        ...

    def listing(self, inspect: ContainerSnapshot) -> ContainerSnapshot | None:
        """An inspect as the list call shows it; None when the sweep does not watch it."""
        ...


class Records(Protocol):
    """What the store holds of one host, as people read it."""

    @property
    def host(self) -> str: ...

    @property
    def clock(self) -> Clock: ...

    def open_incidents(self) -> list[Incident]:
        """The incidents not closed, oldest first."""
        ...

    def silences_in_force(self, now: datetime) -> list[Silence]: ...

    def recent_actions(self, since: datetime, limit: int) -> list[RemediationAction]:
        """The newest `limit` actions requested since `since`, oldest first."""
        ...

    def history(self, since: datetime, containers: Collection[str] | None = None) -> History:
        """What happened to `containers` (None: every one) since `since`, for the strip;
        Guardian's runs only with every container."""
        ...

    def timeline(
        self, incident: Incident, newest: int | None = None, known: Sequence[Transition] = ()
    ) -> list[Transition | RemediationAction]: ...

    def awaiting_approval(self, incident: Incident) -> bool: ...

    def events(self, since: int | datetime | None, limit: int) -> EventPage:
        """The events feed: at most `limit` events recorded after cursor `since` (a time: at or
        after it; None: from the oldest held)."""
        ...
