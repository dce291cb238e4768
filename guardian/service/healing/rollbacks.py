"""The ladder's rollback rung (restart.escalate: rollback, docs/restarts.md) and the records it
goes back to (core.escalation.rollback).

`KeptRecords` keeps the record each container runs healthy on, only while the operator's ladder
holds the rung: at the first healthy look of a container in a run (and once a day after), one
store write; an inspect only for a record the store does not hold yet.

`Rollbacks` takes the rung: it judges whether the running record is new and failed early and
an earlier one of the name ran healthy, then replaces the container with the recreate's
machinery (service/healing/recreator.py): the intent and both records stored before the
removal, the create from the record that ran healthy (its image by ID, its configuration as a
whole), the verification of a restart; the record it left is kept as failed on the name. What
does not apply is refused with the reason and the command a person would run, as the rung
taken, and the ladder moves on.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from guardian.core.assessment import Assessment
from guardian.core.escalation.recreate import RecreateSpec, Refusal
from guardian.core.escalation.rollback import (
    Kept,
    Running,
    for_person,
    image_gone_command,
    judge,
    kept_from,
    person_command,
    running_of,
    why,
    why_person,
)
from guardian.core.model import (
    ActionKind,
    ContainerSnapshot,
    Decision,
    Incident,
    RollbackRequest,
)
from guardian.logs import kv
from guardian.ports import EngineUnavailable
from guardian.service.context import LoopContext
from guardian.service.healing.decisions import made_by_rollback
from guardian.service.healing.recorder import Recorder
from guardian.service.healing.recreator import Recreator, Replacement, spec_of
from guardian.service.state.claims import Claim

log = logging.getLogger("guardian.rollback")

RUNG = "rollback"
KEEP_AGAIN = 86_400.0  # seconds: a container running healthy keeps its record seen once a day


def created_of(ctx: LoopContext, snap: ContainerSnapshot) -> datetime | None:
    """When the container was created, as this run's clock places the engine's stamp: from its
    snapshot, or an inspect when the snapshot came from a list (None: gone, or unknown)."""
    if snap.created is not None:
        return snap.created
    try:
        inspected = ctx.engine.inspect(snap.id)
    except EngineUnavailable:
        return None
    return inspected.created if inspected is not None else None


class KeptRecords:
    """The records containers run healthy on, kept for the rollback rung. Called on the
    container's turn; one entry per name in memory (`forget` drops the names gone)."""

    def __init__(self, ctx: LoopContext) -> None:
        self.ctx = ctx
        self._kept: dict[str, tuple[str, float]] = {}  # name -> (container id, monotonic)

    def seen_healthy(self, snap: ContainerSnapshot, healthy_for: timedelta) -> None:
        """`snap` was judged fine, for `healthy_for` so far: its record is kept when it runs
        healthy (a healthcheck says so, or, without one, it has run restart.rollback_monitor
        long)."""
        ctx = self.ctx
        policy = ctx.settings.policy
        if RUNG not in policy.escalate or snap.state != "running":
            return
        if snap.health is None and healthy_for < policy.rollback_monitor:
            return
        mono = ctx.clock.monotonic()
        if snap.health not in (None, "healthy"):
            return
        last = self._kept.get(snap.name)
        if last is not None and last[0] == snap.id and mono - last[1] < KEEP_AGAIN:
            return
        self._kept[snap.name] = (snap.id, mono)
        host, now = ctx.settings.host, ctx.clock.now()
        if ctx.store.touch_kept(host, snap.name, snap.id, now):
            return
        try:
            record = ctx.engine.record(snap.id)
        except EngineUnavailable:
            self._kept.pop(snap.name, None)  # asked again at the next healthy look
            return
        created = created_of(ctx, snap)
        kept = kept_from(record, snap.name, created, now) if record is not None else None
        if kept is None:
            return
        ctx.store.keep_record(host, kept)
        log.info("healthy record kept", extra=kv(container=snap.name, image=kept.image_id[7:19]))

    def forget(self, present: set[str]) -> None:
        """After a sweep's list: forget the names no longer present (their records stay in the
        store until retention), and see again, once a day, the records of those still there, so
        retention never forgets a record a container still runs on."""
        ctx = self.ctx
        mono = ctx.clock.monotonic()
        for name in [n for n in list(self._kept) if n not in present]:
            self._kept.pop(name, None)
        due = [(n, e) for n, e in list(self._kept.items()) if mono - e[1] >= KEEP_AGAIN]
        for name, (container_id, _) in due:
            self._kept[name] = (container_id, mono)
            ctx.store.touch_kept(ctx.settings.host, name, container_id, ctx.clock.now())


