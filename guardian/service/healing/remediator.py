"""The only restart path: gather the history, ask decide(), then restart, or give up or record
why not (service/healing/refusals.py). Container incidents, followers (service/healing/followers.py)
and `guardian check --apply` all restart through here, so every restart gets the same retry, record,
metrics and notification.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from datetime import datetime, timedelta

from guardian.core import incidents
from guardian.core.assessment import Assessment
from guardian.core.detection.checks import probe_before
from guardian.core.facts import ApprovalUsed
from guardian.core.labels import ContainerRules
from guardian.core.model import (
    ActionKind,
    ActionOutcome,
    ContainerSnapshot,
    Decision,
    Incident,
    Outcome,
    ProblemType,
    Reason,
    RemediationAction,
    Verdict,
)
from guardian.core.outbound import notifications
from guardian.core.outbound.hooks import ActionVerdict
from guardian.core.verification import PendingVerify
from guardian.logs import kv
from guardian.ports import EngineUnavailable, Rechecks, RestartCalls
from guardian.service.context import LoopContext
from guardian.service.healing.actions import STOP_TIMEOUT_KEY, action_row, stamped
from guardian.service.healing.decisions import DecisionPoint
from guardian.service.healing.recorder import Recorder
from guardian.service.healing.recreator import Recreator
from guardian.service.healing.refusals import Refusals
from guardian.service.healing.rollbacks import Rollbacks
from guardian.service.state.claims import Claim

log = logging.getLogger("guardian.remediator")


def slot_until(stop_timeout: timedelta, budget: timedelta, now: datetime) -> datetime | None:
    """Until when a restart holds a restart.max_concurrent slot: while the engine may be waiting
    within the operator's restart.stop_timeout (`budget`). A label asking for a longer stop
    timeout (docs/design.md rule 14) costs the host no more slot time than the operator's own
    setting; past it the call only waits for the container's own process to end."""
    return now + budget if stop_timeout > budget else None


def _told(result: ActionOutcome, said: str) -> ActionOutcome:
    """The outcome as the attempt's notification tells it: with what the last probe before the
    restart said (`said`), when a restart judged from the cache read it after the call."""
    if not said:
        return result
    return replace(
        result, detail=f"{result.detail}; the last probe before the restart said: {said}"
    )


def _held(claim: Claim | None) -> Claim:
    """The claim a decision that acts always comes with (`decided`)."""
    assert claim is not None, "a decision that acts is claimed under the restart lock"
    return claim


