"""The small protocols the loop needs from the outside world: Engine, Store, Stamps, Outbox,
Feed, Clock, Notifier, Metrics, ProbeRunner, HookRunner, ResourceReader. Adapters implement them
(adapters/), tests use tests/fakes.py.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol

from guardian.core.detection.probes import ProbeSpec
from guardian.core.detection.usage import Usage
from guardian.core.detection.windows import MaintenancePeriod
from guardian.core.escalation.recreate import RecreateSpec
from guardian.core.escalation.rollback import Kept
from guardian.core.facts import Fact
from guardian.core.history import History
from guardian.core.incidents import IncidentChange
from guardian.core.model import (
    ActionOutcome,
    Approval,
    ContainerSnapshot,
    Decision,
    EventHorizon,
    Incident,
    IncidentState,
    Outcome,
    ProblemType,
    RecordedEvent,
    RemediationAction,
    RollbackRequest,
    Silence,
    Transition,
)
from guardian.core.outbound.delivery import Next, Pending, Result
from guardian.core.outbound.hooks import HookRun
from guardian.core.outbound.notifications import Notification


class EngineUnavailable(Exception):
    """The container engine could not be reached; the message is one line for the log."""


class StoreError(Exception):
    """The store cannot be opened or written; the message names the file."""


class InstanceConflict(Exception):
    """Another Guardian already watches this engine (or uses this store); names it."""


@dataclass(frozen=True)
class EngineEvent:
    """One container event from the engine's stream."""

    action: str  # health_status | die | oom | stop | start | restart | kill | destroy
    # (Docker's names: the adapter translates Podman's `died` and `remove`)
    container_id: str
    container_name: str
    at: datetime
    attributes: dict[str, str]


@dataclass(frozen=True)
class EngineHistory:
    """What the engine still keeps of its container events between two times (a bounded ring
    on Docker, none from before its own start): the events Guardian knows, oldest first, and
    the time of the oldest event of any kind it returned (None: it returned none)."""

    events: tuple[EngineEvent, ...]
    oldest: datetime | None


class LogStream(Protocol):
    """A container's output as it is written (Engine.follow_logs): stdout and stderr merged,
    the engine's framing taken off, in blocks of bytes."""

    def read(self, limit: int) -> bytes:
        """Up to `limit` bytes of output, waiting for some; b"" once it ended (the container
        stopped, or close()). Raises EngineUnavailable when the engine cut it off."""

    @property
    def written_at(self) -> datetime | None:
        """When the container wrote the last output read, as the engine stamped it (in
        Guardian's frame); None: unknown. How far behind the reader is."""

    def close(self) -> None:
        """End the stream, also from another thread: a read waiting on it returns or raises."""


class LogPattern(Protocol):
    def search(self, text: bytes, start: int = 0) -> tuple[int, int] | None:
        """The span of the leftmost match in `text` from `start` (None: none), in time linear
        in the text whatever the pattern. `^` and `$` match at line ends; no match spans a
        newline."""


class Patterns(Protocol):
    """Compiles the patterns of log rules (core.detection.log_rules) with a linear-time engine."""

    def compile(self, pattern: str) -> LogPattern:
        """Raises core.detection.log_rules.PatternError for a pattern the engine refuses (syntax,
        size)."""


@dataclass(frozen=True)
class EngineIdentity:
    """Which engine serves the API: its kind ("docker" or "podman"), version and API version."""

    kind: str
    version: str
    api_version: str


@dataclass(frozen=True)
class EngineStep:
    """What a step of a recreate did (a removal, or a create from a RecreateSpec): done, with
    the new container's id for a create; or why not, in one line for people. `sent`: the
    request may have reached the engine (an unknown outcome: look before trying again)."""

    done: bool
    reason: str = ""
    container_id: str = ""
    sent: bool = True


class Clock(Protocol):
    """Two readings: `now()` is the wall clock (aware UTC), for what people read and what the
    store keeps across restarts; it may step (NTP, a stale boot, a VM resumed). `monotonic()`
    is seconds on a clock that never steps and counts suspend: every duration within a run
    (deadlines, holds, streaks, pacing, schedules) is measured on it (docs/design.md rule 12).
    It is the host's (CLOCK_BOOTTIME): a later run on the same boot reads the same clock, so a
    reading kept with a stamp tells a later run its age (core.stamps.placed_since)."""

    def now(self) -> datetime: ...

    def monotonic(self) -> float: ...


