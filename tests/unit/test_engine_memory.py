"""service.state.engine_memory: what the engine's record read at start-up tells the budget of
restarts the store lost (docs/design.md rule 16): the host's minute, whichever container is
decided first; stamps that move with the wall clock's steps (rule 12); a restart the engine
still carries out."""

from __future__ import annotations

import threading
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from guardian.core.detection.restart_policy import RestartPolicy
from guardian.core.facts import StoreRecovered
from guardian.core.model import ContainerSnapshot
from guardian.ports import EngineEvent, EngineHistory
from guardian.service.state.engine_memory import EngineMemory, RecordQuery
from tests.fakes import FakeClock, FakeEngine

HOST = "h"
WINDOW = timedelta(hours=1)
STOP = timedelta(seconds=10)
MINUTE = timedelta(minutes=1)
POLICY = RestartPolicy(cooldown=timedelta(seconds=60), max_attempts=3, window=WINDOW)


@dataclass
class Diary:
    """The store as EngineMemory reads it: the restarts it kept, by container id, no marks."""

    restarts: dict[str, tuple[datetime, ...]] = field(default_factory=dict)

    def restart_times(
        self,
        host: str,
        since: datetime,
        container: str | None = None,
        container_id: str | None = None,
    ) -> tuple[datetime, ...]:
        kept: Collection[datetime] = (
            self.restarts.get(container_id, ())
            if container_id is not None
            else [t for ts in self.restarts.values() for t in ts]
        )
        return tuple(t for t in kept if t > since)

    def remembered(self, host: str, mark: str) -> datetime | None:
        return None


def event(action: str, cid: str, at: datetime) -> EngineEvent:
    return EngineEvent(action, cid, cid, at, {"name": cid})


def restarted(cid: str, at: datetime) -> list[EngineEvent]:
    """A restart asked through the API as the engine records it: the signal, the exit, the
    start, and Docker's `restart` once done."""
    stopped = [event(action, cid, at) for action in ("kill", "die", "stop")]
    then = at + timedelta(seconds=1)
    return [*stopped, event("start", cid, then), event("restart", cid, then)]


def world() -> tuple[FakeClock, FakeEngine, EngineMemory]:
    clock = FakeClock()
    engine = FakeEngine(clock)
    return clock, engine, EngineMemory(clock, threading.RLock())


def read(memory: EngineMemory, engine: FakeEngine, diary: Diary | None = None) -> None:
    memory.read_if_due(RecordQuery(engine, diary or Diary(), HOST, WINDOW, STOP))  # type: ignore[arg-type]


def inspected(cid: str, started_at: datetime, created: datetime) -> ContainerSnapshot:
    return ContainerSnapshot(
        id=cid,
        name=cid,
        labels={},
        state="running",
        health="unhealthy",
        inspected=True,
        started_at=started_at,
        created=created,
    )


def test_a_restart_the_store_lost_counts_in_the_hosts_minute_before_its_container_is_decided() -> (
    None
):
    clock, engine, memory = world()
    begun = clock.now() - timedelta(minutes=30)
    lost = clock.now() - timedelta(seconds=20)
    engine.kept = [
        event("create", "web", begun),
        event("start", "web", begun),
        *restarted("web", lost),  # made while the disk was full, then Guardian was killed
        event("create", "api", begun),
        event("start", "api", begun),  # its first start: no restart
    ]
    read(memory, engine)
    # The next container decided is another one: the host's minute counts web's restart.
    assert memory.recent(clock.now() - MINUTE) == (lost + timedelta(seconds=1),)


def test_a_restart_the_store_kept_is_not_counted_again_in_the_hosts_minute() -> None:
    clock, engine, memory = world()
    at = clock.now() - timedelta(seconds=20)
    engine.kept = [event("start", "web", at - timedelta(hours=2)), *restarted("web", at)]
    read(memory, engine, Diary({"web": (at,)}))
    assert memory.recent(clock.now() - MINUTE) == ()


