"""decide(): table-driven cases over a fake clock, and properties over random failure sequences."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guardian.adapters.run_stamps import RunStamps
from guardian.core.model import (
    Approval,
    ProblemType,
    Reason,
    RollbackRequest,
    Silence,
    Verdict,
)
from guardian.core.policy import (
    AttemptHistory,
    HostLoad,
    RestartPolicy,
    Target,
    counted_attempts,
    decide,
    reset_due,
)
from guardian.core.storm import StormHold
from tests.fakes import T0, FakeClock

NOW = T0
RATE = timedelta(minutes=1)
POLICY = RestartPolicy(
    cooldown=timedelta(seconds=300),
    max_attempts=3,
    window=timedelta(hours=1),
    reset_after=timedelta(seconds=600),
    max_per_minute=10,
    max_concurrent=2,
)


LADDER = replace(POLICY, escalate=("recreate", "stop"))


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


@dataclass
class Case:
    name: str
    verdict: Verdict
    reason: Reason
    attempts: tuple[float, ...] = ()  # seconds ago
    reset: float | None = None  # seconds ago
    in_flight: bool = False
    verifying: bool = False
    engine_denied: bool = False
    host_recent: tuple[float, ...] = ()
    host_in_flight: int = 0
    target: Target = field(default_factory=lambda: Target("app"))
    policy: RestartPolicy = POLICY
    retry_in: float | None = None  # seconds from NOW
    attempt: int | None = None
    storm: StormHold | None = None
    slot_free_in: float | None = None  # seconds from NOW: a long stop gives its slot up
    approval: Approval | None = None
    silence: Silence | None = None
    rungs: tuple[tuple[str, float], ...] = ()  # the ladder's rungs taken, seconds ago
    request: RollbackRequest | None = None  # a person's rollback (guardian rollback)


def approval(approved: bool = True, age: float = 10, ttl: float = 3600, used: bool = False):
    """A person's answer given `age` seconds ago, valid for `ttl` seconds."""
    return Approval(
        1,
        7,
        "h",
        "app",
        approved,
        "ana",
        "db checked",
        ago(age),
        ago(age - ttl),
        used_at=ago(1) if used else None,
    )


def request(age: float = 10, ttl: float = 3600, used: bool = False) -> RollbackRequest:
    """A person's rollback asked `age` seconds ago, valid for `ttl` seconds."""
    return RollbackRequest(
        1,
        "h",
        "app",
        "app-id",
        "sha256:" + "d" * 64,
        "sha256:" + "1" * 64,
        "app:latest",
        "ana",
        "bad release",
        ago(age),
        ago(age - ttl),
        used_at=ago(1) if used else None,
    )


ROLLBACK = Target("app", problem=ProblemType.ROLLBACK_REQUESTED)
ASK = replace(POLICY, action="ask")
PATIENT = replace(POLICY, act_after=timedelta(seconds=60))


def since(seconds_ago: float) -> Target:
    return Target("app", problem_since=ago(seconds_ago))