class Engine(Protocol):
    def ping(self) -> None:
        """Raise EngineUnavailable unless the engine answers."""

    def identity(self) -> EngineIdentity:
        """Which engine answers (asked once per connection); raises EngineUnavailable."""

    def list_containers(
        self,
        label: str,
        scope: str = "",
        names: Collection[str] = (),
        ids: Collection[str] = (),
    ) -> list[ContainerSnapshot]:
        """Containers carrying `label` ("all": every container) and matching the `scope` label
        selector ("key" or "key=value"; empty: no restriction), with their health when the
        engine knows it: ONE request on Docker, one more per health state on Podman. `names`,
        `ids`: only the containers of these names, of these full ids (the engine selects
        them)."""

    def list_unwell(self, label: str, scope: str = "") -> list[ContainerSnapshot]:
        """The containers list_containers(label, scope) shows that do not run well (in any
        state but running, or running with a health of unhealthy or starting:
        ContainerSnapshot.runs_well), as it shows them: the engine selects them, two requests
        on Docker (one by state, one by health). On an idle host, a few small answers where
        the whole list of 1,000 containers is a megabyte."""

    def inspect(self, container_id: str) -> ContainerSnapshot | None:
        """The full snapshot of one container; None when it no longer exists."""

    def as_listed(self, snap: ContainerSnapshot) -> ContainerSnapshot:
        """What list_containers shows of the container an inspect showed as `snap`."""

    def stamp_uncertainty(self) -> timedelta | None:
        """How far the engine's stamps (events, state times), in Guardian's frame, may be off
        Guardian's clock; None: not known yet (no answer bounded it)."""

    def logs(self, container_id: str, tail: int) -> str:
        """The last `tail` lines of the container's output ("" when unavailable)."""

    def follow_logs(self, container_id: str, since: datetime, tail: int) -> LogStream:
        """The container's output from `since` on (of its last `tail` lines at most, which
        bounds the engine's work to find them), then as it is written, until it stops. Raises
        EngineUnavailable; a container that is gone gives a stream that has ended."""

    def restart(
        self, container_id: str, stop_timeout: timedelta, previous_started_at: datetime | None
    ) -> ActionOutcome:
        """Restart and classify what happened; never raises for engine errors.

        `previous_started_at` (State.StartedAt before the request) settles an unknown outcome.
        """

    def stop(self, container_id: str, stop_timeout: timedelta) -> ActionOutcome:
        """Stop (guardian.action=stop) and classify what happened; never raises for engine
        errors. STOPPED when the engine stopped it (or it was not running)."""

    def record(self, container_id: str) -> Mapping[str, Any] | None:
        """The container's whole inspect as the engine answers it (for a recreate: its own
        record, core.escalation.recreate); None when it is gone."""

    def remove_container(self, container_id: str, stop_timeout: timedelta) -> EngineStep:
        """Stop and remove it, keeping its named volumes; done when it is gone afterwards."""

    def create_container(self, spec: RecreateSpec) -> EngineStep:
        """Create (under the spec's name), connect and start a container from `spec`."""

    def has_image(self, image_id: str) -> bool:
        """Whether the engine holds the image `image_id` (Guardian pulls nothing); raises
        EngineUnavailable when it cannot tell."""

    def events(self, since: datetime | None) -> Iterator[EngineEvent]:
        """Container events from `since` on; ends or raises EngineUnavailable when cut off."""

    def stop_events(self) -> None:
        """End a running events() iteration from another thread."""

    def history(self, since: datetime, until: datetime) -> EngineHistory:
        """The container events the engine still keeps from `since` to `until` (one bounded
        request that ends at `until`); raises EngineUnavailable."""

    def stats(self, container_id: str) -> Usage | None:
        """One non-streaming stats reading of a running container (memory less its inactive
        file cache, cumulative CPU time); None when it is gone or not running. Raises
        EngineUnavailable."""

    def close(self) -> None: ...


