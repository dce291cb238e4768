"""The inputs of the single decision point: the attempt history from the store, what the loop
is doing now, the host's load, silences, dependencies and owners, gathered for decide().
Every restart decision, and what `guardian status` shows, is asked here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from guardian.core.detection.restart_policy import RestartPolicy
from guardian.core.labels import ContainerRules
from guardian.core.model import (
    REPLACING,
    ActionKind,
    Approval,
    ContainerSnapshot,
    Decision,
    Outcome,
    ProblemType,
    Reason,
    RemediationAction,
    RollbackRequest,
    Silence,
)
from guardian.core.policy import AttemptHistory, HostLoad, Target, decide
from guardian.core.storm import StormHold
from guardian.service.context import LoopContext
from guardian.service.state.claims import Claim

# The reasons a STOP action carries when it was the ladder's stop rung (not guardian.action=stop).
RUNG_REASONS = (str(Reason.ESCALATED), str(Reason.APPROVED))


def lineage(actions: Sequence[RemediationAction], container_id: str) -> frozenset[str]:
    """The ids `container_id` was recreated (or rolled back) from by Guardian (the outcomes name
    the new container), itself included: one container for its budget, so a recreated
    container never starts the ladder again."""
    ids = {container_id}
    while True:
        more = {
            a.container_id
            for a in actions
            if a.kind in REPLACING and a.successor in ids and a.container_id not in ids
        }
        if not more:
            return frozenset(ids)
        ids |= more


def ladder_history(
    actions: Sequence[RemediationAction], container_id: str
) -> tuple[tuple[datetime, ...], tuple[tuple[str, datetime], ...]]:
    """From the actions of a name: the restarts of the containers `container_id` was recreated
    from (its own are read as ever), and the ladder's rungs its lineage took (a recreate, done
    or refused; a stop as a rung)."""
    ids = lineage(actions, container_id)
    before = tuple(
        a.requested_at
        for a in actions
        if a.kind == ActionKind.RESTART and a.container_id in ids - {container_id}
    )
    rungs = tuple(
        (str(a.kind) if a.kind in REPLACING else "stop", a.requested_at)
        for a in actions
        if a.container_id in ids
        and a.outcome != Outcome.WITHDRAWN  # never sent: not taken
        and (a.kind in REPLACING or (a.kind == ActionKind.STOP and a.reason in RUNG_REASONS))
    )
    return before, rungs


def made_by_rollback(actions: Sequence[RemediationAction], container_id: str) -> bool:
    """Whether a rollback made `container_id`, or a container it was recreated from."""
    ids = lineage(actions, container_id)
    return any(a.kind == ActionKind.ROLLBACK and a.successor in ids for a in actions)


@dataclass(frozen=True)
class _Read:
    """What the store says about one container and the host, read outside the loop lock."""

    attempts: tuple[datetime, ...]
    reset_at: datetime | None
    engine_denied: bool
    recent_restarts: tuple[datetime, ...]
    storm: StormHold | None
    silence: Silence | None
    dependencies: tuple[str, ...]
    approval: Approval | None = None  # guardian.action=ask: a person's answer for the incident
    problem_since: datetime | None = None  # restart.act_after: since when the problem lasts
    rungs: tuple[tuple[str, datetime], ...] = ()  # the ladder's rungs taken (restart.escalate)
    request: RollbackRequest | None = None  # a person's rollback of this container
    # A restart the engine's record shows under way, which no claim of this run holds.
    under_way: bool = False


def _asks(policy: RestartPolicy) -> bool:
    """Whether a person's approval may be what the decision waits for: every restart's
    (guardian.action=ask) or a rung's of the ladder (restart.escalate_ask)."""
    return policy.action == "ask" or bool(policy.escalate_ask)