CASES = [
    Case("first restart is allowed", Verdict.RESTART, Reason.ALLOWED, attempt=1),
    Case(
        "guardian never restarts itself",
        Verdict.DENY,
        Reason.SELF,
        target=Target("guardian", is_self=True),
    ),
    Case(
        "a container not opted in is never restarted",
        Verdict.DENY,
        Reason.NOT_OPTED_IN,
        target=Target("db", opted_in=False),
    ),
    Case(
        "self wins over everything else",
        Verdict.DENY,
        Reason.SELF,
        attempts=(10, 20, 30),
        target=Target("guardian", opted_in=False, is_self=True),
    ),
    Case(
        "a container an orchestrator owns is observed, never restarted",
        Verdict.DENY,
        Reason.ORCHESTRATOR_MANAGED,
        target=Target("web.1.x", orchestrator="Docker Swarm (service web)"),
    ),
    Case(
        "an orchestrator's container stays denied with attempts left and no cooldown",
        Verdict.DENY,
        Reason.ORCHESTRATOR_MANAGED,
        attempts=(4000,),
        target=Target("web.1.x", orchestrator="Nomad"),
    ),
    Case(
        "watch.orchestrated act: an orchestrator's container is restarted like any other",
        Verdict.RESTART,
        Reason.ALLOWED,
        target=Target("web.1.x", orchestrator="Kubernetes"),
        policy=replace(POLICY, act_on_orchestrated=True),
        attempt=1,
    ),
    Case(
        "watch.orchestrated act keeps the cooldown",
        Verdict.WAIT,
        Reason.COOLDOWN,
        attempts=(100,),
        target=Target("web.1.x", orchestrator="Kubernetes"),
        policy=replace(POLICY, act_on_orchestrated=True),
        retry_in=200,
    ),
    Case(
        "not opted in wins over an orchestrator",
        Verdict.DENY,
        Reason.NOT_OPTED_IN,
        target=Target("web.1.x", opted_in=False, orchestrator="Docker Swarm"),
    ),
    Case("one restart at a time per container", Verdict.WAIT, Reason.IN_FLIGHT, in_flight=True),
    Case(
        "a restart awaiting its verification is judged by it, not restarted again",
        Verdict.WAIT,
        Reason.VERIFYING,
        verifying=True,
    ),
    Case(
        "a verification holds even a container with no attempts counted (after a reset)",
        Verdict.WAIT,
        Reason.VERIFYING,
        attempts=(30,),
        reset=10,
        verifying=True,
    ),
    Case(
        "a crash loop is reported, never restarted: Docker's restart policy is at it",
        Verdict.DENY,
        Reason.REPORT_ONLY,
        target=Target("app", problem=ProblemType.CRASH_LOOP),
    ),
    Case(
        "a report-only problem is denied before its attempts would give up",
        Verdict.DENY,
        Reason.REPORT_ONLY,
        attempts=(10, 20, 30),
        target=Target("app", problem=ProblemType.CRASH_LOOP),
    ),
    Case(
        "an orchestrator's crash loop says the orchestrator owns it",
        Verdict.DENY,
        Reason.ORCHESTRATOR_MANAGED,
        target=Target("web.1.x", orchestrator="Nomad", problem=ProblemType.CRASH_LOOP),
    ),
    Case(
        "a problem that is restarted for goes through the other guards",
        Verdict.RESTART,
        Reason.ALLOWED,
        target=Target("app", problem=ProblemType.UNHEALTHY),
        attempt=1,
    ),
    Case(
        "a restart the engine refused (403) is never retried",
        Verdict.DENY,
        Reason.ENGINE_DENIED,
        attempts=(3000,),
        engine_denied=True,
    ),
    Case(
        "cooldown holds the second attempt",
        Verdict.WAIT,
        Reason.COOLDOWN,
        attempts=(100,),
        retry_in=200,
        attempt=2,
    ),
    Case(
        "one second before the cooldown ends",
        Verdict.WAIT,
        Reason.COOLDOWN,
        attempts=(299,),
        retry_in=1,
        attempt=2,
    ),
    Case(
        "cooldown over: second attempt", Verdict.RESTART, Reason.ALLOWED, attempts=(300,), attempt=2
    ),
    Case(
        "third attempt after two", Verdict.RESTART, Reason.ALLOWED, attempts=(700, 1400), attempt=3
    ),
    Case(
        "gives up after max attempts in the window",
        Verdict.GIVE_UP,
        Reason.MAX_ATTEMPTS,
        attempts=(400, 1000, 2000),
        retry_in=3600 - 2000,
    ),
    Case(
        "attempts older than the window do not count",
        Verdict.RESTART,
        Reason.ALLOWED,
        attempts=(3700, 4000, 5000),
        attempt=1,
    ),
    Case(
        "a reset forgets earlier attempts",
        Verdict.RESTART,
        Reason.ALLOWED,
        attempts=(1000, 1500, 2000),
        reset=900,
        attempt=1,
    ),
    Case(
        "a reset does not skip the cooldown",
        Verdict.WAIT,
        Reason.COOLDOWN,
        attempts=(1000, 1500, 100),
        reset=200,
        retry_in=200,
    ),
    Case(
        "backoff doubles the cooldown",
        Verdict.WAIT,
        Reason.COOLDOWN,
        attempts=(1000, 400),
        policy=replace(POLICY, backoff_factor=2.0),
        retry_in=200,
        attempt=3,
    ),
    Case(
        "backoff is capped by max_cooldown",
        Verdict.RESTART,
        Reason.ALLOWED,
        attempts=(3000, 2000, 700),
        policy=replace(
            POLICY, backoff_factor=10.0, max_attempts=5, max_cooldown=timedelta(seconds=600)
        ),
        attempt=4,
    ),
    Case(
        "host budget: max_per_minute",
        Verdict.WAIT,
        Reason.RATE_LIMITED,
        host_recent=tuple(range(5, 55, 5)),
        retry_in=60 - 50,
    ),
    Case(
        "host budget: restarts older than a minute are free",
        Verdict.RESTART,
        Reason.ALLOWED,
        host_recent=tuple(range(61, 200, 5)),
        attempt=1,
    ),
    Case("host budget: max_concurrent", Verdict.WAIT, Reason.CONCURRENCY, host_in_flight=2),
    Case(
        "host budget: max_concurrent, a long stop gives its slot up soon: retry then",
        Verdict.WAIT,
        Reason.CONCURRENCY,
        host_in_flight=2,
        slot_free_in=4,
        retry_in=4,
    ),
    Case(
        "host budget: one slot left",
        Verdict.RESTART,
        Reason.ALLOWED,
        host_in_flight=1,
        host_recent=tuple(range(5, 50, 5)),
        attempt=1,
    ),
    Case(
        "dry run decides but never restarts",
        Verdict.DENY,
        Reason.DRY_RUN,
        policy=replace(POLICY, dry_run=True),
        attempt=1,
    ),
    Case(
        "dry run still reports the cooldown",
        Verdict.WAIT,
        Reason.COOLDOWN,
        attempts=(10,),
        policy=replace(POLICY, dry_run=True),
        retry_in=290,
    ),
    Case(
        "a storm holds every restart until its hold ends",
        Verdict.WAIT,
        Reason.STORM,
        storm=StormHold(NOW + timedelta(seconds=120)),
        retry_in=120,
    ),
    Case(
        "a storm holds even a container that has attempts left and no cooldown",
        Verdict.WAIT,
        Reason.STORM,
        attempts=(3000,),
        storm=StormHold(NOW + timedelta(seconds=1)),
        retry_in=1,
    ),
    Case(
        "the storm's hold is over: one restart is let through as the canary",
        Verdict.RESTART,
        Reason.STORM_CANARY,
        storm=StormHold(NOW),
        attempt=1,
    ),
    Case(
        "a canary is restarting: every other restart waits for its verdict",
        Verdict.WAIT,
        Reason.STORM,
        storm=StormHold(ago(60), canary="db"),
    ),
    Case(
        "the last canary did not heal: another container is the next canary",
        Verdict.WAIT,
        Reason.STORM,
        storm=StormHold(ago(1), failed="app"),
    ),
    Case(
        "the last canary did not heal: any other container may be the next",
        Verdict.RESTART,
        Reason.STORM_CANARY,
        storm=StormHold(ago(1), failed="db"),
        attempt=1,
    ),
    Case(
        "the canary still waits for its own cooldown",
        Verdict.WAIT,
        Reason.COOLDOWN,
        attempts=(10,),
        storm=StormHold(ago(1)),
        retry_in=290,
    ),
    Case(
        "the canary still keeps to the host budget",
        Verdict.WAIT,
        Reason.CONCURRENCY,
        host_in_flight=2,
        storm=StormHold(ago(1)),
    ),
    Case(
        "the canary is never restarted in a dry run",
        Verdict.DENY,
        Reason.DRY_RUN,
        policy=replace(POLICY, dry_run=True),
        storm=StormHold(ago(1)),
        attempt=1,
    ),
    # A bystander: counted by the storm, but not one of the containers that made it.
    Case(
        "a storm holds a bystander one cooldown from when it turned unhealthy, not its hour",
        Verdict.WAIT,
        Reason.STORM,
        storm=StormHold(NOW + timedelta(hours=1), bystander_since=ago(60)),
        retry_in=240,
    ),
    Case(
        "a bystander is restarted once a cooldown has passed, the storm's hold still running",
        Verdict.RESTART,
        Reason.ALLOWED,
        storm=StormHold(NOW + timedelta(hours=1), bystander_since=ago(300)),
        attempt=1,
    ),
    Case(
        "a bystander waits one cooldown at most while a canary restarts",
        Verdict.WAIT,
        Reason.STORM,
        storm=StormHold(ago(60), canary="db", bystander_since=ago(100)),
        retry_in=200,
    ),
    Case(
        "a bystander is let through after its cooldown while a canary restarts",
        Verdict.RESTART,
        Reason.ALLOWED,
        storm=StormHold(ago(60), canary="db", bystander_since=ago(301)),
        attempt=1,
    ),
    Case(
        "a bystander is never the canary: its restart says nothing of the storm's cause",
        Verdict.RESTART,
        Reason.ALLOWED,
        storm=StormHold(ago(1), bystander_since=ago(400)),
        attempt=1,
    ),
    Case(
        "a bystander that was the last canary is held no longer than one cooldown",
        Verdict.RESTART,
        Reason.ALLOWED,
        storm=StormHold(ago(1), failed="app", bystander_since=ago(400)),
        attempt=1,
    ),
    Case(
        "a bystander's one cooldown is its own, a label's longer one too",
        Verdict.WAIT,
        Reason.STORM,
        policy=replace(POLICY, cooldown=timedelta(seconds=900)),
        storm=StormHold(NOW + timedelta(hours=1), bystander_since=ago(400)),
        retry_in=500,
    ),
    Case(
        "a bystander stamped ahead of the clock is held one cooldown from now, no longer",
        Verdict.WAIT,
        Reason.STORM,
        storm=StormHold(NOW + timedelta(hours=1), bystander_since=NOW + timedelta(hours=2)),
        retry_in=300,
    ),
    Case(
        "a bystander past its hold still keeps its own cooldown since its last restart",
        Verdict.WAIT,
        Reason.COOLDOWN,
        attempts=(100,),
        storm=StormHold(NOW + timedelta(hours=1), bystander_since=ago(400)),
        retry_in=200,
    ),
    Case(
        "a bystander past its hold still keeps to the host budget",
        Verdict.WAIT,
        Reason.CONCURRENCY,
        host_in_flight=2,
        storm=StormHold(NOW + timedelta(hours=1), bystander_since=ago(400)),
    ),
    Case(
        "a storm never lets Guardian restart itself",
        Verdict.DENY,
        Reason.SELF,
        target=Target("guardian", is_self=True),
        storm=StormHold(ago(1)),
    ),
    Case(
        "max_attempts 1 gives up after one",
        Verdict.GIVE_UP,
        Reason.MAX_ATTEMPTS,
        attempts=(400,),
        policy=replace(POLICY, max_attempts=1),
        retry_in=3200,
    ),
    # The wall clock stepped back: stamps ahead of NOW (negative "seconds ago") count as now.
    Case(
        "attempts made a day ahead still count after the clock is corrected",
        Verdict.GIVE_UP,
        Reason.MAX_ATTEMPTS,
        attempts=(-86400, -86700, -87000),
        retry_in=3600,
    ),
    Case(
        "the cooldown runs from now for an attempt stamped ahead of the clock",
        Verdict.WAIT,
        Reason.COOLDOWN,
        attempts=(-3600,),
        retry_in=300,
        attempt=2,
    ),
    Case(
        "one attempt before a step back and two after still reach the cap",
        Verdict.GIVE_UP,
        Reason.MAX_ATTEMPTS,
        attempts=(-3000, 900, 400),
        retry_in=2700,
    ),
    Case(
        "restarts stamped ahead of the clock use the host budget",
        Verdict.WAIT,
        Reason.RATE_LIMITED,
        host_recent=(-7200,) * 10,
        retry_in=60,
        attempt=1,
    ),
    Case(
        "a reset stamped ahead of the clock orders nothing: the window's attempts count",
        Verdict.GIVE_UP,
        Reason.MAX_ATTEMPTS,
        attempts=(1500, 1200, 900),
        reset=-600,
        retry_in=2100,
    ),
    Case(
        "a clock stepped forward past the window frees the budget (a new run cannot know)",
        Verdict.RESTART,
        Reason.ALLOWED,
        attempts=(86400 + 30, 86400 + 20, 86400 + 10),
        attempt=1,
    ),
]


