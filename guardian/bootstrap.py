"""The composition root: the only place that builds adapters and wires the loop.

build_daemon, build_status and build_operator take only what their command needs, and accept
replacements (engine=, clock=, store=, metrics=) so tests build Guardian exactly as production
does. The loop's pipeline is the one literal table in build_loop(); rebuild() applies a reload.
"""

from __future__ import annotations

import logging
import os
import re
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from prometheus_client import CollectorRegistry

from guardian.adapters.clock import SystemClock
from guardian.adapters.docker_engine import DockerEngine
from guardian.adapters.instance import HostLock, engine_key, engine_taken, rival_container
from guardian.adapters.notify.alertmanager import AlertmanagerNotifier
from guardian.adapters.notify.apprise import AppriseConfigError, apprise_channels
from guardian.adapters.notify.discord import DiscordNotifier
from guardian.adapters.notify.email import EmailNotifier
from guardian.adapters.notify.pagerduty import PagerDutyNotifier
from guardian.adapters.notify.slack_bot import SlackBotNotifier
from guardian.adapters.notify.slack_webhook import SlackWebhookNotifier
from guardian.adapters.notify.webhook import WebhookNotifier
from guardian.adapters.probe_runner import SocketProbeRunner
from guardian.adapters.prometheus import PrometheusMetrics
from guardian.adapters.resilient_store import ResilientStore
from guardian.adapters.sqlite.outbox import SqliteOutbox
from guardian.adapters.sqlite.retention import Pruned
from guardian.adapters.sqlite.store import SqliteStore
from guardian.adapters.systemd import SystemdSupervisor
from guardian.config import (
    DEFAULT_STORE_PATH,
    ConfigError,
    Settings,
    changed_keys,
    reloadable,
    reloaded,
)
from guardian.core.checks import CheckSettings
from guardian.core.delivery import RetryPolicy
from guardian.core.probes import ProbeSpec
from guardian.core.redaction import Redactor
from guardian.core.storm import StormSettings
from guardian.credentials import load_token, resolve_secret
from guardian.logs import install_redaction, kv, reconfigure_logging
from guardian.ports import Clock, Engine, Metrics, Notifier, ProbeRunner, Store, StoreError
from guardian.service.context import LoopContext
from guardian.service.crash_loops import CrashLoops, CrashLoopSettings
from guardian.service.decisions import DecisionPoint
from guardian.service.delivery import DeliveryWorker, WorkerSettings
from guardian.service.dependencies import Dependencies
from guardian.service.healer import Healer
from guardian.service.host import HostWatch
from guardian.service.oom import OomEvents
from guardian.service.operator import Operator
from guardian.service.pipeline import Pipeline
from guardian.service.prober import Prober
from guardian.service.recorder import Recorder
from guardian.service.remediator import Remediator
from guardian.service.rules import RuleBook
from guardian.service.settings import HealerSettings
from guardian.service.state import LoopState
from guardian.service.verifier import Verifier

log = logging.getLogger("guardian")
_CONTAINER_ID = re.compile(r"(?:docker[-/]|/containers/)([0-9a-f]{64})")


@dataclass
class App:
    """A built Guardian: what the daemon and the commands drive. close() releases the edges."""

    settings: Settings
    engine: Engine
    store: Store
    clock: Clock
    metrics: PrometheusMetrics
    healer: Healer
    prober: Prober
    operator: Operator
    supervisor: SystemdSupervisor = field(default_factory=SystemdSupervisor)
    delivery: DeliveryWorker | None = None  # started and stopped by the daemon
    prune: Callable[[datetime], Pruned] | None = None  # store retention (the daemon's daily job)
    api_token: str | None = None
    lock: HostLock | None = None  # `guardian run`: one Guardian per engine, held until close()

    def rival(self) -> str:
        """Why this Guardian must not run: another running Guardian container on the engine
        with the same scope ("" when none; never this container, restarted by Docker).
        Raises EngineUnavailable."""
        own = {i for i in (self.healer.ctx.settings.self_id, socket.gethostname()) if i}
        scope = self.settings["watch.scope"]
        other = rival_container(self.engine, own, scope)
        return engine_taken(scope, other) if other else ""

    @property
    def verifier(self) -> Verifier:
        return self.healer.verifier

    def probe_tick(self) -> None:
        """Run the probes that are due; a container whose verdict flipped is judged at once."""
        for container_id in self.prober.tick():
            self.healer.react(container_id, source="probe")

    def close(self) -> None:
        self.engine.close()
        self.store.close()
        self.supervisor.close()
        if self.lock is not None:
            self.lock.release()


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


