"""The extension points of one pass of the loop, filled by bootstrap as one literal table.

Judges turn a result into another (crash loops, OOM events, probes, log rules); the storm
breaker and the dependency graph feed inputs to decide(); the rest follow what the loop saw. An
empty Pipeline is the bare loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from guardian.core.assessment import Assessment
from guardian.core.model import ContainerSnapshot, HealthCheckResult
from guardian.core.outbound.hooks import ActionVerdict
from guardian.core.storm import StormHold
from guardian.ports import EngineEvent, EngineHistory
from guardian.service.state.listing import Listed

Judge = Callable[[ContainerSnapshot, HealthCheckResult], HealthCheckResult]


def _not_for(_container: str) -> bool:
    return False


def _no_hold(_snap: ContainerSnapshot) -> StormHold | None:
    return None


def _ignore(_container: str) -> None:
    return None


def _none(_container: str) -> tuple[str, ...]:
    return ()


def _first(_container: str) -> int:
    return 0


def _no_followers(_leader: str, _root: str) -> tuple[tuple[str, str], ...]:
    return ()


def _no_relatives(_container: str) -> tuple[tuple[str, ...], dict[str, str]]:
    return (), {}


def watched_only(follow: Callable[[list[ContainerSnapshot]], None]) -> Callable[[Listed], None]:
    """A follower of the sweep's watched containers that works on every sweep's list, changed
    or not (the log rules' follower attaches again to a stream that ended), as a row of
    `listed`."""

    def told(seen: Listed) -> None:
        follow(seen.watched)

    return told


def changed_only(
    follow: Callable[[list[ContainerSnapshot]], None],
) -> Callable[[Listed], None]:
    """A follower of the sweep's watched containers told them only when they changed (the
    sweep decides that once for every follower; a reload, which may change the rules a
    follower reads, gives a changed list), as a row of `listed`."""

    def told(seen: Listed) -> None:
        if seen.changed:
            follow(seen.watched)

    return told


@dataclass(frozen=True)
class Pipeline:
    judges: tuple[Judge, ...] = ()  # in order, after the health check
    looks: tuple[Judge, ...] = ()  # the same judgements changing nothing (status, the API)
    # A judge that needs a listed container inspected although the list shows no problem.
    inspect_wanted: tuple[Callable[[ContainerSnapshot, datetime], bool], ...] = ()
    # The sweep's containers, and whether they changed since the last were told (Listed).
    listed: tuple[Callable[[Listed], None], ...] = ()
    assessed: tuple[Callable[[list[Assessment]], None], ...] = ()  # a whole sweep, before acting
    act_order: Callable[[str], int] = _first  # a sweep acts on lower keys first (dependencies)
    detected: tuple[Callable[[HealthCheckResult], None], ...] = ()
    recovered: tuple[Callable[[str], None], ...] = ()  # a container seen without a problem
    engine_state: tuple[Callable[[bool, str], None], ...] = ()
    events: tuple[Callable[[EngineEvent], None], ...] = ()
    # The engine's record of events as read at start-up and after the store recovered.
    record_read: tuple[Callable[[EngineHistory], None], ...] = ()
    ended: tuple[Callable[[str, str], None], ...] = ()  # a restart's final outcome
    # An unacknowledged storm's hold on a container (None: no storm, or one it leaves alone).
    storm_holds: Callable[[ContainerSnapshot], StormHold | None] = _no_hold
    storm_canary: Callable[[str], None] = _ignore  # decide() let this container through as canary
    # An open storm speaks for this container's opening (it is one of the storm's own).
    storm_speaks_for: Callable[[str], bool] = _not_for
    unhealthy_dependencies: Callable[[str], tuple[str, ...]] = _none
    # (id, why) to restart after (leader, root of the wave): restart_with, namespace followers
    followers: Callable[[str, str], tuple[tuple[str, str], ...]] = _no_followers
    # A recreate's relatives: the names that joined its namespaces, the listed names by id.
    relatives: Callable[[str], tuple[tuple[str, ...], dict[str, str]]] = _no_relatives
    verdicts: tuple[Callable[[ActionVerdict], None], ...] = ()  # an action's verdict (hooks)
    # What went wrong since a restarted container's start that no health status shows (its
    # log matched a rule again): a verification fails on it. None: nothing.
    relapsed: tuple[Callable[[ContainerSnapshot], str | None], ...] = ()
    # What a reader should know of containers that their judgement does not say, by name (a
    # log rule not followed: every slot is taken).
    notes: tuple[Callable[[list[ContainerSnapshot]], dict[str, str]], ...] = ()
