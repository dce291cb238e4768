"""Verification after a restart, and reconciliation of actions a crash left unfinished.

A restart is `succeeded` only when the container is observed healthy (or, without a
healthcheck, running and stable) within verify_timeout (core.verification judges). Nothing is
reported healed otherwise.

The engine's bounded memory plays no part here: a verdict reads the health status now and
State.StartedAt, which the engine keeps as long as the container, never the five probes Docker
keeps (they outlive a start, so failures from before the restart may still be among them), nor
the event ring (a verification a lost event never woke is judged at its next tick).
"""

from __future__ import annotations

import logging
from datetime import datetime
from functools import partial

from guardian.core.model import (
    REPLACING,
    ActionKind,
    ContainerSnapshot,
    IncidentState,
    Outcome,
    RemediationAction,
)
from guardian.core.outbound import notifications
from guardian.core.outbound.hooks import ActionVerdict
from guardian.core.stamps import Reading, no_later_than, placed_since
from guardian.core.verification import (
    PendingVerify,
    awaiting_first_check,
    judge,
    restarted,
    verdict_detail,
)
from guardian.logs import kv
from guardian.ports import EngineUnavailable
from guardian.service.context import LoopContext
from guardian.service.healing.actions import monotonic_of, stop_timeout_of
from guardian.service.healing.followers import FOLLOWER_REASONS, Followers
from guardian.service.healing.recorder import Recorder
from guardian.service.healing.recreator import Leftovers

log = logging.getLogger("guardian.verify")

HEALED_OR_UNDECIDED = (None, Outcome.SUCCEEDED, Outcome.UNKNOWN)


def _own_incident(action: RemediationAction) -> int | None:
    """The incident an action's verdict may resolve or close: none for a follower's restart,
    which is only told under its leader's incident."""
    return None if action.reason in FOLLOWER_REASONS else action.incident_id


