"""Facts: small immutable records of what happened, published once by the part of the service
that made it happen (ports.Facts). Readers (the status page, its feed, `guardian status`, the
API) keep their views from them and never reach into the loop's state.

Each fact carries what its readers need and no more: a store write's fact carries the incident
or silence as the write left it, so a reader need not read the store again for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from guardian.core.model import ContainerSnapshot, Incident, Silence
from guardian.core.outbound.notifications import Notification


@dataclass(frozen=True)
class ContainersListed:
    """A sweep listed the watched containers."""

    containers: tuple[ContainerSnapshot, ...]


@dataclass(frozen=True)
class InspectAsked:
    """The loop is about to ask the engine to inspect a container; `ticket` pairs it with the
    answer (ContainerInspected), so a reader knows which changes came after the question."""

    ticket: int


@dataclass(frozen=True)
class ContainerInspected:
    """The engine's answer to the inspect of the same ticket."""

    ticket: int
    snapshot: ContainerSnapshot


@dataclass(frozen=True)
class EngineEventSeen:
    """An engine event about a container (`container`: empty when the event names none)."""

    container: str
    action: str


@dataclass(frozen=True)
class EngineReachability:
    """Whether the engine answered the latest sweep."""

    up: bool


@dataclass(frozen=True)
class ClockStepped:
    """The wall clock stepped; every time shown moved with it."""

    step: timedelta


@dataclass(frozen=True)
class DeliveryGivenUp:
    """A notification's delivery was given up (a dead letter)."""


@dataclass(frozen=True)
class IncidentChangedByPerson:
    """A person acknowledged, resolved or closed an incident (or tried to: another writer may
    have changed it first); readers read the container's incidents again."""

    container: str
    incident: int | None


@dataclass(frozen=True)
class SilenceSet:
    """A silence was written, as the store keeps it."""

    silence: Silence


@dataclass(frozen=True)
class SilenceLifted:
    """A container's silence was lifted: the silence as the store keeps it (ended_at set), None
    when there was none in force."""

    container: str
    silence: Silence | None


@dataclass(frozen=True)
class ApprovalGiven:
    """A person approved or denied a held restart."""

    container: str
    incident: int | None


@dataclass(frozen=True)
class RollbackRequested:
    """A person asked for a rollback of `container` (guardian rollback, the API): the loop
    looks at it on its worker."""

    container: str


@dataclass(frozen=True)
class ApprovalUsed:
    """The loop tried to use an approval once (it may have been used already)."""


@dataclass(frozen=True)
class IncidentWritten:
    """The loop wrote an incident change: `incident` as the write left it in the store, None
    when the write may not have landed (the store refused it: read the container again)."""

    container: str
    incident_id: int | None
    incident: Incident | None


@dataclass(frozen=True)
class AttemptWritten:
    """The loop wrote an action (a restart, a stop, a hook run, a decision) or its outcome.
    `container` None: about any container. `counts`: it may change other containers'
    decisions (the host's restart budget, a dependency's hold); a decision does not."""

    container: str | None
    incident_id: int | None
    counts: bool


@dataclass(frozen=True)
class ResetWritten:
    """A container's restart counter was reset."""

    container: str


@dataclass(frozen=True)
class ProblemStartsMoved:
    """The clock stepped and the open incidents' problem starts moved with it."""


@dataclass(frozen=True)
class NotificationsWithdrawn:
    """Unsent notifications were withdrawn (any incident's): read everything again."""


@dataclass(frozen=True)
class StoreRecovered:
    """The store took writes again and what was held in memory was written: read everything
    again."""


@dataclass(frozen=True)
class NotificationsNotQueued:
    """The store refused the write that would have queued these notifications (a full disk):
    they are sent directly, once, marked so (service/outbound/delivery.py), rather than lost
    unheard."""

    notifications: tuple[Notification, ...]


@dataclass(frozen=True)
class StoreWrittenElsewhere:
    """Another process (a `guardian` command) wrote the store, and what it wrote is not known
    (the change feed does not tell it, or not all of it): read everything again."""


# What a record another process wrote tells readers, by the first word of its kind in the
# store's change feed (core.model.RecordedEvent): the kind of record (ports.Record's value), and
# whether it may change what is decided for other containers too (an incident, a restart:
# dependencies, the host's budget). A kind not here names nothing a reader can bring up to date
# alone: readers read everything again (StoreWrittenElsewhere).
FEED_WRITES: Mapping[str, tuple[str, bool]] = {
    "incident": ("incidents", True),
    "action": ("actions", True),
    "approval": ("approvals", False),
    "silence": ("silences", False),
    # A person's rollback request: its own container's decision only (its action follows).
    "rollback": ("actions", False),
}


@dataclass(frozen=True)
class RecordWrittenElsewhere:
    """Another process (a `guardian` command: an acknowledgement, a silence, an approval) wrote
    a record about `container`, as the store's change feed tells it: `kind` the feed's kind
    (its first word one of FEED_WRITES), `incident` the incident it belongs to (None: none).
    Readers read that container's records of that kind again: nothing of the record itself is
    carried, since another process's row is only as trustworthy as the file."""

    container: str
    incident: int | None
    kind: str


@dataclass(frozen=True)
class SettingsReloaded:
    """The settings were reloaded: every container's answer may rest on what changed."""


Fact = (
    ContainersListed
    | InspectAsked
    | ContainerInspected
    | EngineEventSeen
    | EngineReachability
    | ClockStepped
    | DeliveryGivenUp
    | IncidentChangedByPerson
    | SilenceSet
    | SilenceLifted
    | ApprovalGiven
    | ApprovalUsed
    | RollbackRequested
    | NotificationsNotQueued
    | IncidentWritten
    | AttemptWritten
    | ResetWritten
    | ProblemStartsMoved
    | NotificationsWithdrawn
    | StoreRecovered
    | StoreWrittenElsewhere
    | RecordWrittenElsewhere
    | SettingsReloaded
)
