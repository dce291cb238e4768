"""The composition root: the only place that builds adapters and wires the loop.

build_daemon, build_status and build_operator take only what their command needs, and accept
replacements (engine=, clock=, store=, metrics=) so tests build Guardian exactly as production
does. The loop's pipeline is the one literal table in build_loop().
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from prometheus_client import CollectorRegistry

from guardian.adapters.cgroups import CgroupReader
from guardian.adapters.clock import SystemClock
from guardian.adapters.engine.docker_engine import DockerEngine
from guardian.adapters.heartbeat import HttpPinger, failure_url
from guardian.adapters.hook_runner import SubprocessHookRunner
from guardian.adapters.host_lock import EngineAccess, HostLock, engine_key
from guardian.adapters.instance import detect_self_id
from guardian.adapters.notify.channels import ChannelConfigError, receiver_channels
from guardian.adapters.private_files import warn_if_readable
from guardian.adapters.probe_runner import SocketProbeRunner
from guardian.adapters.prometheus import PrometheusMetrics
from guardian.adapters.re2_patterns import Re2Patterns
from guardian.adapters.run_stamps import RunStamps
from guardian.adapters.sqlite.feed import SqliteFeed
from guardian.adapters.sqlite.outbox import SqliteOutbox
from guardian.adapters.sqlite.retention import Pruned
from guardian.adapters.sqlite.store import SqliteStore
from guardian.adapters.systemd import SystemdSupervisor
from guardian.config import ConfigError, Settings
from guardian.config.channels import receiver_specs
from guardian.config.credentials import load_token
from guardian.config.heartbeat import heartbeat_urls
from guardian.config.store import existing_store_path, store_path
from guardian.core.detection.checks import CheckSettings
from guardian.core.detection.log_rules import LogRule
from guardian.core.detection.probes import ProbeSpec
from guardian.core.detection.resources import LABELS as RESOURCE_LABELS
from guardian.core.detection.resources import Limit
from guardian.core.labels import LOGS_MATCH
from guardian.core.model import ContainerSnapshot
from guardian.core.outbound import notifications
from guardian.core.outbound.delivery import RetryPolicy
from guardian.core.outbound.notifications import Notification
from guardian.core.outbound.routing import Routing, route_of
from guardian.core.redaction import Redactor
from guardian.core.storm import StormSettings
from guardian.logs import install_redaction
from guardian.ports import (
    Clock,
    Engine,
    Facts,
    HookRunner,
    Metrics,
    Notifier,
    Patterns,
    ProbeRunner,
    Rechecks,
    ResourceReader,
    RestartCalls,
    Store,
    Turns,
)
from guardian.readside.changes import Changes
from guardian.runtime.edges import Edges
from guardian.runtime.restart_calls import RestartRunner
from guardian.service.context import LoopContext
from guardian.service.elsewhere import Elsewhere
from guardian.service.facts import FactStream
from guardian.service.healing.decisions import DecisionPoint
from guardian.service.healing.dependencies import Dependencies
from guardian.service.healing.followers import Followers
from guardian.service.healing.healer import Healer
from guardian.service.healing.host import HostWatch
from guardian.service.healing.namespaces import Namespaces
from guardian.service.healing.recorder import Recorder
from guardian.service.healing.remediator import Remediator
from guardian.service.healing.verifier import Verifier
from guardian.service.healing.written import LoopStore
from guardian.service.loop import Loop
from guardian.service.operator import Operator
from guardian.service.outbound.channel_check import ChannelCheck
from guardian.service.outbound.delivery import DeliveryWorker, WorkerSettings
from guardian.service.outbound.heartbeat import Heartbeat
from guardian.service.outbound.hooks import Hooks, HookSettings
from guardian.service.pipeline import Pipeline, changed_only, watched_only
from guardian.service.rules import RuleBook
from guardian.service.settings import HealerSettings
from guardian.service.state.maintenance import MaintenanceLog
from guardian.service.state.quiet import HeardRechecks
from guardian.service.state.state import LoopState
from guardian.service.watchers.crash_loops import CrashLoops, CrashLoopSettings
from guardian.service.watchers.log_watch import LogWatch
from guardian.service.watchers.oom import OomEvents
from guardian.service.watchers.prober import Prober
from guardian.service.watchers.resources import ResourceWatch
from guardian.service.watchers.stop_records import StopRecords

log = logging.getLogger("guardian")


@dataclass
class App:
    """A built Guardian: what the daemon and the commands drive. `edges.close()` releases what it
    holds open (runtime.edges); `loop.follow_step` follows a step of the wall clock."""

    settings: Settings
    engine: Engine
    store: Store
    clock: Clock
    metrics: PrometheusMetrics
    healer: Healer
    prober: Prober
    operator: Operator
    resources: ResourceWatch  # resource rules: sampled by the daemon's job while any applies
    loop: Loop  # what the entrypoints ask of the running loop (service.loop)
    verifier: Verifier  # the healer's
    restarts: RestartRunner  # where restart calls run: here until the daemon starts its queue
    logs: LogWatch  # log rules: followers run once the daemon starts them
    edges: Edges  # the engine, the store, systemd's socket, the lock: released in that order
    supervisor: SystemdSupervisor = field(default_factory=SystemdSupervisor)
    delivery: DeliveryWorker | None = None  # started and stopped by the daemon
    heartbeat: Heartbeat | None = None  # told of each sweep by the daemon
    prune: Callable[[datetime], Pruned] | None = None  # store retention (the daemon's daily job)
    api_token: str | None = None
    lock: HostLock | None = None  # `guardian run`: one Guardian per engine, held until closed
    hooks: Hooks | None = None  # `guardian run` with remediation.hooks: stopped by the daemon
    changes: Changes = field(default_factory=Changes)  # what the status page's stream waits on
    facts: FactStream = field(default_factory=FactStream)  # the loop's stream of facts
    # Why the store is not keeping Guardian's record now ("": it is): /readyz and /healthz say so.
    store_degraded: Callable[[], str] = field(default=lambda: "")
    # `guardian run`: what other processes wrote to the store, told to readers from its change
    # feed; the store's file, whose writes the daemon watches for it.
    elsewhere: Elsewhere | None = None
    store_file: Path | None = None


@dataclass(frozen=True)
class LoopParts:
    """What the pipeline's table names: the watchers and the relations, built over the ports."""

    crash_loops: CrashLoops
    oom: OomEvents
    prober: Prober
    resources: ResourceWatch
    logs: LogWatch
    namespaces: Namespaces
    dependencies: Dependencies
    host: HostWatch
    stops: StopRecords