class Record(StrEnum):
    """What kind of record a store write wrote: a reader that keeps the store's lists (the
    status page) reads again those of that kind alone."""

    INCIDENTS = "incidents"  # an incident and its transitions
    ACTIONS = "actions"
    SILENCES = "silences"
    APPROVALS = "approvals"
    RESETS = "resets"
    DELIVERIES = "deliveries"  # a notification's delivery given up


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
        (the outbox); returns it with its id, as the write left it in the store (a detection
        update keeps the state a person wrote meanwhile)."""

    def transitions(
        self, incident_id: int, limit: int | None = None, after: int | None = None
    ) -> list[Transition]:
        """An incident's transitions, oldest first; `limit`: the newest this many only;
        `after`: those written after the one of this id only (they are never changed)."""

    def withdraw_unsent(self, host: str) -> int:
        """Withdraw the queued notifications of open container incidents no channel has tried
        to send yet (escalations excepted), so their receivers are told nothing of them; returns
        how many incidents. A storm's notification speaks for them instead."""

    def release_held(self, incident_id: int | None, output: str = "") -> int:
        """Queue the held notifications (an opening judged from the container cache) of one
        incident, or of all (None: at a start), told what the probe said (`output`; "" keeps
        their detail); returns how many."""

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
        successor: str = "",
    ) -> None:
        """Write an action's outcome; `successor`: a recreate's new container id (kept when
        a later outcome, its verification's, is written without one)."""

    def actions(
        self,
        host: str,
        container: str | None = None,
        since: datetime | None = None,
        *,
        incident: int | None = None,
        limit: int | None = None,
    ) -> list[RemediationAction]:
        """Oldest first; `incident`: those told under it; `limit`: only the newest so many."""
        ...

    def last_action(self, incident_id: int) -> RemediationAction | None: ...

    def unfinished_actions(self, host: str) -> list[RemediationAction]: ...

    def unanswered_restarts(self, host: str) -> list[RemediationAction]:
        """Each container's latest restart when its outcome is unknown (sent, no answer: its
        verification settles it), oldest first; not one whose verification reached the verdict
        `unknown` (seen healthy, the restart unconfirmed: core.verification.UNCONFIRMED)."""

    def restart_times(
        self,
        host: str,
        since: datetime,
        container: str | None = None,
        container_id: str | None = None,
    ) -> tuple[datetime, ...]:
        """Request times of restart attempts (every outcome but withdrawn: never sent to the
        engine), for the host, or for a name (and, with `container_id`, only the container of
        that id carrying it)."""

    def last_reset(self, host: str, container: str) -> datetime | None: ...

    def first_restart_after_reset(self, host: str, container: str) -> datetime | None:
        """The earliest stamp among the restarts of `container` written after its last counter
        reset (in the order written, whatever their stamps; None: none, or no reset, or one
        written before the store kept that order)."""

    def record_reset(self, host: str, container: str, at: datetime) -> None: ...

    def history(
        self, host: str, since: datetime, containers: Collection[str] | None = None
    ) -> History:
        """What happened to `containers` (None: every one) since `since`: problem spans,
        silences, restarts, stops and recreates, and Guardian's runs (see core.history)."""

    def kept_records(self, host: str, name: str) -> list[Kept]:
        """The records kept of `name` for the rollback rung (seen healthy, or left by a
        rollback), the most recently seen first."""

    def keep_record(self, host: str, record: Kept) -> None:
        """Keep a record seen healthy (lifting a failed mark), or one a rollback left (failed);
        one per record of a name, at most a few per name."""

    def touch_kept(self, host: str, name: str, container_id: str, at: datetime) -> bool:
        """Whether the record that `container_id` runs on is kept as healthy; seen at `at`."""

    def remembered(self, host: str, mark: str) -> datetime | None:
        """The time last kept under `mark` (None: never): how far the store's record reaches
        (`recorded_through`), the last engine event handled (`events_through`)."""

    def remember(self, host: str, mark: str, at: datetime) -> None:
        """Keep `at` under `mark`, replacing the time kept before."""

    def move_problem_starts(self, host: str, step: timedelta) -> None:
        """The wall clock stepped by `step`: the problem starts of the incidents not closed
        move with it, so restart.act_after keeps its length through the step
        (docs/design.md rule 12)."""

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

    def add_silence(self, silence: Silence) -> Silence:
        """Store a silence (it ends the container's silence in force); returns it as stored."""
        ...

    def end_silence(self, host: str, container: str, by: str, at: datetime) -> Silence | None:
        """Lift the container's silence in force; returns it as stored (None: there was none)."""
        ...

    def active_silence(self, host: str, container: str, now: datetime) -> Silence | None: ...

    def silences(self, host: str, now: datetime, include_ended: bool = False) -> list[Silence]: ...

    def add_approval(
        self, approval: Approval, notifications: Sequence[Notification] = ()
    ) -> Approval: ...

    def approvals(self, incident_id: int) -> list[Approval]: ...

    def approval_for(self, host: str, container: str) -> Approval | None:
        """The latest answer for an open incident of `container`."""

    def use_approval(self, approval_id: int, at: datetime) -> bool:
        """Compare-and-set: False when the approval was used already."""

    def unused_approvals(self, host: str, now: datetime) -> list[Approval]: ...

    def add_rollback_request(self, request: RollbackRequest) -> RollbackRequest:
        """Store a person's rollback request (guardian rollback); returns it with its id."""

    def rollback_requests(self, host: str, now: datetime) -> list[RollbackRequest]:
        """The rollback requests not used and not expired at `now`, oldest first."""

    def use_rollback_request(self, request_id: int, at: datetime) -> bool:
        """Compare-and-set: False when the request was used already."""

    def events_after(self, host: str, cursor: int, limit: int) -> list[RecordedEvent]:
        """The events feed: the first `limit` events of `host` recorded after `cursor`."""
        ...

    def event_cursor_at(self, host: str, at: datetime) -> int:
        """The cursor after which the events recorded at or after `at` come."""
        ...

    def event_horizon(self) -> EventHorizon: ...

    def close(self) -> None: ...


