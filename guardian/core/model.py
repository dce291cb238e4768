"""Guardian's value types: what a container looks like, what a check found, what was decided.

Everything here is a frozen value: the core computes new values instead of mutating old ones.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum


class ProblemType(StrEnum):
    """The kind of problem an incident is about; part of the incident's identity."""

    UNHEALTHY = "unhealthy"
    EXITED = "exited"
    OOM_KILLED = "oom_killed"
    CRASH_LOOP = "crash_loop"  # Docker's restart policy keeps restarting it; Guardian never does
    PROBE_FAILED = "probe_failed"  # a Guardian-run HTTP/TCP probe failed failure_threshold times
    LOG_MATCH = (
        "log_match"  # its output matched a log rule (core.detection.log_rules) since its last start
    )
    # It joined a namespace (`container:<id>`) of a container that no longer exists: a restart
    # cannot fix it, so Guardian reports it and names the command that recreates it.
    ORPHANED_NAMESPACE = "orphaned_namespace"
    # A resource rule (core.detection.resources) held for its whole `for`: memory or CPU above its
    # limit.
    MEMORY_HIGH = "memory_high"
    CPU_HIGH = "cpu_high"
    # Host-level problems: their incidents use HOST_SUBJECT as the container.
    # A person asked for a rollback (guardian rollback NAME): opened when decide() lets it
    # through, resolved by the rollback's verification.
    ROLLBACK_REQUESTED = "rollback_requested"
    STORM = "storm"  # too many watched containers unhealthy at once
    ENGINE_UNREACHABLE = "engine_unreachable"


HOST_PROBLEMS = frozenset({ProblemType.STORM, ProblemType.ENGINE_UNREACHABLE})
HOST_SUBJECT = "(host)"  # the `container` of a host-level incident


class IncidentState(StrEnum):
    ACTIVE = "active"
    ACKNOWLEDGED = "acknowledged"
    IN_PROGRESS = "in_progress"
    RESOLVED = "resolved"
    CLOSED = "closed"


OPEN_STATES = frozenset(
    {IncidentState.ACTIVE, IncidentState.ACKNOWLEDGED, IncidentState.IN_PROGRESS}
)


@dataclass(frozen=True)
class ContainerSnapshot:
    """What the engine told us about one container at one moment.

    `health` is Docker's health status (`healthy`, `unhealthy`, `starting`) or None when the
    container has no HEALTHCHECK. Fields only known after an inspect are None when the snapshot
    came from the list call alone (`inspected` is False then).
    """

    id: str
    name: str
    labels: dict[str, str]
    state: str  # created | running | paused | restarting | exited | dead | removing
    health: str | None
    inspected: bool = False
    exit_code: int | None = None
    oom_killed: bool = False
    started_at: datetime | None = None
    finished_at: datetime | None = None
    created: datetime | None = None  # from an inspect: when the container was created
    restart_count: int = 0
    restart_policy: str = ""  # "", "no", "always", "unless-stopped", "on-failure"
    restart_policy_max_retries: int = 0
    health_start_period: timedelta = timedelta(0)
    health_output: str = ""
    health_log_at: datetime | None = None  # when Docker finished the last health probe
    # Every address of the container on its networks; 127.0.0.1 for a host-network container.
    # A probe may aim at these only, unless the operator allows more (probe.allow_hosts).
    addresses: tuple[str, ...] = ()
    memory_limit: int = 0  # bytes (HostConfig.Memory); 0: no limit
    # The probe that completed the failing streak; None once it leaves Docker's five-probe log.
    unhealthy_since: datetime | None = None
    # After that: the oldest failing probe still kept, a lower bound on when it turned.
    unhealthy_by: datetime | None = None
    # Namespaces joined from another container, (kind, leader) as HostConfig says
    # `container:<leader>` (core.relations.namespaces.raw_modes): the list call tells the network
    # one only, an inspect all three (network, pid, ipc).
    namespaces: tuple[tuple[str, str], ...] = ()
    # From an inspect only: the evidence that a container is a Guardian (adapters.instance).
    # pid: its first process on the engine's host, 0 when not running; mounts: (source, dest).
    pid: int = 0
    command: tuple[str, ...] = ()
    mounts: tuple[tuple[str, str], ...] = ()

    @property
    def short_id(self) -> str:
        return self.id[:12]

    @property
    def runs_well(self) -> bool:
        """Running, healthy or without a healthcheck: what a list of the containers that do not
        run well (Engine.list_unwell) leaves out."""
        return self.state == "running" and self.health in (None, "healthy")

    def as_listed(self) -> ContainerSnapshot:
        """What the engine's list call shows of this container: no field only an inspect tells,
        a health only while it runs (Docker reads it from the status text, which shows none for
        a paused, restarting or stopped container), the network namespace alone."""
        return ContainerSnapshot(
            id=self.id,
            name=self.name,
            labels=self.labels,
            state=self.state,
            health=self.health if self.state == "running" else None,
            addresses=self.addresses,
            namespaces=tuple(n for n in self.namespaces if n[0] == "network"),
        )


