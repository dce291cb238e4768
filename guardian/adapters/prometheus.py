"""The Metrics port over prometheus_client: every metric Guardian exports, in one class over an
injected registry.

Labels stay bounded: container names and fixed enums, never container or incident ids.
docs/monitoring.md's metrics table lists them; monitoring/ holds the alerts and the dashboard.
What the loop's state says now (the gauges, and the restarts of the containers still there) is
read at scrape time by a custom collector (LoopCollector), never cleared and refilled.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from guardian import __version__
from guardian.core.model import Decision, ProblemType, Reason, Verdict
from guardian.core.outbound.hooks import HOOK_OUTCOMES
from guardian.ports import EngineIdentity

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
DURATION_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

# The `outcome` values of guardian_notifications_total (the restart taxonomy, for deliveries):
# delivered; transient_failure (will be retried); permanent_failure (a 4xx: never retried);
# dead_letter (retries used up, kept in the store); unknown (timeout after sending).
NOTIFICATION_OUTCOMES = (
    "delivered",
    "transient_failure",
    "permanent_failure",
    "dead_letter",
    "unknown",
)


@dataclass(frozen=True)
class LoopNow:
    """What the loop's state says now: replaced whole by each update, read whole by a scrape."""

    watched: int = 0
    unhealthy: int = 0
    open_incidents: tuple[tuple[tuple[str, str], int], ...] = ()  # ((type, state), count)
    exhausted: frozenset[str] = frozenset()
    last_sweep: float = float("nan")  # Not 0 (1970): "no sweep yet" is not a sweep 56 years late
    docker_up: float = 0.0
    queue_depth: int = 0
    # Restarts by (container, outcome) of the containers still there: a removed container's
    # series end (forget_containers).
    restarts: tuple[tuple[tuple[str, str], int], ...] = ()


@dataclass(eq=False)  # registered by identity
class LoopCollector(Collector):
    """The gauges and guardian_restarts_total, built at scrape time from one LoopNow: a scrape
    sees every series that exists, whichever thread updates what meanwhile."""

    now: LoopNow = field(default_factory=LoopNow)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def update(self, **changes: object) -> None:
        with self.lock:
            self.now = replace(self.now, **changes)  # type: ignore[arg-type]

    def collect(self) -> Iterator[Metric]:
        now = self.now  # one value, replaced whole: no lock needed to read it
        yield _gauge("guardian_containers_watched", "Containers opted in to Guardian.", now.watched)
        yield _gauge(
            "guardian_containers_unhealthy",
            "Watched containers with a problem at the last sweep.",
            now.unhealthy,
        )
        incidents = GaugeMetricFamily(
            "guardian_incidents_open",
            "Incidents not yet closed, by type and state.",
            labels=["type", "state"],
        )
        for (kind, state), n in now.open_incidents:
            incidents.add_metric([kind, state], n)
        yield incidents
        restarts = CounterMetricFamily(
            "guardian_restarts",
            "Restarts by final outcome (retry_exhausted: Guardian gave up on the container).",
            labels=["container", "outcome"],
        )
        for (container, outcome), n in now.restarts:
            restarts.add_metric([container, outcome], n)
        yield restarts
        exhausted = GaugeMetricFamily(
            "guardian_restarts_exhausted",
            "1 while the container has an open incident whose restart attempts are used up.",
            labels=["container"],
        )
        for name in sorted(now.exhausted):
            exhausted.add_metric([name], 1)
        yield exhausted
        yield _gauge(
            "guardian_last_sweep_timestamp_seconds",
            "Unix time of the last completed sweep (NaN until the first one).",
            now.last_sweep,
        )
        yield _gauge(
            "guardian_docker_up", "1 when the Docker engine answered the last call.", now.docker_up
        )
        yield _gauge(
            "guardian_notification_queue_depth",
            "Notifications waiting in the outbox.",
            now.queue_depth,
        )

    def describe(self) -> Iterator[Metric]:
        return self.collect()  # the families without series: names, types and label names


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


class PrometheusMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.loop_now = LoopCollector()
        registry.register(self.loop_now)
        self.incidents_total = Counter(
            "guardian_incidents",
            "Incidents opened (or reopened by a recurrence), by type.",
            ["type"],
            registry=registry,
        )
        self.decisions_total = Counter(
            "guardian_restart_decisions",
            "Restart decisions taken by the policy, by decision and reason.",
            ["decision", "reason"],
            registry=registry,
        )
        self.detection_to_restart = Histogram(
            "guardian_detection_to_restart_seconds",
            "Time from Docker reporting a problem to Guardian's restart request.",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.restart_duration = Histogram(
            "guardian_restart_duration_seconds",
            "Duration of the engine's restart call.",
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.sweep_duration = Histogram(
            "guardian_sweep_duration_seconds",
            "Duration of one reconciliation sweep.",
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.store_errors = Counter(
            "guardian_store_errors",
            "Store operations that failed (a failed write is logged and healing continues).",
            registry=registry,
        )
        self.store_held = Gauge(
            "guardian_store_held_intents",
            "Restart and stop intents held only in memory: the store refused to write them; "
            "written when it accepts writes again, lost if Guardian dies first.",
            registry=registry,
        )
        self._declare_watchers(registry)
        self._declare_outbound(registry)
        self.build_info = Info("guardian_build", "Guardian build information.", registry=registry)
        self.engine_identified(None)
        self._series_from_start()

    def _declare_watchers(self, registry: CollectorRegistry) -> None:
        """What the watchers beside the health check see: log rules left waiting, the clock."""
        self.log_rules_unfollowed = Gauge(
            "guardian_log_rules_unfollowed",
            "Running containers with a log rule whose output is not followed: every slot is "
            "taken (the operator's logs.rules are followed first).",
            registry=registry,
        )
        self.clock_steps = Counter(
            "guardian_clock_steps",
            "Steps of the wall clock against the monotonic clock (NTP, a person, a VM resumed), "
            "by direction; durations never depend on the wall clock.",
            ["direction"],
            registry=registry,
        )

    def _declare_outbound(self, registry: CollectorRegistry) -> None:
        """What Guardian sends out: notifications, heartbeat pings, remediation hooks."""
        self.notifications_total = Counter(
            "guardian_notifications",
            "Notification deliveries by channel and outcome.",
            ["channel", "outcome"],
            registry=registry,
        )
        self.notification_channel_state = Gauge(
            "guardian_notification_channel_up",
            "1 while the channel delivers; 0 once it dead-lettered, until it delivers again.",
            ["channel"],
            registry=registry,
        )
        self.heartbeat_pings = Counter(
            "guardian_heartbeat_pings",
            "Heartbeat pings to the push monitor, by ping (up or fail) and outcome.",
            ["ping", "outcome"],
            registry=registry,
        )
        self.hook_runs_total = Counter(
            "guardian_hook_runs",
            "Runs of remediation.hooks by outcome (policy_denied: refused, the queue was full).",
            ["outcome"],
            registry=registry,
        )

    def _series_from_start(self) -> None:
        """Series that alerts take increase() of exist from the start: a counter series that is
        born at 1 shows no increase, and the first incident or restart would go unseen."""
        for direction in ("forward", "back"):
            self.clock_steps.labels(direction=direction)
        for kind in ProblemType:
            self.incidents_total.labels(type=str(kind))
        self.decisions_total.labels(decision=str(Verdict.RESTART), reason=str(Reason.ALLOWED))
        for outcome in HOOK_OUTCOMES:
            self.hook_runs_total.labels(outcome=str(outcome))

    # -- the Metrics port -------------------------------------------------------------------

    def engine_reachable(self, up: bool) -> None:
        self.loop_now.update(docker_up=1.0 if up else 0.0)

    def engine_identified(self, engine: EngineIdentity | None) -> None:
        """Until the engine first answers, its kind and version are "unknown"."""
        self.build_info.info(
            {
                "version": __version__,
                "engine": engine.kind if engine else "unknown",
                "engine_version": engine.version if engine else "unknown",
            }
        )

    def swept(self, watched: int, unhealthy: int) -> None:
        self.loop_now.update(watched=watched, unhealthy=unhealthy)

    def sweep_finished(self, seconds: float, completed_at: datetime | None) -> None:
        self.sweep_duration.observe(seconds)
        if completed_at is not None:
            self.loop_now.update(last_sweep=completed_at.timestamp())

    def incident_opened(self, kind: ProblemType) -> None:
        self.incidents_total.labels(type=str(kind)).inc()

    def decided(self, decision: Decision) -> None:
        self.decisions_total.labels(
            decision=str(decision.verdict), reason=str(decision.reason)
        ).inc()

    def restart_requested(self, detected_at: datetime | None, at: datetime) -> None:
        if detected_at is not None:
            self.detection_to_restart.observe(max(0.0, (at - detected_at).total_seconds()))

    def restart_returned(self, seconds: float) -> None:
        self.restart_duration.observe(seconds)

    def restart_ended(self, container: str, outcome: str) -> None:
        with self.loop_now.lock:
            counts = dict(self.loop_now.now.restarts)
            counts[(container, outcome)] = counts.get((container, outcome), 0) + 1
            self.loop_now.now = replace(self.loop_now.now, restarts=tuple(sorted(counts.items())))

    def containers_present(self, names: set[str]) -> None:
        with self.loop_now.lock:
            now = self.loop_now.now
            kept = tuple(kv for kv in now.restarts if kv[0][0] in names)
            self.loop_now.now = replace(now, restarts=kept)

    def open_incidents(self, counts: dict[tuple[str, str], int], exhausted: set[str]) -> None:
        self.loop_now.update(
            open_incidents=tuple(sorted(counts.items())), exhausted=frozenset(exhausted)
        )

    def store_failed(self) -> None:
        self.store_errors.inc()

    def store_holding(self, count: int) -> None:
        self.store_held.set(count)

    def log_rules_unfollowed_now(self, count: int) -> None:
        self.log_rules_unfollowed.set(count)

    def clock_stepped(self, seconds: float) -> None:
        self.clock_steps.labels(direction="forward" if seconds > 0 else "back").inc()

    def notification_channel(self, channel: str) -> None:
        self.add_notification_channel(channel)
        self.notification_channel_state.labels(channel=channel).set(1)

    def notification_sent(self, channel: str, outcome: str) -> None:
        self.count_notification(channel, outcome)

    def notification_queue(self, depth: int) -> None:
        self.loop_now.update(queue_depth=depth)

    def notification_channel_up(self, channel: str, up: bool) -> None:
        self.notification_channel_state.labels(channel=channel).set(1 if up else 0)

    def heartbeat_pinged(self, up: bool, delivered: bool | None) -> None:
        ping = "up" if up else "fail"
        for outcome in ("delivered", "failed"):
            series = self.heartbeat_pings.labels(ping=ping, outcome=outcome)
            if delivered is not None and (outcome == "delivered") == delivered:
                series.inc()

    def hook_ran(self, outcome: str) -> None:
        if outcome in HOOK_OUTCOMES:  # bounded labels, whatever a caller passes
            self.hook_runs_total.labels(outcome=outcome).inc()

    # -- helpers ----------------------------------------------------------------------------

    def add_notification_channel(self, channel: str) -> None:
        """Create every outcome series of a channel at 0, so its first failure is alertable."""
        for outcome in NOTIFICATION_OUTCOMES:
            self.notifications_total.labels(channel=channel, outcome=outcome)

    def count_notification(self, channel: str, outcome: str) -> None:
        """Count one delivery attempt; `outcome` is one of NOTIFICATION_OUTCOMES."""
        if outcome not in NOTIFICATION_OUTCOMES:
            raise ValueError(f"notification outcome {outcome!r}: expected {NOTIFICATION_OUTCOMES}")
        self.notifications_total.labels(channel=channel, outcome=outcome).inc()
