"""The small protocols the loop needs from the outside world: Engine, Store, Clock.

Adapters implement them (adapters/), tests use the fakes in tests/fakes.py.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from guardian.core.delivery import Result
from guardian.core.incidents import IncidentChange
from guardian.core.model import (
    ActionOutcome,
    ContainerSnapshot,
    Incident,
    IncidentState,
    Outcome,
    ProblemType,
    RemediationAction,
    Silence,
    Transition,
)
from guardian.core.notifications import Notification


class EngineUnavailable(Exception):
    """The container engine could not be reached; the message is one line for the log."""


class StoreError(Exception):
    """The store cannot be opened or written; the message names the file."""


@dataclass(frozen=True)
class EngineEvent:
    """One container event from the engine's stream."""

    action: str  # health_status | die | oom | stop | start | restart | kill | destroy
    container_id: str
    container_name: str
    at: datetime
    attributes: dict[str, str]


class Clock(Protocol):
    def now(self) -> datetime: ...


class Engine(Protocol):
    def ping(self) -> None:
        """Raise EngineUnavailable unless the engine answers."""

    def list_containers(self, label: str, scope: str = "") -> list[ContainerSnapshot]:
        """Containers carrying `label` ("all": every container) and matching the `scope` label
        selector ("key" or "key=value"; empty: no restriction), in ONE request."""

    def inspect(self, container_id: str) -> ContainerSnapshot | None:
        """The full snapshot of one container; None when it no longer exists."""

    def logs(self, container_id: str, tail: int) -> str:
        """The last `tail` lines of the container's output ("" when unavailable)."""

    def restart(
        self, container_id: str, stop_timeout: timedelta, previous_started_at: datetime | None
    ) -> ActionOutcome:
        """Restart and classify what happened; never raises for engine errors.

        `previous_started_at` (State.StartedAt before the request) settles an unknown outcome.
        """

    def events(self, since: datetime | None) -> Iterator[EngineEvent]:
        """Container events from `since` on; ends or raises EngineUnavailable when cut off."""

    def stop_events(self) -> None:
        """End a running events() iteration from another thread."""

    def close(self) -> None: ...


class Store(Protocol):
    def current_incident(self, host: str, container: str, kind: ProblemType) -> Incident | None:
        """The incident for (host, container, type) that is not closed, if any."""

    def open_incidents(self, host: str, container: str | None = None) -> list[Incident]:
        """Incidents that are not closed (resolved ones included)."""

    def get_incident(self, incident_id: int) -> Incident | None: ...

    def save_incident(
        self, change: IncidentChange, notifications: Sequence[Notification] = ()
    ) -> Incident:
        """Write the incident, its transitions and the notifications it causes atomically
        (the outbox); returns it with its id."""

    def transitions(self, incident_id: int) -> list[Transition]: ...

    def withdraw_unsent(self, host: str) -> int:
        """Withdraw the queued notifications of open container incidents no channel has tried
        to send yet (escalations excepted), so their receivers are told nothing of them; returns
        how many incidents. A storm's notification speaks for them instead."""

    def record_intent(
        self, action: RemediationAction, notifications: Sequence[Notification] = ()
    ) -> int:
        """Write an action before acting (with the notifications it causes); returns its id."""

    def record_outcome(
        self,
        action_id: int,
        outcome: Outcome,
        detail: str,
        finished_at: datetime,
        notifications: Sequence[Notification] = (),
    ) -> None: ...

    def actions(
        self, host: str, container: str | None = None, since: datetime | None = None
    ) -> list[RemediationAction]: ...

    def last_action(self, incident_id: int) -> RemediationAction | None: ...

    def unfinished_actions(self, host: str) -> list[RemediationAction]: ...

    def restart_times(
        self, host: str, since: datetime, container: str | None = None
    ) -> tuple[datetime, ...]:
        """Request times of restart attempts (all outcomes), for one container or the host."""

    def last_reset(self, host: str, container: str) -> datetime | None: ...

    def record_reset(self, host: str, container: str, at: datetime) -> None: ...

    # Operator queries and changes (CLI and HTTP API).

    def list_incidents(
        self, host: str, state: IncidentState | None = None, container: str | None = None
    ) -> list[Incident]: ...

    def save_state_change(
        self,
        change: IncidentChange,
        expected: IncidentState,
        notifications: Sequence[Notification] = (),
    ) -> Incident | None:
        """Write a person's transition unless the state moved meanwhile (then None), with the
        notifications it causes (only for an incident people were already told about)."""

    def add_silence(self, silence: Silence) -> Silence: ...

    def end_silence(self, host: str, container: str, by: str, at: datetime) -> Silence | None: ...

    def active_silence(self, host: str, container: str, now: datetime) -> Silence | None: ...

    def silences(self, host: str, now: datetime, include_ended: bool = False) -> list[Silence]: ...

    def close(self) -> None: ...


class Notifier(Protocol):
    """One notification channel (Slack, Discord, email, webhook, Alertmanager, PagerDuty)."""

    name: str  # unique per configured channel, e.g. "slack"
    idempotent: bool  # True: a send whose outcome is unknown may be repeated safely
    max_batch: int  # how many notifications (of different incidents) one send may carry
    min_interval: timedelta  # pacing: at least this long between two sends

    def send(self, batch: Sequence[Notification]) -> Result:
        """Deliver one message carrying `batch`; never raises, classifies every failure."""