class Stamps(Protocol):
    """This run's restart requests and counter resets, each kept with a monotonic reading as it
    is written, so that read back they are placed by the monotonic clock: a step of the wall
    clock within a run neither shortens nor lengthens a cooldown, an attempt window or the
    host's budget (docs/design.md rule 12; adapters/run_stamps.py)."""

    def wrote_restart(self, host: str, container: str, container_id: str, at: datetime) -> None:
        """A restart request is being written (whether or not the store takes it)."""

    def wrote_reset(self, host: str, container: str, at: datetime) -> None: ...

    def began(self) -> datetime:
        """When this run began, placed by the monotonic clock: what an earlier run wrote came
        before it, whatever its stamp."""
        ...

    def restart_times(
        self,
        host: str,
        since: datetime,
        read: Callable[[datetime], tuple[datetime, ...]],
        container: str | None,
        container_id: str | None,
    ) -> tuple[datetime, ...]:
        """Store.restart_times, with `read(after)` asking the store."""
        ...

    def last_reset(self, host: str, container: str, stored: datetime | None) -> datetime | None:
        """Store.last_reset, given the store's (`stored`)."""
        ...


@dataclass(frozen=True)
class FeedRow:
    """One row of the store's change feed (core.model.RecordedEvent) another process wrote, as
    far as a reader of facts needs it: `kind` (incident.changed, silence.set, ...), the
    container and incident it is about. What another process wrote is only as trustworthy as
    the file: a row holding a value of the wrong type reads as kind "" (nothing to attribute),
    and a container is read at most FEED_NAME + 1 characters long."""

    cursor: int
    kind: str
    container: str
    incident: int | None


FEED_NAME = 255  # the longest name a feed row is taken to name (the CLI's: operator.MAX_CONTAINER)


@dataclass(frozen=True)
class WrittenElsewhere:
    """What other processes wrote to the store since the last look (Feed.written_elsewhere).

    `changed`: another connection committed (SQLite's data_version). `rows`: the feed's rows
    those commits wrote, oldest first, of this host; `whole`: they are all of them (False: more
    than the look reads, or retention forgot some after the cursor: `rows` is empty then, and
    anything may have been written)."""

    changed: bool
    rows: tuple[FeedRow, ...] = ()
    whole: bool = True


class Feed(Protocol):
    """The store's change feed, followed by cursor for what other processes (a `guardian`
    command) wrote: the cursor and what was seen last are kept by the adapter, from the feed's
    end when it was built. One caller at a time (the daemon's store watch, or its sweep where
    there is no watch); raises StoreError."""

    def written_elsewhere(self, host: str, limit: int) -> WrittenElsewhere:
        """What other processes wrote since the last call (at most `limit` rows: beyond, none
        and not whole); the cursor moves past it all, this process's own rows included."""
        ...


class MaintenanceRecords(Protocol):
    """The runs of maintenance windows the store holds (the events feed tells each start and
    end). Raise StoreError when the store cannot be read or written."""

    def open_periods(self, host: str) -> list[MaintenancePeriod]:
        """The runs whose end is not written, oldest first."""
        ...

    def start_period(self, host: str, period: MaintenancePeriod) -> MaintenancePeriod:
        """Write a run's start (once: the same run written again stays as it was); with its id."""
        ...

    def end_period(self, period_id: int, at: datetime) -> None:
        """Write a run's end at `at` (once)."""
        ...