def test_a_restart_counted_from_the_engine_moves_with_a_step_of_the_wall_clock() -> None:
    clock, engine, memory = world()
    created = clock.now() - timedelta(minutes=30)
    lost = clock.now() - timedelta(seconds=20)
    engine.kept = [event("start", "web", created), *restarted("web", lost)]
    read(memory, engine)
    start = lost + timedelta(seconds=1)
    snap = inspected("web", start, created)
    assert memory.unrecorded(snap, (), POLICY, STOP, clock.now()) == (start,)
    clock.step(600)  # ten minutes forward; no time passes
    moved = start + timedelta(seconds=600)
    assert memory.unrecorded(snap, (), POLICY, STOP, clock.now()) == (moved,)
    assert memory.recent(clock.now() - MINUTE) == (moved,)


def test_an_undecided_restart_in_the_hosts_minute_moves_with_a_step_too() -> None:
    clock, engine, memory = world()
    lost = clock.now() - timedelta(seconds=20)
    engine.kept = [event("start", "web", lost - timedelta(hours=2)), *restarted("web", lost)]
    read(memory, engine)
    clock.step(-3600)  # an hour back: still within the minute, as the monotonic clock says
    assert memory.recent(clock.now() - MINUTE) == (lost + timedelta(seconds=1, hours=-1),)


def test_a_restart_the_engine_still_carries_out_is_under_way_and_counts_from_its_kill() -> None:
    clock, engine, memory = world()
    created = clock.now() - timedelta(minutes=30)
    kill = clock.now() - timedelta(seconds=3)  # the stop takes up to STOP: no start yet
    engine.kept = [event("start", "web", created), event("kill", "web", kill)]
    read(memory, engine)
    snap = inspected("web", created, created)
    assert memory.under_way(snap, STOP)
    assert memory.unrecorded(snap, (), POLICY, STOP, clock.now()) == (kill,)
    clock.advance(5)  # carried out: the start comes, within its stop timeout
    done = inspected("web", clock.now(), created)
    assert not memory.under_way(done, STOP)


def test_the_start_of_a_restart_under_way_is_not_a_second_restart() -> None:
    clock, engine, memory = world()
    created = clock.now() - timedelta(minutes=30)
    kill = clock.now() - timedelta(seconds=3)
    engine.kept = [event("start", "web", created), event("kill", "web", kill)]
    read(memory, engine)
    clock.advance(5)  # decided first after its start
    snap = inspected("web", clock.now(), created)
    assert memory.unrecorded(snap, (), POLICY, STOP, clock.now()) == (kill,)


def test_a_kill_older_than_its_stop_timeout_is_not_under_way() -> None:
    clock, engine, memory = world()
    created = clock.now() - timedelta(minutes=30)
    engine.kept = [
        event("start", "web", created),
        event("kill", "web", clock.now() - timedelta(seconds=60)),  # a person's docker stop
    ]
    read(memory, engine)
    assert not memory.under_way(inspected("web", created, created), STOP)


def test_the_hosts_minute_counts_only_watched_containers_restarts_after_the_stores_mark() -> None:
    """Another Guardian's container, a watched one its restart policy restarted (no API
    restart) or one removed since never spends this Guardian's budget; nor does a restart the
    store's mark vouches for (the store holds every attempt through it: that start was not
    Guardian's lost one)."""
    clock, engine, memory = world()
    begun = clock.now() - timedelta(minutes=30)
    mark = clock.now() - timedelta(seconds=40)
    before, lost = mark - timedelta(seconds=10), clock.now() - timedelta(seconds=20)

    def ours(cid: str, action: str, at: datetime) -> EngineEvent:
        return EngineEvent(action, cid, cid, at, {"name": cid, "team": "ours"})

    engine.kept = [
        *restarted("elsewhere", lost),  # not watched: another Guardian's
        ours("policy", "start", begun),
        ours("policy", "die", lost),  # watched, restarted by its restart policy: no `restart`
        ours("policy", "start", lost),
        *[ours("gone", e.action, e.at) for e in restarted("gone", lost)],
        ours("gone", "destroy", lost),  # removed since: no attempt of what is there now
        ours("web", "start", begun),
        *[ours("web", e.action, e.at) for e in restarted("web", before)],  # before the mark
        ours("api", "start", begun),
        *[ours("api", e.action, e.at) for e in restarted("api", lost)],  # lost: after it
    ]

    @dataclass
    class Marked(Diary):
        def remembered(self, host: str, mark_name: str) -> datetime | None:
            return mark

    ours_only = RecordQuery(
        engine,
        Marked(),  # type: ignore[arg-type]
        HOST,
        WINDOW,
        STOP,
        lambda attributes: attributes.get("team") == "ours",
    )
    memory.read_if_due(ours_only)
    assert memory.recent(clock.now() - MINUTE) == (lost + timedelta(seconds=1),)


