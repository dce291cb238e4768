"""The composition root: the only place that builds adapters and wires them to the healer."""

from __future__ import annotations

import logging
import os
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from prometheus_client import CollectorRegistry

from guardian.adapters.clock import SystemClock
from guardian.adapters.docker_engine import DockerEngine
from guardian.adapters.notify.alertmanager import AlertmanagerNotifier
from guardian.adapters.notify.discord import DiscordNotifier
from guardian.adapters.notify.email import EmailNotifier
from guardian.adapters.notify.pagerduty import PagerDutyNotifier
from guardian.adapters.notify.slack_bot import SlackBotNotifier
from guardian.adapters.notify.slack_webhook import SlackWebhookNotifier
from guardian.adapters.notify.webhook import WebhookNotifier
from guardian.adapters.notify.worker import DeliveryWorker, WorkerSettings
from guardian.adapters.resilient_store import ResilientStore
from guardian.adapters.sqlite.outbox import SqliteOutbox
from guardian.adapters.sqlite.retention import Pruned
from guardian.adapters.sqlite.store import SqliteStore
from guardian.adapters.systemd import SystemdNotifier
from guardian.checks import CheckSettings
from guardian.config import DEFAULT_STORE_PATH, ConfigError, Settings
from guardian.core.delivery import RetryPolicy
from guardian.crashloop import CrashLoops, CrashLoopSettings
from guardian.dependencies import Dependencies
from guardian.healer import Healer, HealerSettings
from guardian.host import HostWatch, StormSettings
from guardian.logs import kv
from guardian.metrics import Metrics
from guardian.oom import OomEvents
from guardian.operations import Operator
from guardian.ports import Clock, Engine, Notifier, Store, StoreError
from guardian.probes import Prober, ProbeSpec
from guardian.secrets import Redactor, install_redaction, resolve_secret

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
    sd_notify: SystemdNotifier = field(default_factory=SystemdNotifier)
    notify: DeliveryWorker | None = None  # started and stopped by the daemon
    prober: Prober | None = None
    prune: Callable[[datetime], Pruned] | None = None  # store retention (the daemon's daily job)

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
    # The outbox writes through the SQLite store itself (same transaction as the change).
    sqlite = SqliteStore(store_path(settings))
    store = ResilientStore(sqlite, metrics)
    engine = DockerEngine(settings["docker.url"], settings["docker.timeout"])
    hs = healer_settings(settings, detect_self_id())
    healer = Healer(engine, store, clock, hs, metrics)
    prober = extend(healer, settings)
    try:
        worker = build_notify(settings, sqlite, clock, metrics, hs.host)
    except ConfigError:
        store.close()
        raise
    sd_notify = SystemdNotifier.from_env()
    return App(
        settings, engine, store, clock, metrics, healer, sd_notify, worker, prober, sqlite.prune
    )


def extend(healer: Healer, settings: Settings) -> Prober:
    """Wire crash loops, probes, dependencies and host incidents into the healer's hooks."""
    CrashLoops(
        healer.engine,
        CrashLoopSettings(
            settings["crash_loop.restarts"],
            settings["crash_loop.window"],
            settings["crash_loop.log_lines"],
        ),
    ).attach(healer)
    OomEvents().attach(healer)
    prober = Prober(
        healer,
        ProbeSpec(
            "http",
            "",
            0,
            period=settings["probe.period"],
            timeout=settings["probe.timeout"],
            failure_threshold=settings["probe.failure_threshold"],
            success_threshold=settings["probe.success_threshold"],
        ),
    )
    prober.attach()
    Dependencies(healer).attach()
    HostWatch(
        healer.store,
        healer.clock,
        healer.settings.host,
        StormSettings(
            settings["storm.threshold"], settings["storm.window"], settings["storm.min_containers"]
        ),
        settings["docker.timeout"],
    ).attach(healer)
    return prober


def existing_store_path(settings: Settings) -> Path:
    """The store path for commands that read what a daemon wrote: it must exist already."""
    path = store_path(settings)
    if not path.exists():
        raise StoreError(
            f"store {path}: no such file; is `guardian run` using this config? (pass --config)"
        )
    return path


def build_operator(settings: Settings) -> Operator:
    """The store and clock alone, for CLI commands that do not need the engine."""
    store = SqliteStore(existing_store_path(settings))
    return Operator(store, SystemClock(), socket.gethostname())


def build_notify(
    settings: Settings, store: SqliteStore, clock: Clock, metrics: Metrics, host: str
) -> DeliveryWorker:
    """The outbox worker and the channels configured in `notify:`; secrets are read here, from
    the environment or files, and registered for redaction in every log line."""
    n = settings.values["notify"]
    redact = Redactor()
    install_redaction(redact)
    outbox = SqliteOutbox(store.db)
    timeout, pacing = n["timeout"], n["pacing"]
    channels: list[Notifier] = []
    if url := resolve_secret(settings, "slack_webhook_url", redact):
        channels.append(SlackWebhookNotifier(url, timeout, pacing))
    if token := resolve_secret(settings, "slack_bot_token", redact):
        if not n["slack_bot_channel"]:
            raise ConfigError("notify.slack_bot_channel: required with a Slack bot token")
        channels.append(
            SlackBotNotifier(
                token, n["slack_bot_channel"], n["slack_api_url"], outbox, timeout, pacing
            )
        )
    if url := resolve_secret(settings, "discord_webhook_url", redact):
        channels.append(DiscordNotifier(url, timeout, pacing))
    password = resolve_secret(settings, "email_password", redact)
    if n["email_smtp_host"]:
        to = [a.strip() for a in (n["email_to"] or "").split(",") if a.strip()]
        if not to or not n["email_from"]:
            raise ConfigError(
                "notify.email_from and notify.email_to: required with email_smtp_host"
            )
        channels.append(
            EmailNotifier(
                n["email_smtp_host"],
                n["email_smtp_port"],
                n["email_security"],
                n["email_from"],
                to,
                timeout,
                n["email_username"],
                password,
            )
        )
    if url := resolve_secret(settings, "webhook_url", redact):
        secret = resolve_secret(settings, "webhook_secret", redact)
        channels.append(WebhookNotifier(url, secret, timeout))
    if n["alertmanager_url"]:
        channels.append(
            AlertmanagerNotifier(
                n["alertmanager_url"], outbox, clock, timeout, n["alertmanager_resend_interval"]
            )
        )
    if key := resolve_secret(settings, "pagerduty_routing_key", redact):
        channels.append(PagerDutyNotifier(key, n["pagerduty_url"], timeout, n["pagerduty_events"]))
    retry = RetryPolicy(
        max_attempts=n["max_attempts"],
        backoff=n["retry_backoff"],
        max_backoff=n["max_backoff"],
        max_retry_after=n["max_retry_after"],
    )
    ws = WorkerSettings(host, n["group_wait"], n["repeat_interval"], retry)
    return DeliveryWorker(outbox, channels, clock, metrics, ws, redact)


def build_outbox(settings: Settings) -> SqliteOutbox:
    """The outbox of an existing store, for `guardian notifications` (close its .db)."""
    return SqliteOutbox(SqliteStore(existing_store_path(settings)).db)
