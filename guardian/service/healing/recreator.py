"""The ladder's recreate rung (restart.escalate): remove the container and create it again from
its own record, under the same name (core.escalation.recreate). Nothing is lost
(docs/design.md rules 5 and 20): the intent and the whole record are written before the
removal, the outcome with the new container's id after the create; a crash between the two is
settled at the next start from the stored record (`settle`, called by Verifier.reconcile).
What cannot be recreated faithfully is refused with the reason and the command a person would
run, and the rung counts as taken so that the ladder moves on; the recreated container keeps
its budget (decisions.py reads the history of its lineage).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from guardian.core import incidents
from guardian.core.assessment import Assessment
from guardian.core.escalation.recreate import RecreateSpec, Refusal, build
from guardian.core.escalation.rollback import Kept, kept_from
from guardian.core.labels import ALL
from guardian.core.model import (
    REPLACING,
    ActionKind,
    ContainerSnapshot,
    Decision,
    Incident,
    Outcome,
    RemediationAction,
)
from guardian.core.outbound import notifications
from guardian.core.outbound.hooks import ActionVerdict
from guardian.core.verification import PendingVerify
from guardian.logs import kv
from guardian.ports import EngineStep, EngineUnavailable, RestartCalls
from guardian.service.context import LoopContext
from guardian.service.healing.actions import action_row
from guardian.service.healing.recorder import Recorder
from guardian.service.state.claims import Claim

log = logging.getLogger("guardian.recreate")
# Whether a decided call goes to the engine now (snapshot, claim, intent's action id).
MaySend = Callable[[ContainerSnapshot, Claim, int], bool]


def spec_of(
    record: Mapping[str, Any], relatives: tuple[tuple[str, ...], dict[str, str]]
) -> RecreateSpec | Refusal:
    """The spec to recreate `record`'s container with, or why not (its followers refuse it)."""
    followers, leaders = relatives
    return build(record, followers, leaders)


def refused_detail(reason: str, command: str, verb: str = "recreate") -> str:
    """A recreate (or rollback) not done, in one line: why, and what a person would run."""
    return f"{verb} refused: {reason}; a person would run: {command}"


@dataclass(frozen=True)
class Replacement:
    """What replaces a container under its name: its own record (a recreate) or the last one of
    its name that ran healthy (a rollback), with what is stored before the removal."""

    kind: ActionKind  # RECREATE or ROLLBACK
    spec: RecreateSpec  # what is created
    record: str  # the record created from, as JSON: stored with the intent
    replaced: str = ""  # a rollback's: the record of the container it removes
    done: str = "recreated from its record as"  # the outcome's words, before the new id
    failed: Kept | None = None  # a rollback's: the record it leaves, kept as failed once done

    @property
    def verb(self) -> str:
        return str(self.kind)


def removed_by_recreate(action: RemediationAction | None) -> bool:
    """Whether `action` (a recreate or a rollback) removed its container and no create followed
    (the engine refused it): the container is gone, its record kept, and its incident waits for
    a person."""
    return (
        action is not None
        and action.kind in REPLACING
        and bool(action.record)
        and not action.successor
        and action.outcome is Outcome.PERMANENT_FAILURE
    )


