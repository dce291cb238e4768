"""Dependency-aware healing: `guardian.depends_on`, Compose's depends_on, `guardian.restart_with`.

While a dependency is unhealthy its dependents are not restarted (decide() says
`dependency_unhealthy`, naming the dependency's incident). After Guardian restarted a container
and saw it healthy, the containers that declared `guardian.restart_with=<it>` are restarted too,
each through decide() with its own budget.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping

from guardian.core.model import (
    HOST_PROBLEMS,
    ContainerSnapshot,
    IncidentState,
    Outcome,
    RemediationAction,
    Verdict,
)
from guardian.healer import Assessment, Healer
from guardian.logs import kv
from guardian.remediation import PendingVerify

log = logging.getLogger("guardian.dependencies")

DEPENDS_ON = "guardian.depends_on"
RESTART_WITH = "guardian.restart_with"
COMPOSE_DEPENDS_ON = "com.docker.compose.depends_on"
COMPOSE_PROJECT = "com.docker.compose.project"
COMPOSE_SERVICE = "com.docker.compose.service"
RESTART_WITH_REASON = "restart_with"

_UNHEALTHY_STATES = frozenset(
    {IncidentState.ACTIVE, IncidentState.ACKNOWLEDGED, IncidentState.IN_PROGRESS}
)


def _names(value: str | None) -> list[str]:
    """`db,cache` -> [db, cache]; Compose writes `db:service_healthy:false,cache:...`."""
    if not value:
        return []
    out = []
    for part in value.split(","):
        name = part.strip().split(":", 1)[0].strip()
        if name and name not in out:
            out.append(name)
    return out


class Dependencies:
    """Resolves dependency names to container names, from the containers the last sweep listed."""

    def __init__(self, healer: Healer) -> None:
        self.healer = healer
        self._lock = threading.Lock()
        self._labels: dict[str, Mapping[str, str]] = {}  # container name -> labels
        self._ids: dict[str, str] = {}
        # Containers seen with a problem and not yet seen healthy: covers the moment between
        # detection and the incident being written (a sweep decides for all before acting).
        self._problems: set[str] = set()

    def attach(self) -> None:
        self.healer.hooks.listed.append(self.update)
        self.healer.hooks.unhealthy_dependencies = self.unhealthy
        self.healer.hooks.healed.append(self.restart_followers)
        self.healer.hooks.assessed.append(self.assessed)
        self.healer.hooks.detected.append(lambda r: self._mark(r.container_name, True))
        self.healer.hooks.recovered.append(lambda name: self._mark(name, False))

    def _mark(self, name: str, problem: bool) -> None:
        with self._lock:
            if problem:
                self._problems.add(name)
            else:
                self._problems.discard(name)

    def assessed(self, rows: list[Assessment]) -> None:
        for row in rows:
            if row.result.problem is not None:
                self._mark(row.snapshot.name, True)
            elif row.result.skipped is None:
                self._mark(row.snapshot.name, False)
        # Act on dependencies before their dependents, so a held-back restart can name the
        # dependency's incident (the sweep applies rows in this order).
        rows.sort(key=lambda row: self.depth(row.snapshot.name))

    def depth(self, container: str, seen: frozenset[str] = frozenset()) -> int:
        """0 without dependencies, else 1 + the deepest dependency (cycles cut)."""
        deps = [d for d in self.depends_on(container) if d not in seen]
        if not deps or len(seen) > 10:
            return 0
        return 1 + max(self.depth(d, seen | {container}) for d in deps)

    def update(self, snapshots: list[ContainerSnapshot]) -> None:
        with self._lock:
            self._labels = {s.name: s.labels for s in snapshots}
            self._ids = {s.name: s.id for s in snapshots}

    def _resolve(self, of: str, refs: list[str]) -> list[str]:
        """A reference is a container name, or a Compose service of the same project."""
        labels = self._labels.get(of, {})
        project = labels.get(COMPOSE_PROJECT)
        out: list[str] = []
        for ref in refs:
            if ref in self._labels:
                matches = [ref]
            else:
                matches = sorted(
                    n
                    for n, lab in self._labels.items()
                    if project
                    and lab.get(COMPOSE_PROJECT) == project
                    and lab.get(COMPOSE_SERVICE) == ref
                )
            out += [m for m in matches if m != of and m not in out]
        return out

    def depends_on(self, container: str) -> list[str]:
        with self._lock:
            labels = self._labels.get(container, {})
            refs = _names(labels.get(DEPENDS_ON)) + _names(labels.get(COMPOSE_DEPENDS_ON))
            return self._resolve(container, refs)

    def followers(self, container: str) -> list[str]:
        """Containers that declared `guardian.restart_with` naming `container`."""
        with self._lock:
            return sorted(
                name
                for name, labels in self._labels.items()
                if container in self._resolve(name, _names(labels.get(RESTART_WITH)))
            )

    def unhealthy(self, container: str) -> tuple[str, ...]:
        """Dependencies of `container` with an unresolved incident: 'db (incident 4)'."""
        host = self.healer.settings.host
        out = []
        for dep in self.depends_on(container):
            for incident in self.healer.store.open_incidents(host, dep):
                if incident.type not in HOST_PROBLEMS and incident.state in _UNHEALTHY_STATES:
                    out.append(f"{dep} (incident {incident.id}, {incident.type})")
                    break
            else:
                if dep in self.healer.pending:
                    out.append(f"{dep} (restart being verified)")
                elif dep in self._problems:
                    out.append(f"{dep} (unhealthy)")
        return tuple(out)

    # -- restart_with -----------------------------------------------------------------------

    def restart_followers(self, container: str) -> None:
        """`container` was restarted by Guardian and is healthy: restart its followers."""
        self._mark(container, False)
        for name in self.followers(container):
            try:
                self._restart_follower(name, container)
            except Exception:
                log.exception("restart_with failed", extra=kv(container=name, after=container))

    def _restart_follower(self, name: str, leader: str) -> None:
        healer, host = self.healer, self.healer.settings.host
        cid = self._ids.get(name)
        snap = healer.engine.inspect(cid) if cid else None
        if snap is None:
            return
        rules = healer.rules(snap)
        leader_incident = next(
            (i.id for i in reversed(healer.store.open_incidents(host, leader))), None
        )
        now = healer.clock.now()
        with healer._lock:
            decision = healer.decide(name, rules, now)
            if decision.restart:
                healer._restarting.add(name)
        healer.metrics.decisions_total.labels(
            decision=str(decision.verdict), reason=str(decision.reason)
        ).inc()
        detail = f"after {leader} was restarted and healthy"
        if not decision.restart:
            healer.store.record_intent(
                RemediationAction(
                    None,
                    leader_incident,
                    host,
                    name,
                    snap.id,
                    "decision",
                    now,
                    str(decision.reason),
                    outcome=Outcome.RETRY_EXHAUSTED
                    if decision.verdict is Verdict.GIVE_UP
                    else Outcome.POLICY_DENIED,
                    detail=f"{RESTART_WITH_REASON} {detail}: {decision.verdict}"
                    + (f"; {decision.detail}" if decision.detail else ""),
                    finished_at=now,
                    attempt=decision.attempt,
                    extra={"restart_with": leader},
                )
            )
            log.info(
                "restart_with held back",
                extra=kv(container=name, after=leader, reason=decision.reason),
            )
            return
        try:
            action_id = healer.store.record_intent(
                RemediationAction(
                    None,
                    leader_incident,
                    host,
                    name,
                    snap.id,
                    "restart",
                    now,
                    RESTART_WITH_REASON,
                    detail=detail,
                    attempt=decision.attempt,
                    extra={"restart_with": leader},
                )
            )
            log.warning(
                "restarting container with its dependency",
                extra=kv(container=name, after=leader, attempt=decision.attempt),
            )
            outcome = healer.engine.restart(snap.id, rules.stop_timeout, snap.started_at)
        finally:
            with healer._lock:
                healer._restarting.discard(name)
        done = healer.clock.now()
        healer.store.record_outcome(action_id, outcome.outcome, outcome.detail, done)
        if outcome.outcome in (Outcome.RESTARTED, Outcome.UNKNOWN):
            with healer._lock:
                healer.pending[name] = PendingVerify(
                    action_id,
                    None,
                    name,
                    snap.id,
                    now,
                    done + healer.settings.verify_timeout,
                    snap.started_at,
                )
        else:
            healer.metrics.restarts_total.labels(container=name, outcome=str(outcome.outcome)).inc()