class Remediator:
    def __init__(
        self,
        ctx: LoopContext,
        recorder: Recorder,
        decisions: DecisionPoint,
        calls: RestartCalls,
        rechecks: Rechecks,
    ) -> None:
        """`calls` runs each restart call: a call returns once the engine has stopped and
        started the container, up to its stop timeout later, so the daemon runs them on restart
        threads (a burst a sweep found would otherwise wait for one stop after another)."""
        self.ctx = ctx
        self.recorder = recorder
        self.decisions = decisions
        self._calls = calls
        self._rechecks = rechecks
        self.refusals = Refusals(ctx, recorder)
        self.recreator = Recreator(ctx, recorder, calls, self.may_send)
        self.rollbacks = Rollbacks(ctx, recorder, self.recreator)

    @contextmanager
    def decided(
        self,
        snap: ContainerSnapshot,
        rules: ContainerRules,
        problem: ProblemType | None = None,
        began: datetime | None = None,
    ) -> Iterator[tuple[Decision, Claim | None]]:
        """Decide and claim the restart under one hold of the restart lock, so no other thread
        acts meanwhile (the history is read before, outside it: DecisionPoint.decision_for):
        the one decision of an action. The claim (when the decision acts) is held by the block:
        it ends when the block ends, unless the block passed it on with its call
        (Claim.carried_by). `began`: since when the problem lasts, as its incident is about to
        be written."""
        now = self.ctx.clock.now()
        with ExitStack() as holding:
            claimed: list[Claim] = []

            def claim(decision: Decision) -> None:
                if decision.acts:
                    slot = slot_until(rules.stop_timeout, self.ctx.settings.stop_timeout, now)
                    claims = self.ctx.state.claims
                    # Held from the moment it exists: nothing after this can leave it behind.
                    # Not sent yet: sent once the person-stop check passed (may_send).
                    claimed.append(
                        holding.enter_context(
                            claims.claim(snap.name, rules.stop_timeout, slot, waits=True)
                        )
                    )
                    if decision.reason is Reason.STORM_CANARY:
                        self.ctx.pipeline.storm_canary(snap.name)

            decision = self.decisions.decision_for(snap, rules, now, claim, problem, began)
            self.ctx.metrics.decided(decision)
            yield decision, claimed[0] if claimed else None

    def may_send(self, snap: ContainerSnapshot, claim: Claim, action_id: int) -> bool:
        """Whether `claim`'s call (its intent written as `action_id`) goes to the engine now,
        on the container's worker that decided it; the caller sends it at once. A person's
        stop, kill or removal may have been heard meanwhile (the events thread does not wait
        for the worker): then it is withdrawn (Refusals.withdraw), and the container judged
        again, so decide() holds it back with its own reason."""
        why = self.decisions.unsent(snap, claim)
        if not why:
            return True
        self.refusals.withdraw(snap, claim, action_id, why)
        self._rechecks.recheck(snap.id, self.ctx.clock.now())
        return False

    def recheck(self, container_id: str, at: datetime) -> None:
        """Judge the container again at `at` (a hold's end), on its worker."""
        self._rechecks.recheck(container_id, at)

    # -- acting -----------------------------------------------------------------------------

    def act(
        self, a: Assessment, incident: Incident, decision: Decision, claim: Claim | None
    ) -> None:
        """Act on an open incident as `decision` (made in `decided`, whose block this runs
        in, holding its `claim`) says: restart, give up, or record why not."""
        called = False
        waiting = decision.reason is Reason.AWAITING_APPROVAL
        self.ctx.state.approvals.awaiting(a.snapshot.name, a.snapshot.id if waiting else None)
        match decision.verdict:
            case _ if decision.acts and self._stopped_by_person(a.snapshot, incident):
                pass  # a restart, a recreate or a stop would undo what the person did
            case Verdict.RESTART if decision.approval is not None:
                called = self._restart_approved(a, incident, decision, _held(claim))
            case Verdict.RESTART:
                self._restart_incident(a, incident, decision, _held(claim))
                called = True
            case Verdict.RECREATE if self._approval_used(a, incident, decision):
                self.recreator.recreate(a, incident, decision, _held(claim))
            case Verdict.ROLLBACK if self._approval_used(a, incident, decision):
                self.rollbacks.rollback(a, incident, decision, _held(claim))
            case Verdict.STOP if self._approval_used(a, incident, decision):
                self._stop_incident(a, incident, decision, _held(claim))
            case Verdict.GIVE_UP:
                self.refusals.give_up(incident, decision)
            case Verdict.WAIT | Verdict.DENY:
                if decision.reason is Reason.CONCURRENCY:
                    self.ctx.state.claims.wait_for_slot(a.snapshot.name, a.snapshot.id)
                if decision.verdict is Verdict.WAIT and decision.retry_at is not None:
                    self._rechecks.recheck(a.snapshot.id, decision.retry_at)
                self.refusals.hold(incident, a.snapshot, decision, a.rules.policy.action)
        if a.cached and not called and incident.id is not None:
            # Judged from the cache, but no restart call reads the probe: the opening goes as is.
            self.ctx.store.release_held(incident.id)

    def _stopped_by_person(self, snap: ContainerSnapshot, incident: Incident) -> bool:
        """Whether a person's kill or removal of the container was heard since it was read: a
        probe the kill cut short fails, so Docker may say unhealthy just before it, and a read
        may show the container still running. Never undone: the incident stays as it is."""
        if not self.ctx.state.person_stops.holds(snap.id):
            return False
        log.info(
            "not acted on: a person stopped or removed it",
            extra=kv(container=snap.name, incident=incident.id),
        )
        return True

    def _restart_approved(
        self, a: Assessment, incident: Incident, decision: Decision, claim: Claim
    ) -> bool:
        """A restart a person approved: the approval is used once (compare-and-set), so two
        threads deciding on one approval never restart twice. Whether it was called."""
        if not self._approval_used(a, incident, decision):
            return False
        self._restart_incident(a, incident, decision, claim)
        return True

    def _approval_used(self, a: Assessment, incident: Incident, decision: Decision) -> bool:
        """Whether the decision may act: it needs no approval, or it used its approval now
        (compare-and-set: two threads deciding on one approval never act twice)."""
        approval = decision.approval
        if approval is None:
            return True
        assert approval.id is not None
        used = self.ctx.store.use_approval(approval.id, self.ctx.clock.now())
        self.ctx.facts.publish(ApprovalUsed())
        if used:
            log.info(
                f"{decision.verdict} approved",
                extra=kv(container=a.snapshot.name, incident=incident.id, by=approval.by),
            )
        return used

    def _stop_incident(
        self, a: Assessment, incident: Incident, decision: Decision, claim: Claim
    ) -> None:
        """guardian.action=stop: stop the container and leave it to a person (claimed like a
        restart, so the engine's stop events are known as Guardian's own)."""
        ctx, snap, now = self.ctx, a.snapshot, self.ctx.clock.now()
        incident = self.recorder.save(incidents.start_remediation(incident, "stopping", now))
        # The ladder's stop rung is recorded as one (its reason), so the ladder counts it taken.
        rung = decision.reason in (Reason.ESCALATED, Reason.APPROVED)
        action = action_row(
            self.ctx.settings.host,
            incident.id,
            (snap.name, snap.id),
            ActionKind.STOP,
            now,
            str(decision.reason) if rung else "action_stop",
            decision,
            detail=decision.detail if rung else "",
        )
        action_id = ctx.store.record_intent(action)
        log.warning(
            "stopping container (the ladder's stop rung)"
            if rung
            else "stopping container (guardian.action=stop)",
            extra=kv(container=snap.name, incident=incident.id),
        )

        def call() -> None:
            if not self.may_send(snap, claim, action_id):
                return
            result = ctx.engine.stop(snap.id, a.rules.stop_timeout)
            claim.release()  # the engine is done with it: its events are no longer ours
            done = ctx.clock.now()
            told = incident
            if rung and result.outcome is Outcome.STOPPED and not incident.escalated:
                # The last rung pages: escalated first, so its notification is critical.
                told = self.recorder.save(incidents.escalate(incident))
            said = replace(result, detail=f"{decision.detail}: {result.detail}") if rung else result
            notes = self._attempt_notes(told, snap.name, decision, said, done)
            ctx.store.record_outcome(action_id, result.outcome, result.detail, done, notes)
            if result.outcome is Outcome.STOPPED and not told.escalated:
                self.recorder.save(incidents.escalate(incident))  # a person takes it from here
            ctx.restart_ended(snap.name, str(result.outcome))

        self._calls.run(claim.carried_by(call), None, snap.id)

    def _restart_incident(
        self, a: Assessment, incident: Incident, decision: Decision, claim: Claim
    ) -> None:
        """Hand the restart call on (its thread reads the probe when `cached`)."""
        snap = a.snapshot
        now = self.ctx.clock.now()
        incident = self.recorder.save(incidents.start_remediation(incident, "restarting", now))
        approved = decision.approval
        action = action_row(
            self.ctx.settings.host,
            incident.id,
            (snap.name, snap.id),
            ActionKind.RESTART,
            now,
            str(decision.reason),
            decision,
            detail=decision.detail if approved is not None else "",
            extra={"approved_by": approved.by} if approved is not None else None,
        )

        def gone_if_removed(result: ActionOutcome) -> None:
            if result.outcome is Outcome.PERMANENT_FAILURE:
                self.recorder.gone(incident, result.detail, self.ctx.clock.now())

        self.restart(
            snap,
            a.rules,
            decision,
            claim,
            action,
            incident,
            a.detected_at,
            then=gone_if_removed,
            cached=a.cached,
        )

    def restart(
        self,
        snap: ContainerSnapshot,
        rules: ContainerRules,
        decision: Decision,
        claim: Claim,
        action: RemediationAction,
        incident: Incident | None,
        detected_at: datetime | None,
        verify_incident: bool = True,
        then: Callable[[ActionOutcome], None] | None = None,
        after: str = "",
        cached: bool = False,
    ) -> None:
        """Write the intent, then (on `calls`) restart (one retry when the request never
        reached the engine), record the outcome with its notification, hand a restart to
        verification and tell `then`. The caller holds the restart's `claim` (`decided`); the
        call carries it on and ends it once the engine returned, or raised. `cached`: the
        problem was judged from the container cache, without the probe's output (read after
        the call: _call_engine)."""
        ctx, now = self.ctx, action.requested_at
        # Recorded so that a start after a stop mid-call knows how long the engine may take.
        stop = str(int(rules.stop_timeout.total_seconds()))
        action = replace(
            action, extra={**action.extra, STOP_TIMEOUT_KEY: stop, **stamped(ctx.clock)}
        )
        action_id = ctx.store.record_intent(action)
        ctx.metrics.restart_requested(detected_at, now)
        log.warning(
            "restarting container",
            extra=kv(
                container=snap.name,
                incident=action.incident_id,
                reason=action.reason,
                attempt=decision.attempt,
                max_attempts=decision.max_attempts,
                stop_timeout=int(rules.stop_timeout.total_seconds()),
            ),
        )
        pending = PendingVerify(
            action_id,
            incident.id if incident is not None and verify_incident else None,
            snap.name,
            snap.id,
            now,
            now,  # the deadline counts from the call's return (below)
            snap.started_at,
            decision.attempt,
            decision.max_attempts,
            after=after,
        )

        def call() -> None:
            result = self._call_engine(snap, rules, decision, claim, pending, incident, cached)
            if then is not None:
                then(result)

        # Refused (the daemon is stopping: the intent without an outcome is reconciled at the
        # next start), the claim ends as the caller's block does.
        self._calls.run(claim.carried_by(call), claim.slot_until, snap.id)

    def _call_engine(
        self,
        snap: ContainerSnapshot,
        rules: ContainerRules,
        decision: Decision,
        claim: Claim,
        pending: PendingVerify,
        incident: Incident | None,
        cached: bool,
    ) -> ActionOutcome:
        """The restart call and what follows it: on the thread `calls` chose. The claim
        ends as soon as the engine returned (an error ends it as the call does). A restart
        judged from the cache (`cached`) reads the probe's output once the call returned (the
        kill never waits on it): the attempt's notification and the incident say it."""
        ctx, action_id = self.ctx, pending.action_id
        if not self.may_send(snap, claim, action_id):
            if cached and incident is not None and incident.id is not None:
                ctx.store.release_held(incident.id)  # the opening goes as is
            return ActionOutcome(Outcome.WITHDRAWN)
        began = ctx.clock.monotonic()  # a duration: never the wall clock (docs/design.md rule 12)
        result = self._request_restart(snap, rules)
        if not ctx.state.claims.recording:
            # Guardian stopped while the engine waited out the stop timeout: the intent stays
            # without an outcome, and the next start reconciles it (Verifier.reconcile).
            claim.release()
            log.info(
                "restart returned after stop; left to the next start", extra=kv(container=snap.name)
            )
            return result
        done = ctx.clock.now()
        # UNKNOWN is never repeated blindly: verification observes what really happened.
        verify = result.outcome in (Outcome.RESTARTED, Outcome.UNKNOWN)
        if verify:
            pending = replace(pending, deadline=done + ctx.settings.verify_timeout)
            claim.hand_over(pending)
        else:
            claim.release()
        ctx.metrics.restart_returned(ctx.clock.monotonic() - began)
        log.info(
            "restart finished",
            extra=kv(container=snap.name, outcome=result.outcome, detail=result.detail),
        )
        said = self._probe_before(snap, pending.restarted_at) if cached and verify else ""
        if cached and incident is not None and incident.id is not None:
            ctx.store.release_held(incident.id, said)  # the opening, before the attempt
        notes = self._attempt_notes(incident, snap.name, decision, _told(result, said), done)
        try:
            ctx.store.record_outcome(action_id, result.outcome, result.detail, done, notes)
            if said and incident is not None:
                self._probe_said(incident, said)
        finally:
            if verify:
                ctx.state.verifications.outcome_written(pending)
        if not verify:
            ctx.restart_ended(snap.name, str(result.outcome))
            ctx.verdict_reached(
                ActionVerdict(snap.name, snap.id, "restart", result.outcome, pending.incident_id)
            )
        return result

    def _request_restart(self, snap: ContainerSnapshot, rules: ContainerRules) -> ActionOutcome:
        """The engine's restart, sent once more only when the first request never reached the
        engine (an unknown outcome is never sent again: verification settles it)."""
        ctx = self.ctx
        result = ctx.engine.restart(snap.id, rules.stop_timeout, snap.started_at)
        if result.outcome is Outcome.TRANSIENT_FAILURE and result.retryable:
            # One retry on identical input: the request never reached the engine.
            result = ctx.engine.restart(snap.id, rules.stop_timeout, snap.started_at)
        return result

    def _probe_before(self, snap: ContainerSnapshot, requested_at: datetime) -> str:
        """What the last probe before a restart requested at `requested_at` said, from one
        inspect after the call (core.detection.checks.probe_before); "" when the engine does not
        answer or no probe qualifies."""
        try:
            after = self.ctx.inspect_kept(snap.id)
        except EngineUnavailable:
            return ""
        return "" if after is None else probe_before(after, requested_at)

    def _probe_said(self, incident: Incident, said: str) -> None:
        """The incident's detail becomes what the probe said (`guardian status`, the page and
        later notifications show it), on the incident as the store holds it now."""
        current = self.ctx.store.get_incident(incident.id) if incident.id is not None else None
        if current is not None:
            self.recorder.save(incidents.probe_said(current, said))

    def _attempt_notes(
        self,
        incident: Incident | None,
        container: str,
        decision: Decision,
        result: ActionOutcome,
        done: datetime,
    ) -> tuple[notifications.Notification, ...]:
        """What an action's outcome tells people (a restart's or a stop's attempt), if it has an
        incident to tell it under."""
        if incident is None:
            return ()
        note = notifications.attempt(
            incident, decision.attempt, decision.max_attempts, result.outcome, result.detail, done
        )
        return self.recorder.notes(container, note)