def store_path(settings: Settings, env: Mapping[str, str] | None = None) -> Path:
    """The configured store path; the default falls back to the XDG state dir when unwritable."""
    path = Path(settings["store.path"])
    if settings.store_path_explicit or settings["store.path"] != DEFAULT_STORE_PATH:
        return path
    parent = path.parent
    if (parent.is_dir() and os.access(parent, os.W_OK)) or (
        not parent.exists() and os.access(parent.parent, os.W_OK)
    ):
        return path
    env = os.environ if env is None else env
    base = Path(
        env.get("XDG_STATE_HOME") or Path(env.get("HOME", "~")).expanduser() / ".local/state"
    )
    fallback = base / "guardian" / "guardian.db"
    log.warning(
        "default store directory not writable; using the user state directory",
        extra=kv(default=str(path), store=str(fallback)),
    )
    return fallback


def claim_instance(settings: Settings) -> HostLock:
    """Make this the one Guardian of its engine and scope on this host before `guardian run`
    opens anything: lock the store and the engine. Raises InstanceConflict naming the other
    Guardian; the app built with the lock releases it (a running Guardian container on the
    engine is looked for at the first contact with the engine: App.rival)."""
    lock = HostLock(
        store_path(settings), engine_key(settings["docker.url"]), settings["watch.scope"]
    )
    lock.acquire()
    return lock


def existing_store_path(settings: Settings) -> Path:
    """The store path for commands that read what a daemon wrote: it must exist already."""
    path = store_path(settings)
    if not path.exists():
        raise StoreError(
            f"store {path}: no such file; is `guardian run` using this config? (pass --config)"
        )
    return path


def healer_settings(settings: Settings, self_id: str | None, host: str = "") -> HealerSettings:
    return HealerSettings(
        host=host or socket.gethostname(),
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
        labels_may_loosen=settings["labels.allow_loosen"],
    )


def build_loop(
    settings: Settings,
    hs: HealerSettings,
    engine: Engine,
    store: Store,
    clock: Clock,
    metrics: Metrics,
    runner: ProbeRunner | None = None,
) -> tuple[Healer, Prober]:
    """The healing loop over its ports: the extensions, the pipeline table, the parts."""
    state = LoopState()
    crash_loops = CrashLoops(
        engine,
        CrashLoopSettings(
            settings["crash_loop.restarts"],
            settings["crash_loop.window"],
            settings["crash_loop.log_lines"],
        ),
    )
    oom = OomEvents()
    prober = Prober(
        clock,
        runner or SocketProbeRunner(),
        ProbeSpec(
            "http",
            "",
            0,
            period=settings["probe.period"],
            timeout=settings["probe.timeout"],
            failure_threshold=settings["probe.failure_threshold"],
            success_threshold=settings["probe.success_threshold"],
        ),
        settings["probe.allow_hosts"],
    )
    dependencies = Dependencies(store, state, hs.host)
    host = HostWatch(
        store,
        clock,
        hs.host,
        StormSettings(
            settings["storm.threshold"],
            settings["storm.window"],
            settings["storm.min_containers"],
            settings["storm.hold"],
            settings["storm.max_hold"],
        ),
        settings["docker.timeout"],
    )
    # The order of each row is the order things run in.
    pipeline = Pipeline(
        judges=(crash_loops.judge, oom.judge, prober.judge),
        looks=(crash_loops.look, oom.judge, prober.judge),
        inspect_wanted=(crash_loops.still_looping,),
        listed=(crash_loops.follow, prober.update, dependencies.follow, host.follow),
        assessed=(dependencies.assessed, host.assessed),
        act_order=dependencies.act_order,
        detected=(dependencies.detected, host.detected),
        recovered=(dependencies.recovered, host.recovered),
        engine_state=(host.engine_state,),
        ended=(host.restart_ended,),
        events=(oom.on_event,),
        storm_holds=host.storm_holds,
        storm_canary=host.canary_claimed,
        storm_open=host.storm_open,
        unhealthy_dependencies=dependencies.unhealthy,
        followers=dependencies.followers,
    )
    ctx = LoopContext(engine, store, clock, metrics, state, pipeline, RuleBook(hs, state))
    recorder = Recorder(ctx)
    remediator = Remediator(ctx, recorder, DecisionPoint(ctx))
    verifier = Verifier(ctx, recorder, remediator)
    return Healer(ctx, recorder, remediator, verifier), prober