class Notifier(Protocol):
    """One notification channel (Slack, Discord, email, webhook, Alertmanager, PagerDuty)."""

    name: str  # unique per configured channel, e.g. "slack"
    idempotent: bool  # True: a send whose outcome is unknown may be repeated safely
    max_batch: int  # how many notifications (of different incidents) one send may carry
    min_interval: timedelta  # pacing: at least this long between two sends

    def send(self, batch: Sequence[Notification]) -> Result:
        """Deliver one message carrying `batch`; never raises, classifies every failure."""


@dataclass(frozen=True)
class QueuedDelivery:
    """One notification waiting for one channel, as the outbox hands it to the worker."""

    pending: Pending
    notification: Notification
    attempts: int


class Outbox(Protocol):
    """The delivery worker's view of the durable outbox (written with each change, see Store)."""

    def enqueue(self, notifications: Sequence[Notification]) -> None: ...

    def fan_out(
        self,
        channels: Sequence[str],
        select: Callable[[Notification], Sequence[str]] | None = None,
    ) -> int:
        """One delivery per channel (of those `select` chooses for the event, when given) for
        every event not yet dispatched; returns how many."""

    def pending(self, channel: str) -> list[QueuedDelivery]: ...

    def record(self, row_ids: Sequence[int], nxt: Next, reason: str, now: datetime) -> None:
        """Store the outcome of one send for every row it carried."""

    def queue_depth(self) -> int: ...

    def reminders_due(
        self, host: str, repeat_interval: timedelta, now: datetime
    ) -> list[tuple[Incident, datetime]]:
        """Escalated open incidents whose last reminder is older than `repeat_interval`."""

    def next_reminder_at(self, host: str, repeat_interval: timedelta) -> datetime | None:
        """When reminders_due will next return an incident, as things stand (None: never)."""

    def follow_step(self, step: timedelta) -> None:
        """The wall clock stepped by `step`: queued notifications' stamps (queued at, retry
        at) move with it."""

    def catch_up(self, now: datetime, longest_retry: timedelta) -> int:
        """Queued notifications' stamps ahead of `now` (a step no run followed) brought back,
        once: queued now, first tried now, retried within `longest_retry`; how many moved."""

    def ref(self, channel: str, incident_id: int) -> tuple[str, str] | None:
        """A channel's reference kept for an incident (a thread root, a firing alert, a mark)."""

    def set_ref(self, channel: str, incident_id: int, ref: str, data: str = "") -> None: ...

    def drop_ref(self, channel: str, incident_id: int) -> None: ...


class ProbeRunner(Protocol):
    def run(self, spec: ProbeSpec, address: str) -> tuple[bool, str]:
        """Run one probe: (passed, what was seen). Never raises for network errors."""


class ResourceReader(Protocol):
    def read(self, container_id: str) -> Usage | None:
        """The container's usage from its cgroup files; None when none are visible here (the
        caller then asks the engine's stats). Never raises for a missing or unreadable file."""


class HookRunner(Protocol):
    """Runs operator-written hooks as processes of their own (core.outbound.hooks)."""

    def run(self, argv: Sequence[str], env: Mapping[str, str], timeout: timedelta) -> HookRun:
        """Run `argv` (no shell) with exactly `env` in a process group of its own, until it
        ends, `timeout` passes or stop() (then the group is killed); never raises."""

    def stop(self) -> None:
        """Kill the process group of every running hook now; later runs end at once,
        interrupted, without starting."""


class Facts(Protocol):
    """Where the service publishes what happened (core.facts), once, from the part that made
    it happen; readers subscribe. publish() never raises and returns quickly."""

    def publish(self, fact: Fact) -> None: ...


class RestartCalls(Protocol):
    """Where a restart call runs once decided, claimed and its intent recorded: on the deciding
    thread (commands, tests) or on its container's worker (the daemon, runtime/restart_calls.py:
    at once when the deciding thread is that worker)."""

    def run(self, call: Callable[[], None], slot_until: datetime | None, key: str) -> None:
        """Run `call`, which returns once the engine has stopped and started the container
        whose id is `key`. `slot_until`: when the call gives its restart.max_concurrent slot
        up while still running (None: when it returns), so whoever waits for a slot is judged
        again then. Raises RuntimeError once Guardian is stopping."""


