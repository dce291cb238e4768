"""The decisions that refuse a restart, written down: a give-up escalates its incident once and
tells people; a hold is recorded once per incident and reason, not on every sweep; a call
withdrawn before it was sent ends its action with the reason."""

from __future__ import annotations

import logging

from guardian.core import incidents
from guardian.core.model import (
    ActionKind,
    ContainerSnapshot,
    Decision,
    Incident,
    Outcome,
    Reason,
)
from guardian.core.outbound import notifications
from guardian.core.outbound.hooks import ActionVerdict
from guardian.logs import kv
from guardian.service.context import LoopContext
from guardian.service.healing.actions import ACTION_KEY, action_row, held_back
from guardian.service.healing.recorder import Recorder
from guardian.service.state.claims import Claim

log = logging.getLogger("guardian.remediator")

# Reasons that never change while the inputs stay the same: record them once per incident.
_QUIET_WAITS = frozenset({Reason.IN_FLIGHT, Reason.VERIFYING})


class Refusals:
    def __init__(self, ctx: LoopContext, recorder: Recorder) -> None:
        self.ctx = ctx
        self.recorder = recorder

    def give_up(self, incident: Incident, decision: Decision) -> None:
        """Attempts exhausted: escalate the incident (once) with its notification, record the
        refusal and tell the verdict's hooks."""
        if incident.escalated:
            return
        ctx, now = self.ctx, self.ctx.clock.now()
        change = incidents.escalate(incident)
        note = notifications.gave_up(change.incident, decision, now)
        incident = self.recorder.save(change, self.recorder.notes(incident.container, note))
        ctx.store.record_intent(
            action_row(
                ctx.settings.host,
                incident.id,
                (incident.container, incident.container_id),
                ActionKind.DECISION,
                now,
                str(decision.reason),
                decision,
                outcome=Outcome.RETRY_EXHAUSTED,
                detail=f"{decision.max_attempts} attempts used; next allowed at "
                f"{decision.retry_at.isoformat() if decision.retry_at else 'never'}",
            )
        )
        ctx.restart_ended(incident.container, str(Outcome.RETRY_EXHAUSTED))
        ctx.verdict_reached(
            ActionVerdict(
                incident.container,
                incident.container_id,
                "restart",
                Outcome.RETRY_EXHAUSTED,
                incident.id,
            )
        )
        log.error(
            "giving up: attempts exhausted, incident escalated",
            extra=kv(
                container=incident.container,
                incident=incident.id,
                attempts=decision.attempt,
                retry_at=decision.retry_at,
            ),
        )

    def withdraw(self, snap: ContainerSnapshot, claim: Claim, action_id: int, why: str) -> None:
        """A decided call is not sent after all (DecisionPoint.unsent says `why`): its claim
        and slot are given up, and its action (intent `action_id`) ends withdrawn: nothing
        was asked of the engine."""
        ctx = self.ctx
        claim.release()
        ctx.store.record_outcome(action_id, Outcome.WITHDRAWN, f"not sent: {why}", ctx.clock.now())
        ctx.restart_ended(snap.name, str(Outcome.WITHDRAWN))
        log.info("call withdrawn", extra=kv(container=snap.name, reason=why))

    def hold(
        self,
        incident: Incident,
        snap: ContainerSnapshot,
        decision: Decision,
        action: str = "restart",
    ) -> None:
        """Record a held-back restart once per incident and reason, not on every sweep; the
        container's action when it is not `restart` (a person may approve an `ask` container's
        restart while a silence or cooldown still holds it)."""
        if decision.reason in _QUIET_WAITS or incident.id is None:
            return
        ctx = self.ctx
        last = ctx.store.last_action(incident.id)
        if (
            last is not None
            and last.kind == ActionKind.DECISION
            and last.reason == str(decision.reason)
        ):
            return
        notes: tuple[notifications.Notification, ...] = ()
        if decision.reason is Reason.AWAITING_APPROVAL:
            ttl, now = ctx.settings.approval_ttl, ctx.clock.now()
            ask = notifications.awaiting_approval(incident, decision, ttl, now)
            notes = self.recorder.notes(incident.container, ask)
        ctx.store.record_intent(
            action_row(
                ctx.settings.host,
                incident.id,
                (snap.name, snap.id),
                ActionKind.DECISION,
                ctx.clock.now(),
                str(decision.reason),
                decision,
                outcome=Outcome.POLICY_DENIED,
                detail=held_back(decision),
                extra={ACTION_KEY: action} if action != "restart" else None,
            ),
            notes,
        )
        log.info(
            "restart held back",
            extra=kv(
                container=snap.name,
                incident=incident.id,
                verdict=decision.verdict,
                reason=decision.reason,
                retry_at=decision.retry_at,
            ),
        )
