"""The Metrics port over prometheus_client: every metric Guardian exports, in one class over an
injected registry.

Labels stay bounded: container names and fixed enums, never container or incident ids.
The README's metrics table lists them; monitoring/ holds the alerts and the dashboard.
"""

from __future__ import annotations

from datetime import datetime

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from guardian import __version__
from guardian.core.model import Decision, ProblemType, Reason, Verdict
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


class PrometheusMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.containers_watched = Gauge(
            "guardian_containers_watched", "Containers opted in to Guardian.", registry=registry
        )
        self.containers_unhealthy = Gauge(
            "guardian_containers_unhealthy",
            "Watched containers with a problem at the last sweep.",
            registry=registry,
        )
        self.incidents_open = Gauge(
            "guardian_incidents_open",
            "Incidents not yet closed, by type and state.",
            ["type", "state"],
            registry=registry,
        )
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
        self.restarts_total = Counter(
            "guardian_restarts",
            "Restarts by final outcome (retry_exhausted: Guardian gave up on the container).",
            ["container", "outcome"],
            registry=registry,
        )
        self.restarts_exhausted = Gauge(
            "guardian_restarts_exhausted",
            "1 while the container has an open incident whose restart attempts are used up.",
            ["container"],
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
        self.last_sweep = Gauge(
            "guardian_last_sweep_timestamp_seconds",
            "Unix time of the last completed sweep (NaN until the first one).",
            registry=registry,
        )
        # Not 0 (1970): "no sweep yet" must not read as a sweep 56 years late.
        self.last_sweep.set(float("nan"))
        self.docker_up = Gauge(
            "guardian_docker_up",
            "1 when the Docker engine answered the last call.",
            registry=registry,
        )
        self.store_errors = Counter(
            "guardian_store_errors",
            "Store operations that failed (a failed write is logged and healing continues).",
            registry=registry,
        )
        self.notifications_total = Counter(
            "guardian_notifications",
            "Notification deliveries by channel and outcome.",
            ["channel", "outcome"],
            registry=registry,
        )
        self.notification_queue_depth = Gauge(
            "guardian_notification_queue_depth",
            "Notifications waiting in the outbox.",
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
        self.build_info = Info("guardian_build", "Guardian build information.", registry=registry)
        self.engine_identified(None)
        # Series that alerts take increase() of exist from the start: a counter series that is
        # born at 1 shows no increase, and the first incident or restart would go unseen.
        for kind in ProblemType:
            self.incidents_total.labels(type=str(kind))
        self.decisions_total.labels(decision=str(Verdict.RESTART), reason=str(Reason.ALLOWED))

    # -- the Metrics port -------------------------------------------------------------------

    def engine_reachable(self, up: bool) -> None:
        self.docker_up.set(1 if up else 0)

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
        self.containers_watched.set(watched)
        self.containers_unhealthy.set(unhealthy)

    def sweep_finished(self, seconds: float, completed_at: datetime | None) -> None:
        self.sweep_duration.observe(seconds)
        if completed_at is not None:
            self.last_sweep.set(completed_at.timestamp())

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
        self.restarts_total.labels(container=container, outcome=outcome).inc()

    def open_incidents(self, counts: dict[tuple[str, str], int], exhausted: set[str]) -> None:
        self.set_open_incidents(counts)
        self.set_exhausted(exhausted)

    def store_failed(self) -> None:
        self.store_errors.inc()

    def notification_channel(self, channel: str) -> None:
        self.add_notification_channel(channel)
        self.notification_channel_state.labels(channel=channel).set(1)

    def notification_sent(self, channel: str, outcome: str) -> None:
        self.count_notification(channel, outcome)

    def notification_queue(self, depth: int) -> None:
        self.notification_queue_depth.set(depth)

    def notification_channel_up(self, channel: str, up: bool) -> None:
        self.notification_channel_state.labels(channel=channel).set(1 if up else 0)

    def heartbeat_pinged(self, up: bool, delivered: bool | None) -> None:
        ping = "up" if up else "fail"
        for outcome in ("delivered", "failed"):
            series = self.heartbeat_pings.labels(ping=ping, outcome=outcome)
            if delivered is not None and (outcome == "delivered") == delivered:
                series.inc()

    # -- helpers ----------------------------------------------------------------------------

    def set_open_incidents(self, counts: dict[tuple[str, str], int]) -> None:
        """Replace the open-incident gauge with fresh counts keyed by (type, state)."""
        self.incidents_open.clear()
        for (kind, state), n in counts.items():
            self.incidents_open.labels(type=kind, state=state).set(n)

    def set_exhausted(self, containers: set[str]) -> None:
        """Replace the exhausted-restarts gauge: one series per container Guardian gave up on."""
        self.restarts_exhausted.clear()
        for name in containers:
            self.restarts_exhausted.labels(container=name).set(1)

    def add_notification_channel(self, channel: str) -> None:
        """Create every outcome series of a channel at 0, so its first failure is alertable."""
        for outcome in NOTIFICATION_OUTCOMES:
            self.notifications_total.labels(channel=channel, outcome=outcome)

    def count_notification(self, channel: str, outcome: str) -> None:
        """Count one delivery attempt; `outcome` is one of NOTIFICATION_OUTCOMES."""
        if outcome not in NOTIFICATION_OUTCOMES:
            raise ValueError(f"notification outcome {outcome!r}: expected {NOTIFICATION_OUTCOMES}")
        self.notifications_total.labels(channel=channel, outcome=outcome).inc()