class Turns(Protocol):
    """One container judged and acted on by one thread at a time: the sweep hands each
    container's apply to its worker of the daemon's work queue, a job (the verify tick, a
    leader's followers) takes the container's turn from that queue, a watcher (a probe or
    resource tick) only asks for a look on its worker; commands and tests run every turn and
    look at once."""

    def turn(self, key: str, fn: Callable[[], None]) -> None:
        """Run `fn` as the turn of the container whose id is `key`; when its worker is busy
        with it now, that worker looks at it again instead, and `fn` is not run."""

    def hand(self, work: Sequence[tuple[str, Callable[[], None]]]) -> None:
        """Run each function (the sweep's applies) as the turn of the container whose id is
        paired with it, on that container's worker, and return once each returned or began the
        restart call it decided (which goes on there, at once); one whose worker is busy with
        its container now, or has work for it waiting (a follower's restart), looks at it again
        once done instead, and its function is not run: the caller never waits behind a restart
        call. Commands and tests run them at once, in order."""

    def later(self, key: str, fn: Callable[[], None]) -> None:
        """Run `fn` (a follower's restart) as the turn of the container whose id is `key` on
        its worker, once that worker is free, so that the restart call it decides runs there at
        once; the caller goes on. Commands and tests run it at once."""

    def look(self, key: str, source: str, now: Callable[[], None]) -> None:
        """Have the container whose id is `key` judged again soon on its worker (`source`:
        the watcher that asked, told in what is recorded); the caller goes on. Where no
        worker runs (commands, tests), `now` is called at once instead."""


class Rechecks(Protocol):
    """Who judges a container again at a time a decision named (a patience, a silence or a
    cooldown ending): the daemon's work queue; commands and tests wait for a sweep."""

    def recheck(self, container_id: str, at: datetime) -> None: ...


class Metrics(Protocol):
    """What the loop counts. adapters/prometheus.py exports it; every call is cheap and never
    raises. Labels stay bounded: container names and fixed enums, never ids."""

    def engine_reachable(self, up: bool) -> None: ...

    def engine_identified(self, engine: EngineIdentity) -> None:
        """The engine that answers (guardian_build_info's engine labels)."""

    def swept(self, watched: int, unhealthy: int) -> None:
        """The containers the last sweep watched and found with a problem."""

    def sweep_finished(self, seconds: float, completed_at: datetime | None) -> None:
        """A sweep's duration; `completed_at` only when it saw the whole host."""

    def incident_opened(self, kind: ProblemType) -> None: ...

    def decided(self, decision: Decision) -> None: ...

    def restart_requested(self, detected_at: datetime | None, at: datetime) -> None:
        """A restart request leaves: the time since the engine reported the problem."""

    def restart_returned(self, seconds: float) -> None:
        """How long the engine's restart call took."""

    def restart_ended(self, container: str, outcome: str) -> None:
        """A restart's final outcome (an Outcome, or retry_exhausted when Guardian gave up)."""

    def containers_present(self, names: set[str]) -> None:
        """A sweep listed these watched containers: the series of any other one end."""

    def open_incidents(self, counts: dict[tuple[str, str], int], exhausted: set[str]) -> None:
        """Replace the open incidents by (type, state), and the containers Guardian gave up on."""

    def store_failed(self) -> None: ...

    def store_holding(self, count: int) -> None:
        """How many intents the store holds only in memory now (it refused to write them)."""

    def log_rules_unfollowed_now(self, count: int) -> None:
        """How many running containers' log rules wait for a slot now (not followed)."""

    def clock_stepped(self, seconds: float) -> None:
        """The wall clock stepped by `seconds` against the monotonic clock (back: negative)."""

    def notification_channel(self, channel: str) -> None:
        """A channel is configured: its series exist from the start."""

    def notification_sent(self, channel: str, outcome: str) -> None: ...

    def notification_queue(self, depth: int) -> None: ...

    def notification_channel_up(self, channel: str, up: bool) -> None:
        """The channel delivered its last send (True) or dead-lettered it (False)."""

    def heartbeat_pinged(self, up: bool, delivered: bool | None) -> None:
        """A heartbeat ping (up: all is well, else the failure ping) was answered or not;
        None: the heartbeat is configured (its series exist from the start)."""

    def hook_ran(self, outcome: str) -> None:
        """A hook run ended (or was refused): one of core.outbound.hooks.HOOK_OUTCOMES."""
