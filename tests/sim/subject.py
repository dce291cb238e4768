"""Guardian under simulation, driven on one thread as the daemon drives it today.

Built through bootstrap (tests/app.py make_app, build_status) over the simulated engine, a
FakeClock and a real SQLite store on a disk that may fill, with the daemon's work queue started
as Daemon.start starts it (App.restarts.start) over tests/sim/workers.py's SimQueue: restart
calls run on their container's worker (at once when the deciding thread is that worker, else
queued for it), rechecks are delayed looks, the jobs take a container's turn. Its methods are the
daemon's jobs (entrypoints/daemon.py: the sweep, verify ticks, the approvals look, the delivery
worker, reconcile on a worker), its events thread (entrypoints/event_listener.py), and a
person's commands. This is the one place that knows how today's loop is driven: when the loop
changes, re-point these methods at it and the driver and the oracle stay as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path

from guardian.adapters.sqlite.outbox import SqliteOutbox
from guardian.adapters.sqlite.store import SqliteStore
from guardian.core.outbound.delivery import RetryPolicy
from guardian.entrypoints.event_listener import IN_FLIGHT, REPLAY_LIMIT
from guardian.ports import EngineUnavailable, StoreError
from guardian.runtime.work_queue import Work
from guardian.service.outbound.delivery import DeliveryWorker, WorkerSettings
from guardian.service.state.engine_memory import EVENTS_THROUGH
from guardian.service.watchers.clock_steps import StepWatch
from tests.app import TestApp, make_app
from tests.fakes import FakeClock
from tests.sim.edges import Channel, Disk, FillingDatabase
from tests.sim.engine import SimEngine
from tests.sim.host import CONFIG
from tests.sim.stream import Stream
from tests.sim.workers import SimQueue


@dataclass(repr=False)
class Subject:
    """One run of Guardian at a time over the same engine, clock and store file."""

    tmp: Path
    engine: SimEngine
    clock: FakeClock
    disk: Disk
    channel: Channel
    t: TestApp | None = None
    steps: StepWatch | None = None
    delivery: DeliveryWorker | None = None
    stream: Stream | None = None
    queue: SimQueue | None = None  # the daemon's work queue of this run
    judged: set[str] = field(default_factory=set)  # containers judged for replayed events
    judge_from: datetime | None = None
    last_at: datetime | None = None  # the last event handled
    reconciled: bool = False
    store_errors: int = 0
    events_lost: int = 0  # events that left the engine's ring before a stream read them
    on_heard: list[Callable[[str, str], None]] = field(default_factory=list)
    on_raised: list[Callable[[Exception], None]] = field(default_factory=list)

    @property
    def app(self) -> TestApp:
        assert self.t is not None, "Guardian is not running"
        return self.t

    @property
    def sqlite(self) -> SqliteStore:
        return self.app.store

    # -- a run of Guardian -------------------------------------------------------------------

    def start(self) -> None:
        """Start Guardian over the store file (as `guardian run` does after a crash)."""
        sqlite = SqliteStore(FillingDatabase(self.tmp / "guardian.db", self.disk))
        self.engine.guardian_started()
        self.engine.guardian_dead = False
        self.t = make_app(self.tmp, engine=self.engine, clock=self.clock, sqlite=sqlite, **CONFIG)
        app = self.t.app
        self.steps = StepWatch(self.clock, app.metrics, app.loop.follow_step)
        retry = RetryPolicy(5, timedelta(seconds=2), timedelta(minutes=5), timedelta(minutes=5))
        self.delivery = DeliveryWorker(
            SqliteOutbox(sqlite.db),
            [self.channel],
            self.clock,
            app.metrics,
            WorkerSettings(self.t.host, retry=retry),
            facts=app.facts,
        )
        app.facts.subscribe(self.delivery.on_fact)
        app.loop.also_stepped(self.delivery.follow_step)
        # Daemon.start: restart calls run on their containers' workers from now on, rechecks
        # are delayed looks, and a freed slot's waiter is looked at (Daemon.slot_freed).
        queue = self.queue = SimQueue(self.reconcile, self.clock.monotonic, self._raised)
        app.restarts.start(queue, partial(self._slot_freed, queue))  # type: ignore[arg-type]
        self.reconciled = False
        app.loop.follows_events(self.clock.now())
        self.stream = Stream(self.engine, live=self.stream.live if self.stream else 0)
        self.connect(self._replay_from())

    def crash(self) -> int:
        """kill -9: whatever Guardian held in memory is gone (looks and restart calls queued,
        restart intents the store refused); the store file and the engine stay. A call the
        engine was carrying out goes on there. How many containers had work queued."""
        dropped = self.queue.drop() if self.queue is not None else 0
        self.engine.guardian_dead = True
        self.sqlite.close()
        self.t = self.steps = self.delivery = None
        if self.stream is not None:
            self.stream.cut()
        return dropped

    def _raised(self, exc: Exception) -> None:
        for told in self.on_raised:
            told(exc)

    def _slot_freed(self, queue: SimQueue) -> None:
        """Daemon.slot_freed: the container held back longest for a restart slot is looked at
        (not by a run that was killed: its frames are unwinding)."""
        if not queue.dead:
            waiter = self.app.app.loop.next_slot_waiter()
            if waiter is not None:
                queue.add(waiter)

    def _replay_from(self) -> datetime | None:
        """EventListener.replay_from: the store's mark of the last event handled."""
        try:
            mark = self.sqlite.remembered(self.app.host, EVENTS_THROUGH)
        except StoreError:
            return None
        if mark is None:
            return None
        now = self.clock.now()
        return max(mark, now - REPLAY_LIMIT) if mark <= now else now - REPLAY_LIMIT

    # -- the event stream (the events thread) ------------------------------------------------

    def connect(self, since: datetime | None) -> None:
        """The events thread (re)connects: the engine's record is read, then the stream replays
        from `since` (EventListener.run)."""
        assert self.stream is not None
        try:
            with self.job("events"):
                self.app.healer.read_engine_record()  # before anything replayed is judged
        except EngineUnavailable:
            self.app.app.loop.stream_lost()  # the listener backs off and connects again
            return
        self.judged, now = set(), self.clock.now()
        self.judge_from = since or now
        lost = self.stream.lost
        self.stream.connect(self.app.app.loop.stream_opening(since, now))
        self.events_lost += self.stream.lost - lost

    def cut(self) -> None:
        """The stream is lost (the daemon reconnects after a backoff)."""
        assert self.stream is not None
        self.stream.cut()
        self.app.app.loop.stream_lost()

    def reconnect(self) -> None:
        self.connect(self.last_at)

    def hear(self) -> str | None:
        """The events thread reads one event: on_event, and a reaction when it asks for one
        (a replayed event's container judged once per replay). What it read, or None."""
        assert self.stream is not None
        read = self.stream.read()
        if read is None:
            return None
        event, replayed = read
        self.last_at = event.at
        healer = self.app.healer
        with self.job("events"):
            wanted = healer.on_event(event)
            # What this run of Guardian heard, for the oracle: a held act's learnt.
            for told in self.on_heard:
                told(event.action, event.container_id)
            assert self.judge_from is not None
            if wanted and event.at >= self.judge_from:
                if replayed and event.container_id in self.judged:
                    return f"{event.action} {event.container_name} (replayed again)"
                if replayed:
                    self.judged.add(event.container_id)
                assert self.queue is not None
                self.queue.add(event.container_id, healer.reported_at(event))  # react_soon
        return f"{event.action} {event.container_name}" + (" (replayed)" if replayed else "")

    def handled_through(self) -> datetime | None:
        """EventListener.handled_through: while the stream is up, nearly now."""
        if self.stream is None or not self.stream.open:
            return self.last_at
        recent = self.clock.now() - IN_FLIGHT
        return recent if self.last_at is None else max(self.last_at, recent)

    # -- the daemon's jobs -------------------------------------------------------------------

    @contextmanager
    def job(self, name: str) -> Iterator[None]:
        """A job as the daemon runs it, on a thread of its own: a store that fails ends the
        job, counted (the daemon logs it); anything else propagates, for the oracle to report."""
        with self._thread(name), self._counted():
            yield

    def _thread(self, name: str) -> AbstractContextManager[None]:
        return self.queue.acting(name) if self.queue is not None else nullcontext()

    @contextmanager
    def _counted(self) -> Iterator[None]:
        try:
            yield
        except StoreError:
            self.store_errors += 1

    # -- the work queue's workers ------------------------------------------------------------

    def reconcile(self, container_id: str, work: Work) -> None:
        """Daemon.reconcile, on the key's worker: the restart calls decided for it
        (RestartRunner.carry: their failures logged there), then a look."""
        for call in work.calls:
            call()
        if work.look:
            self.react(container_id, work.detected_at)

    def react(self, container_id: str, detected_at: datetime | None) -> None:
        """Daemon.react, on the worker that holds the container."""
        with self._counted():
            self.app.healer.react(container_id, detected_at)

    def look_for_approvals(self) -> None:
        """Daemon.look_for_approvals: a container whose restart awaits a person's approval is
        looked at once one was given."""
        with self.job("approvals"):
            loop = self.app.app.loop
            awaited = loop.approvals_awaited()
            if not awaited:
                return
            found = self.app.app.store.unused_approvals(loop.host, self.clock.now())
            assert self.queue is not None
            for container in sorted({a.container for a in found if a.container in awaited}):
                self.queue.add(awaited[container])

    def sweep(self) -> str:
        """Daemon.sweep: the first of a run reconciles what the last run left unfinished; the
        engine's record is read when due; the marks a next start reads are written."""
        healer, started = self.app.healer, self.clock.now()
        with self.job("sweep"):
            try:
                if not self.reconciled:
                    self.engine.ping()
                    self.app.app.verifier.reconcile()
                    self.reconciled = True
                healer.read_engine_record()
                report = healer.sweep()
            except EngineUnavailable as exc:
                healer.engine_state(False, str(exc))
                return "engine unreachable"
            healer.mark_running(started)
            if report.engine_error is None:
                healer.mark_swept(started, self.handled_through())
            problems = sum(1 for r in report.rows if r.result.problem is not None)
            return f"{len(report.rows)} judged, {problems} with a problem"
        return "store failed"

    def verify(self) -> None:
        with self.job("verify"):
            self.app.verify()

    def deliver(self) -> int:
        """One tick of the delivery worker: how many messages it sent."""
        assert self.delivery is not None
        with self.job("delivery"):
            return self.delivery.tick()
        return 0

    def look_at_clock(self) -> timedelta:
        """The scheduler's step watch looks at the clock (every turn of the daemon's loop)."""
        assert self.steps is not None
        with self._thread("scheduler"):
            return self.steps.look()