class Verifier:
    def __init__(self, ctx: LoopContext, recorder: Recorder, followers: Followers) -> None:
        self.ctx = ctx
        self.recorder = recorder
        self.followers = followers
        self.leftovers = Leftovers(ctx, recorder)

    def awaiting(self) -> bool:
        """A restart awaits its verification: the only time the verify tick has work."""
        return bool(self.ctx.state.verifications.pending())

    def verify(self, only: str | None = None) -> None:
        """Check the pending verifications that are due (the tick: each with a growing gap,
        see Verifications.due), or the one for container `only` at once (its event)."""
        ctx = self.ctx
        verifications = ctx.state.verifications
        due = verifications.due(ctx.clock.now(), only)
        try:
            listed = self._listed(due) if len(due) > 1 else {}
            for p in due:
                ctx.turns.turn(p.container_id, partial(self._verify_one, p, listed, only is None))
        except EngineUnavailable:
            return  # judged when the engine answers again

    def _verify_one(
        self, p: PendingVerify, listed: dict[str, ContainerSnapshot], tick: bool
    ) -> None:
        """Judge one due verification, on its container's turn (`tick`: the verify tick's,
        which notes a look that reached no verdict). Raises EngineUnavailable."""
        ctx, verifications = self.ctx, self.ctx.state.verifications
        summary = listed.get(p.container_id)
        before = Reading(ctx.clock.now(), ctx.clock.monotonic())
        waits = summary is not None and awaiting_first_check(
            verifications.placed(p, before), summary, before.wall
        )
        if waits:
            verifications.looked(p, before.wall)
            return
        # The loop's own look: it fills the container cache too, so the restarted container's
        # next unhealthy event needs no inspect (service.state.container_cache).
        snap = ctx.inspect_kept(p.container_id)
        clocks = Reading(ctx.clock.now(), ctx.clock.monotonic())
        now = clocks.wall
        if snap is None:
            self.finish(p, Outcome.PERMANENT_FAILURE, "container removed during verification", now)
            return
        if clocks.stepped_since(before):
            # The wall clock stepped while the container was read: its stamps may lie on the
            # clock before the step, the verification's after it. Judged at the next look.
            if tick:
                verifications.looked(p, now)
            return
        # The verification's stamps (held on the monotonic clock) where the snapshot's are.
        placed = verifications.placed(p, clocks)
        started = snap.started_at if restarted(placed, snap) else None
        # Its start, even where its event was never heard: a stop heard after it is a
        # person's, never undone (LoopState.restart_seen).
        if started is not None and ctx.state.restart_seen(p, started):
            log.info(
                "a person's stop after the restart: left alone", extra=kv(container=p.container)
            )
        outcome = judge(placed, snap, now, ctx.settings.verify_timeout)
        relapse = self._relapse(placed, snap) if outcome in HEALED_OR_UNDECIDED else None
        if relapse is not None:
            # A problem of the new run (its log matched again): not healed, whatever its
            # health says.
            self.finish(p, Outcome.UNHEALTHY_AFTER_RESTART, relapse, now)
        elif outcome is not None:
            self.finish(p, outcome, verdict_detail(outcome, snap, placed, now), now)
        elif tick:
            verifications.looked(p, now)

    def _relapse(self, p: PendingVerify, snap: ContainerSnapshot) -> str | None:
        """What the pipeline saw go wrong since the restart's start (a log match), or None."""
        if not restarted(p, snap):
            return None
        for relapsed in self.ctx.pipeline.relapsed:
            found = relapsed(snap)
            if found is not None:
                return found
        return None

    def _listed(self, due: list[PendingVerify]) -> dict[str, ContainerSnapshot]:
        """The list call's summaries of the containers of `due`, by id: one list for all of them
        (four requests on Podman). After a burst most still await their first health check,
        and an inspect each (the container's lock in the engine) would tell the busy engine's
        answer nothing a verdict needs (core.verification.awaiting_first_check)."""
        s = self.ctx.settings
        ids = {p.container_id for p in due}
        listed = self.ctx.engine.list_containers(s.watch_label, s.scope)
        return {c.id: c for c in listed if c.id in ids}

    def finish(self, p: PendingVerify, outcome: Outcome, detail: str, now: datetime) -> None:
        """Write `p`'s verdict (once, whichever thread gets here first); the container stays
        verifying until its incident carries the verdict."""
        if not self.ctx.state.verifications.begin_verdict(p):
            return
        try:
            leader = self._finish(p, outcome, detail, now)
        finally:
            self.ctx.state.verifications.verdict_written(p)
        if leader is not None:
            # Only now: while it counted as verifying, it held its followers back
            # (dependency_unhealthy: "restart being verified").
            self.followers.restart_after(*leader)

    def _finish(
        self, p: PendingVerify, outcome: Outcome, detail: str, now: datetime
    ) -> tuple[str, str] | None:
        """Record the verdict; returns (leader, root) whose followers follow now, if any."""
        ctx = self.ctx
        incident = ctx.store.get_incident(p.incident_id) if p.incident_id is not None else None
        notes: tuple[notifications.Notification, ...] = ()
        if incident is not None and outcome is Outcome.UNHEALTHY_AFTER_RESTART:
            note = notifications.attempt(incident, p.attempt, p.max_attempts, outcome, detail, now)
            notes = self.recorder.notes(incident.container, note)
        ctx.store.record_outcome(p.action_id, outcome, detail, now, notes)
        ctx.restart_ended(p.container, str(outcome))
        ctx.verdict_reached(
            ActionVerdict(p.container, p.container_id, "restart", outcome, p.incident_id)
        )
        level = logging.INFO if outcome is Outcome.SUCCEEDED else logging.WARNING
        log.log(
            level,
            "restart verified",
            extra=kv(container=p.container, outcome=outcome, detail=detail),
        )
        if incident is None:
            # A follower, told under its leader's incident. Healthy, it leads its own followers.
            return self._follower_healed(p, now) if outcome is Outcome.SUCCEEDED else None
        if outcome in (Outcome.SUCCEEDED, Outcome.UNKNOWN) and incident.is_open:
            reason = "healthy after restart" if outcome is Outcome.SUCCEEDED else "observed healthy"
            self.recorder.recovered(incident, reason, now)
            ctx.state.streaks.seen_healthy(p.container, now)
            # Seen healthy: the storm breaker and dependencies stop counting it as unhealthy
            # now, not at the next sweep (a few quick, separate failures are no storm).
            for recovered in ctx.pipeline.recovered:
                recovered(p.container)
            self.recorder.refresh_gauges()
            return (p.container, p.container) if outcome is Outcome.SUCCEEDED else None
        if outcome is Outcome.PERMANENT_FAILURE:
            self.recorder.gone(incident, detail, now)
        self.recorder.refresh_gauges()
        return None

    def _follower_healed(self, p: PendingVerify, now: datetime) -> tuple[str, str] | None:
        """Observed healthy after its restart as a follower: what it opened while cut off (its
        own health check failed) is resolved now, not at the next sweep, so a follower of it is
        not held back by it (dependency_unhealthy); then its own followers follow."""
        ctx = self.ctx
        for own in ctx.store.open_incidents(ctx.settings.host, p.container):
            if own.is_open and own.container_id == p.container_id:
                self.recorder.recovered(own, "healthy after its restart as a follower", now)
        ctx.state.streaks.seen_healthy(p.container, now)
        for recovered in ctx.pipeline.recovered:
            recovered(p.container)
        return (p.container, p.after) if p.after else None

    def reconcile(self) -> int:
        """On start-up: give every action a crash left without an outcome one, and resume
        verifications that were pending, an unanswered restart's among them while the engine
        may still carry it out. Returns how many actions were given an outcome or resumed
        (the unanswered restarts aside: their outcome is written)."""
        ctx = self.ctx
        now = ctx.clock.now()
        count = 0
        unfinished = ctx.store.unfinished_actions(ctx.settings.host)
        ctx.store.release_held(None)  # openings a stop left held go as they are, first
        for action in unfinished:
            count += 1
            action_id = action.id or 0
            if action.kind in REPLACING:
                pending = self.leftovers.settle(action)
                if pending is not None:
                    ctx.state.verifications.resume(pending)
                continue
            if action.outcome is Outcome.RESTARTED:
                # Restarted, but Guardian died before verifying: verify now, honestly.
                snap = ctx.engine.inspect(action.container_id)
                if snap is not None:
                    self._resume(action_id, _own_incident(action), snap, action.requested_at)
                    continue
            if action.kind != ActionKind.RESTART:
                ctx.store.record_outcome(action_id, Outcome.INTERRUPTED, "Guardian stopped", now)
                continue
            snap = ctx.engine.inspect(action.container_id)
            if snap is None:
                ctx.store.record_outcome(
                    action_id, Outcome.PERMANENT_FAILURE, "container gone after restart", now
                )
                incident = ctx.store.get_incident(_own_incident(action) or 0)
                if incident is not None and incident.state is not IncidentState.CLOSED:
                    self.recorder.gone(incident, "container gone", now)
                continue
            self._settle_restart(action, snap, now)
        for action in ctx.store.unanswered_restarts(ctx.settings.host):
            self._resume_unanswered(action, now)
        return count

    def _resume_unanswered(self, action: RemediationAction, now: datetime) -> None:
        """A restart whose call went unanswered (timed out after sending) and whose
        verification a stop or a crash cut short: verified again while the engine may still be
        carrying it out, so the container is not asked for a second restart meanwhile. Its
        age is told by the monotonic clock, not by the wall clock, which may have stepped."""
        ctx = self.ctx
        if ctx.state.verifications.verifying(action.container) or not self._may_still_stop(
            action, now
        ):
            return
        snap = ctx.engine.inspect(action.container_id)
        if snap is None:
            return  # gone: nothing left to restart twice
        restarted = snap.started_at is not None and snap.started_at >= action.requested_at
        self._resume(
            action.id or 0,
            _own_incident(action),
            snap,
            action.requested_at,
            deadline=self._stop_deadline(action),
            previous_started_at=None if restarted else snap.started_at,
        )
        log.warning(
            "reconciled unanswered restart",
            extra=kv(container=action.container, detail="the engine may still restart it"),
        )

    def _settle_restart(
        self, action: RemediationAction, snap: ContainerSnapshot, now: datetime
    ) -> None:
        """A restart a crash left without an outcome, its container still there: settled by
        evidence (State.StartedAt against the request), never by a second request."""
        ctx = self.ctx
        action_id = action.id or 0
        restarted = snap.started_at is not None and snap.started_at >= action.requested_at
        if not restarted and snap.state == "running" and self._may_still_stop(action, now):
            # A stop left this call to the engine mid stop timeout (Daemon.stop): the restart
            # may still come, so it is verified like any other, never requested again.
            self._resume(
                action_id,
                _own_incident(action),
                snap,
                action.requested_at,
                deadline=self._stop_deadline(action),
                previous_started_at=snap.started_at,
                left_to_engine=True,
            )
            log.warning(
                "reconciled unfinished action",
                extra=kv(
                    container=action.container,
                    detail="restart left to the engine at stop; verifying it",
                ),
            )
            return
        detail = (
            "Guardian stopped mid-restart; State.StartedAt shows the container restarted"
            if restarted
            else "Guardian stopped before the restart completed; the container did not restart"
        )
        ctx.store.record_outcome(action_id, Outcome.INTERRUPTED, detail, now)
        if not restarted:
            ctx.restart_ended(action.container, str(Outcome.INTERRUPTED))
        log.warning(
            "reconciled unfinished action", extra=kv(container=action.container, detail=detail)
        )
        if restarted:
            self._resume(action_id, _own_incident(action), snap, action.requested_at)

    def _stop_deadline(self, action: RemediationAction) -> datetime:
        """When a restart requested by `action` must have healed: its stop timeout (recorded
        with the intent; the operator's when absent) and verify_timeout after the request."""
        s = self.ctx.settings
        stop = stop_timeout_of(action, s.stop_timeout)
        # Placed by the monotonic clock kept with the intent: a step of the wall clock since
        # (in this run or another) neither ends the wait early nor, as a stamp ahead of the
        # clock, beyond its length from now.
        now = Reading(self.ctx.clock.now(), self.ctx.clock.monotonic())
        requested = placed_since(action.requested_at, monotonic_of(action), now)
        return requested + stop + s.verify_timeout

    def _may_still_stop(self, action: RemediationAction, now: datetime) -> bool:
        return now < self._stop_deadline(action)

    def _resume(
        self,
        action_id: int,
        incident_id: int | None,
        snap: ContainerSnapshot,
        at: datetime,
        deadline: datetime | None = None,
        previous_started_at: datetime | None = None,
        left_to_engine: bool = False,
    ) -> None:
        # Requested before a step back of the clock: its verify_timeout runs from now at most.
        if deadline is None:
            deadline = no_later_than(at, self.ctx.clock.now()) + self.ctx.settings.verify_timeout
        self.ctx.state.verifications.resume(
            PendingVerify(
                action_id,
                incident_id,
                snap.name,
                snap.id,
                at,
                deadline,
                previous_started_at,
                left_to_engine=left_to_engine,
            )
        )