def claim_instance(settings: Settings) -> HostLock:
    """Make this the one Guardian of its engine and scope on this host before `guardian run`
    opens anything: lock the store and the engine. Raises InstanceConflict naming the other
    Guardian; the app built with the lock releases it (a running Guardian container on the
    engine is looked for at the first contact with the engine: instance.rivals_of)."""
    url = settings["docker.url"]
    lock = HostLock(
        store_path(settings), engine_key(url), settings["watch.scope"], EngineAccess.of(url)
    )
    lock.acquire()
    return lock


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
        approval_ttl=settings["restart.approval_ttl"],
        maintenance=settings["maintenance.windows"],
        resources=settings["resources.rules"],
        log_rules=settings["logs.rules"],
        resync=settings["watch.resync"],
    )


def build_loop(
    settings: Settings,
    hs: HealerSettings,
    engine: Engine,
    store: Store,
    clock: Clock,
    metrics: Metrics,
    runner: ProbeRunner | None = None,
    hooks: Hooks | None = None,
    facts: Facts | None = None,
    *,
    calls: RestartCalls,
    rechecks: Rechecks,
    turns: Turns,
    reader: ResourceReader | None = None,
    patterns: Patterns | None = None,
) -> tuple[Healer, Prober, ResourceWatch, LogWatch]:
    """The healing loop over its ports: the extensions, the pipeline table, the parts. `calls`
    runs the restart calls, `rechecks` judges a container again when a decision names a time
    (or at once: a log rule matched), `turns` gives a job one container's turn (one thread at
    a time per container), `reader` reads containers' cgroups (default: under
    resources.cgroup_root); `patterns` compiles log rules (RE2)."""
    state = LoopState(clock)
    rechecks = HeardRechecks(state.quiet, rechecks)  # a container asked about is judged again
    rules = RuleBook(hs, state.routing)
    namespaces = Namespaces(engine)
    parts = LoopParts(
        resources=resource_watch(settings, rules, engine, clock, reader),
        logs=log_watch(rules, engine, clock, rechecks, patterns, metrics),
        crash_loops=crash_loops_of(settings, engine, clock),
        oom=OomEvents(),
        prober=prober_of(settings, clock, runner),
        namespaces=namespaces,
        dependencies=Dependencies(store, state.verifications, hs.host, namespaces),
        host=host_watch(settings, store, clock, hs.host, state.lock),
        stops=stop_records(engine, store, state, clock, rules),
    )
    pipeline = pipeline_of(parts, hooks)
    ctx = LoopContext(
        engine, store, clock, metrics, state, pipeline, rules, facts or FactStream(), turns
    )
    recorder = Recorder(ctx)
    remediator = Remediator(ctx, recorder, DecisionPoint(ctx), calls, rechecks)
    verifier = Verifier(ctx, recorder, Followers(ctx, remediator))
    healer = Healer(ctx, recorder, remediator, verifier)
    return healer, parts.prober, parts.resources, parts.logs


