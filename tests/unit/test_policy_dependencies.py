"""decide(): the storm and dependency guards, table-driven over a fake clock."""

from __future__ import annotations

from datetime import timedelta

import pytest

from guardian.core.model import Reason, Verdict
from guardian.core.policy import AttemptHistory, HostLoad, RestartPolicy, Target, decide
from guardian.core.storm import StormHold
from tests.fakes import T0, FakeClock

POLICY = RestartPolicy(cooldown=timedelta(seconds=60), max_attempts=3, window=timedelta(hours=1))
DB = ("db (incident 4, unhealthy)",)
HOLD = StormHold(until=T0 + timedelta(minutes=5))


def ago(clock: FakeClock, seconds: float):
    return clock.now() - timedelta(seconds=seconds)


# (case, target, history builder, host, policy, expected verdict, expected reason)
CASES = [
    ("healthy deps and no storm: allowed", Target("app"), (), HostLoad(), POLICY,
     Verdict.RESTART, Reason.ALLOWED),
    ("an unhealthy dependency holds the restart", Target("app", unhealthy_dependencies=DB), (),
     HostLoad(), POLICY, Verdict.WAIT, Reason.DEPENDENCY_UNHEALTHY),
    ("a storm holds every restart", Target("app"), (), HostLoad(storm=HOLD), POLICY,
     Verdict.WAIT, Reason.STORM),
    ("storm wins over an unhealthy dependency", Target("app", unhealthy_dependencies=DB), (),
     HostLoad(storm=HOLD), POLICY, Verdict.WAIT, Reason.STORM),
    ("never itself, even in a storm", Target("guardian", is_self=True), (),
     HostLoad(storm=HOLD), POLICY, Verdict.DENY, Reason.SELF),
    ("not opted in beats dependencies", Target("x", opted_in=False, unhealthy_dependencies=DB),
     (), HostLoad(), POLICY, Verdict.DENY, Reason.NOT_OPTED_IN),
    ("a dependency hold does not spend attempts: exhausted still waits for the dependency",
     Target("app", unhealthy_dependencies=DB), (3000, 2000, 1000), HostLoad(), POLICY,
     Verdict.WAIT, Reason.DEPENDENCY_UNHEALTHY),
    ("dependency healthy again: the budget applies", Target("app"), (3000, 2000, 1000),
     HostLoad(), POLICY, Verdict.GIVE_UP, Reason.MAX_ATTEMPTS),
    ("dependency healthy again: the cooldown applies", Target("app"), (10,), HostLoad(),
     POLICY, Verdict.WAIT, Reason.COOLDOWN),
    ("storm over (acknowledged): dry run still only records", Target("app"), (), HostLoad(),
     RestartPolicy(dry_run=True), Verdict.DENY, Reason.DRY_RUN),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "target", "attempts_ago", "host", "policy", "verdict", "reason"),
    CASES,
    ids=[c[0] for c in CASES],
)
def test_decide_with_dependencies_and_storms(
    case, target, attempts_ago, host, policy, verdict, reason
):
    clock = FakeClock()
    history = AttemptHistory(attempts=tuple(ago(clock, s) for s in attempts_ago))
    decision = decide(target, history, host, policy, clock.now())
    assert (decision.verdict, decision.reason) == (verdict, reason)


def test_dependency_decision_names_the_dependency_and_its_incident():
    clock = FakeClock()
    decision = decide(
        Target("app", unhealthy_dependencies=DB), AttemptHistory(), HostLoad(), POLICY, clock.now()
    )
    assert decision.detail == "waiting for db (incident 4, unhealthy)"


def test_restart_allowed_once_storm_ends_after_the_clock_moves_on():
    clock = FakeClock()
    history = AttemptHistory()
    assert decide(Target("a"), history, HostLoad(storm=HOLD), POLICY, clock.now()).reason is (
        Reason.STORM
    )
    clock.advance(minutes=5)
    assert decide(Target("a"), history, HostLoad(), POLICY, clock.now()).restart
