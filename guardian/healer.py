"""One pass of the loop over the ports: observe -> incident -> decide -> act -> record.

The Healer holds no policy of its own: every restart goes through core.policy.decide(), every
incident change through core.incidents. It is driven by the daemon (sweeps, events, verify ticks)
and by `guardian check`. Acting and recording live in remediation.py, verification after a
restart in verify.py.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from guardian.checks import CheckSettings, evaluate, needs_inspect, reported_at
from guardian.core import incidents, notifications
from guardian.core.labels import ContainerRules, in_scope, opted_in, rules_for
from guardian.core.model import (
    HOST_PROBLEMS,
    ContainerSnapshot,
    Decision,
    HealthCheckResult,
    Incident,
    IncidentState,
    Outcome,
    ProblemType,
    Verdict,
)
from guardian.core.notifications import Kind, Notification
from guardian.core.policy import AttemptHistory, HostLoad, RestartPolicy, Target, decide, reset_due
from guardian.hooks import Hooks
from guardian.logs import kv
from guardian.metrics import Metrics
from guardian.ports import Clock, Engine, EngineEvent, EngineUnavailable, Store
from guardian.remediation import PendingVerify, Remediation

log = logging.getLogger("guardian.healer")

# Problems Guardian reports but never restarts for (Docker's restart policy is already at it).
_REPORT_ONLY = frozenset({ProblemType.CRASH_LOOP})


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

    def watches(self, labels: dict[str, str]) -> bool:
        return in_scope(labels, self.scope) and opted_in(labels, self.watch_label)


@dataclass
class Assessment:
    """What one container looked like and what Guardian would do: a row of `guardian check`."""

    snapshot: ContainerSnapshot
    rules: ContainerRules
    result: HealthCheckResult
    decision: Decision | None = None
    detected_at: datetime | None = None


@dataclass
class SweepReport:
    rows: list[Assessment] = field(default_factory=list)
    engine_error: str | None = None


class Healer(Remediation):
    """Observes containers, opens and updates incidents, and asks decide(); acting on a
    decision and recording it live in remediation.py."""

    def __init__(
        self, engine: Engine, store: Store, clock: Clock, settings: HealerSettings, metrics: Metrics
    ) -> None:
        self.engine = engine
        self.store = store
        self.clock = clock
        self.settings = settings
        self.metrics = metrics
        self._lock = threading.RLock()
        self._restarting: set[str] = set()  # restart call running, by container name
        self.pending: dict[str, PendingVerify] = {}  # restarted, awaiting verification
        self._healthy_since: dict[str, datetime] = {}
        self._reset_checked: dict[str, datetime] = {}  # healthy streaks already reset or checked
        self._rules: dict[str, tuple[dict[str, str], ContainerRules]] = {}  # by container id
        self._stopped_by_person: set[str] = set()  # container ids
        self._warned: set[tuple[str, str]] = set()
        self._muted: set[str] = set()  # containers labelled guardian.notify=false
        self.engine_up: bool | None = None
        self.hooks = Hooks()

    # -- observe ----------------------------------------------------------------------------

    def rules(self, snap: ContainerSnapshot) -> ContainerRules:
        # Labels are fixed at creation, so a container's rules are worked out once, not per sweep.
        cached = self._rules.get(snap.id)
        if cached is not None and cached[0] == snap.labels:
            return cached[1]
        s = self.settings
        rules = rules_for(snap.labels, s.policy, s.stop_timeout, s.watch_label, s.self_id, snap.id)
        self._rules[snap.id] = (dict(snap.labels), rules)
        for warning in rules.warnings:
            if (snap.name, warning) not in self._warned:
                self._warned.add((snap.name, warning))
                log.warning("bad label ignored", extra=kv(container=snap.name, problem=warning))
        if rules.notify:
            self._muted.discard(snap.name)
        else:
            self._muted.add(snap.name)
        return rules

    def notes(self, incident: Incident, *notes: Notification) -> tuple[Notification, ...]:
        """The notifications to queue for `incident`: none when its container's label mutes it;
        no opening while a storm incident is open (the storm's notification speaks for it; the
        store then queues none of its later news but escalations, see insert_notifications)."""
        if incident.container in self._muted:
            return ()
        if self.hooks.storm_open is not None and self.hooks.storm_open():
            return tuple(n for n in notes if n.kind is not Kind.OPENED)
        return notes

    def _engine_state(self, up: bool, error: str = "") -> None:
        if up != self.engine_up:
            if up:
                log.info("docker engine reachable", extra=kv(url=getattr(self.engine, "url", None)))
            else:
                log.error("docker engine unreachable; will retry", extra=kv(reason=error))
        self.engine_up = up
        self.metrics.docker_up.set(1 if up else 0)
        for hook in self.hooks.engine_state:
            hook(up, error)

    def assess(
        self, snap: ContainerSnapshot, source: str, detected_at: datetime | None = None
    ) -> Assessment:
        """Judge one container (inspecting it when it is a candidate) and decide, without acting."""
        if needs_inspect(snap) and not snap.inspected:
            full = self.engine.inspect(snap.id)
            snap = full if full is not None else snap
        rules = self.rules(snap)
        now = self.clock.now()
        result = evaluate(
            snap, now, self.settings.checks, snap.id in self._stopped_by_person, source
        )
        for judge in self.hooks.judges:
            result = judge(snap, result)
        a = Assessment(snap, rules, result, detected_at=detected_at or reported_at(snap))
        if (
            result.problem is not None
            and result.problem not in _REPORT_ONLY
            and snap.name not in self.pending
        ):
            a.decision = self.decide(snap.name, rules, now)
        return a

    def decide(self, container: str, rules: ContainerRules, now: datetime) -> Decision:
        """Gather history from the store and ask the single decision point."""
        host = self.settings.host
        policy = rules.policy
        horizon = now - max(
            policy.window, policy.max_cooldown, policy.cooldown, timedelta(minutes=1)
        )
        with self._lock:
            history = AttemptHistory(
                attempts=self.store.restart_times(host, horizon, container),
                reset_at=self.store.last_reset(host, container),
                in_flight=container in self._restarting or container in self.pending,
                engine_denied=self._engine_denied(container, now - policy.window),
            )
            load = HostLoad(
                recent_restarts=self.store.restart_times(host, now - timedelta(minutes=1)),
                in_flight=len(self._restarting),
                storm=self.hooks.storm() if self.hooks.storm else False,
            )
        silence = self.store.active_silence(host, container, now)
        deps = self.hooks.unhealthy_dependencies
        target = Target(container, rules.opted_in, rules.is_self, deps(container) if deps else ())
        return decide(target, history, load, policy, now, silence)

    def _engine_denied(self, container: str, since: datetime) -> bool:
        """Whether the engine refused the last restart of a problem that is still open."""
        restarts = [
            a
            for a in self.store.actions(self.settings.host, container, since)
            if a.kind == "restart"
        ]
        if not restarts or restarts[-1].outcome is not Outcome.POLICY_DENIED:
            return False
        incident = self.store.get_incident(restarts[-1].incident_id or 0)
        return incident is not None and incident.is_open

    # -- the loop ---------------------------------------------------------------------------

    def sweep(self, apply: bool = True) -> SweepReport:
        """Reconcile every watched container: one list request, one inspect per candidate."""
        report = SweepReport()
        try:
            summaries = self.engine.list_containers(self.settings.watch_label, self.settings.scope)
            self._engine_state(True)
        except EngineUnavailable as exc:
            self._engine_state(False, str(exc))
            report.engine_error = str(exc)
            return report
        watched = [s for s in summaries if self.settings.watches(s.labels)]
        for listed in self.hooks.listed:
            listed(watched)
        # One query for the whole sweep instead of one per healthy container (bench/RESULTS.md).
        open_names = {i.container for i in self.store.open_incidents(self.settings.host)}
        for snap in watched:
            try:
                assessment = self.assess(snap, "sweep")
            except EngineUnavailable as exc:
                self._engine_state(False, str(exc))
                report.engine_error = str(exc)
                break
            report.rows.append(assessment)
        if apply:
            # Judge the whole host before acting on any container: a storm holds every restart.
            for assessed in self.hooks.assessed:
                assessed(report.rows)
            for assessment in report.rows:
                self.apply(assessment, open_names)
        if apply and report.engine_error is None:
            self._forget_vanished({s.name for s in watched})
        if report.engine_error is None:
            listed_ids = {s.id for s in summaries}
            self._rules = {k: v for k, v in self._rules.items() if k in listed_ids}
        self.metrics.containers_watched.set(len(watched))
        self.metrics.containers_unhealthy.set(
            sum(1 for r in report.rows if r.result.problem is not None)
        )
        self.refresh_incident_gauge()
        return report

    def check_container(self, container_id: str, detected_at: datetime | None = None) -> None:
        """React to one container at once (driven by an engine event)."""
        try:
            snap = self.engine.inspect(container_id)
        except EngineUnavailable as exc:
            self._engine_state(False, str(exc))
            return
        if snap is None or not self.settings.watches(snap.labels):
            return
        self.apply(self.assess(snap, "event", detected_at))
        self.refresh_incident_gauge()

    def on_event(self, event: EngineEvent) -> bool:
        """Book-keeping for one engine event; True when the container should be checked now."""
        cid, action = event.container_id, event.action
        with self._lock:
            ours = any(p.container_id == cid for p in self.pending.values()) or (
                event.container_name in self._restarting
            )
            if action in ("stop", "kill") and not ours:
                # `docker stop`/`docker kill` by a person: never undo it.
                self._stopped_by_person.add(cid)
            elif action in ("start", "destroy"):
                self._stopped_by_person.discard(cid)
        for hook in self.hooks.events:
            hook(event)
        # Event attributes carry the container's labels: skip containers Guardian does not watch
        # without spending an inspect on them.
        if not self.settings.watches(event.attributes):
            return False
        if action == "health_status":
            return event.attributes.get("health_status") in ("unhealthy", "healthy")
        return action in ("die", "oom")

    # -- incidents and actions --------------------------------------------------------------

    def apply(self, a: Assessment, open_names: set[str] | None = None) -> None:
        """Record what an assessment found and act on its decision.

        `open_names`: the containers with an open incident, when the caller (a sweep) already
        read them; None reads the store for this container."""
        result, name = a.result, a.snapshot.name
        if result.skipped is not None:
            return
        now = result.observed_at
        if result.problem is None:
            for recovered in self.hooks.recovered:
                recovered(name)
            self._observed_healthy(name, now, open_names)
            return
        self._healthy_since.pop(name, None)
        for detected in self.hooks.detected:
            detected(result)
        host = self.settings.host
        existing = self.store.current_incident(host, name, result.problem)
        change = incidents.record_detection(existing, host, result, now)
        news = change.opened or change.reopened
        opened = notifications.opened(change.incident, a.decision, now)
        incident = self.store.save_incident(
            change, self.notes(change.incident, opened) if news else ()
        )
        if news:
            self.metrics.incidents_total.labels(type=str(incident.type)).inc()
            log.warning(
                "problem detected",
                extra=kv(
                    container=name,
                    incident=incident.id,
                    type=incident.type,
                    source=result.source,
                    detail=result.detail,
                ),
            )
            for t in change.transitions:
                self._log_transition(incident, t.from_state, t.to_state, t.reason)
        if name in self.pending or a.decision is None:
            return
        # Decide again under the lock: another thread may have acted since the assessment.
        with self._lock:
            decision = self.decide(name, a.rules, self.clock.now())
            self.metrics.decisions_total.labels(
                decision=str(decision.verdict), reason=str(decision.reason)
            ).inc()
            a.decision = decision
            if decision.restart:
                self._restarting.add(name)
        match decision.verdict:
            case Verdict.RESTART:
                self._restart(a, incident, decision)
            case Verdict.GIVE_UP:
                self._give_up(incident, decision)
            case Verdict.WAIT | Verdict.DENY:
                self._note_decision(incident, a.snapshot, decision)

    def _observed_healthy(
        self, name: str, now: datetime, open_names: set[str] | None = None
    ) -> None:
        host = self.settings.host
        since = self._healthy_since.setdefault(name, now)
        if open_names is None or name in open_names:
            for incident in self.store.open_incidents(host, name):
                if incident.is_open and name not in self.pending:
                    change = incidents.record_recovery(incident, "observed healthy", now)
                    note = notifications.resolved(change.incident, "observed healthy", now)
                    self._save(change, self.notes(incident, note))
        policy = self.settings.policy
        # Reset marks only move forward: once one is at or after this healthy streak's start,
        # no reset is due until the streak ends, so the store is not asked again each sweep.
        if now - since < policy.reset_after or self._reset_checked.get(name) == since:
            return
        self._reset_checked[name] = since
        if reset_due(since, self.store.last_reset(host, name), policy, now):
            self.store.record_reset(host, name, now)
            log.info(
                "attempt counter reset", extra=kv(container=name, healthy_since=since.isoformat())
            )
            for incident in self.store.open_incidents(host, name):
                if incident.state is IncidentState.RESOLVED:
                    reason = f"healthy for {int(policy.reset_after.total_seconds())}s"
                    self._close(incident, reason, now)

    def _forget_vanished(self, present: set[str]) -> None:
        """Close incidents of containers that are no longer there (removed or no longer watched)."""
        now = self.clock.now()
        for incident in self.store.open_incidents(self.settings.host):
            if incident.type in HOST_PROBLEMS:
                continue  # host-level incidents are not about a container
            if incident.container not in present and incident.container not in self.pending:
                with self._lock:
                    if incident.container in self._restarting:
                        continue
                self._gone(incident, "no longer listed by the engine", now)
        for name in list(self._healthy_since):
            if name not in present:
                del self._healthy_since[name]
        for name in list(self._reset_checked):
            if name not in present:
                del self._reset_checked[name]

    def refresh_incident_gauge(self) -> None:
        """Recount open incidents, and the containers Guardian gave up on, from the store."""
        counts: dict[tuple[str, str], int] = {}
        exhausted: set[str] = set()
        for incident in self.store.open_incidents(self.settings.host):
            key = (str(incident.type), str(incident.state))
            counts[key] = counts.get(key, 0) + 1
            if incident.escalated and incident.is_open:
                exhausted.add(incident.container)
        self.metrics.set_open_incidents(counts)
        self.metrics.set_exhausted(exhausted)