@dataclass(frozen=True)
class HealthCheckResult:
    """The verdict of the checks on one container.

    `problem` is None when the container is fine. `skipped` names why the container was not
    judged at all (paused, stopped by a person, in its grace period, ...); a skipped result
    neither opens nor resolves incidents.
    """

    container_id: str
    container_name: str
    observed_at: datetime
    problem: ProblemType | None = None
    detail: str = ""
    skipped: str | None = None
    source: str = "sweep"  # sweep | event | verify
    # Since when the problem lasts, as far as the engine still tells; exact only while the
    # failing probe or exit is kept. None: the engine tells nothing (a Guardian-run probe).
    since: datetime | None = None
    since_exact: bool = False

    @property
    def healthy(self) -> bool:
        return self.problem is None and self.skipped is None


@dataclass(frozen=True)
class Incident:
    """One problem of one container, from first detection until closed."""

    id: int | None
    host: str
    container: str
    container_id: str
    type: ProblemType
    state: IncidentState
    opened_at: datetime
    last_seen: datetime
    occurrences: int = 1
    detail: str = ""
    escalated: bool = False
    resolved_by: str | None = None
    resolved_at: datetime | None = None
    closed_at: datetime | None = None
    close_reason: str | None = None
    # The earliest evidence of this episode, never moved later while it lasts; restart.act_after
    # counts from it. None: a row stored without it, for which the opening stands in.
    problem_since: datetime | None = None

    @property
    def is_open(self) -> bool:
        return self.state in OPEN_STATES

    @property
    def began(self) -> datetime:
        """Since when the problem lasts (problem_since, else the opening)."""
        return self.problem_since or self.opened_at


@dataclass(frozen=True)
class Transition:
    """One state change of an incident, as recorded in the audit trail."""

    from_state: IncidentState | None  # None for the opening of the incident
    to_state: IncidentState
    actor: str
    at: datetime
    reason: str
    # Its row in the store (None until written): where a reader that has it reads on from, not
    # part of what it says.
    id: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Silence:
    """A maintenance silence: no restarts (and no notifications) for one container until `until`.

    A silence ends at `until`, or earlier when someone lifts it (`ended_at`).
    """

    id: int | None
    host: str
    container: str
    created_at: datetime
    until: datetime
    reason: str
    created_by: str
    ended_at: datetime | None = None
    ended_by: str | None = None

    def active(self, now: datetime) -> bool:
        return self.ended_at is None and self.created_at <= now < self.until


class Verdict(StrEnum):
    RESTART = "restart"
    WAIT = "wait"  # not now; may retry at `retry_at`
    DENY = "deny"  # never, for as long as the inputs stay the same (policy-denied)
    GIVE_UP = "give_up"  # attempts exhausted: escalate, keep the incident open
    STOP = "stop"  # guardian.action=stop, or the ladder's stop rung: stop it, a person acts
    RECREATE = "recreate"  # the ladder's recreate rung: remove it, create it from its record
    ROLLBACK = "rollback"  # the ladder's rollback rung: replace it by its last healthy record


# The verdicts on which Guardian acts on the container (Decision.acts).
ACTING = frozenset({Verdict.RESTART, Verdict.STOP, Verdict.RECREATE, Verdict.ROLLBACK})


