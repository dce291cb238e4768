"""Guardian built through bootstrap for tests, exactly as production wires it, with fakes passed
in: a FakeEngine, a FakeClock, a real SQLite store in a temp dir and a fresh Prometheus registry.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from prometheus_client import CollectorRegistry

from guardian.adapters.clock import SystemClock
from guardian.adapters.prometheus import PrometheusMetrics
from guardian.adapters.sqlite.store import SqliteStore
from guardian.adapters.systemd import SystemdSupervisor
from guardian.bootstrap import App, build_daemon, build_status
from guardian.config import Settings, load_settings
from guardian.core.model import ActionKind, RemediationAction
from guardian.ports import HookRunner, ResourceReader, RestartCalls
from guardian.service.healing.healer import Healer
from guardian.service.watchers.prober import Prober
from tests.fakes import FakeClock, FakeEngine

if TYPE_CHECKING:
    import pytest

HOST = "h"


def settings_for(tmp: Path, sections: Mapping[str, Mapping[str, Any]]) -> Settings:
    """Settings from a config file holding `sections` (the store in `tmp`), no environment."""
    config: dict[str, dict[str, Any]] = {"store": {"path": str(tmp / "guardian.db")}}
    for section, values in sections.items():
        config.setdefault(section, {}).update(values)
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return load_settings(path, env={})


@dataclass
class TestApp:
    tmp: Path
    settings: Settings
    clock: FakeClock
    engine: FakeEngine
    store: SqliteStore  # the SQLite store under the app's LoopStore
    app: App
    daemon: bool

    __test__ = False  # not a test class, whatever pytest thinks of the name

    @property
    def healer(self) -> Healer:
        return self.app.healer

    @property
    def prober(self) -> Prober:
        return self.app.prober

    @property
    def registry(self) -> CollectorRegistry:
        return self.app.metrics.registry

    @property
    def host(self) -> str:
        return self.app.healer.ctx.settings.host

    def actions(self, container: str | None = None) -> list[RemediationAction]:
        return self.store.actions(self.host, container)

    def restarts(self) -> list[RemediationAction]:
        return [a for a in self.actions() if a.kind == ActionKind.RESTART]

    def restarted(self) -> list[str]:
        """Names of the containers the engine was asked to restart, in order."""
        names = {c.id: c.name for c in self.engine.containers.values()}
        return [names[i] for i in self.engine.restarts]

    def verify(self) -> None:
        self.app.verifier.verify()

    def climb(self, times: int = 30) -> None:
        """Sweeps and verifications with the clock moving between them, as a daemon's would
        run: `times` rounds of a sweep, a second, a verification, two seconds."""
        for _ in range(times):
            self.healer.sweep()
            self.clock.advance(1)
            self.healer.verifier.verify()
            self.clock.advance(2)

    def queued(self) -> list[dict[str, Any]]:
        """The notifications in the outbox, oldest first, as their payloads."""
        rows = self.store.db.query("SELECT payload FROM outbox ORDER BY id")
        return [json.loads(r["payload"]) for r in rows]

    def metric(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, labels) or 0.0

    def following(self) -> TestApp:
        """The daemon follows the engine's events and its stream is open (as the listener
        does): the container cache and the listing between whole lists count on it."""
        self.app.loop.follows_events(self.clock.now())
        self.app.loop.stream_opening(None, self.clock.now())
        return self

    def count_judged(self, monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
        """From now on, how often each container is judged by a sweep."""
        counts: Counter[str] = Counter()
        assess = self.healer.assess

        def counting(snap, source, detected_at=None):  # type: ignore[no-untyped-def]
            if source == "sweep":
                counts[snap.name] += 1
            return assess(snap, source, detected_at)

        monkeypatch.setattr(self.healer, "assess", counting)
        return counts

    def restart_guardian(self) -> TestApp:
        """A new Guardian over the same store, engine and clock: what a restart looks like."""
        return make_app(
            self.tmp,
            engine=self.engine,
            clock=self.clock,
            sqlite=self.store,
            daemon=self.daemon,
            settings=self.settings,
        )


def make_app(
    tmp: Path,
    *,
    engine: FakeEngine | None = None,
    clock: FakeClock | SystemClock | None = None,
    sqlite: SqliteStore | None = None,
    daemon: bool = False,
    env: Mapping[str, str] | None = None,
    settings: Settings | None = None,
    host: str = HOST,
    supervisor: SystemdSupervisor | None = None,
    hook_runner: HookRunner | None = None,
    restart_calls: RestartCalls | None = None,
    resource_reader: ResourceReader | None = None,
    **sections: Mapping[str, Any],
) -> TestApp:
    """Build Guardian through bootstrap (build_status, or build_daemon with `daemon`);
    `restart_calls`: where build_status's loop runs restart calls (default: here)."""
    settings = settings or settings_for(tmp, sections)
    clock = clock or FakeClock()
    engine = engine if engine is not None else FakeEngine(clock)
    store = sqlite or SqliteStore(settings["store.path"])
    metrics = PrometheusMetrics(CollectorRegistry())
    if daemon:
        app = build_daemon(
            settings,
            engine=engine,
            clock=clock,
            store=store,
            metrics=metrics,
            env=env or {},
            host=host,
            supervisor=supervisor,
            hook_runner=hook_runner,
            resource_reader=resource_reader,
        )
    else:
        app = build_status(
            settings,
            engine=engine,
            clock=clock,
            store=store,
            metrics=metrics,
            host=host,
            restart_calls=restart_calls,
            resource_reader=resource_reader,
        )
    return TestApp(tmp, settings, clock, engine, store, app, daemon)


def make_world(tmp: Path, dry_run: bool = False, label: str = "guardian.enable") -> TestApp:
    """Guardian with a short cooldown (2 s), 3 attempts an hour and a 30 s verify timeout."""
    return make_app(
        tmp,
        restart={
            "cooldown": "2s",
            "max_attempts": 3,
            "window": "1h",
            "reset_after": "600s",
            "stop_timeout": "1s",
            "verify_timeout": "30s",
            "dry_run": dry_run,
        },
        watch={"label": label},
    )