def build_status(
    settings: Settings,
    *,
    engine: Engine | None = None,
    clock: Clock | None = None,
    store: SqliteStore | None = None,
    metrics: PrometheusMetrics | None = None,
    host: str = "",
) -> App:
    """The loop without delivery, systemd or the API: for `guardian status` and `guardian
    check`, which need no notification secrets. Raises StoreError when the store cannot open."""
    clock = clock or SystemClock()
    metrics = metrics or PrometheusMetrics(CollectorRegistry())
    sqlite = store or SqliteStore(store_path(settings))
    # A full disk must not stop healing: write failures are logged and counted, not fatal.
    resilient = ResilientStore(sqlite, metrics)
    engine = engine or DockerEngine(settings["docker.url"], settings["docker.timeout"])
    docker_url = Redactor()
    docker_url.add_credentials_of(settings["docker.url"])  # masked even when quoted alone
    install_redaction(docker_url)
    hs = healer_settings(settings, detect_self_id(), host)
    healer, prober = build_loop(settings, hs, engine, resilient, clock, metrics)
    operator = Operator(resilient, clock, hs.host)
    return App(
        settings, engine, resilient, clock, metrics, healer, prober, operator, prune=sqlite.prune
    )


def build_daemon(
    settings: Settings,
    *,
    engine: Engine | None = None,
    clock: Clock | None = None,
    store: SqliteStore | None = None,
    metrics: PrometheusMetrics | None = None,
    supervisor: SystemdSupervisor | None = None,
    env: Mapping[str, str] | None = None,
    host: str = "",
    lock: HostLock | None = None,
) -> App:
    """Everything `guardian run` needs: the loop, the notification channels (secrets read from
    `env`), the API token and systemd. Raises StoreError or ConfigError. The app holds `lock`
    (claim_instance) and opens the store it locked."""
    sqlite = store or SqliteStore(lock.store if lock is not None else store_path(settings))
    app = build_status(
        settings, engine=engine, clock=clock, store=sqlite, metrics=metrics, host=host
    )
    try:
        app.delivery = build_delivery(
            settings, sqlite, app.clock, app.metrics, app.healer.ctx.settings.host, env
        )
        app.api_token = load_token(settings, env)
    except ConfigError:
        app.close()
        raise
    app.supervisor = supervisor or SystemdSupervisor.from_env(env)
    app.lock = lock
    return app


@dataclass(frozen=True)
class Reloaded:
    """What a reload did: the changed keys now in force, and those that wait for a restart."""

    applied: tuple[str, ...]
    need_restart: tuple[str, ...]


