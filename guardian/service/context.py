"""What every part of the loop shares: the ports, the settings, the rules and the LoopState parts.

The settings in force live in the RuleBook, which a reload retunes; `settings` always reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from guardian.core.hooks import ActionVerdict
from guardian.ports import Clock, Engine, Facts, Metrics, Store
from guardian.service.facts import FactStream
from guardian.service.pipeline import Pipeline
from guardian.service.rules import RuleBook
from guardian.service.settings import HealerSettings
from guardian.service.state import LoopState


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

    @property
    def settings(self) -> HealerSettings:
        return self.rules.settings

    def restart_ended(self, container: str, outcome: str) -> None:
        """A restart's final outcome: counted, and told to whoever follows restarts (a storm's
        canary)."""
        self.metrics.restart_ended(container, outcome)
        for ended in self.pipeline.ended:
            ended(container, outcome)

    def verdict_reached(self, verdict: ActionVerdict) -> None:
        """An action's verdict (core.hooks.HOOK_VERDICTS), told to whoever follows verdicts: the
        operator's hooks, which never hold the caller up."""
        for reached in self.pipeline.verdicts:
            reached(verdict)