CASES += [
    # -- guardian.action ----------------------------------------------------------------------
    Case(
        "action notify: never acts, whatever else holds",
        Verdict.DENY,
        Reason.NOTIFY_ONLY,
        policy=replace(POLICY, action="notify"),
    ),
    Case(
        "action notify on a container Guardian must never touch: still self first",
        Verdict.DENY,
        Reason.SELF,
        target=Target("guardian", is_self=True),
        policy=replace(POLICY, action="notify"),
    ),
    Case(
        "action stop: the allowed action is a stop",
        Verdict.STOP,
        Reason.ALLOWED,
        policy=replace(POLICY, action="stop"),
        attempt=1,
    ),
    Case(
        "action stop keeps to the cooldown like a restart",
        Verdict.WAIT,
        Reason.COOLDOWN,
        attempts=(100,),
        policy=replace(POLICY, action="stop"),
        retry_in=200,
    ),
    Case(
        "action stop in a dry run: nothing",
        Verdict.DENY,
        Reason.DRY_RUN,
        policy=replace(POLICY, action="stop", dry_run=True),
    ),
    Case(
        "action ask without an answer: waits for a person",
        Verdict.WAIT,
        Reason.AWAITING_APPROVAL,
        policy=ASK,
    ),
    Case(
        "action ask, approved: one restart",
        Verdict.RESTART,
        Reason.APPROVED,
        policy=ASK,
        approval=approval(),
        attempt=1,
    ),
    Case(
        "action ask, an approval already used: waits for a new one",
        Verdict.WAIT,
        Reason.AWAITING_APPROVAL,
        policy=ASK,
        approval=approval(used=True),
    ),
    Case(
        "action ask, an expired approval does nothing",
        Verdict.WAIT,
        Reason.AWAITING_APPROVAL,
        policy=ASK,
        approval=approval(age=4000, ttl=3600),
    ),
    Case(
        "action ask, denied: never for this incident",
        Verdict.DENY,
        Reason.APPROVAL_DENIED,
        policy=ASK,
        approval=approval(approved=False),
    ),
    Case(
        "action ask, approved but in cooldown: the cooldown still holds it",
        Verdict.WAIT,
        Reason.COOLDOWN,
        attempts=(100,),
        policy=ASK,
        approval=approval(),
        retry_in=200,
    ),
    Case(
        "action ask, approved but silenced: held until the silence ends",
        Verdict.WAIT,
        Reason.SILENCED,
        policy=ASK,
        approval=approval(),
        silence=Silence(1, "h", "app", ago(10), NOW + timedelta(seconds=50), "upgrade", "ana"),
        retry_in=50,
    ),
    Case(
        "action ask, approved but the host budget is used: waits",
        Verdict.WAIT,
        Reason.RATE_LIMITED,
        policy=ASK,
        approval=approval(),
        host_recent=tuple(range(5, 55, 5)),
        retry_in=10,
    ),
    Case(
        "action ask, approved, attempts exhausted: gives up all the same",
        Verdict.GIVE_UP,
        Reason.MAX_ATTEMPTS,
        attempts=(1000, 2000, 3000),
        policy=ASK,
        approval=approval(),
        retry_in=600,
    ),
    # -- patience (restart.act_after) --------------------------------------------------------
    Case(
        "act_after: a problem younger than act_after waits until it has lasted that long",
        Verdict.WAIT,
        Reason.ACT_AFTER,
        target=since(20),
        policy=PATIENT,
        retry_in=40,
    ),
    Case(
        "act_after: a problem that has lasted act_after is acted on",
        Verdict.RESTART,
        Reason.ALLOWED,
        target=since(60),
        policy=PATIENT,
        attempt=1,
    ),
    Case(
        "act_after: a problem stamped ahead of the clock (a step back) counts from now",
        Verdict.WAIT,
        Reason.ACT_AFTER,
        target=since(-3600),
        policy=PATIENT,
        retry_in=60,
    ),
    Case(
        "act_after: unknown start, no patience to apply",
        Verdict.RESTART,
        Reason.ALLOWED,
        policy=PATIENT,
        attempt=1,
    ),
    Case(
        "act_after does not delay giving up",
        Verdict.GIVE_UP,
        Reason.MAX_ATTEMPTS,
        attempts=(1000, 2000, 3000),
        target=since(1),
        policy=PATIENT,
        retry_in=600,
    ),
    Case(
        "act_after and ask: patience first, then the person",
        Verdict.WAIT,
        Reason.ACT_AFTER,
        target=since(1),
        policy=replace(ASK, act_after=timedelta(seconds=60)),
        approval=approval(),
        retry_in=59,
    ),
    Case(
        "ladder: restarts spent, the next rung is a recreate",
        Verdict.RECREATE,
        Reason.ESCALATED,
        attempts=(1000, 2000, 3000),
        policy=LADDER,
        attempt=3,
    ),
    Case(
        "ladder: the recreate taken did not help, the stop is next",
        Verdict.STOP,
        Reason.ESCALATED,
        attempts=(1000, 2000, 3000),
        rungs=(("recreate", 600),),
        policy=LADDER,
    ),
    Case(
        "ladder: every rung taken, give up",
        Verdict.GIVE_UP,
        Reason.MAX_ATTEMPTS,
        attempts=(1000, 2000, 3000),
        rungs=(("recreate", 900), ("stop", 600)),
        policy=LADDER,
        retry_in=600,
    ),
    Case(
        "ladder: a rung waits the cooldown of the last attempt",
        Verdict.WAIT,
        Reason.COOLDOWN,
        attempts=(1000, 2000, 3000),
        rungs=(("recreate", 100),),
        policy=LADDER,
        retry_in=200,
    ),
    Case(
        "ladder: a rung waits for the host's budget like a restart",
        Verdict.WAIT,
        Reason.RATE_LIMITED,
        attempts=(1000, 2000, 3000),
        host_recent=(10,) * 10,
        policy=LADDER,
        retry_in=50,
    ),
    Case(
        "ladder: a storm holds a rung as it holds restarts",
        Verdict.WAIT,
        Reason.STORM,
        attempts=(1000, 2000, 3000),
        storm=StormHold(until=NOW + timedelta(seconds=30)),
        policy=LADDER,
        retry_in=30,
    ),
    Case(
        "ladder: a silence holds a rung",
        Verdict.WAIT,
        Reason.SILENCED,
        attempts=(1000, 2000, 3000),
        silence=Silence(1, "h", "app", ago(60), NOW + timedelta(seconds=90), "upgrade", "ana"),
        policy=LADDER,
        retry_in=90,
    ),
    Case(
        "ladder: a rung in escalate_ask waits for a person",
        Verdict.WAIT,
        Reason.AWAITING_APPROVAL,
        attempts=(1000, 2000, 3000),
        policy=replace(LADDER, escalate_ask=("recreate",)),
    ),
    Case(
        "ladder: a rung in escalate_ask taken with a person's approval",
        Verdict.RECREATE,
        Reason.APPROVED,
        attempts=(1000, 2000, 3000),
        policy=replace(LADDER, escalate_ask=("recreate",)),
        approval=approval(),
    ),
    Case(
        "ladder: ask asks before every rung",
        Verdict.WAIT,
        Reason.AWAITING_APPROVAL,
        attempts=(1000, 2000, 3000),
        rungs=(("recreate", 600),),
        policy=replace(LADDER, action="ask"),
    ),
    Case(
        "ladder: a dry run takes no rung",
        Verdict.DENY,
        Reason.DRY_RUN,
        attempts=(1000, 2000, 3000),
        policy=replace(LADDER, dry_run=True),
    ),
    Case(
        "ladder: restarts left come first",
        Verdict.RESTART,
        Reason.ALLOWED,
        attempts=(2000, 3000),
        policy=LADDER,
        attempt=3,
    ),
    Case(
        "ladder: rungs older than the window are given back with the restarts",
        Verdict.RESTART,
        Reason.ALLOWED,
        attempts=(4000,),
        rungs=(("recreate", 3700), ("stop", 3650)),
        policy=LADDER,
    ),
    Case(
        "ladder: a reset gives the rungs back",
        Verdict.RESTART,
        Reason.ALLOWED,
        attempts=(3000, 2900, 2800),
        rungs=(("recreate", 2500),),
        reset=1000,
        policy=LADDER,
    ),
    Case(
        "ladder: a label that narrowed it to stop skips the recreate",
        Verdict.STOP,
        Reason.ESCALATED,
        attempts=(1000, 2000, 3000),
        policy=replace(LADDER, escalate=("stop",)),
    ),
    Case(
        "a person's usable rollback request that every rule lets through is a rollback",
        Verdict.ROLLBACK,
        Reason.REQUESTED,
        target=ROLLBACK,
        request=request(),
    ),
    Case(
        "a person's rollback asks no approval on top, whatever the action",
        Verdict.ROLLBACK,
        Reason.REQUESTED,
        target=ROLLBACK,
        request=request(),
        policy=ASK,
    ),
    Case(
        "a person's rollback waits for a silence like every action",
        Verdict.WAIT,
        Reason.SILENCED,
        target=ROLLBACK,
        request=request(),
        silence=Silence(1, "h", "app", ago(60), NOW + timedelta(seconds=600), "deploy", "bo"),
        retry_in=600,
    ),
    Case(
        "a person's rollback waits for the cooldown of the last attempt",
        Verdict.WAIT,
        Reason.COOLDOWN,
        target=ROLLBACK,
        request=request(),
        attempts=(1,),
        retry_in=POLICY.cooldown.total_seconds() - 1,
    ),
    Case(
        "a person's rollback request used or expired is refused",
        Verdict.DENY,
        Reason.REQUESTED,
        target=ROLLBACK,
        request=request(used=True),
    ),
    Case(
        "a rollback asked without a request is refused, never a restart",
        Verdict.DENY,
        Reason.REQUESTED,
        target=ROLLBACK,
    ),
    Case(
        "a person's rollback is denied in a dry run",
        Verdict.DENY,
        Reason.DRY_RUN,
        target=ROLLBACK,
        request=request(),
        policy=replace(POLICY, dry_run=True),
    ),
    Case(
        "ladder: a container whose action is stop has no ladder",
        Verdict.GIVE_UP,
        Reason.MAX_ATTEMPTS,
        attempts=(1000, 2000, 3000),
        policy=replace(LADDER, action="stop"),
        retry_in=600,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_decide(case: Case) -> None:
    history = AttemptHistory(
        attempts=tuple(ago(s) for s in case.attempts),
        reset_at=ago(case.reset) if case.reset is not None else None,
        in_flight=case.in_flight,
        verifying=case.verifying,
        engine_denied=case.engine_denied,
        rungs=tuple((rung, ago(s)) for rung, s in case.rungs),
    )
    slot_free_at = NOW + timedelta(seconds=case.slot_free_in) if case.slot_free_in else None
    host = HostLoad(
        tuple(ago(s) for s in case.host_recent), case.host_in_flight, slot_free_at, case.storm
    )
    d = decide(
        case.target, history, host, case.policy, NOW, case.silence, case.approval, case.request
    )
    assert (d.verdict, d.reason) == (case.verdict, case.reason)
    expected_retry = NOW + timedelta(seconds=case.retry_in) if case.retry_in is not None else None
    assert d.retry_at == expected_retry
    if case.attempt is not None:
        assert d.attempt == case.attempt
    assert d.restart == (case.verdict is Verdict.RESTART)


@pytest.mark.parametrize(
    ("healthy_for", "last_reset", "due"),
    [
        (None, None, False),
        (599, None, False),
        (600, None, True),
        (900, 1000, True),  # reset before this healthy streak began
        (900, 100, False),  # already reset during this streak
    ],
)
def test_reset_only_after_continuous_health(healthy_for, last_reset, due) -> None:
    since = ago(healthy_for) if healthy_for is not None else None
    reset = ago(last_reset) if last_reset is not None else None
    assert reset_due(since, reset, POLICY, NOW) is due


def test_counted_attempts_respects_window_and_reset() -> None:
    history = AttemptHistory((ago(4000), ago(1000), ago(10)), reset_at=ago(500))
    assert counted_attempts(history, POLICY, NOW) == [ago(10)]


# -- properties over random failure sequences ------------------------------------------------

# Small, dense times so that boundaries (exactly at the cooldown, the window edge) get hit.
seconds = st.sampled_from([0, 1, 5, 10, 30, 60, 120, 300]).map(lambda s: timedelta(seconds=s))
policies = st.builds(
    RestartPolicy,
    cooldown=seconds,
    max_attempts=st.integers(1, 5),
    window=st.sampled_from([60, 120, 300, 600]).map(lambda s: timedelta(seconds=s)),
    backoff_factor=st.sampled_from([1.0, 1.5, 2.0]),
    max_cooldown=st.sampled_from([300, 600]).map(lambda s: timedelta(seconds=s)),
    reset_after=seconds,
    max_per_minute=st.integers(1, 5),
    max_concurrent=st.integers(1, 3),
)

# Each step: seconds that pass, which container asks, whether it is healthy then, and whether
# restarts still in flight finish.
steps = st.lists(
    st.tuples(st.integers(0, 40), st.integers(0, 3), st.booleans(), st.booleans()),
    min_size=1,
    max_size=120,
)


def simulate(policy: RestartPolicy, script: list[tuple[int, int, bool, bool]]):
    """Drive decide() like the healer does; return the restarts it allowed (time, container,
    restarts running at that moment) and every counter reset per container."""
    now = NOW
    restarts: list[tuple[datetime, int, int]] = []
    resets: dict[int, list[datetime]] = {}
    healthy_since: dict[int, datetime] = {}
    running: set[int] = set()
    for wait, c, healthy, finish in script:
        now += timedelta(seconds=wait)
        if finish:
            running.clear()
        last_reset = resets[c][-1] if resets.get(c) else None
        if healthy:
            since = healthy_since.setdefault(c, now)
            if reset_due(since, last_reset, policy, now):
                resets.setdefault(c, []).append(now)
            continue
        healthy_since.pop(c, None)
        history = AttemptHistory(
            tuple(t for t, who, _ in restarts if who == c), last_reset, c in running
        )
        host = HostLoad(tuple(t for t, _, _ in restarts), len(running))
        d = decide(Target(f"c{c}"), history, host, policy, now)
        if d.restart:
            restarts.append((now, c, len(running) + 1))
            running.add(c)
    return restarts, resets


def times_of(restarts, c):
    return [t for t, who, _ in restarts if who == c]


@settings(max_examples=400, deadline=None)
@given(policies, steps)
def test_never_two_restarts_closer_than_the_cooldown(policy, script) -> None:
    restarts, _ = simulate(policy, script)
    for c in {who for _, who, _ in restarts}:
        times = times_of(restarts, c)
        for a, b in itertools.pairwise(times):
            assert b - a >= policy.cooldown


@settings(max_examples=400, deadline=None)
@given(policies, steps)
def test_never_more_than_max_attempts_in_a_window_since_the_last_reset(policy, script) -> None:
    restarts, resets = simulate(policy, script)
    for c in {who for _, who, _ in restarts}:
        times = times_of(restarts, c)
        for t in times:
            last_reset = max((r for r in resets.get(c, []) if r <= t), default=None)
            start = t - policy.window
            if last_reset is not None and last_reset > start:
                start = last_reset
            assert sum(1 for u in times if start < u <= t) <= policy.max_attempts


@settings(max_examples=400, deadline=None)
@given(policies, steps)
def test_host_budget_is_never_exceeded(policy, script) -> None:
    restarts, _ = simulate(policy, script)
    times = [t for t, _, _ in restarts]
    for t in times:
        in_minute = [u for u in times if t - timedelta(minutes=1) < u <= t]
        assert len(in_minute) <= policy.max_per_minute
    assert all(running <= policy.max_concurrent for _, _, running in restarts)


# -- the same properties while the wall clock steps -------------------------------------------

# Each step as above, plus a step of the wall clock (seconds) and whether Guardian restarts
# before it (a new run: its memory of this run's stamps is gone). Across runs the clock only
# steps back (a clock corrected after running ahead), and no run follows a step forward: a new
# run cannot tell a step forward before it from time that passed.
wall_steps = st.sampled_from([0, 0, 0, 5, -5, 30, -30, 3600, -3600, 86400, -86400])
stepped_script = st.lists(
    st.tuples(
        st.integers(0, 40),
        st.integers(0, 3),
        st.booleans(),
        st.booleans(),
        wall_steps,
        st.integers(0, 9).map(lambda n: n == 0),
    ),
    min_size=1,
    max_size=120,
)


def simulate_with_steps(policy: RestartPolicy, script):
    """Drive decide() as the service feeds it (the store's stamps through RunStamps, healthy
    streaks moved by each step) while the wall clock steps; return the restarts (monotonic
    time, container, restarts running) and every counter reset (monotonic time)."""
    clock = FakeClock(NOW)
    stamps = RunStamps(clock)
    stored: list[tuple[datetime, int]] = []  # restart requests as the store keeps them
    stored_resets: dict[int, datetime] = {}
    restarts: list[tuple[float, int, int]] = []
    resets: dict[int, list[float]] = {}
    healthy_since: dict[int, datetime] = {}
    running: set[int] = set()
    forward = False
    for wait, c, healthy, finish, step, new_run in script:
        clock.advance(wait)
        if new_run and not forward:
            stamps, healthy_since, running = RunStamps(clock), {}, set()
            step = -abs(step)
        else:  # a streak's start is held on the monotonic clock (HealthyStreaks)
            healthy_since = {k: t + timedelta(seconds=step) for k, t in healthy_since.items()}
            forward = forward or step > 0
        clock.step(step)
        if finish:
            running.clear()
        now, name = clock.now(), f"c{c}"
        last_reset = stamps.last_reset("h", name, stored_resets.get(c))
        if healthy:
            since = healthy_since.setdefault(c, now)
            if reset_due(since, last_reset, policy, now):
                stored_resets[c] = now
                stamps.wrote_reset("h", name, now)
                resets.setdefault(c, []).append(clock.monotonic())
            continue
        healthy_since.pop(c, None)

        def read(after: datetime, who: int | None = None) -> tuple[datetime, ...]:
            return tuple(t for t, w in stored if t > after and who in (None, w))

        horizon = now - max(policy.window, policy.max_cooldown, policy.cooldown, RATE)
        mine = stamps.restart_times("h", horizon, lambda a, c=c: read(a, c), name, name)
        everyone = stamps.restart_times("h", now - RATE, read)
        history = AttemptHistory(mine, last_reset, c in running)
        d = decide(Target(name), history, HostLoad(everyone, len(running)), policy, now)
        if d.restart:
            stored.append((now, c))
            stamps.wrote_restart("h", name, name, now)
            restarts.append((clock.monotonic(), c, len(running) + 1))
            running.add(c)
    return restarts, resets


@settings(max_examples=400, deadline=None)
@given(policies, stepped_script)
def test_the_cap_holds_in_real_time_over_any_sequence_of_clock_steps(policy, script) -> None:
    """Measured on the monotonic clock: the cooldown, max_attempts within the window since the
    last reset, and the host budget, however the wall clock stepped."""
    restarts, resets = simulate_with_steps(policy, script)
    cooldown, window = policy.cooldown.total_seconds(), policy.window.total_seconds()
    for c in {who for _, who, _ in restarts}:
        times = [t for t, who, _ in restarts if who == c]
        for a, b in itertools.pairwise(times):
            assert b - a >= cooldown
        for t in times:
            last_reset = max((r for r in resets.get(c, []) if r <= t), default=None)
            start = t - window if last_reset is None else max(t - window, last_reset)
            assert sum(1 for u in times if start < u <= t) <= policy.max_attempts
    times = [t for t, _, _ in restarts]
    for t in times:
        assert sum(1 for u in times if t - 60 < u <= t) <= policy.max_per_minute
    assert all(n <= policy.max_concurrent for _, _, n in restarts)


offsets = st.integers(-7200, 7200).map(lambda s: NOW + timedelta(seconds=s))


@settings(max_examples=300, deadline=None)
@given(
    policies,
    offsets,
    offsets,
    st.sampled_from([None, "db", "app"]),
    st.sampled_from([None, "db", "app"]),
)
def test_a_storm_holds_a_bystander_one_cooldown_at_most(policy, until, since, canary, failed):
    """Whatever stage the storm is in, a container that did not make it waits for it no longer
    than one cooldown from when it turned unhealthy (or from now, for a stamp ahead)."""
    hold = StormHold(until, canary, failed, bystander_since=since)
    d = decide(Target("app"), AttemptHistory(), HostLoad(storm=hold), policy, NOW)
    limit = min(since, NOW) + policy.cooldown
    if d.reason is Reason.STORM:
        assert limit > NOW and d.retry_at == limit
    else:
        assert limit <= NOW and d.reason is not Reason.STORM_CANARY


def climb(policy: RestartPolicy, script: list[tuple[int, int, bool, bool]]):
    """simulate() with the ladder: each action decide() allows (a restart or a rung), per
    container, as (time, what) in order, and the resets."""
    now = NOW
    done: dict[int, list[tuple[datetime, str, int]]] = {}
    resets: dict[int, list[tuple[datetime, int]]] = {}  # (time, step): steps may share a time
    healthy_since: dict[int, datetime] = {}
    for step, (wait, c, healthy, _) in enumerate(script):
        now += timedelta(seconds=wait)
        last_reset = resets[c][-1][0] if resets.get(c) else None
        if healthy:
            since = healthy_since.setdefault(c, now)
            if reset_due(since, last_reset, policy, now):
                resets.setdefault(c, []).append((now, step))
            continue
        healthy_since.pop(c, None)
        mine = done.setdefault(c, [])
        history = AttemptHistory(
            tuple(t for t, what, _ in mine if what == "restart"),
            last_reset,
            rungs=tuple((what, t) for t, what, _ in mine if what != "restart"),
        )
        d = decide(Target(f"c{c}"), history, HostLoad(), policy, now)
        if d.verdict in (Verdict.RESTART, Verdict.RECREATE, Verdict.STOP):
            mine.append((now, str(d.verdict), step))
    return done, resets


@settings(max_examples=400, deadline=None)
@given(policies, steps, st.sampled_from([("recreate", "stop"), ("recreate",), ("stop",)]))
def test_the_ladder_climbs_each_rung_once_after_the_restarts_and_waits_each_cooldown(
    policy, script, ladder
) -> None:
    policy = replace(policy, escalate=ladder)
    done, resets = climb(policy, script)
    for c, actions in done.items():
        for (a, _, _), (b, _, _) in itertools.pairwise(actions):
            assert b - a >= policy.cooldown
        for i, (at, what, step) in enumerate(actions):
            # What counts at `at`: after the window's start and the last reset before it.
            start = max([at - policy.window, *(r for r, s in resets.get(c, ()) if s < step)])
            before = [w for t, w, _ in actions[:i] if t > start]
            if what == "restart":
                assert before.count("restart") < policy.max_attempts
            else:
                assert before.count("restart") >= policy.max_attempts  # restarts first
                assert what not in before  # each rung once
                # The rung above the highest still counted: it only climbs, and skips none.
                highest = max((ladder.index(w) for w in before if w != "restart"), default=-1)
                assert ladder.index(what) == highest + 1
