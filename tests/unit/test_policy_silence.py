"""decide() with a maintenance silence: table rows, and expiry stepped with a FakeClock."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest

from guardian.core.model import Reason, Silence, Verdict
from guardian.core.policy import AttemptHistory, HostLoad, RestartPolicy, Target, decide
from tests.fakes import T0, FakeClock

POLICY = RestartPolicy(cooldown=timedelta(seconds=300), max_attempts=3, window=timedelta(hours=1))


def silence(
    start: float = -60, length: float = 7200, ended: float | None = None, container: str = "app"
) -> Silence:
    """A silence from `start` seconds after T0, lasting `length` seconds."""
    created = T0 + timedelta(seconds=start)
    return Silence(
        1,
        "host",
        container,
        created,
        created + timedelta(seconds=length),
        "maintenance",
        "alice",
        ended_at=T0 + timedelta(seconds=ended) if ended is not None else None,
    )


def ago(seconds: float) -> datetime:
    return T0 - timedelta(seconds=seconds)


@dataclass
class Case:
    name: str
    silence: Silence | None
    verdict: Verdict
    reason: Reason
    target: Target = field(default_factory=lambda: Target("app"))
    history: AttemptHistory = field(default_factory=AttemptHistory)
    policy: RestartPolicy = POLICY
    retry_at: datetime | None = None


CASES = [
    Case("no silence: allowed", None, Verdict.RESTART, Reason.ALLOWED),
    Case(
        "an active silence holds the restart until it ends",
        silence(),
        Verdict.WAIT,
        Reason.SILENCED,
        retry_at=T0 + timedelta(seconds=7140),
    ),
    Case(
        "an expired silence no longer holds", silence(-7200, 3600), Verdict.RESTART, Reason.ALLOWED
    ),
    Case("a lifted silence no longer holds", silence(ended=-1), Verdict.RESTART, Reason.ALLOWED),
    Case(
        "a silence set in the future does not hold yet",
        silence(60),
        Verdict.RESTART,
        Reason.ALLOWED,
    ),
    Case(
        "guardian itself stays denied, silence or not",
        silence(),
        Verdict.DENY,
        Reason.SELF,
        target=Target("app", is_self=True),
    ),
    Case(
        "not opted in stays denied, silence or not",
        silence(),
        Verdict.DENY,
        Reason.NOT_OPTED_IN,
        target=Target("app", opted_in=False),
    ),
    Case(
        "silence wins over exhausted attempts: no escalation during maintenance",
        silence(),
        Verdict.WAIT,
        Reason.SILENCED,
        history=AttemptHistory(attempts=(ago(100), ago(700), ago(1400))),
        retry_at=T0 + timedelta(seconds=7140),
    ),
    Case(
        "silence wins over cooldown",
        silence(),
        Verdict.WAIT,
        Reason.SILENCED,
        history=AttemptHistory(attempts=(ago(10),)),
        retry_at=T0 + timedelta(seconds=7140),
    ),
    Case(
        "silence wins over dry run",
        silence(),
        Verdict.WAIT,
        Reason.SILENCED,
        policy=RestartPolicy(dry_run=True),
        retry_at=T0 + timedelta(seconds=7140),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_decide_with_silence(case: Case) -> None:
    d = decide(case.target, case.history, HostLoad(), case.policy, T0, case.silence)
    assert (d.verdict, d.reason) == (case.verdict, case.reason)
    assert d.retry_at == case.retry_at


def test_silence_expires_exactly_at_its_end() -> None:
    clock = FakeClock()
    s = Silence(1, "host", "app", clock.now(), clock.now() + timedelta(hours=2), "upgrade", "bob")

    def ask() -> Reason:
        return decide(Target("app"), AttemptHistory(), HostLoad(), POLICY, clock.now(), s).reason

    assert ask() is Reason.SILENCED
    clock.advance(hours=1, minutes=59, seconds=59)
    assert ask() is Reason.SILENCED
    clock.advance(seconds=1)
    assert ask() is Reason.ALLOWED