def resource_watch(
    settings: Settings,
    rules: RuleBook,
    engine: Engine,
    clock: Clock,
    reader: ResourceReader | None,
) -> ResourceWatch:
    """Resource rules, sampled from the containers' cgroups (default: under
    resources.cgroup_root)."""

    def limits_of(snap: ContainerSnapshot) -> tuple[Limit, ...]:
        # Without a label or a config rule, nothing to work out (a sweep asks of every one).
        if not rules.settings.resources and snap.labels.keys().isdisjoint(RESOURCE_LABELS):
            return ()
        return rules.observed(snap).resources

    return ResourceWatch(
        clock, reader or CgroupReader(settings["resources.cgroup_root"]), engine, limits_of
    )


def log_watch(
    rules: RuleBook,
    engine: Engine,
    clock: Clock,
    rechecks: Rechecks,
    patterns: Patterns | None,
    metrics: Metrics,
) -> LogWatch:
    """Log rules, compiled by `patterns` (default: RE2); the containers whose rules wait for
    a slot are counted in `metrics`."""

    def log_rules_of(snap: ContainerSnapshot) -> tuple[LogRule, ...]:
        # The one "watched" predicate, under the settings in force (a reload retunes them);
        # without a label or a config rule, nothing to work out.
        s = rules.settings
        if (LOGS_MATCH not in snap.labels and not s.log_rules) or not s.watches(snap.labels):
            return ()
        return rules.of(snap).log_rules

    return LogWatch(
        engine,
        patterns or Re2Patterns(),
        log_rules_of,
        clock,
        rechecks,
        waiting=metrics.log_rules_unfollowed_now,
    )


def stop_records(
    engine: Engine, store: Store, state: LoopState, clock: Clock, rules: RuleBook
) -> StopRecords:
    """A person's stops kept in the store and found in the engine's record, of the containers
    watched under the settings in force (a reload may change them)."""

    def watched(labels: dict[str, str]) -> bool:
        return rules.settings.watches(labels)

    return StopRecords(engine, store, state, clock, rules.settings.host, watched)


def crash_loops_of(settings: Settings, engine: Engine, clock: Clock) -> CrashLoops:
    return CrashLoops(
        engine,
        CrashLoopSettings(
            settings["crash_loop.restarts"],
            settings["crash_loop.window"],
            settings["crash_loop.log_lines"],
        ),
        clock,
    )


