"""One pass of the loop: observe -> judge -> incident -> (remediator: decide -> act -> record).

The Healer holds no policy of its own: every restart goes through the Remediator and so through
core.policy.decide(), every incident change through core.incidents. It is driven by the daemon
(sweeps, engine events, probe verdicts) and by `guardian check`.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Collection
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial

from guardian.core import incidents
from guardian.core.assessment import Assessment, SweepReport
from guardian.core.detection.checks import evaluate, heard, needs_inspect, reported_at, skip
from guardian.core.detection.stops import KILL_BOUND
from guardian.core.engine_record import LATE
from guardian.core.facts import (
    ClockStepped,
    ContainerInspected,
    ContainersListed,
    EngineEventSeen,
    EngineReachability,
    InspectAsked,
)
from guardian.core.history import RUN_MARK
from guardian.core.incidents import IncidentChange
from guardian.core.model import (
    HOST_PROBLEMS,
    ContainerSnapshot,
    Decision,
    Incident,
    IncidentState,
    Verdict,
)
from guardian.core.outbound import notifications
from guardian.core.policy import reset_due
from guardian.logs import kv
from guardian.ports import EngineEvent, EngineUnavailable, StoreError
from guardian.service.context import LoopContext
from guardian.service.healing.actions import restart_calls
from guardian.service.healing.recorder import Recorder
from guardian.service.healing.recreator import removed_by_recreate
from guardian.service.healing.remediator import Remediator
from guardian.service.healing.requested import RequestedRollbacks
from guardian.service.healing.rollbacks import KeptRecords
from guardian.service.healing.verifier import Verifier
from guardian.service.state.engine_memory import EVENTS_THROUGH, RECORDED_THROUGH, RecordQuery
from guardian.service.state.listing import Listed, Listings
from guardian.service.state.quiet import QuietRow, is_quiet, taken
from guardian.service.watchers.prober import Prober
from guardian.service.watchers.resources import ResourceWatch

log = logging.getLogger("guardian.healer")

# Containers a sweep inspects at most for the cache's resync (their entry missing, doubtful or
# unlike the list): the first sweep after a start or a cut stream fills the cache of a host of
# 1,000 containers whole (about a second of inspects on a Unix socket), so their events are
# acted on from the cache within the first minute; a larger host is read in parts.
RESYNC_READS = 1024
# Seconds between two writes of the marks a sweep leaves (this run's, how far the store's
# record and the events handled reach): an idle sweep at the 10 s default writes none.
MARKS_EVERY = 60.0


class Healer:
    def __init__(
        self, ctx: LoopContext, recorder: Recorder, remediator: Remediator, verifier: Verifier
    ) -> None:
        self.ctx = ctx
        self.recorder = recorder
        self.remediator = remediator
        self.verifier = verifier
        self.kept_records = KeptRecords(ctx)  # the records run healthy, for the rollback rung
        # A person's rollbacks (guardian rollback): looked at on the container's worker.
        self.requested = RequestedRollbacks(ctx, remediator, recorder, self._look_requested)
        self._tickets = itertools.count(1)  # pairs an inspect's question with its answer
        self.quiet = ctx.state.quiet  # the containers a sweep need not judge again
        # What a sweep lists: all, or only what it must judge again (service/state/listing.py).
        self.listings = Listings(ctx.engine, ctx.state.cache, self.quiet, ctx.clock)
        # The watched list the pipeline's followers were last told of: the one object Listings
        # hands again while nothing watched changed.
        self._followed: list[ContainerSnapshot] | None = None
        # The ids listed and the names watched, of the list objects they were worked out from.
        self._sets: tuple[list[ContainerSnapshot], list[ContainerSnapshot], set[str], set[str]]
        self._sets = ([], [], set(), set())
        self._run_mark: str | None = None  # this run's, named at its first sweep
        self._run_marked = 0.0  # monotonic: when it was last written
        self._swept_marked: float | None = None  # monotonic: when mark_swept last wrote

    def mark_running(self, at: datetime) -> None:
        """Guardian ran through `at` (after each sweep, whether or not the engine answered):
        this run's mark, named for its first sweep, so the page tells the hours Guardian was
        not running from those it watched (core.history)."""
        mono = self.ctx.clock.monotonic()
        if self._run_mark is None:
            self._run_mark = RUN_MARK + at.isoformat(timespec="microseconds")
        elif mono - self._run_marked < MARKS_EVERY:
            return  # a strip's slot is 30 minutes: a write a minute tells it
        self.ctx.store.remember(self.ctx.settings.host, self._run_mark, at)
        self._run_marked = mono

    def follow_step(self, step: timedelta) -> None:
        """The wall clock stepped by `step`: what the loop holds in memory runs on the
        monotonic clock and keeps its length; the store moves the problem starts patience
        counts from (kept with the incidents), and every container is judged afresh."""
        self.ctx.state.cache.doubt_all("the wall clock stepped")
        self.ctx.state.person_stops.follow_step(step)  # the engine's stamps move with the step
        self.quiet.clear()
        self.ctx.store.move_problem_starts(self.ctx.settings.host, step)
        self.ctx.facts.publish(ClockStepped(step))

    # -- observe ----------------------------------------------------------------------------

    def watched(
        self, names: Collection[str] = ()
    ) -> tuple[list[ContainerSnapshot], list[ContainerSnapshot]]:
        """(every container listed, the watched ones): ONE list request, scoped server-side;
        `names`: of these containers only. A read: the sweep's own list is
        service.state.listing's."""
        s = self.ctx.settings
        listed = self.ctx.engine.list_containers(s.watch_label, s.scope, names)
        return listed, [c for c in listed if s.watches(c.labels)]

    def notes(self, watched: list[ContainerSnapshot]) -> dict[str, tuple[str, ...]]:
        """What a reader should know of these containers that their judgement does not say
        (a log rule not followed), by name."""
        found: dict[str, tuple[str, ...]] = {}
        for note in self.ctx.pipeline.notes:
            for name, said in note(watched).items():
                found[name] = (*found.get(name, ()), said)
        return found

    def listing(self, inspect: ContainerSnapshot) -> ContainerSnapshot | None:
        """An inspect as the list call shows it; None when the sweep does not watch it."""
        if not self.ctx.settings.watches(inspect.labels):
            return None
        return self.ctx.engine.as_listed(inspect)

    def _inspect(self, container_id: str, keep: bool = True) -> ContainerSnapshot | None:
        """The engine's inspect, published with the question before it (readers place the
        answer among the changes that came while it was asked); on Docker the loop's own
        (`keep`; not a read's: reads change nothing) fill the container cache."""
        ticket = next(self._tickets)
        self.ctx.facts.publish(InspectAsked(ticket))
        ctx = self.ctx
        snap = ctx.inspect_kept(container_id) if keep else ctx.engine.inspect(container_id)
        if snap is not None:
            self.ctx.facts.publish(ContainerInspected(ticket, snap))
        return snap

    def read_engine_record(self) -> None:
        """At start-up and after the store recovered from failed writes: read the engine's
        record of starts over the restart window (docs/design.md rule 16; raises
        EngineUnavailable, and is read at the next sweep), and tell the pipeline what it read
        (a person's stops in it)."""
        ctx, s = self.ctx, self.ctx.settings
        query = RecordQuery(
            ctx.engine, ctx.store, s.host, s.policy.window, s.stop_timeout, s.watches
        )
        read = ctx.state.remembered.read_if_due(query)
        if read is not None:
            for told in ctx.pipeline.record_read:
                told(read)

    def mark_swept(self, swept_at: datetime, events_through: datetime | None) -> None:
        """After a sweep: the store's record reaches `swept_at` (a mark the resilient store
        writes only once it holds every attempt), the engine's events were handled through
        `events_through` (replayed from there at the next start)."""
        mono = self.ctx.clock.monotonic()
        if self._swept_marked is not None and mono - self._swept_marked < MARKS_EVERY:
            # A minute older at the next start only widens what it reads back (the engine's
            # record, its events), never narrows it; an idle sweep writes nothing.
            return
        self._swept_marked = mono
        store, host = self.ctx.store, self.ctx.settings.host
        store.remember(host, RECORDED_THROUGH, swept_at)
        if events_through is not None:
            store.remember(host, EVENTS_THROUGH, events_through)

    def engine_state(self, up: bool, error: str = "") -> None:
        """Record whether the engine answered (log a change, update the gauge, host incidents)."""
        before = self.ctx.state.engine.answered(up)
        if not up:
            self.quiet.clear()
        if up != before:
            if up:
                self._engine_reached()
            else:
                log.error("docker engine unreachable; will retry", extra=kv(reason=error))
        self.ctx.metrics.engine_reachable(up)
        for follow in self.ctx.pipeline.engine_state:
            follow(up, error)
        self.ctx.facts.publish(EngineReachability(up))

    def _engine_reached(self) -> None:
        """Log which engine answers (Docker or Podman, at the start and after each outage)."""
        engine = self.ctx.engine
        fields: dict[str, object] = {"url": getattr(engine, "url", None)}
        try:
            identity = engine.identity()
        except EngineUnavailable as exc:  # gone again already: the next sweep says so
            fields["engine"] = f"unknown ({exc})"
        else:
            self.ctx.metrics.engine_identified(identity)
            fields.update(engine=identity.kind, version=identity.version, api=identity.api_version)
        log.info("docker engine reachable", extra=kv(**fields))

    def assess(
        self, snap: ContainerSnapshot, source: str, detected_at: datetime | None = None
    ) -> Assessment:
        """Judge one container (inspecting it when it is a candidate), without deciding: the
        loop decides once, as it acts (apply). The loop's own look: crash loops are tracked
        (and their logs fetched once), and the container's notify label heeded."""
        return self._judged(snap, source, detected_at, observe=True)

    def look(self, snap: ContainerSnapshot, known: ContainerSnapshot | None = None) -> Assessment:
        """Judge as assess() does, and decide, changing nothing in the loop's state (no crash
        loop observation or log fetch, no muting): `guardian status` and the API's reads.
        `known`: the inspect of this very listing already made (the status page's rows
        between changes the engine announces), used instead of asking again."""
        return self._judged(snap, "status", None, observe=False, known=known)

    def _judged(
        self,
        snap: ContainerSnapshot,
        source: str,
        detected_at: datetime | None,
        observe: bool,
        known: ContainerSnapshot | None = None,
    ) -> Assessment:
        ctx = self.ctx
        rules_of = ctx.rules.observed if observe else ctx.rules.of
        if not snap.inspected and (
            needs_inspect(snap)
            or any(wanted(snap, ctx.clock.now()) for wanted in ctx.pipeline.inspect_wanted)
        ):
            if ctx.state.claims.running(snap.name):
                # Guardian's own restart is at it: an inspect now would wait for the engine to
                # stop the container (up to its stop timeout), and the exit it shows is the
                # restart's own. Neither a problem nor a recovery; its verification judges it.
                result = skip(snap, ctx.clock.now(), "restart_in_flight", source)
                return Assessment(snap, rules_of(snap), result)
            full = known if known is not None else self._inspect(snap.id, keep=observe)
            snap = full if full is not None else snap
        rules = rules_of(snap)
        now = ctx.clock.now()
        result = evaluate(
            snap, now, ctx.settings.checks, ctx.state.person_stops.holds(snap.id), source
        )
        for judge in ctx.pipeline.judges if observe else ctx.pipeline.looks:
            result = judge(snap, result)
        result = heard(result, detected_at, snap)
        a = Assessment(snap, rules, result, detected_at=detected_at or reported_at(snap))
        if not observe:
            self._decided_for_reading(a)
        return a

    def _decided_for_reading(self, a: Assessment) -> None:
        """What the loop would decide for a problem, for people to read (`guardian status`,
        `guardian check` without --apply): reserving nothing. Report-only problems and restarts
        in flight or verifying are decide()'s too: the decision says why nothing happens."""
        if a.result.problem is not None:
            decisions, now = self.remediator.decisions, self.ctx.clock.now()
            a.decision = decisions.decision_for(a.snapshot, a.rules, now, problem=a.result.problem)

    # -- the loop ---------------------------------------------------------------------------

    def sweep(self, apply: bool = True) -> SweepReport:
        """Reconcile every watched container: one list request, one inspect per candidate."""
        ctx = self.ctx
        report = SweepReport()
        try:
            listed, watched = self.listings.read(ctx.settings, ctx.on_docker())
            self.engine_state(True)
        except EngineUnavailable as exc:
            self.engine_state(False, str(exc))
            report.engine_error = str(exc)
            # The store still answers: open incidents (engine_unreachable among them) are shown.
            self.recorder.refresh_gauges()
            return report
        self._tell_listed(listed, watched)
        ctx.facts.publish(ContainersListed(tuple(watched)))
        # One query for the whole sweep instead of one per healthy container (bench/RESULTS.md).
        open_names = {i.container for i in ctx.store.open_incidents(ctx.settings.host)}
        quiet = self._judge(watched, open_names, apply, report)
        if apply:
            # Judge the whole host before acting on any container: a storm holds every restart.
            for assessed in ctx.pipeline.assessed:
                assessed(report.rows)
            judged = [] if quiet is None else [r for r in report.rows if r.snapshot.id not in quiet]
            self._act(judged, open_names)
            if report.engine_error is None and quiet is not None:
                self._keep_quiet(report.rows, quiet, open_names, watched)
        if report.engine_error is None:
            ids, names = self._sets_of(listed, watched)
            if apply:
                self._forget_vanished(names)
            ctx.rules.keep_only(ids)
            self._resync(listed, watched)
        unhealthy = sum(1 for r in report.rows if r.result.problem is not None)
        ctx.state.engine.swept(len(watched))
        ctx.metrics.swept(len(watched), unhealthy)
        self.recorder.refresh_gauges()
        return report

    def _act(self, judged: list[Assessment], open_names: set[str]) -> None:
        """Apply each judged row on its container's worker, never beside it (an event's look
        would judge it at the same time and open its incident twice): the restart call it
        decides is sent there at once. Dependencies first, a depth of the graph at a time: a
        held-back dependent names the incident its dependency's apply wrote."""
        order = self.ctx.pipeline.act_order
        ranked = sorted(((order(row.snapshot.name), i, row) for i, row in enumerate(judged)))
        for _, tier in itertools.groupby(ranked, key=lambda ranked_row: ranked_row[0]):
            work = [(row.snapshot.id, partial(self.apply, row, open_names)) for *_, row in tier]
            self.ctx.turns.hand(work)

    def _judge(
        self,
        watched: list[ContainerSnapshot],
        open_names: set[str],
        apply: bool,
        report: SweepReport,
    ) -> dict[str, QuietRow] | None:
        """Each watched container's row in `report`: a quiet one's taken as the last sweep left
        it (service/state/quiet.py; only a sweep that acts keeps them), any other judged. The
        rows taken; None when the last sweep's whole was taken at once (nothing to keep anew)."""
        ctx = self.ctx
        now = ctx.clock.now()
        if apply:
            again = self.quiet.again(watched, ctx.settings, now, open_names)
            if again is not None:
                report.rows.extend(again)
                return None
        rows = self.quiet.begin(ctx.settings) if apply else {}
        quiet: dict[str, QuietRow] = {}
        for snap in watched:
            kept = rows.get(snap.id)
            if kept is not None and taken(kept, snap, now, open_names):
                quiet[snap.id] = kept
                report.rows.append(kept.row)
                continue
            try:
                assessment = self.assess(snap, "sweep")
                if not apply:
                    self._decided_for_reading(assessment)
            except EngineUnavailable as exc:
                self.engine_state(False, str(exc))
                report.engine_error = str(exc)
                break
            report.rows.append(assessment)
        return quiet

    def _sets_of(
        self, listed: list[ContainerSnapshot], watched: list[ContainerSnapshot]
    ) -> tuple[set[str], set[str]]:
        """(the ids listed, the names watched), worked out again only for other list objects:
        Listings hands the very objects again while nothing changed, and no one changes them."""
        last_listed, last_watched, ids, names = self._sets
        if listed is not last_listed or watched is not last_watched:
            ids, names = {s.id for s in listed}, {s.name for s in watched}
            self._sets = (listed, watched, ids, names)
        return ids, names

    def _tell_listed(
        self, listed: list[ContainerSnapshot], watched: list[ContainerSnapshot]
    ) -> None:
        """Tell the pipeline's followers what the sweep listed, decided once for all of them:
        changed or not since they were last told."""
        seen = Listed(listed, watched, changed=watched is not self._followed)
        for follow in self.ctx.pipeline.listed:
            follow(seen)
        self._followed = watched

    def _keep_quiet(
        self,
        rows: list[Assessment],
        quiet: dict[str, QuietRow],
        open_names: set[str],
        watched: list[ContainerSnapshot],
    ) -> None:
        """Keep the rows a next sweep may take as they are: those taken, and those judged quiet
        now whose incidents are all closed (a healthy look closes none it did not see); all of
        them, of `watched`, as one whole when every row is quiet."""
        streaks, reset_after = self.ctx.state.streaks, self.ctx.settings.policy.reset_after
        for a in rows:
            cid, name = a.snapshot.id, a.snapshot.name
            if cid in quiet or name in open_names or not is_quiet(a):
                continue
            until = streaks.quiet_until(name, reset_after)
            if until is not None:
                quiet[cid] = QuietRow(a, until)
        self.quiet.keep(quiet, watched, rows)

    def _resync(self, listed: list[ContainerSnapshot], watched: list[ContainerSnapshot]) -> None:
        """The sweep as the cache's resync (Docker only): entries of containers no longer
        listed are forgotten, those the list shows otherwise doubted, and the watched ones
        whose entry is missing or doubtful inspected (at most RESYNC_READS; none whose restart
        is under way: the engine answers that inspect only once it has stopped the container)."""
        if not self.ctx.on_docker():
            return
        state = self.ctx.state
        wanted = set(state.cache.resync(watched, listed))
        if not wanted:
            return
        reads = [s for s in watched if s.id in wanted and not state.restart_underway(s.name)]
        for snap in reads[:RESYNC_READS]:
            try:
                self._inspect(snap.id)
            except EngineUnavailable as exc:
                self.engine_state(False, str(exc))
                return

    def react(
        self, container_id: str, detected_at: datetime | None = None, source: str = "event"
    ) -> None:
        """React to one container at once (an engine event or a probe verdict): verify a
        restart that awaits it, or judge the container and act. An unhealthy event (its
        `detected_at`) for a container whose cached entry is fresh is judged from the entry,
        without an inspect (apply inspects it after deciding, when the decision does not act
        at once); anything else inspects."""
        self.quiet.heard(container_id)
        name = self.ctx.state.verifications.name_of(container_id)
        if name is not None:
            self.verifier.verify(only=name)
            return
        a = None if detected_at is None else self._from_cache(container_id, source, detected_at)
        if a is None:
            try:
                snap = self._inspect(container_id)
            except EngineUnavailable as exc:
                self.engine_state(False, str(exc))
                return
            if snap is None or not self.ctx.settings.watches(snap.labels):
                return
            a = self.assess(snap, source, detected_at)
        self.apply(a)
        self.recorder.refresh_gauges()

    def _from_cache(
        self, container_id: str, source: str, detected_at: datetime
    ) -> Assessment | None:
        """The container judged from its cached entry, when that finds a problem: speed matters
        where it is decided a restart or a stop. A hold, a refusal or a give-up is recorded and
        told to people with the probe's output, which an entry does not keep: apply inspects
        then (_with_output). None: inspect it now."""
        snap = self._cached_unhealthy(container_id)
        if snap is None or not self.ctx.settings.watches(snap.labels):
            return None
        a = self.assess(snap, source, detected_at)
        if a.result.problem is None or a.result.skipped is not None:
            return None
        a.cached = True  # the remediator reads the probe's output after the restart call
        return a

    def _with_output(self, a: Assessment) -> Assessment | None:
        """`a`, judged from the cache, judged again from an inspect (for the probe's output);
        None when the engine no longer has it or does not answer (the next look judges it).
        Judging it twice changes nothing: assess reads, and its judges keep only what a
        snapshot shows."""
        try:
            snap = self._inspect(a.snapshot.id)
        except EngineUnavailable as exc:
            self.engine_state(False, str(exc))
            return None
        if snap is None or not self.ctx.settings.watches(snap.labels):
            return None
        return self.assess(snap, a.result.source, a.detected_at)

    def _cached_unhealthy(self, container_id: str) -> ContainerSnapshot | None:
        """The container as the cache holds it, when its entry is fresh and it runs unhealthy
        (the event that said so kept it); else None: inspect it."""
        if not self.ctx.on_docker():
            return None
        snap = self.ctx.state.cache.fresh(container_id)
        if snap is None or snap.state != "running" or snap.health != "unhealthy":
            return None
        log.debug("judged from the cache", extra=kv(container=snap.name))
        return snap

    @staticmethod
    def reported_at(event: EngineEvent) -> datetime | None:
        """The event's time when the event itself says the container turned unhealthy: evidence
        of when that problem began (core.detection.checks.heard), and the start of
        detection_to_restart. Any other event is only a reason to look: a health event that says
        healthy, or nothing (Podman's carries the status before its check), may lie before the
        problem a look then finds, and patience would end too soon; an exit's start is its
        FinishedAt, which the engine keeps.

        The engine replays missed events from a ring (256 on Docker 20.10) after a reconnect;
        an event that has left it is simply not heard, and the sweep the reconnect asks for
        finds the problem with what the engine still keeps (a later start: never sooner)."""
        if event.action == "health_status" and event.attributes.get("health_status") == "unhealthy":
            return event.at
        return None

    def probe_tick(self, prober: Prober) -> None:
        """Run the probes that are due; a container whose verdict flipped is judged soon, on
        its worker."""
        for container_id in prober.tick():
            now = partial(self.react, container_id, None, "probe")
            self.ctx.turns.look(container_id, "probe", now)

    def _look_requested(self, container_id: str) -> None:
        """A person asked for a rollback of the container: judged soon, on its worker."""
        now = partial(self.react, container_id, None, "rollback")
        self.ctx.turns.look(container_id, "rollback", now)

    def resource_tick(self, resources: ResourceWatch) -> None:
        """Sample the containers with a resource limit; one whose breach began or ended (held
        for its whole `for`) is judged soon, on its worker."""
        for container_id in resources.tick():
            now = partial(self.react, container_id, None, "resources")
            self.ctx.turns.look(container_id, "resources", now)

    def on_event(self, event: EngineEvent) -> bool:
        """Book-keeping for one engine event; True when the container should be checked now."""
        state, cid, action = self.ctx.state, event.container_id, event.action
        state.cache.saw(event)
        self.quiet.heard(cid)
        if action in ("stop", "kill"):
            # `docker stop`/`docker kill` by a person is held: never undo it. The store is read
            # only for a stop no restart in memory explains (a running restart's own: none).
            own = state.caused_by_restart(cid, event.container_name, event.at)
            near = () if own else self._restarts_near(event)
            state.stop_heard(cid, event.container_name, event.at, near)
        elif action == "start":
            state.person_stops.forget(cid)
            state.heard_start(event.container_name, event.at)
        elif action == "destroy":
            state.person_stops.removed(cid)
        for follow in self.ctx.pipeline.events:
            follow(event)
        self.ctx.facts.publish(EngineEventSeen(event.container_name, event.action))
        if state.claims.running(event.container_name):
            # The restart's own kill, die and start: its verification judges them, and an
            # inspect now would only hold a job thread until the engine has stopped the container.
            return False
        # Event attributes carry the container's labels: skip containers Guardian does not watch
        # without spending an inspect on them.
        if not self.ctx.settings.watches(event.attributes):
            return False
        # A health event means "look now", whatever status it carries: Podman's is the status
        # before the check that sent it, so only an inspect tells the truth.
        return action in ("health_status", "die", "oom")

    def _restarts_near(self, event: EngineEvent) -> tuple[tuple[datetime, timedelta], ...]:
        """The store's restarts of a watched container, their verdicts in, that may have made
        its stop or kill `event` (an earlier run's, or this one's heard again: the stream
        replays what it missed): when each was asked, with its stop timeout. The restart that
        runs or awaits its verdict is not among them (OwnStops judges its stops), and none
        read is the safe side: the stop is held as a person's."""
        ctx, name = self.ctx, event.container_name
        if not ctx.settings.watches(event.attributes):
            return ()
        try:
            rows = ctx.store.actions(ctx.settings.host, name, event.at - KILL_BOUND - LATE)
        except StoreError:
            return ()
        verifying = {p.action_id for p in ctx.state.verifications.pending(name)}
        done = [a for a in rows if a.outcome is not None and a.id not in verifying]
        return restart_calls(done, event.container_id, ctx.settings.stop_timeout)

    # -- incidents --------------------------------------------------------------------------

    def apply(self, a: Assessment, open_names: set[str] | None = None) -> None:
        """Record what an assessment found, decide once, and act on the decision.

        `open_names`: the containers with an open incident, when the caller (a sweep) already
        read them; None reads the store for this container."""
        ctx = self.ctx
        result, name = a.result, a.snapshot.name
        if ctx.state.rollbacks.pending(a.snapshot.id) and self.requested.act(a):
            return  # a person's rollback replaced it (or was refused): nothing else this turn
        if result.skipped is not None:
            if a.snapshot.state != "running":
                # Not judged (a person's stop, an exit code left alone, paused), but not healthy
                # either: the attempt counter's reset needs reset_after of healthy looks unbroken.
                ctx.state.streaks.ended(name)
            return
        now = result.observed_at
        if result.problem is None:
            ctx.state.approvals.awaiting(name, None)  # nothing left to approve
            for recovered in ctx.pipeline.recovered:
                recovered(name)
            self._observed_healthy(a.snapshot, now, open_names)
            return
        ctx.state.streaks.ended(name)
        for detected in ctx.pipeline.detected:
            detected(result)
        change = self._detection(a, now)
        again: Assessment | None = None
        problem = result.problem
        with self.remediator.decided(a.snapshot, a.rules, problem, change.incident.began) as (
            decision,
            claim,
        ):
            if a.cached and not decision.acts:
                # A hold is told with the probe's output: read it now. The decision stands for
                # the same problem since the same start; anything else is decided afresh.
                fuller = self._with_output(a)
                if fuller is None:
                    return
                same = fuller.result.problem is problem and fuller.result.skipped is None
                fuller_change = self._detection(fuller, now) if same else change
                if not same or fuller_change.incident.began != change.incident.began:
                    again = fuller
                else:
                    a, change = fuller, fuller_change
            if again is None:
                a.decision = decision
                incident = self._opened(a, change, decision, now)
                self.remediator.act(a, incident, decision, claim)
        if again is not None:
            self.apply(again, open_names)

    def _detection(self, a: Assessment, now: datetime) -> IncidentChange:
        """The incident change `a`'s problem makes (not yet written), after closing those of
        another container that carried its name."""
        current = self._retire_replaced(a.snapshot, now)
        existing = next((i for i in current if i.type is a.result.problem), None)
        return incidents.record_detection(existing, self.ctx.settings.host, a.result, now)

    def _opened(
        self, a: Assessment, change: IncidentChange, decision: Decision, now: datetime
    ) -> Incident:
        """Write the incident change, with its opening's message (telling `decision`) when it
        opens or reopens the incident."""
        ctx, result, name = self.ctx, a.result, a.snapshot.name
        news = change.opened or change.reopened
        opened = notifications.opened(change.incident, decision, now)
        if a.cached and decision.verdict is Verdict.RESTART:
            # No probe output yet: the opening waits for the restart call (Remediator).
            opened = replace(opened, held=True)
        incident = self.recorder.save(change, self.recorder.notes(name, opened) if news else ())
        if news:
            ctx.metrics.incident_opened(incident.type)
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
        return incident

    def _retire_replaced(self, snap: ContainerSnapshot, now: datetime) -> list[Incident]:
        """The incidents of `snap`'s name that are not closed, after closing those of another
        container that carried the name before (`docker compose up` recreates containers): a
        container's identity is its id, its name is how people find it."""
        kept = []
        for incident in self.ctx.store.open_incidents(self.ctx.settings.host, snap.name):
            if incident.container_id and incident.container_id != snap.id:
                self.recorder.replaced(incident, snap.id, now)
            else:
                kept.append(incident)
        return kept

    def _observed_healthy(
        self, snap: ContainerSnapshot, now: datetime, open_names: set[str] | None = None
    ) -> None:
        ctx, host, name = self.ctx, self.ctx.settings.host, snap.name
        since = ctx.state.streaks.seen_healthy(name, now)
        self.kept_records.seen_healthy(snap, now - since)
        if open_names is None or name in open_names:
            # A restart that started, or was verified, while the store was read makes what was
            # read stale: its verification has the say.
            epoch = ctx.state.epoch_of(name)
            for incident in self._retire_replaced(snap, now):
                if incident.is_open and ctx.state.no_restart_since(name, epoch):
                    self.recorder.recovered(incident, "observed healthy", now)
        policy = ctx.settings.policy
        if now - since < policy.reset_after or not ctx.state.streaks.first_reset_check(name, since):
            return
        if reset_due(since, ctx.store.last_reset(host, name), policy, now):
            ctx.store.record_reset(host, name, now)
            log.info(
                "attempt counter reset", extra=kv(container=name, healthy_since=since.isoformat())
            )
            for incident in ctx.store.open_incidents(host, name):
                if incident.state is IncidentState.RESOLVED:
                    reason = f"healthy for {int(policy.reset_after.total_seconds())}s"
                    self.recorder.close(incident, reason, now)

    def _forget_vanished(self, present: set[str]) -> None:
        """Close incidents of containers that are no longer there (removed or no longer watched)."""
        ctx, now = self.ctx, self.ctx.clock.now()
        for incident in ctx.store.open_incidents(ctx.settings.host):
            if incident.type in HOST_PROBLEMS:
                continue  # host-level incidents are not about a container
            gone = incident.container not in present
            if gone and not ctx.state.restart_underway(incident.container):
                if removed_by_recreate(ctx.store.last_action(incident.id or 0)):
                    continue  # its record is kept for a person: the incident stays open
                self.recorder.gone(incident, "no longer listed by the engine", now)
        ctx.state.forget_absent(present)
        self.kept_records.forget(present)
        # A restart in flight still counts for its container, whatever the list said.
        ctx.metrics.containers_present(ctx.state.present_or_underway(present))
