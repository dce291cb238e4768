"""What every part of the loop shares: the ports, the settings, the rules and the LoopState parts.

The settings in force live in the RuleBook, which a reload retunes; `settings` always reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from guardian.core.cache_entry import order_margin
from guardian.core.model import ContainerSnapshot
from guardian.core.outbound.hooks import ActionVerdict
from guardian.ports import Clock, Engine, EngineUnavailable, Facts, Metrics, Store, Turns
from guardian.service.facts import FactStream
from guardian.service.pipeline import Pipeline
from guardian.service.rules import RuleBook
from guardian.service.settings import HealerSettings
from guardian.service.state.state import LoopState


class AtOnce:
    """Turns where nothing runs beside the caller (`guardian check`, tests): each at once."""

    def turn(self, key: str, fn: Callable[[], None]) -> None:
        fn()

    def hand(self, work: Sequence[tuple[str, Callable[[], None]]]) -> None:
        for _, fn in work:
            fn()

    def later(self, key: str, fn: Callable[[], None]) -> None:
        fn()

    def look(self, key: str, source: str, now: Callable[[], None]) -> None:
        now()


@dataclass(frozen=True)
class LoopContext:
    engine: Engine
    store: Store
    clock: Clock
    metrics: Metrics
    state: LoopState
    pipeline: Pipeline
    rules: RuleBook
    facts: Facts = field(default_factory=FactStream)  # what happened, for the readers
    turns: Turns = field(default_factory=AtOnce)  # one thread at a time per container

    @property
    def settings(self) -> HealerSettings:
        return self.rules.settings

    def on_docker(self) -> bool:
        """Whether the engine is Docker: Podman's list and events differ, so it has no cache."""
        try:
            return self.engine.identity().kind == "docker"
        except EngineUnavailable:
            return False

    def inspect_kept(self, container_id: str) -> ContainerSnapshot | None:
        """The loop's own inspect (the healer's, the verifier's): on Docker its answer fills the
        container cache (service.state.container_cache: its rules say whether the entry is fresh).
        A read for people (status, the API, the page) asks the engine directly instead."""
        if not self.on_docker():
            return self.engine.inspect(container_id)
        cache = self.state.cache
        ask = cache.asking(container_id, self.clock.now())
        try:
            snap = self.engine.inspect(container_id)
        except EngineUnavailable:
            cache.unanswered(ask)
            raise
        margin = order_margin(self.engine.stamp_uncertainty())
        cache.answered(ask, snap, self.clock.now(), margin)
        return snap

    def restart_ended(self, container: str, outcome: str) -> None:
        """A restart's final outcome: counted, and told to whoever follows restarts (a storm's
        canary)."""
        self.metrics.restart_ended(container, outcome)
        for ended in self.pipeline.ended:
            ended(container, outcome)

    def verdict_reached(self, verdict: ActionVerdict) -> None:
        """An action's verdict (core.outbound.hooks.HOOK_VERDICTS), told to whoever follows
        verdicts: the operator's hooks, which never hold the caller up."""
        for reached in self.pipeline.verdicts:
            reached(verdict)