def prober_of(settings: Settings, clock: Clock, runner: ProbeRunner | None) -> Prober:
    """The probes of `guardian.probe.*` labels, run by `runner` (default: over sockets)."""
    return Prober(
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


def host_watch(
    settings: Settings, store: Store, clock: Clock, host: str, lock: threading.RLock
) -> HostWatch:
    return HostWatch(
        store,
        clock,
        host,
        StormSettings(
            settings["storm.threshold"],
            settings["storm.window"],
            settings["storm.min_containers"],
            settings["storm.hold"],
            settings["storm.max_hold"],
            settings["storm.count"],
        ),
        settings["docker.timeout"],
        lock,
    )


# Long: the pipeline's one literal table, a row a line, read top to bottom.
def pipeline_of(p: LoopParts, hooks: Hooks | None) -> Pipeline:
    """The loop's one literal table: the order of each row is the order things run in."""
    return Pipeline(
        judges=(
            p.crash_loops.judge,
            p.oom.judge,
            p.stops.judge,
            p.prober.judge,
            p.resources.judge,
            p.logs.judge,
            p.namespaces.judge,
        ),
        looks=(
            p.crash_loops.look,
            p.oom.judge,
            p.stops.look,
            p.prober.judge,
            p.resources.judge,
            p.logs.judge,
            p.namespaces.judge,
        ),
        inspect_wanted=(p.crash_loops.still_looping, p.logs.matched),
        listed=(
            watched_only(p.crash_loops.follow),
            changed_only(p.prober.update),
            changed_only(p.resources.update),
            watched_only(p.logs.update),
            p.dependencies.follow,
            p.host.follow,
            watched_only(p.stops.retry),
        ),
        assessed=(p.dependencies.assessed, p.host.assessed),
        act_order=p.dependencies.act_order,
        detected=(p.dependencies.detected, p.host.detected),
        recovered=(p.dependencies.recovered, p.host.recovered),
        engine_state=(p.host.engine_state,),
        ended=(p.host.restart_ended, p.resources.restart_ended),
        events=(
            p.stops.on_event,
            p.oom.on_event,
            p.crash_loops.on_event,
            p.namespaces.on_event,
            p.resources.on_event,
            p.logs.on_event,
            p.host.on_event,
        ),
        record_read=(p.stops.learn,),
        storm_holds=p.host.storm_holds,
        storm_canary=p.host.canary_claimed,
        storm_speaks_for=p.host.storm_speaks_for,
        unhealthy_dependencies=p.dependencies.unhealthy,
        followers=p.dependencies.followers,
        relatives=p.namespaces.relatives,
        verdicts=(hooks.reached,) if hooks is not None else (),
        relapsed=(p.logs.relapsed,),
        notes=(p.logs.unfollowed,),
    )


def build_status(
    settings: Settings,
    *,
    engine: Engine | None = None,
    clock: Clock | None = None,
    store: SqliteStore | None = None,
    metrics: PrometheusMetrics | None = None,
    host: str = "",
    hooks: Callable[[Store, Clock, Metrics, str], Hooks] | None = None,
    restart_calls: RestartCalls | None = None,
    resource_reader: ResourceReader | None = None,
) -> App:
    """The loop without delivery, systemd or the API: for `guardian status` and `guardian check`
    (no notification secrets; `hooks` builds build_daemon's hooks). `restart_calls` (tests): where
    restart calls run, by default here until the daemon starts its work queue (App.restarts);
    `resource_reader` (tests): the cgroup reader. Raises StoreError."""
    clock = clock or SystemClock()
    metrics = metrics or PrometheusMetrics(CollectorRegistry())
    sqlite = store or SqliteStore(store_path(settings))
    changes, facts = changes_followed()
    loop_store = LoopStore(sqlite, metrics, facts, RunStamps(clock))  # service/healing/written.py
    engine = engine_of(settings, engine, clock)
    hs = healer_settings(settings, detect_self_id(), host)
    after = hooks(loop_store, clock, metrics, hs.host) if hooks is not None else None
    restarts = RestartRunner(metrics, clock)
    healer, prober, resources, logs = build_loop(
        settings,
        hs,
        engine,
        loop_store,
        clock,
        metrics,
        hooks=after,
        facts=facts,
        calls=restart_calls or restarts,
        rechecks=restarts,
        turns=restarts,
        reader=resource_reader,
    )
    return App(
        settings,
        engine,
        loop_store,
        clock,
        metrics,
        healer,
        prober,
        loop_operator(settings, loop_store, clock, hs.host, facts, engine, healer),
        resources,
        loop=Loop(healer.ctx.state, hs.host, healer.follow_step),
        verifier=healer.verifier,
        restarts=restarts,
        logs=logs,
        edges=Edges(engine.close, loop_store.close),
        prune=sqlite.prune,
        hooks=after,
        changes=changes,
        facts=facts,
        store_degraded=loop_store.degraded,
    )


def loop_operator(
    settings: Settings,
    store: LoopStore,
    clock: Clock,
    host: str,
    facts: FactStream,
    engine: Engine,
    healer: Healer,
) -> Operator:
    """The operator actions in the loop's process (the API's): a person's rollback asked here
    is looked at at once, on the container's worker."""
    ttl = settings["restart.approval_ttl"]
    return Operator(
        store, clock, host, ttl, facts, engine, healer.requested.look_for, store.in_order
    )


def changes_followed() -> tuple[Changes, FactStream]:
    """The loop's stream of facts, and the changes the status page's stream waits on, kept
    from it."""
    changes = Changes()
    facts = FactStream()
    facts.subscribe(changes.on_fact)
    return changes, facts


def engine_of(settings: Settings, engine: Engine | None, clock: Clock) -> Engine:
    """The engine (default: Docker at docker.url), its URL's credentials masked in every log
    line, even when quoted alone."""
    engine = engine or DockerEngine(settings["docker.url"], settings["docker.timeout"], clock)
    docker_url = Redactor()
    docker_url.add_credentials_of(settings["docker.url"])
    install_redaction(docker_url)
    return engine


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
    hook_runner: HookRunner | None = None,
    resource_reader: ResourceReader | None = None,
) -> App:
    """Everything `guardian run` needs: the loop, the notification channels (secrets read from
    `env`), the API token, systemd and the operator's hooks. Raises StoreError or ConfigError.
    The app holds `lock` (claim_instance) and opens the store it locked."""
    sqlite = store or SqliteStore(lock.store if lock is not None else store_path(settings))
    warn_if_readable(sqlite.db.path)  # once the store is known to be good
    for note in settings.notes:  # compat autoheal: what each of its variables became
        log.info(note)
    secrets = Redactor()  # filled below, before any hook can run: masked in hooks' output
    app = build_status(
        settings,
        engine=engine,
        clock=clock,
        store=sqlite,
        metrics=metrics,
        host=host,
        hooks=hooks_builder(settings, hook_runner, secrets, env),
        resource_reader=resource_reader,
    )
    try:
        app.delivery = build_delivery(
            settings,
            sqlite,
            app.clock,
            app.metrics,
            app.healer.ctx.settings.host,
            env,
            facts=app.facts,
        )
        app.api_token = load_token(settings, env)
        app.heartbeat = build_heartbeat(settings, app.metrics, env)
    except ConfigError:
        app.edges.close()
        raise
    app.loop.also_stepped(app.delivery.follow_step)
    record_maintenance(app, sqlite)  # the daemon's alone (`guardian check` sweeps too)
    follow_elsewhere(app, sqlite)
    secrets.update(app.delivery.redact)
    if app.api_token:
        secrets.add(app.api_token)
    secrets.add_credentials_of(settings["docker.url"])
    app.supervisor = supervisor or SystemdSupervisor.from_env(env)
    app.lock = lock
    app.edges.hold(app.supervisor.close)
    if lock is not None:
        app.edges.hold(lock.release)
    return app