class Reason(StrEnum):
    ALLOWED = "allowed"
    SELF = "self"
    NOT_OPTED_IN = "not_opted_in"
    DRY_RUN = "dry_run"
    IN_FLIGHT = "restart_in_progress"  # Guardian's restart call for it runs now
    VERIFYING = "verifying"  # restarted; its verification has not judged it yet
    REPORT_ONLY = "report_only"  # a problem Guardian reports, never restarts for (crash loop)
    COOLDOWN = "cooldown"
    MAX_ATTEMPTS = "max_attempts"
    RATE_LIMITED = "rate_limited"
    CONCURRENCY = "max_concurrent"
    SILENCED = "silenced"
    ENGINE_DENIED = "engine_denied"  # the engine (or a socket proxy) refused the last restart
    DEPENDENCY_UNHEALTHY = "dependency_unhealthy"
    STORM = "storm"
    STORM_CANARY = "storm_canary"  # allowed: the one restart that tries whether a storm is over
    ORCHESTRATOR_MANAGED = "orchestrator_managed"  # Swarm, Kubernetes, Nomad recreate it
    NOTIFY_ONLY = "notify_only"  # guardian.action=notify: people are told, Guardian never acts
    ACT_AFTER = "act_after"  # patience: the problem has not lasted act_after yet
    AWAITING_APPROVAL = "awaiting_approval"  # guardian.action=ask: a person approves each one
    APPROVED = "approved"  # allowed: a person approved this restart of the incident
    APPROVAL_DENIED = "approval_denied"  # a person said no to restarting this incident
    ESCALATED = "escalated"  # allowed: restarts did not help, the ladder's next rung
    REQUESTED = "requested"  # allowed: a person asked for this rollback (guardian rollback)


@dataclass(frozen=True)
class Decision:
    """What `decide()` says about one restart request: a verdict, why, and when to ask again."""

    verdict: Verdict
    reason: Reason
    retry_at: datetime | None = None
    attempt: int = 0  # the number this restart would be within the window (1-based)
    max_attempts: int = 0
    detail: str = ""  # e.g. which dependency is unhealthy
    approval: Approval | None = None  # the approval a restart (reason approved) uses
    request: RollbackRequest | None = None  # the person's request a rollback (requested) uses
    # The ladder's rung this decision is about (restart.escalate), "" for a restart's: its
    # `attempt` is then the restarts used (all of them), as a give-up's is.
    rung: str = ""

    @property
    def used(self) -> int:
        """The attempts used before this decision: a give-up's and a rung's count them all,
        the others name the next attempt."""
        past = self.verdict is Verdict.GIVE_UP or bool(self.rung)
        return self.attempt if past else max(0, self.attempt - 1)

    @property
    def restart(self) -> bool:
        return self.verdict is Verdict.RESTART

    @property
    def acts(self) -> bool:
        """Guardian acts on the container now (a restart or, by its action, a stop)."""
        return self.verdict in ACTING


@dataclass(frozen=True)
class Approval:
    """A person's answer for one incident of a container whose action is `ask`: `approved`
    allows one restart until `expires_at` (used once: `used_at`); a denial ends the question."""

    id: int | None
    incident_id: int
    host: str
    container: str
    approved: bool
    by: str
    reason: str
    created_at: datetime
    expires_at: datetime
    used_at: datetime | None = None

    def usable(self, now: datetime) -> bool:
        return self.approved and self.used_at is None and now < self.expires_at


@dataclass(frozen=True)
class RollbackRequest:
    """A person's rollback of the container `container_id` (guardian rollback NAME, or the
    API) to the record of its name that ran healthy with `digest`: usable once (`used_at`,
    compare-and-set) until `expires_at` (restart.approval_ttl), through decide() like every
    action."""

    id: int | None
    host: str
    container: str
    container_id: str
    digest: str
    image_id: str
    image_ref: str
    by: str
    reason: str
    created_at: datetime
    expires_at: datetime
    used_at: datetime | None = None

    def usable(self, now: datetime) -> bool:
        return self.used_at is None and now < self.expires_at