# -- under the host lock, never across the read ---------------------------------------------------


class HeldEngine(FakeEngine):
    """An engine whose first history request waits until `go` is set, and tells when it began
    (`asked`); later requests answer at once."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)
        self.asked, self.go = threading.Event(), threading.Event()
        self.requests = 0

    def history(self, since: datetime, until: datetime) -> EngineHistory:
        self.requests += 1
        if self.requests == 1:
            self.asked.set()
            assert self.go.wait(5)
        return super().history(since, until)


def test_a_slow_read_of_the_record_holds_no_decision_and_a_caller_meanwhile_reads_it_itself() -> (
    None
):
    clock = FakeClock()
    engine, host_lock = HeldEngine(clock), threading.RLock()
    memory = EngineMemory(clock, host_lock)
    lost = clock.now() - timedelta(seconds=20)
    engine.kept = [event("start", "web", lost - timedelta(minutes=30)), *restarted("web", lost)]
    first: list[EngineHistory | None] = []
    slow = threading.Thread(target=lambda: first.append(memory.read_if_due(query(engine))))
    slow.start()
    try:
        assert engine.asked.wait(5)
        # The engine has not answered the first reader: the host lock is free meanwhile.
        assert host_lock.acquire(timeout=1), "the host lock is held across the engine's read"
        host_lock.release()
        assert memory.recent(clock.now() - MINUTE) == ()  # nothing half read is judged
        # A second caller finds it due and reads it whole before it judges.
        assert memory.read_if_due(query(engine)) is not None
        assert memory.recent(clock.now() - MINUTE) == (lost + timedelta(seconds=1),)
    finally:
        engine.go.set()
        slow.join(5)
    assert first == [None]  # the second reader's record is in place: the first is not installed
    assert not memory.due and engine.requests == 2


def test_a_recovery_of_the_store_during_a_read_is_answered_by_a_read_after_it() -> None:
    clock = FakeClock()
    engine = HeldEngine(clock)
    memory = EngineMemory(clock, threading.RLock())
    slow = threading.Thread(target=lambda: memory.read_if_due(query(engine)))
    slow.start()
    assert engine.asked.wait(5)
    memory.on_fact(StoreRecovered())  # the store wrote what it held after the read began
    engine.go.set()
    slow.join(5)
    assert memory.due  # the read under way began before those writes
    assert memory.read_if_due(query(engine)) is not None
    assert not memory.due


def query(engine: FakeEngine) -> RecordQuery:
    return RecordQuery(engine, Diary(), HOST, WINDOW, STOP)  # type: ignore[arg-type]


def test_a_lost_restart_the_engine_still_carries_out_counts_in_the_hosts_minute() -> None:
    """The store lost the restart (a full disk, then a crash) and the engine had sent its stop
    signal but not started the container yet when the next run read its record: no start and
    no `restart` event of it yet, its kill stands for it. A kill long past its stop timeout is
    a finished stop, not counted."""
    clock, engine, memory = world()
    begun = clock.now() - timedelta(minutes=30)
    kill = clock.now() - timedelta(seconds=3)
    old = clock.now() - timedelta(seconds=50)
    engine.kept = [
        event("start", "web", begun),
        event("kill", "web", kill),
        event("start", "db", begun),
        event("kill", "db", old),
        event("die", "db", old),
        event("stop", "db", old),
    ]
    read(memory, engine)
    assert memory.recent(clock.now() - MINUTE) == (kill,)


def test_a_stop_signal_counts_only_itself_not_the_restart_policys_starts_before_it() -> None:
    """A watched container its restart policy restarted (no `restart` event), then stopped by
    a person seconds before the read: the kill counts (it may be a restart under way), the
    policy's start before it does not."""
    clock, engine, memory = world()
    begun = clock.now() - timedelta(minutes=30)
    policy = clock.now() - timedelta(seconds=30)
    kill = clock.now() - timedelta(seconds=3)
    engine.kept = [
        event("start", "web", begun),
        event("die", "web", policy),
        event("start", "web", policy),
        event("kill", "web", kill),
    ]
    read(memory, engine)
    assert memory.recent(clock.now() - MINUTE) == (kill,)
