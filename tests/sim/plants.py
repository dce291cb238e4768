"""Bugs planted in Guardian on purpose, to prove the oracle can fail (an oracle that cannot fail
is no oracle): each patches one guard away for the duration of a run, in this process only.
`--plant NAME` replays a seed with the same bug planted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import guardian.core.policy as policy
import guardian.service.healing.decisions as decisions
import guardian.service.healing.verifier as verifier
from guardian.core.model import (
    ContainerSnapshot,
    Decision,
    HealthCheckResult,
    Outcome,
    Reason,
    Verdict,
)
from guardian.service.state.person_stops import PersonStops
from guardian.service.watchers.stop_records import StopRecords

_decide = decisions.decide


def _always_restart(*args: Any, **kwargs: Any) -> Decision:
    """The decision point lets through every request it would hold back or give up on: a
    second restart while one is in flight or awaits its verdict, every budget ignored (what
    it refuses for good, or leaves to a person, it still refuses)."""
    decision, policy = _decide(*args, **kwargs), args[3]
    if (
        policy.action == "restart"
        and decision.verdict in (Verdict.WAIT, Verdict.GIVE_UP)
        and decision.reason is not Reason.SILENCED
    ):
        return Decision(Verdict.RESTART, Reason.ALLOWED, attempt=1, max_attempts=3)
    return decision


def _without(*names: str) -> tuple[policy.Rule, ...]:
    """decide()'s rules with those named letting every request through."""
    return tuple(
        rule._replace(check=lambda case: None) if rule.name in names else rule
        for rule in policy.RULES
    )


_judge = verifier.judge


def _healed_anyway(*args: Any, **kwargs: Any) -> Outcome | None:
    """A restart that did not heal is judged healed."""
    outcome = _judge(*args, **kwargs)
    return Outcome.SUCCEEDED if outcome is Outcome.UNHEALTHY_AFTER_RESTART else outcome


def _never_held(self: PersonStops, container_id: str) -> bool:
    """A person's stop, kill or removal forgotten at once: nothing holds Guardian back."""
    return False


def _never_found(
    self: StopRecords, snap: ContainerSnapshot, result: HealthCheckResult
) -> HealthCheckResult:
    """A person's stop neither the store kept nor the engine's record shows."""
    return result


PLANTS: dict[str, Callable[[], list[tuple[object, str, object]]]] = {
    # (a) two restarts where one may be in flight: the decision point always allows.
    "always_allow": lambda: [(decisions, "decide", _always_restart)],
    # (b) the cooldown ignored.
    "no_cooldown": lambda: [(policy, "RULES", _without("cooldown"))],
    # (c) a person's stop undone: the person-stop check patched away.
    "forget_person_stops": lambda: [
        (PersonStops, "holds", _never_held),
        (StopRecords, "judge", _never_found),
    ],
    # An orchestrator's container restarted: the owner and opt-in rules let everything through.
    "ignore_owners": lambda: [(policy, "RULES", _without("orchestrated", "not_opted_in"))],
    # Reported healed without being well: a verdict of unhealthy after restart turned into
    # succeeded.
    "healed_anyway": lambda: [(verifier, "judge", _healed_anyway)],
    # The host's restarts at once (restart.max_concurrent) ignored: only the work queue's
    # interleavings find it, restart calls of several containers in flight together.
    "ignore_max_concurrent": lambda: [(policy, "RULES", _without("concurrency"))],
}


@contextmanager
def planted(name: str) -> Iterator[None]:
    """Guardian with the bug `name` planted while the block runs ("" plants nothing)."""
    if not name:
        yield
        return
    if name not in PLANTS:
        raise ValueError(f"unknown plant {name!r}: one of {', '.join(sorted(PLANTS))}")
    with ExitStack() as undo:
        for target, attribute, value in PLANTS[name]():
            before = getattr(target, attribute)
            setattr(target, attribute, value)
            undo.callback(setattr, target, attribute, before)
        yield
