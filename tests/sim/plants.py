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
from guardian.core.model import Decision, Reason, Verdict
from guardian.service.state.state import PersonStops

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


def _no_cooldown() -> tuple[policy.Rule, ...]:
    """decide()'s rules without the cooldown (the oracle still holds the configured one)."""
    return tuple(
        rule._replace(check=lambda case: None) if rule.name == "cooldown" else rule
        for rule in policy.RULES
    )


def _never_held(self: PersonStops, container_id: str) -> bool:
    """A person's stop, kill or removal forgotten at once: nothing holds Guardian back."""
    return False


PLANTS: dict[str, Callable[[], list[tuple[object, str, object]]]] = {
    # (a) two restarts where one may be in flight: the decision point always allows.
    "always_allow": lambda: [(decisions, "decide", _always_restart)],
    # (b) the cooldown ignored.
    "no_cooldown": lambda: [(policy, "RULES", _no_cooldown())],
    # (c) a person's stop undone: the person-stop check patched away.
    "forget_person_stops": lambda: [(PersonStops, "holds", _never_held)],
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
