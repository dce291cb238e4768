"""The composition root: the only place that builds adapters and wires them to the healer."""

from __future__ import annotations

import logging
import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import CollectorRegistry

from guardian.adapters.clock import SystemClock
from guardian.adapters.docker_engine import DockerEngine
from guardian.adapters.resilient_store import ResilientStore
from guardian.adapters.sqlite_store import SqliteStore
from guardian.checks import CheckSettings
from guardian.config import DEFAULT_STORE_PATH, Settings
from guardian.healer import Healer, HealerSettings
from guardian.logs import kv
from guardian.metrics import Metrics
from guardian.ports import Clock, Engine, Store

log = logging.getLogger("guardian")
_CONTAINER_ID = re.compile(r"(?:docker[-/]|/containers/)([0-9a-f]{64})")


@dataclass
class App:
    settings: Settings
    engine: Engine
    store: Store
    clock: Clock
    metrics: Metrics
    healer: Healer

    def close(self) -> None:
        self.engine.close()
        self.store.close()


def detect_self_id(proc: Path = Path("/proc/self")) -> str | None:
    """Guardian's own container id when it runs in a container, so it never heals itself."""
    for name in ("cgroup", "mountinfo"):
        try:
            text = (proc / name).read_text(errors="replace")
        except OSError:
            continue
        match = _CONTAINER_ID.search(text)
        if match:
            return match.group(1)
    return None


def store_path(settings: Settings, env: dict[str, str] | None = None) -> Path:
    """The configured store path; the default falls back to the XDG state dir when unwritable."""
    path = Path(settings["store.path"])
    if settings.store_path_explicit or settings["store.path"] != DEFAULT_STORE_PATH:
        return path
    parent = path.parent
    if (parent.is_dir() and os.access(parent, os.W_OK)) or (
        not parent.exists() and os.access(parent.parent, os.W_OK)
    ):
        return path
    env = dict(os.environ) if env is None else env
    base = Path(
        env.get("XDG_STATE_HOME") or Path(env.get("HOME", "~")).expanduser() / ".local/state"
    )
    fallback = base / "guardian" / "guardian.db"
    log.warning(
        "default store directory not writable; using the user state directory",
        extra=kv(default=str(path), store=str(fallback)),
    )
    return fallback


def healer_settings(settings: Settings, self_id: str | None) -> HealerSettings:
    return HealerSettings(
        host=socket.gethostname(),
        watch_label=settings["watch.label"],
        policy=settings.restart_policy(),
        checks=CheckSettings(
            ignore_exit_codes=frozenset(settings["restart.ignore_exit_codes"]),
            start_grace=settings["watch.start_grace"],
        ),
        stop_timeout=settings["restart.stop_timeout"],
        verify_timeout=settings["restart.verify_timeout"],
        self_id=self_id,
        scope=settings["watch.scope"],
    )


def build(settings: Settings, registry: CollectorRegistry | None = None) -> App:
    """Build every adapter from settings. Raises StoreError when the store cannot be opened."""
    clock = SystemClock()
    metrics = Metrics(registry if registry is not None else CollectorRegistry())
    # A full disk must not stop healing: write failures are logged and counted, not fatal.
    store = ResilientStore(SqliteStore(store_path(settings)), metrics)
    engine = DockerEngine(settings["docker.url"], settings["docker.timeout"])
    healer = Healer(engine, store, clock, healer_settings(settings, detect_self_id()), metrics)
    return App(settings, engine, store, clock, metrics, healer)