class Recreator:
    """The recreate rung from decision to verification; its claim is the restart's claim."""

    def __init__(
        self, ctx: LoopContext, recorder: Recorder, calls: RestartCalls, may_send: MaySend
    ) -> None:
        """`may_send`: Remediator.may_send, asked on the worker just before the removal."""
        self.ctx = ctx
        self.recorder = recorder
        self._calls = calls
        self._may_send = may_send

    def recreate(self, a: Assessment, incident: Incident, decision: Decision, claim: Claim) -> None:
        """Read the record, build the spec, then write the intent with the record and (on
        `calls`) remove, create, record the outcome and hand the new container to
        verification. A refusal is written as the rung taken, with its reason."""
        ctx, snap = self.ctx, a.snapshot
        begun = self.begin(a, incident, decision, ActionKind.RECREATE)
        if begun is None:
            return
        record, incident, action = begun
        built = spec_of(record, ctx.pipeline.relatives(snap.name))
        if isinstance(built, Refusal):
            self.refused(incident, decision, action, built)
            return
        text = json.dumps(record, sort_keys=True, default=str)
        self.carry_out(
            a, incident, decision, claim, action, Replacement(ActionKind.RECREATE, built, text)
        )

    def begin(
        self, a: Assessment, incident: Incident, decision: Decision, kind: ActionKind
    ) -> tuple[Mapping[str, Any], Incident, RemediationAction] | None:
        """The container's record as it runs now, its incident under remediation, and the
        action (not yet written) of a recreate or rollback; None when there is nothing to
        replace: the engine did not answer (the next decision asks again) or it is gone."""
        ctx, snap, now = self.ctx, a.snapshot, self.ctx.clock.now()
        try:
            record = ctx.engine.record(snap.id)
        except EngineUnavailable as exc:
            log.warning(f"{kind} postponed", extra=kv(container=snap.name, reason=str(exc)))
            return None  # nothing was done: the next decision asks again
        if record is None:
            self.recorder.gone(incident, f"removed before its {kind}", now)
            return None
        doing = "rolling back" if kind == ActionKind.ROLLBACK else "recreating"
        incident = self.recorder.save(incidents.start_remediation(incident, doing, now))
        action = action_row(
            ctx.settings.host,
            incident.id,
            (snap.name, snap.id),
            kind,
            now,
            str(decision.reason),
            decision,
            detail=decision.detail,
        )
        return record, incident, action

    def carry_out(
        self,
        a: Assessment,
        incident: Incident,
        decision: Decision,
        claim: Claim,
        action: RemediationAction,
        by: Replacement,
    ) -> None:
        """Write the intent with the record(s), then (on `calls`) remove, create, record the
        outcome and hand the new container to verification."""
        ctx, snap = self.ctx, a.snapshot
        # The intent and the whole record first: nothing is removed before they are stored.
        action_id = ctx.store.record_intent(replace(action, record=by.record, replaced=by.replaced))
        if action_id < 0:
            # Held in memory only (the store refused the write: a full disk): a crash after
            # the removal would lose the container, so nothing is removed (docs/design.md
            # rule 20).
            kept = EngineStep(False, "the store did not keep its record: nothing was removed")
            self._ended(incident, decision, action_id, Outcome.TRANSIENT_FAILURE, kept, by.verb)
            return
        log.warning(
            f"{'rolling back' if by.kind == ActionKind.ROLLBACK else 'recreating'} container"
            " (restarts did not help)",
            extra=kv(container=snap.name, incident=incident.id, detail=decision.detail),
        )

        def call() -> None:
            self._remove_then_create(a, incident, decision, claim, action_id, by)

        self._calls.run(claim.carried_by(call), claim.slot_until, a.snapshot.id)

    def refused(
        self, incident: Incident, decision: Decision, action: RemediationAction, refusal: Refusal
    ) -> None:
        """A recreate (or rollback) that would not be faithful or safe: the rung is taken
        (recorded with its reason, so the ladder moves on), the incident and the attempt's
        notification say why."""
        ctx, now = self.ctx, self.ctx.clock.now()
        detail = refused_detail(refusal.reason, refusal.command, action.kind)
        incident = self.recorder.save(incidents.probe_said(incident, detail))
        notes = self._notes(incident, decision, Outcome.POLICY_DENIED, detail, now)
        done = replace(action, outcome=Outcome.POLICY_DENIED, detail=detail, finished_at=now)
        ctx.store.record_intent(done, notes)
        ctx.metrics.restart_ended(incident.container, str(Outcome.POLICY_DENIED))
        log.warning(
            f"{action.kind} refused", extra=kv(container=incident.container, reason=refusal.reason)
        )

    def _remove_then_create(
        self,
        a: Assessment,
        incident: Incident,
        decision: Decision,
        claim: Claim,
        action_id: int,
        by: Replacement,
    ) -> None:
        """On the container's worker: remove, then create from the spec. The claim ends when the
        engine is done, or passes to the new container's verification."""
        ctx, snap = self.ctx, a.snapshot
        if not self._may_send(snap, claim, action_id):
            return
        removed = ctx.engine.remove_container(snap.id, a.rules.stop_timeout)
        if not removed.done:
            # Still there (or unknown): nothing lost; the next decision sees what is there.
            claim.release()
            self._ended(incident, decision, action_id, Outcome.TRANSIENT_FAILURE, removed, by.verb)
            return
        created = ctx.engine.create_container(by.spec)
        if not created.done:
            claim.release()
            self._create_refused(incident, decision, action_id, by, created)
            return
        self._created(incident, decision, claim, action_id, created.container_id, by)

    def _created(
        self,
        incident: Incident,
        decision: Decision,
        claim: Claim,
        action_id: int,
        new_id: str,
        by: Replacement,
    ) -> None:
        """The new container runs: the outcome names it, the incident follows it (its id), and
        it is verified as a restart is (healthy within verify_timeout resolves the incident). A
        rollback's record left is kept as failed on the name."""
        ctx, done, name = self.ctx, self.ctx.clock.now(), by.spec.name
        if by.failed is not None:
            ctx.store.keep_record(ctx.settings.host, replace(by.failed, failed_at=done))
        incident = self.recorder.save(
            incidents.IncidentChange(replace(incident, container_id=new_id))
        )
        pending = PendingVerify(
            action_id,
            incident.id,
            name,
            new_id,
            done,
            done + ctx.settings.verify_timeout,
            None,
            decision.attempt,
            decision.max_attempts,
        )
        claim.hand_over(pending)
        detail = f"{by.done} container {new_id[:12]}"
        notes = self._notes(incident, decision, Outcome.RESTARTED, detail, done)
        try:
            ctx.store.record_outcome(
                action_id, Outcome.RESTARTED, detail, done, notes, successor=new_id
            )
        finally:
            ctx.state.verifications.outcome_written(pending)
        said = "rolled back" if by.kind == ActionKind.ROLLBACK else "recreated"
        log.info(f"container {said}", extra=kv(container=name, new_id=new_id[:12]))

    def _create_refused(
        self,
        incident: Incident,
        decision: Decision,
        action_id: int,
        by: Replacement,
        created: EngineStep,
    ) -> None:
        """Removed, and the engine refused the create (a port taken, the image gone): the
        stored record stays, the incident says so and names what a person would run."""
        command = f"docker compose up -d --force-recreate, or docker run --name {by.spec.name}"
        command += " with the options of the record Guardian stored with this action (its store's"
        command += f" actions table, column record, action {action_id})"
        detail = f"{by.verb} failed after the removal: {created.reason}; a person would run: "
        detail += command
        current = self.ctx.store.get_incident(incident.id or 0) or incident
        # Escalated: the container is gone until a person creates it (its record is kept).
        incident = self.recorder.save(
            incidents.escalate(incidents.probe_said(current, detail).incident)
        )
        step = EngineStep(False, detail)
        self._ended(incident, decision, action_id, Outcome.PERMANENT_FAILURE, step, by.verb)

    def _ended(
        self,
        incident: Incident,
        decision: Decision,
        action_id: int,
        outcome: Outcome,
        step: EngineStep,
        verb: str,
    ) -> None:
        ctx, done = self.ctx, self.ctx.clock.now()
        notes = self._notes(incident, decision, outcome, step.reason, done)
        ctx.store.record_outcome(action_id, outcome, step.reason, done, notes)
        ctx.restart_ended(incident.container, str(outcome))
        ctx.verdict_reached(
            ActionVerdict(incident.container, incident.container_id, verb, outcome, incident.id)
        )
        log.warning(f"{verb} failed", extra=kv(container=incident.container, reason=step.reason))

    def _notes(
        self,
        incident: Incident,
        decision: Decision,
        outcome: Outcome,
        detail: str,
        now: datetime,
    ) -> tuple[notifications.Notification, ...]:
        """The rung's attempt notification: which rung and why, then what happened."""
        said = f"{decision.detail}: {detail}" if decision.detail else detail
        note = notifications.attempt(
            incident, decision.attempt, decision.max_attempts, outcome, said, now
        )
        return self.recorder.notes(incident.container, note)


