"""The loop's settings, read from config by bootstrap (the service never reads config itself)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from guardian.core.detection.checks import CheckSettings
from guardian.core.detection.log_rules import LogRule
from guardian.core.detection.resources import ResourceRule
from guardian.core.detection.restart_policy import RestartPolicy
from guardian.core.detection.windows import MaintenanceWindow
from guardian.core.labels import watched


@dataclass(frozen=True)
class HealerSettings:
    host: str
    watch_label: str
    policy: RestartPolicy
    checks: CheckSettings
    stop_timeout: timedelta
    verify_timeout: timedelta
    self_id: str | None = None
    scope: str = ""  # watch.scope label selector; empty: the whole host
    labels_may_loosen: tuple[str, ...] = ()  # labels.allow_loosen (core.labels.LOOSENABLE)
    approval_ttl: timedelta = timedelta(hours=1)  # restart.approval_ttl (guardian.action=ask)
    maintenance: tuple[MaintenanceWindow, ...] = ()  # maintenance.windows (core.detection.windows)
    resources: tuple[ResourceRule, ...] = ()  # resources.rules (core.detection.resources)
    log_rules: tuple[LogRule, ...] = ()  # logs.rules (core.detection.log_rules)
    # watch.resync: while a stream is open, the first sweep once this has passed since the last
    # resync lists the containers that do not run well, and every tenth resync every container
    # (service.state.listing); 0: every sweep lists every container.
    resync: timedelta = timedelta(0)

    def watches(self, labels: dict[str, str]) -> bool:
        """The one "is this container watched" predicate (sweep, events, status, API)."""
        return watched(labels, self.watch_label, self.scope)
