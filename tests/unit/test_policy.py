"""decide(): table-driven cases over a fake clock, and properties over random failure sequences."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guardian.core.model import ProblemType, Reason, Verdict
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
from tests.fakes import T0

NOW = T0
POLICY = RestartPolicy(
    cooldown=timedelta(seconds=300),
    max_attempts=3,
    window=timedelta(hours=1),
    reset_after=timedelta(seconds=600),
    max_per_minute=10,
    max_concurrent=2,
)


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
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_decide(case: Case) -> None:
    history = AttemptHistory(
        attempts=tuple(ago(s) for s in case.attempts),
        reset_at=ago(case.reset) if case.reset is not None else None,
        in_flight=case.in_flight,
        verifying=case.verifying,
        engine_denied=case.engine_denied,
    )
    host = HostLoad(tuple(ago(s) for s in case.host_recent), case.host_in_flight, case.storm)
    d = decide(case.target, history, host, case.policy, NOW)
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
