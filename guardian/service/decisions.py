"""The inputs of the single decision point: the attempt history from the store, what the loop
is doing now, the host's load, silences, dependencies and owners, gathered for decide().
Every restart decision, and what `guardian status` shows, is asked here.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from guardian.core.labels import ContainerRules
from guardian.core.model import ActionKind, ContainerSnapshot, Decision, Outcome
from guardian.core.policy import AttemptHistory, HostLoad, Target, decide
from guardian.service.context import LoopContext


class DecisionPoint:
    def __init__(self, ctx: LoopContext) -> None:
        self.ctx = ctx

    def decision_for(
        self, snap: ContainerSnapshot, rules: ContainerRules, now: datetime
    ) -> Decision:
        """Gather the history from the store and the loop's state, and ask decide().

        Attempts are this container's (its id): a new container under an old name (`docker
        compose up` after a fix) starts with a fresh budget. What holds a name back whoever
        carries it (a restart in flight, a silence) stays keyed by the name."""
        ctx, host, policy = self.ctx, self.ctx.settings.host, rules.policy
        container = snap.name
        horizon = now - max(
            policy.window, policy.max_cooldown, policy.cooldown, timedelta(minutes=1)
        )
        with ctx.state.lock:
            history = AttemptHistory(
                attempts=ctx.store.restart_times(host, horizon, container, snap.id),
                reset_at=ctx.store.last_reset(host, container),
                in_flight=ctx.state.busy(container),
                engine_denied=self._engine_denied(snap, now - policy.window),
            )
            load = HostLoad(
                recent_restarts=ctx.store.restart_times(host, now - timedelta(minutes=1)),
                in_flight=ctx.state.restarts_in_flight(now),
                slot_free_at=ctx.state.next_slot_free(now),
                storm=ctx.pipeline.storm_holds(),
            )
        silence = ctx.store.active_silence(host, container, now)
        deps = ctx.pipeline.unhealthy_dependencies(container)
        approval = ctx.store.approval_for(host, container) if policy.action == "ask" else None
        since = self._problem_since(snap) if policy.act_after else None
        return decide(
            Target(container, rules.opted_in, rules.is_self, deps, rules.orchestrator, since),
            history,
            load,
            policy,
            now,
            silence,
            approval,
        )

    def _problem_since(self, snap: ContainerSnapshot) -> datetime | None:
        """Since when the container's problem lasts, for restart.act_after: the engine's time
        (the failing health check, the exit), else when its incident opened."""
        if snap.state == "running" and snap.unhealthy_since is not None:
            return snap.unhealthy_since
        if snap.state in ("exited", "dead") and snap.finished_at is not None:
            return snap.finished_at
        opened = [
            i.opened_at
            for i in self.ctx.store.open_incidents(self.ctx.settings.host, snap.name)
            if i.container_id in ("", snap.id)
        ]
        return min(opened, default=None)

    def _engine_denied(self, snap: ContainerSnapshot, since: datetime) -> bool:
        """Whether the engine refused the last restart of a problem that is still open."""
        store = self.ctx.store
        restarts = [
            a
            for a in store.actions(self.ctx.settings.host, snap.name, since)
            if a.kind == ActionKind.RESTART and a.container_id == snap.id
        ]
        if not restarts or restarts[-1].outcome is not Outcome.POLICY_DENIED:
            return False
        incident = store.get_incident(restarts[-1].incident_id or 0)
        return incident is not None and incident.is_open