def record_maintenance(app: App, store: SqliteStore) -> None:
    """Each sweep's listing brings the store's runs of maintenance windows up to date (the
    events feed's maintenance.started and .ended)."""
    rules, ctx = app.healer.ctx.rules, app.healer.ctx
    windows = MaintenanceLog(
        store,
        lambda snap: rules.of(snap).maintenance,
        ctx.settings.host,
        app.clock,
        tuning=lambda: rules.settings,
    )
    app.facts.subscribe(windows.on_fact)


def follow_elsewhere(app: App, store: SqliteStore) -> None:
    """What other processes (a `guardian` command) write to the store, told to the readers
    from its change feed as they land (the daemon watches the store's file for it)."""
    app.elsewhere = Elsewhere(
        SqliteFeed(store.db),
        app.facts,
        app.healer.ctx.settings.host,
        on_rollback=app.healer.requested.look_for,  # `guardian rollback` asked: a look at it
    )
    app.store_file = store.db.path


def hooks_builder(
    settings: Settings,
    runner: HookRunner | None,
    secrets: Redactor,
    env: Mapping[str, str] | None = None,
) -> Callable[[Store, Clock, Metrics, str], Hooks] | None:
    """How build_status builds the hooks of remediation.hooks (None: none configured). They get
    the PATH their programs were found on, and never Guardian's environment."""
    if not settings["remediation.hooks"]:
        return None
    env = os.environ if env is None else env
    hs = HookSettings(
        settings["remediation.hooks"],
        settings["remediation.hooks_max_concurrent"],
        settings["remediation.hooks_max_queued"],
        env.get("PATH", os.defpath),
    )
    used = runner or SubprocessHookRunner()

    def build(store: Store, clock: Clock, metrics: Metrics, host: str) -> Hooks:
        return Hooks(store, clock, metrics, host, used, hs, secrets)

    return build


def build_operator(
    settings: Settings,
    *,
    store: Store | None = None,
    clock: Clock | None = None,
    host: str = "",
    engine: Engine | bool = False,
) -> Operator:
    """The store and clock alone, for CLI commands that do not need the engine; `engine`:
    with the engine too (True: Docker at docker.url), for a person's rollback."""
    store = store or SqliteStore(existing_store_path(settings))
    clock = clock or SystemClock()
    with_engine = engine_of(settings, None, clock) if engine is True else engine or None
    return Operator(
        store,
        clock,
        host or socket.gethostname(),
        settings["restart.approval_ttl"],
        engine=with_engine,
    )