class Outcome(StrEnum):
    """Typed outcome of a remediation action (docs/design.md rule 3)."""

    SUCCEEDED = "succeeded"  # restarted and observed healthy within verify_timeout
    RESTARTED = "restarted"  # the engine restarted it; verification pending
    UNHEALTHY_AFTER_RESTART = "unhealthy_after_restart"  # restarted, not healthy in time
    POLICY_DENIED = "policy_denied"  # refused: by the engine or a socket proxy, or a full queue
    PERMANENT_FAILURE = "permanent_failure"  # the restart call failed: the container is gone
    TRANSIENT_FAILURE = "transient_failure"  # the restart call still failed after one retry
    UNKNOWN = "unknown"  # observed healthy, but not confirmed restarted
    RETRY_EXHAUSTED = "retry_exhausted"  # attempts used up: the incident escalated
    INTERRUPTED = "interrupted"  # Guardian died between intent and outcome
    WITHDRAWN = "withdrawn"  # decided, never sent: a person stopped or silenced it meanwhile
    STOPPED = "stopped"  # guardian.action=stop: stopped as asked, left to a person
    FAILED = "failed"  # a hook exited with another status than 0, or could not start
    TIMED_OUT = "timed_out"  # a hook ran past its timeout and was killed


@dataclass(frozen=True)
class ActionOutcome:
    """The result of asking the engine to do something, already classified."""

    outcome: Outcome
    detail: str = ""
    retryable: bool = False


class ActionKind(StrEnum):
    """What a row of the remediation history records."""

    RESTART = "restart"  # a restart request, with its outcome
    DECISION = "decision"  # a restart held back or given up on, with the reason
    STOP = "stop"  # a stop request (guardian.action=stop), with its outcome
    APPROVAL = "approval"  # a person approved or denied a restart (guardian.action=ask)
    HOOK = "hook"  # an operator's hook run after a verdict (core.outbound.hooks), with its output
    RECREATE = "recreate"  # the ladder's recreate: its record stored before the removal
    # The ladder's rollback (or a person's): the record that ran healthy (what is created) and
    # the one replaced (`replaced`), both stored before the removal.
    ROLLBACK = "rollback"


# The actions that remove a container and create one under its name (its successor).
REPLACING = frozenset({ActionKind.RECREATE, ActionKind.ROLLBACK})


@dataclass(frozen=True)
class RemediationAction:
    """A row of the remediation history: intent first, outcome filled in afterwards."""

    id: int | None
    incident_id: int | None
    host: str
    container: str
    container_id: str
    kind: str  # an ActionKind
    requested_at: datetime
    reason: str
    outcome: Outcome | None = None
    detail: str = ""
    finished_at: datetime | None = None
    attempt: int = 0
    extra: dict[str, str] = field(default_factory=dict)
    # A recreate's (ActionKind.RECREATE): the container's record (its inspect as JSON), written
    # with the intent; the new container's id, written with the outcome.
    record: str = ""
    successor: str = ""
    # A rollback's: the record of the container it replaced (its inspect as JSON).
    replaced: str = ""


def same_snapshots(last: Sequence[ContainerSnapshot], now: Sequence[ContainerSnapshot]) -> bool:
    """Whether a list shows the very snapshots of the last, in order (the list call hands the
    same object for an unchanged container): what follows from a list alone need not be worked
    out again."""
    return len(last) == len(now) and all(map(operator.is_, last, now))


@dataclass(frozen=True)
class RecordedEvent:
    """One thing the store recorded, as the events feed tells it (GET /api/v1/events).

    `cursor` orders the writes: it only grows, and an outcome written onto its action later is
    an event of its own with a later cursor. `kind`: incident.opened, incident.changed,
    action.requested, action.outcome, approval.given, approval.denied, approval.used,
    silence.set, silence.lifted, maintenance.started, maintenance.ended. `fields`: what the
    write said, as the store kept it.
    """

    cursor: int
    kind: str
    at: datetime
    container: str
    incident_id: int | None
    fields: Mapping[str, object]


@dataclass(frozen=True)
class EventHorizon:
    """How far the events feed reaches: retention forgot the events up to cursor `forgotten`
    (0: none), those recorded before `cutoff`; `newest`: the last cursor handed out."""

    forgotten: int = 0
    cutoff: datetime | None = None
    newest: int = 0


@dataclass(frozen=True)
class EventPage:
    """An answer of the events feed: the events after the cursor asked, oldest first, and the
    cursor to ask next (the one asked when there are none)."""

    events: tuple[RecordedEvent, ...]
    next: int
