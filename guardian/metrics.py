"""Every Prometheus metric Guardian exports, in one class over an injected registry.

Labels stay bounded: container names and fixed enums, never container or incident ids.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from guardian import __version__

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
DURATION_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class Metrics:
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
            "guardian_incidents", "Incidents opened, by type.", ["type"], registry=registry
        )
        self.decisions_total = Counter(
            "guardian_restart_decisions",
            "Restart decisions taken by the policy, by decision and reason.",
            ["decision", "reason"],
            registry=registry,
        )
        self.restarts_total = Counter(
            "guardian_restarts",
            "Restart attempts by final outcome.",
            ["container", "outcome"],
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
            "Unix time of the last completed sweep.",
            registry=registry,
        )
        self.docker_up = Gauge(
            "guardian_docker_up",
            "1 when the Docker engine answered the last call.",
            registry=registry,
        )
        self.store_errors = Counter(
            "guardian_store_errors", "Writes to the store that failed.", registry=registry
        )
        self.notifications_total = Counter(
            "guardian_notifications",
            "Notification sends by channel and outcome (delivered, rate_limited, transient,"
            " permanent, unknown, dead_letter), counted per notification carried.",
            ["channel", "outcome"],
            registry=registry,
        )
        self.notification_queue_depth = Gauge(
            "guardian_notification_queue_depth",
            "Notification deliveries waiting in the outbox.",
            registry=registry,
        )
        self.build_info = Info("guardian_build", "Guardian build information.", registry=registry)
        self.build_info.info({"version": __version__})

    def set_open_incidents(self, counts: dict[tuple[str, str], int]) -> None:
        """Replace the open-incident gauge with fresh counts keyed by (type, state)."""
        self.incidents_open.clear()
        for (kind, state), n in counts.items():
            self.incidents_open.labels(type=kind, state=state).set(n)