def build_channels(
    settings: Settings,
    outbox: SqliteOutbox,
    clock: Clock,
    redact: Redactor,
    env: Mapping[str, str] | None = None,
) -> tuple[list[Notifier], Routing]:
    """The channels of every receiver (config.channels: notify.channels, and the flat keys'
    receivers) and the routing between them; secrets are registered with `redact`. Raises
    ConfigError."""
    n = settings.values["notify"]
    timeout, pacing = settings["notify.timeout"], settings["notify.pacing"]
    channels: list[Notifier] = []
    receivers: dict[str, tuple[str, ...]] = {}
    for spec, secret, where in receiver_specs(settings, redact, env):
        try:
            built = receiver_channels(spec, secret, where, outbox, clock, timeout, pacing, redact)
        except ChannelConfigError as exc:
            raise ConfigError(str(exc)) from None
        receivers[str(spec["name"])] = tuple(c.name for c in built)
        channels += built
    routes = tuple(route_of(r) for r in n["routes"])
    return channels, Routing(receivers, routes, n["default"])


def build_delivery(
    settings: Settings,
    store: SqliteStore,
    clock: Clock,
    metrics: Metrics,
    host: str,
    env: Mapping[str, str] | None = None,
    facts: FactStream | None = None,
) -> DeliveryWorker:
    """The outbox worker and the channels configured in `notify:`; every secret read is
    registered for redaction in every log line. `facts`: where a send given up is published
    (the status page lists dead letters)."""
    n = settings.values["notify"]
    redact = Redactor()
    outbox = SqliteOutbox(store.db)
    channels, routing = build_channels(settings, outbox, clock, redact, env)
    retry = RetryPolicy(
        max_attempts=n["max_attempts"],
        backoff=n["retry_backoff"],
        max_backoff=n["max_backoff"],
        max_retry_after=n["max_retry_after"],
    )
    notice = started_notice(settings, host, clock) if n["on_start"] else None
    ws = WorkerSettings(host, n["group_wait"], n["repeat_interval"], retry, on_start=notice)
    install_redaction(redact)
    named = n["channels"] or n["routes"] or n["default"]  # else every channel hears everything
    worker = DeliveryWorker(
        outbox, channels, clock, metrics, ws, redact, routing if named else None, facts
    )
    store.db.on_outbox_written(worker.wake)  # whatever writes a notification wakes the worker
    if facts is not None:
        facts.subscribe(worker.on_fact)  # what the store could not queue is sent directly
    return worker


def started_notice(settings: Settings, host: str, clock: Clock) -> Notification:
    """notify.on_start's message: this host, this version, the containers it watches."""
    from guardian import __version__

    watching = f"the containers labelled {settings['watch.label']}=true"
    if settings["watch.scope"]:
        watching += f" within {settings['watch.scope']}"
    return notifications.started(host, __version__, watching, clock.now())


def build_channel_check(
    settings: Settings, env: Mapping[str, str] | None = None, clock: Clock | None = None
) -> ChannelCheck:
    """`guardian notify test`: the configured channels over a throwaway in-memory outbox (a
    test message leaves no thread root or alert in the daemon's store). Raises ConfigError."""
    clock = clock or SystemClock()
    redact = Redactor()
    outbox = SqliteOutbox(SqliteStore(":memory:").db)
    channels, _ = build_channels(settings, outbox, clock, redact, env)
    install_redaction(redact)
    return ChannelCheck(channels, clock, socket.gethostname(), redact)


def build_heartbeat(
    settings: Settings, metrics: Metrics, env: Mapping[str, str] | None = None
) -> Heartbeat | None:
    """The heartbeat to a push monitor when heartbeat.url_* is set; its URLs are secrets,
    registered for redaction in every log line. Raises ConfigError."""
    redact = Redactor()
    urls = heartbeat_urls(settings, redact, env)
    if urls is None:
        return None
    url, fail = urls
    pinger = HttpPinger(url, fail, settings["heartbeat.timeout"])
    redact.add(failure_url(url))
    install_redaction(redact)
    return Heartbeat(pinger, settings["heartbeat.interval"], metrics, redact)


def build_outbox(settings: Settings) -> SqliteOutbox:
    """The outbox of an existing store, for `guardian notifications` (close its .store)."""
    return SqliteOutbox(SqliteStore(existing_store_path(settings)).db)
