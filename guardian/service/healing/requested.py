"""A person's rollback reaching the loop (guardian rollback NAME, POST
/api/v1/containers/NAME/rollback): the Operator writes a request to the store and, in the
daemon, calls `look_for` (from another process, the store's change feed tells it:
rollback.requested, service/elsewhere.py), which reads the requests still usable and asks for a
look at each container on its worker; the look decides it through decide() (`act`), once.

A request is for the container that ran when it was made (its id): a container created since
under the name needs a request of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from guardian.core import incidents
from guardian.core.assessment import Assessment
from guardian.core.model import (
    ContainerSnapshot,
    HealthCheckResult,
    Incident,
    ProblemType,
    RollbackRequest,
    Verdict,
)
from guardian.core.outbound import notifications
from guardian.logs import kv
from guardian.service.context import LoopContext
from guardian.service.healing.recorder import Recorder
from guardian.service.healing.remediator import Remediator

log = logging.getLogger("guardian.rollback")


class RequestedRollbacks:
    """The look that decides a person's request (the containers it names are kept in
    ctx.state.rollbacks). `look(container_id)` has the container judged soon on its worker."""

    def __init__(
        self,
        ctx: LoopContext,
        remediator: Remediator,
        recorder: Recorder,
        look: Callable[[str], None],
    ) -> None:
        self.ctx = ctx
        self.remediator = remediator
        self.recorder = recorder
        self._look = look

    def look_for(self) -> int:
        """Read the usable requests (at start, and when one is written) and ask for a look at
        each container they name; how many. Raises StoreError."""
        ctx = self.ctx
        found = ctx.store.rollback_requests(ctx.settings.host, ctx.clock.now())
        for request in found:
            ctx.state.rollbacks.requested(request.container_id, request.container)
            log.info(
                "rollback request found",
                extra=kv(container=request.container, by=request.by),
            )
            self._look(request.container_id)
        return len(found)

    def take(self, snap: ContainerSnapshot) -> RollbackRequest | None:
        """The usable request for `snap` (its name and id), or None (then it is no longer
        pending)."""
        ctx = self.ctx
        for request in ctx.store.rollback_requests(ctx.settings.host, ctx.clock.now()):
            if request.container == snap.name and request.container_id == snap.id:
                return request
        self.ctx.state.rollbacks.done(snap.id)
        return None

    def act(self, a: Assessment) -> bool:
        """On the container's turn, when a request names it: decide the person's rollback
        (decide(): a silence, a storm, the budget, a cooldown may hold it; then it is looked at
        again when the hold ends) and carry it out once (the request used by compare-and-set).
        True when it was carried out or refused (nothing else is done on this turn)."""
        ctx, snap = self.ctx, a.snapshot
        request = self.take(snap)
        if request is None or request.id is None:
            return False
        with self.remediator.decided(snap, a.rules, ProblemType.ROLLBACK_REQUESTED) as (
            decision,
            claim,
        ):
            if decision.verdict is not Verdict.ROLLBACK or claim is None:
                if decision.verdict is Verdict.WAIT and decision.retry_at is not None:
                    self.remediator.recheck(snap.id, decision.retry_at)
                log.info(
                    "rollback held",
                    extra=kv(
                        container=snap.name,
                        reason=decision.reason,
                        until=decision.retry_at.isoformat() if decision.retry_at else "",
                        detail=decision.detail,
                    ),
                )
                return False
            self.ctx.state.rollbacks.done(snap.id)
            if not ctx.store.use_rollback_request(request.id, ctx.clock.now()):
                return True  # used already: never twice
            incident = self._opened(a, request, decision.detail)
            self.remediator.rollbacks.rollback(a, incident, decision, claim, request)
        return True

    def _opened(self, a: Assessment, request: RollbackRequest, said: str) -> Incident:
        """The incident the person's rollback is recorded under (resolved by its
        verification, as a restart's)."""
        ctx, snap, now = self.ctx, a.snapshot, self.ctx.clock.now()
        host = ctx.settings.host
        result = HealthCheckResult(
            snap.id, snap.name, now, ProblemType.ROLLBACK_REQUESTED, f"rollback {said}"
        )
        existing = ctx.store.current_incident(host, snap.name, ProblemType.ROLLBACK_REQUESTED)
        change = incidents.record_detection(existing, host, result, now)
        notes = self.recorder.notes(snap.name, notifications.opened(change.incident, None, now))
        return self.recorder.save(change, notes if change.opened or change.reopened else ())
