"""A healer over fakes (engine, clock) and a real SQLite store in a temp dir, fully wired."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml
from prometheus_client import CollectorRegistry

from guardian.adapters.sqlite.store import SqliteStore
from guardian.bootstrap import extend, healer_settings
from guardian.config import load_settings
from guardian.core.model import RemediationAction
from guardian.healer import Healer
from guardian.metrics import Metrics
from guardian.probes import Prober
from tests.fakes import FakeClock, FakeEngine


@dataclass
class Loop:
    clock: FakeClock
    engine: FakeEngine
    store: SqliteStore
    healer: Healer
    prober: Prober

    @property
    def host(self) -> str:
        return self.healer.settings.host

    def actions(self, container: str | None = None) -> list[RemediationAction]:
        return self.store.actions(self.host, container)

    def restarted(self) -> list[str]:
        names = {c.id: c.name for c in self.engine.containers.values()}
        return [names[i] for i in self.engine.restarts]


def make_loop(tmp: Path, **sections: dict[str, object]) -> Loop:
    path = tmp / "config.yaml"
    config: dict[str, dict[str, object]] = {"restart": {"cooldown": "60s"}}
    for section, values in sections.items():
        config.setdefault(section, {}).update(values)
    path.write_text(yaml.safe_dump(config))
    settings = load_settings(path, env={})
    clock = FakeClock()
    engine = FakeEngine(clock)
    store = SqliteStore(tmp / "guardian.db")
    metrics = Metrics(CollectorRegistry())
    healer = Healer(engine, store, clock, healer_settings(settings, None), metrics)
    prober = extend(healer, settings)
    return Loop(clock, engine, store, healer, prober)
