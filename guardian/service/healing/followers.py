"""A healthy leader's followers restarted after it: those that declared
`guardian.restart_with=<leader>` or joined one of its namespaces, each through decide() with its
own budget and the one restart path (Remediator.restart), told under the incident of the
container whose healing began the wave."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime
from functools import partial

from guardian.core.model import ActionKind, Decision, Outcome, Verdict
from guardian.logs import kv
from guardian.service.context import LoopContext
from guardian.service.healing.actions import action_row, held_back
from guardian.service.healing.remediator import Remediator

log = logging.getLogger("guardian.remediator")

RESTART_WITH_REASON = "restart_with"  # also the `via` of a follower by label
NAMESPACE_REASON = "namespace_follower"  # it joined a namespace of the container restarted
FOLLOWER_REASONS = frozenset({RESTART_WITH_REASON, NAMESPACE_REASON})


class Followers:
    def __init__(self, ctx: LoopContext, remediator: Remediator) -> None:
        self.ctx = ctx
        self.remediator = remediator

    def restart_after(self, leader: str, root: str = "") -> None:
        """`leader` was restarted by Guardian and is healthy: restart its followers, told under
        the incident of `root` (the container whose healing began the wave; `leader` itself
        unless `leader` is a follower). One follower's failure never stops the others."""
        root = root or leader
        for container_id, via in self.ctx.pipeline.followers(leader, root):
            # On the follower's worker (after what it does now): its restart call is sent
            # there at once.
            follow = partial(self._following, container_id, leader, root, via)
            self.ctx.turns.later(container_id, follow)

    def _following(self, container_id: str, leader: str, root: str, via: str) -> None:
        """One follower's restart: its failure is logged, and stops no other."""
        try:
            self._follow(container_id, leader, root, via)
        except Exception:
            log.exception(
                "follower restart failed", extra=kv(container_id=container_id[:12], after=leader)
            )

    def _follow(self, container_id: str, leader: str, root: str, via: str) -> None:
        ctx, host = self.ctx, self.ctx.settings.host
        snap = ctx.engine.inspect(container_id)
        if snap is None:
            return
        name, rules = snap.name, ctx.rules.observed(snap)
        leader_incident = next((i for i in reversed(ctx.store.open_incidents(host, root))), None)
        incident_id = leader_incident.id if leader_incident is not None else None
        reason, extra, detail = _why(name, leader, root, via)
        with self.remediator.decided(snap, rules) as (decision, claim):
            now = ctx.clock.now()
            if claim is None or not decision.restart:
                row = (name, snap.id)
                self._record_held_back(row, incident_id, decision, now, f"{reason} {detail}", extra)
                log.info(
                    "follower restart held back",
                    extra=kv(container=name, after=leader, reason=decision.reason),
                )
                return
            action = action_row(
                host,
                incident_id,
                (name, snap.id),
                ActionKind.RESTART,
                now,
                reason,
                decision,
                detail=detail,
                extra=extra,
            )
            # The follower has no incident of its own: its news is told under the leader's.
            told = replace(leader_incident, container=name) if leader_incident else None
            self.remediator.restart(
                snap, rules, decision, claim, action, told, None, verify_incident=False, after=root
            )

    def _record_held_back(
        self,
        container: tuple[str, str],
        incident_id: int | None,
        decision: Decision,
        now: datetime,
        said: str,
        extra: dict[str, str],
    ) -> None:
        """The decision row of a follower that decide() did not let restart (under the restart lock,
        like the decision): `said` is its reason and detail, followed by why it was held back."""
        outcome = (
            Outcome.RETRY_EXHAUSTED
            if decision.verdict is Verdict.GIVE_UP
            else Outcome.POLICY_DENIED
        )
        self.ctx.store.record_intent(
            action_row(
                self.ctx.settings.host,
                incident_id,
                container,
                ActionKind.DECISION,
                now,
                str(decision.reason),
                decision,
                outcome=outcome,
                detail=f"{said}: {held_back(decision)}",
                extra=extra,
            )
        )


def _why(name: str, leader: str, root: str, via: str) -> tuple[str, dict[str, str], str]:
    """A follower's reason, extra fields and detail: by label (`restart_with`) or by a
    namespace it joined (`via` names them). Named in the detail: the row is also shown in the
    leader's incident timeline."""
    if via == RESTART_WITH_REASON:
        reason, extra = RESTART_WITH_REASON, {"restart_with": leader}
        detail = f"{name}, after {leader} was restarted and healthy"
    else:
        reason, extra = NAMESPACE_REASON, {"namespace_of": leader, "namespaces": via}
        detail = f"{name}, after {leader} was restarted and healthy (it joined its {via} namespace)"
    if root != leader:
        extra["wave_of"] = root
    return reason, extra, detail