def rebuild(app: App, new: Settings) -> Reloaded:
    """Put `new` (already validated) in force where that is safe in a running Guardian: the
    loop's settings and label rules, store retention, logging. Restarts and verifications in
    flight, incidents, the store, the engine client, the channels and the HTTP listener are left
    as they are; changed keys that only a restart applies keep their old values and are named."""
    changed = changed_keys(app.settings, new)
    settings = reloaded(app.settings, new)
    hs = app.healer.ctx.settings
    app.healer.ctx.rules.retune(healer_settings(settings, hs.self_id, hs.host))
    app.settings = settings
    reconfigure_logging(settings["log.level"], settings["log.format"])
    return Reloaded(
        tuple(k for k in changed if reloadable(k)),
        tuple(k for k in changed if not reloadable(k)),
    )


def build_operator(
    settings: Settings, *, store: Store | None = None, clock: Clock | None = None, host: str = ""
) -> Operator:
    """The store and clock alone, for CLI commands that do not need the engine."""
    store = store or SqliteStore(existing_store_path(settings))
    return Operator(store, clock or SystemClock(), host or socket.gethostname())


def build_delivery(
    settings: Settings,
    store: SqliteStore,
    clock: Clock,
    metrics: Metrics,
    host: str,
    env: Mapping[str, str] | None = None,
) -> DeliveryWorker:
    """The outbox worker and the channels configured in `notify:`; secrets are read here, from
    the environment or files, and registered for redaction in every log line."""
    n = settings.values["notify"]
    redact = Redactor()
    outbox = SqliteOutbox(store.db)
    timeout, pacing = n["timeout"], n["pacing"]
    channels: list[Notifier] = []
    if url := resolve_secret(settings, "slack_webhook_url", redact, env):
        channels.append(SlackWebhookNotifier(url, timeout, pacing))
    if token := resolve_secret(settings, "slack_bot_token", redact, env):
        if not n["slack_bot_channel"]:
            raise ConfigError("notify.slack_bot_channel: required with a Slack bot token")
        channels.append(
            SlackBotNotifier(
                token, n["slack_bot_channel"], n["slack_api_url"], outbox, timeout, pacing
            )
        )
    if url := resolve_secret(settings, "discord_webhook_url", redact, env):
        channels.append(DiscordNotifier(url, timeout, pacing))
    password = resolve_secret(settings, "email_password", redact, env)
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
    if url := resolve_secret(settings, "webhook_url", redact, env):
        secret = resolve_secret(settings, "webhook_secret", redact, env)
        channels.append(WebhookNotifier(url, secret, timeout))
    if n["alertmanager_url"]:
        channels.append(
            AlertmanagerNotifier(
                n["alertmanager_url"], outbox, clock, timeout, n["alertmanager_resend_interval"]
            )
        )
    if key := resolve_secret(settings, "pagerduty_routing_key", redact, env):
        channels.append(PagerDutyNotifier(key, n["pagerduty_url"], timeout, n["pagerduty_events"]))
    if urls := resolve_secret(settings, "apprise_urls", redact, env):
        try:
            channels += apprise_channels(urls, timeout, pacing, redact)
        except AppriseConfigError as exc:
            raise ConfigError(f"notify.apprise_urls: {exc}") from None
    retry = RetryPolicy(
        max_attempts=n["max_attempts"],
        backoff=n["retry_backoff"],
        max_backoff=n["max_backoff"],
        max_retry_after=n["max_retry_after"],
    )
    ws = WorkerSettings(host, n["group_wait"], n["repeat_interval"], retry)
    install_redaction(redact)
    worker = DeliveryWorker(outbox, channels, clock, metrics, ws, redact)
    store.db.on_outbox_written(worker.wake)  # whatever writes a notification wakes the worker
    return worker


def build_outbox(settings: Settings) -> SqliteOutbox:
    """The outbox of an existing store, for `guardian notifications` (close its .store)."""
    return SqliteOutbox(SqliteStore(existing_store_path(settings)).db)