class DecisionPoint:
    def __init__(self, ctx: LoopContext) -> None:
        self.ctx = ctx

    def decision_for(
        self,
        snap: ContainerSnapshot,
        rules: ContainerRules,
        now: datetime,
        then: Callable[[Decision], None] | None = None,
        problem: ProblemType | None = None,
        began: datetime | None = None,
    ) -> Decision:
        """Gather the history from the store and the loop's state, and ask decide(); `then`
        runs with the decision under the loop lock (reserving the restart it allows). `problem`
        is what the checks found (a report-only one is never restarted for), `began` since when
        it lasts as its incident is about to be written (None: as the store keeps it). Reads
        only: the store, and the loop's state under its lock.

        The store is read outside the loop lock, which the event thread, /healthz and the
        watchdog take too: a store held by another writer (the CLI) stalls this thread only.
        Nothing of this container changes meanwhile: it is decided on its turn (its worker,
        or a sweep or tick holding its key: docs/design.md rule 21). Under the lock, what the
        host does now is read (restarts running or verifying), and the restarts other
        containers reserved while the history was read count as made now (perhaps twice, if
        their rows were read too: never fewer), so the host's budget is decided and reserved
        in one hold of the lock, and so is the storm's canary (its hold read again when another
        container was claimed meanwhile).

        Attempts are this container's (its id): a new container under an old name (`docker
        compose up` after a fix) starts with a fresh budget. What holds a name back whoever
        carries it (a restart in flight, a silence) stays keyed by the name."""
        state = self.ctx.state
        mark = state.claimed()
        read = self._read(snap, rules, now, problem, began)
        with state.lock:
            extra = (now,) * (state.claimed() - mark)
            read = replace(read, recent_restarts=read.recent_restarts + extra)
            if extra and read.storm is not None:
                # Another container was claimed meanwhile, perhaps as the storm's canary: its
                # hold is read again, so one container alone tries whether the storm is over.
                read = replace(read, storm=self.ctx.pipeline.storm_holds(snap))
            decision = self._decide(snap, rules, read, now, problem)
            if then is not None:
                then(decision)
            return decision

    def _read(
        self,
        snap: ContainerSnapshot,
        rules: ContainerRules,
        now: datetime,
        problem: ProblemType | None,
        began: datetime | None,
    ) -> _Read:
        ctx, host, policy = self.ctx, self.ctx.settings.host, rules.policy
        container = snap.name
        horizon = now - max(
            policy.window, policy.max_cooldown, policy.cooldown, timedelta(minutes=1)
        )
        stored = tuple(ctx.store.restart_times(host, horizon, container, snap.id))
        rungs: tuple[tuple[str, datetime], ...] = ()
        if policy.escalate:
            # A container Guardian recreated keeps the budget of those it was made from.
            before, rungs = ladder_history(ctx.store.actions(host, container, horizon), snap.id)
            stored += tuple(at for at in before if at > horizon)
        # What the store could not remember, as the engine recorded it (docs/design.md rule 16).
        memory = ctx.state.remembered
        unrecorded = memory.unrecorded(snap, stored, policy, rules.stop_timeout, now)
        minute_ago = now - timedelta(minutes=1)
        return _Read(
            attempts=stored + unrecorded,
            reset_at=ctx.store.last_reset(host, container),
            engine_denied=self._engine_denied(snap, now - policy.window),
            recent_restarts=tuple(ctx.store.restart_times(host, minute_ago))
            + memory.recent(minute_ago),
            storm=ctx.pipeline.storm_holds(snap),
            silence=self._silence(snap, rules, now),
            dependencies=ctx.pipeline.unhealthy_dependencies(container),
            approval=ctx.store.approval_for(host, container) if _asks(policy) else None,
            problem_since=(
                self._problem_since(snap, now, problem, began)
                if policy.act_after and problem is not ProblemType.ROLLBACK_REQUESTED
                else None  # a person's request waits for no patience
            ),
            rungs=rungs,
            request=self._request(snap) if problem is ProblemType.ROLLBACK_REQUESTED else None,
            under_way=memory.under_way(snap, rules.stop_timeout),
        )

    def _request(self, snap: ContainerSnapshot) -> RollbackRequest | None:
        """A person's rollback request of this container (its name and id) in the store."""
        ctx = self.ctx
        found = ctx.store.rollback_requests(ctx.settings.host, ctx.clock.now())
        return next(
            (r for r in found if r.container == snap.name and r.container_id == snap.id), None
        )

    def _silence(
        self, snap: ContainerSnapshot, rules: ContainerRules, now: datetime
    ) -> Silence | None:
        """What holds the container back: a person's silence or a maintenance window in force
        (held to its end), whichever ends later."""
        ctx = self.ctx
        person = ctx.store.active_silence(ctx.settings.host, snap.name, now)
        if not rules.maintenance:
            return person
        window = ctx.state.maintenance.silence(ctx.settings.host, snap.name, rules.maintenance, now)
        if person is None or (window is not None and window.until > person.until):
            return window or person
        return person

    def unsent(self, snap: ContainerSnapshot, claim: Claim) -> str:
        """Just before `claim`'s call goes to the engine, on the container's worker that decided
        it a moment ago: why it must not go after all, as people read it, or "" once it is
        marked sent (the caller sends it at once). A person's stop, kill or removal heard on
        the events thread since the decision (LoopState.send: hearing a stop and sending decide
        under the restart lock, so the stop is a person's, or perhaps the call's own)."""
        if not self.ctx.state.send(claim, snap.id):
            return "a person stopped, killed or removed it since it was decided"
        return ""

    def _decide(
        self,
        snap: ContainerSnapshot,
        rules: ContainerRules,
        read: _Read,
        now: datetime,
        problem: ProblemType | None,
    ) -> Decision:
        """decide() over what was read and what the loop does now (call under the lock)."""
        state = self.ctx.state
        history = AttemptHistory(
            attempts=read.attempts,
            reset_at=read.reset_at,
            in_flight=read.under_way or state.claims.running(snap.name),
            verifying=state.verifications.verifying(snap.name),
            engine_denied=read.engine_denied,
            rungs=read.rungs,
        )
        load = HostLoad(
            recent_restarts=read.recent_restarts,
            in_flight=state.claims.slots_held(now),
            slot_free_at=state.claims.next_slot_free(now),
            storm=read.storm,
        )
        target = Target(
            snap.name,
            rules.opted_in,
            rules.is_self,
            read.dependencies,
            rules.orchestrator,
            read.problem_since,
            problem,
        )
        return decide(
            target, history, load, rules.policy, now, read.silence, read.approval, read.request
        )

    def _problem_since(
        self,
        snap: ContainerSnapshot,
        now: datetime,
        problem: ProblemType | None,
        began: datetime | None,
    ) -> datetime | None:
        """Since when the container's problem lasts, for restart.act_after: as its open incident
        keeps it (Incident.began: the earliest evidence, never later while the problem lasts,
        and carried across a restart of Guardian by the store). Not the engine's health log:
        Docker keeps five probes, and a start re-read from them would keep moving on.

        Before the incident is written (the first look, `guardian status`), what the engine
        tells now: the probe that turned it unhealthy, else the oldest failure it still keeps
        (later than the turn: never acts sooner), the exit; else now, for a problem. A restart
        asked for without a problem (a follower's) waits for no patience of its own.

        `began`: the start the incident is about to be written with (Healer.apply decides
        before it writes the incident, so the opening's message tells the decision)."""
        if began is not None:
            return began
        kept = [
            i.began
            for i in self.ctx.store.open_incidents(self.ctx.settings.host, snap.name)
            if i.is_open
            and i.container_id in ("", snap.id)
            and (problem is None or i.type is problem)
        ]
        if kept:
            return min(kept)
        if snap.state == "running" and snap.health == "unhealthy":
            return snap.unhealthy_since or snap.unhealthy_by or now
        if snap.state in ("exited", "dead") and snap.finished_at is not None:
            return snap.finished_at
        return now if problem is not None else None

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