class Rollbacks:
    """The rollback rung from decision to verification; its claim is the restart's claim."""

    def __init__(self, ctx: LoopContext, recorder: Recorder, recreator: Recreator) -> None:
        self.ctx = ctx
        self.recorder = recorder
        self.recreator = recreator

    def rollback(
        self,
        a: Assessment,
        incident: Incident,
        decision: Decision,
        claim: Claim,
        request: RollbackRequest | None = None,
    ) -> None:
        """Read the running record, judge, then replace the container by the record of its name
        that ran healthy, or record why not (the rung taken, with its reason). `request`: a
        person's rollback (core.escalation.rollback.for_person: no early failure asked, the
        record the person was told), recorded with who asked."""
        snap, now = a.snapshot, self.ctx.clock.now()
        begun = self.recreator.begin(a, incident, decision, ActionKind.ROLLBACK)
        if begun is None:
            return
        record, incident, action = begun
        if request is not None:
            action = replace(action, extra={"by": request.by, "request": str(request.id)})
        running = self._running(a, incident, record)
        target = self._target(a, running, request)
        if isinstance(target, Refusal):
            self.recreator.refused(incident, decision, action, target)
            return
        old, built = target
        left = kept_from(record, snap.name, running.created, now)
        told = (
            why_person(running, old, request.by) if request else why(running, old, running.created)
        )
        by = Replacement(
            ActionKind.ROLLBACK,
            built,
            old.record,
            replaced=json.dumps(record, sort_keys=True, default=str),
            done=f"{told}: created as",
            failed=replace(left, healthy_at=None) if left is not None else None,
        )
        action = replace(action, detail=f"{decision.detail}: {told}" if decision.detail else told)
        self.recreator.carry_out(a, incident, decision, claim, action, by)

    def _running(self, a: Assessment, incident: Incident, record: Mapping[str, Any]) -> Running:
        """The record the container runs on, its problem's start, and whether a rollback made
        it (or one of the containers it was recreated from)."""
        ctx, snap = self.ctx, a.snapshot
        policy, now = ctx.settings.policy, ctx.clock.now()
        horizon = now - policy.window - policy.max_cooldown
        made = made_by_rollback(ctx.store.actions(ctx.settings.host, snap.name, horizon), snap.id)
        began = incident.problem_since or incident.opened_at
        return running_of(record, snap.name, created_of(ctx, snap), began, made)

    def _target(
        self, a: Assessment, running: Running, request: RollbackRequest | None
    ) -> tuple[Kept, RecreateSpec] | Refusal:
        """The record to go back to and the spec to create it from, or why not: the rung does
        not apply (core.escalation.rollback.judge; for a person's request, for_person), its
        image is gone, or it cannot be created faithfully (core.escalation.recreate)."""
        ctx, snap, policy = self.ctx, a.snapshot, a.rules.policy
        kept = ctx.store.kept_records(ctx.settings.host, snap.name)
        if request is not None:
            target = for_person(running, kept, request.digest)
        else:
            target = judge(running, kept, policy.rollback_monitor, policy.window, ctx.clock.now())
        if isinstance(target, Refusal):
            return target
        refusal = self._image_missing(target, running.labels, snap.name)
        if refusal is not None:
            return refusal
        try:
            old = json.loads(target.record)
        except ValueError:
            old = None
        if not isinstance(old, dict):
            return Refusal(
                "the record kept of it is not a container's inspect",
                person_command(running.labels, snap.name),
            )
        old["Name"] = "/" + snap.name  # the name it runs under now, whatever it was
        built = spec_of(old, ctx.pipeline.relatives(snap.name))
        if isinstance(built, Refusal):
            return built
        kept_as = replace(target, record=json.dumps(old, sort_keys=True, default=str))
        return kept_as, built

    def _image_missing(self, to: Kept, labels: Mapping[str, str], name: str) -> Refusal | None:
        """Why the rollback cannot start: the image that ran healthy is gone (Guardian pulls
        nothing), or the engine cannot say."""
        shown = labels
        try:
            there = self.ctx.engine.has_image(to.image_id)
        except EngineUnavailable as exc:
            return Refusal(
                f"the engine could not say whether {to.told} is still on the host ({exc})",
                image_gone_command(to, shown, name),
            )
        if there:
            return None
        return Refusal(
            f"{to.told}, which ran healthy, is no longer on the host and Guardian pulls nothing",
            image_gone_command(to, shown, name),
        )