class Leftovers:
    """A recreate a crash left unfinished, settled once at the next start (Verifier.reconcile)
    from the stored record and what the engine holds: never a second container."""

    def __init__(self, ctx: LoopContext, recorder: Recorder) -> None:
        self.ctx = ctx
        self.recorder = recorder

    def settle(self, action: RemediationAction) -> PendingVerify | None:
        """Give `action` (a RECREATE without an outcome, or created and not verified) its
        outcome; the verification to resume, if a container now carries the name."""
        ctx, now, action_id = self.ctx, self.ctx.clock.now(), action.id or 0
        if action.outcome is Outcome.RESTARTED and action.successor:
            return self._verify(action, action.successor, now)
        if ctx.engine.inspect(action.container_id) is not None:
            detail = "Guardian stopped before the removal; the container is still there"
            ctx.store.record_outcome(action_id, Outcome.INTERRUPTED, detail, now)
            return None
        there = ctx.engine.list_containers(ALL, "", names=(action.container,))
        if there:
            # Created before the crash (or by a person since): that one is the outcome.
            detail = (
                f"found as container {there[0].id[:12]} after Guardian stopped mid-{action.kind}"
            )
            ctx.store.record_outcome(
                action_id, Outcome.RESTARTED, detail, now, successor=there[0].id
            )
            self._left_failed(action, now)
            return self._verify(action, there[0].id, now)
        return self._create(action, now)

    def _left_failed(self, action: RemediationAction, now: datetime) -> None:
        """A rollback's replaced record, kept as failed on the name once the rollback is done."""
        if action.kind != ActionKind.ROLLBACK or not action.replaced:
            return
        try:
            record = json.loads(action.replaced)
        except ValueError:
            return
        left = kept_from(record, action.container, None, now) if isinstance(record, dict) else None
        if left is not None:
            failed = replace(left, healthy_at=None, failed_at=now)
            self.ctx.store.keep_record(self.ctx.settings.host, failed)

    def _create(self, action: RemediationAction, now: datetime) -> PendingVerify | None:
        """Removed, and never created: created now from the stored record, once."""
        ctx, action_id = self.ctx, action.id or 0
        try:
            built = build(json.loads(action.record)) if action.record else None
        except ValueError:
            built = None
        if not isinstance(built, RecreateSpec):
            why = built.reason if isinstance(built, Refusal) else "no record was stored"
            detail = f"removed, and not created again: {why}"
            ctx.store.record_outcome(action_id, Outcome.PERMANENT_FAILURE, detail, now)
            return None
        created = ctx.engine.create_container(built)
        if not created.done:
            detail = f"removed, and the create from the stored record failed: {created.reason}"
            ctx.store.record_outcome(action_id, Outcome.PERMANENT_FAILURE, detail, now)
            incident = ctx.store.get_incident(action.incident_id or 0)
            if incident is not None and incident.is_open:
                said = incidents.probe_said(incident, detail).incident
                self.recorder.save(incidents.escalate(said))
            return None
        new_id = created.container_id
        detail = f"created from its stored record as {new_id[:12]} after Guardian stopped"
        ctx.store.record_outcome(action_id, Outcome.RESTARTED, detail, now, successor=new_id)
        self._left_failed(action, now)
        log.warning("recreate finished at start", extra=kv(container=action.container))
        return self._verify(action, new_id, now)

    def _verify(self, action: RemediationAction, new_id: str, now: datetime) -> PendingVerify:
        incident = self.ctx.store.get_incident(action.incident_id or 0)
        if incident is not None and incident.is_open and incident.container_id != new_id:
            self.recorder.save(incidents.IncidentChange(replace(incident, container_id=new_id)))
        deadline = now + self.ctx.settings.verify_timeout
        return PendingVerify(
            action.id or 0,
            action.incident_id,
            action.container,
            new_id,
            now,
            deadline,
            None,
            action.attempt,
        )
