"""Named scenarios on the simulator: interleavings written out step by step instead of drawn
from a seed, each checked by the same oracle. The race that failed CI on 12-06 and 12-07, and
each bug the seeds found (tests/sim/known.py), in its shortest form: expected to fail
until the bug is fixed, when strict turns the pass into a failure to notice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from guardian.core.model import ContainerSnapshot
from tests.sim.driver import TICK, quiet_guardian
from tests.sim.engine import Fault
from tests.sim.known import KNOWN
from tests.sim.oracle import Promise, Silenced
from tests.sim.steps import PERSON
from tests.sim.world import World


@pytest.fixture
def w(tmp_path: Path) -> Iterator[World]:
    with quiet_guardian():
        world = World(0, tmp_path)
        world.start()
        yield world
        if world.running:
            world.subject.crash()


def act(w: World, what: Callable[[], object]) -> None:
    """One step: a millisecond passes, `what` happens, the promises are checked."""
    w.clock.advance(TICK)
    w.oracle.begin(w.oracle.step + 1, w.host.containers())
    what()
    w.after_step()


def container(w: World, name: str) -> ContainerSnapshot:
    return next(c for c in w.host.containers() if c.name == name)


def hear_all(w: World) -> None:
    while w.subject.hear() is not None:
        pass


def work_all(w: World) -> None:
    """The work queue's workers take every key waiting, in the order the seed picks."""
    queue = w.subject.queue
    assert queue is not None
    while queue.ready:
        w.work()


def waiting(w: World) -> list[str]:
    """The containers whose work waits for a worker, oldest first."""
    queue = w.subject.queue
    assert queue is not None
    return [w.engine.containers[k].name for k in queue.ready]


def sweep(w: World) -> None:
    """A sweep, and the workers that carry out the restarts it decided at once after it."""
    w.subject.sweep()
    work_all(w)


def wait(w: World, seconds: int) -> None:
    """Time passes as the daemon lets it: events read, the workers run, verify ticks."""
    act(w, w.catch_up)
    act(w, lambda: w.advance(seconds))


def silence(w: World, name: str) -> None:
    """A person silences `name` for ten minutes (`guardian silence`)."""
    op = w.subject.app.app.operator
    s = op.silence(name, timedelta(minutes=10), "maintenance", PERSON)
    w.oracle.silences.append(Silenced(name, s.created_at, s.until, set_at=w.frame.now()))


def broken(w: World) -> set[Promise]:
    return {v.promise for v in w.oracle.violations}


def rows(w: World, sql: str, *args: object) -> int:
    return int(w.subject.sqlite.db.query(sql, args)[0][0])


# -- the race of 12-06 and 12-07 ------------------------------------------------------------


@pytest.mark.parametrize("name", ["web", "asker"])  # restarted at once / awaits an approval
@pytest.mark.parametrize("sweep_first", [True, False], ids=["sweep-then-react", "react-then-sweep"])
def test_a_sweep_and_an_events_reaction_judging_one_container_open_one_incident(
    w: World, name: str, sweep_first: bool
) -> None:
    """CI on 12-06 and 12-07: the sweep and an event's reaction judged one container within a
    millisecond, both opened its incident, the store refused the second (UNIQUE constraint
    failed: incidents.host, incidents.container, incidents.type) and "Incident opened" went out
    twice. On one thread the two can only follow each other, before any other step."""
    act(w, lambda: w.host.sicken(container(w, name), "GET /health: 503"))
    act(w, lambda: hear_all(w))  # the events thread: a look waits for the container's worker
    assert waiting(w) == [name]
    first, then = (w.subject.sweep, lambda: work_all(w))
    for step in (first, then) if sweep_first else (then, first):
        act(w, step)
    sql = "SELECT COUNT(*) FROM incidents WHERE container=? AND type='unhealthy'"
    assert rows(w, sql, name) == 1
    opened = "SELECT COUNT(*) FROM outbox o JOIN incidents i ON i.id = o.incident_id"
    assert rows(w, f"{opened} WHERE i.container=? AND o.kind='opened'", name) == 1
    assert not w.oracle.violations


# -- the bugs the seeds found ---------------------------------------------------------------


def test_a_restart_the_store_lost_still_counts_against_the_hosts_minute(w: World) -> None:
    w.subject.disk.full = True
    act(w, lambda: w.host.sicken(container(w, "web"), "GET /health: 503"))
    act(w, lambda: sweep(w))  # web restarted, its intent held in memory only
    act(w, w.subject.crash)
    w.subject.disk.full = False
    act(w, w.start)
    for name in ("api", "db", "greedy"):
        act(w, lambda n=name: w.host.sicken(container(w, n), "GET /health: 503"))
    act(w, lambda: sweep(w))  # three more within the minute: four, with max_per_minute 3
    assert Promise.HOST_BUDGET not in broken(w)


def test_notifications_queued_before_a_step_back_go_out_within_minutes(w: World) -> None:
    act(w, lambda: w.host.sicken(container(w, "asker"), "GET /health: 503"))
    act(w, lambda: sweep(w))  # its incident opened: told to people
    act(w, lambda: w.step_clock(-3600))
    for _ in range(40):  # ten minutes of delivery ticks
        act(w, w.subject.deliver)
        act(w, lambda: w.advance(15))
    assert w.records.queued(w.subject.sqlite) == 0


def test_notifications_queued_before_a_step_back_while_guardian_was_down_go_out_within_minutes(
    w: World,
) -> None:
    act(w, lambda: w.host.sicken(container(w, "asker"), "GET /health: 503"))
    act(w, lambda: sweep(w))
    act(w, w.subject.deliver)  # fanned out; the channel's first try waits for group_wait
    act(w, w.subject.crash)
    act(w, lambda: w.step_clock(-3600))  # no run of Guardian follows it
    act(w, w.start)
    for _ in range(40):
        act(w, w.subject.deliver)
        act(w, lambda: w.advance(15))
    assert w.records.queued(w.subject.sqlite) == 0


def test_a_persons_stop_not_heard_yet_is_not_undone_by_a_sweep(w: World) -> None:
    act(w, w.subject.cut)  # the event stream is down (the listener backs off, 1 to 30 s)
    act(w, lambda: w.host.stop(container(w, "web"), 1))  # its process exits 1 on SIGTERM
    act(w, lambda: sweep(w))  # the engine's record shows the stop (once F3)
    assert Promise.PERSON_STOP not in broken(w)


def test_a_persons_stop_is_not_undone_by_the_next_run_of_guardian(w: World) -> None:
    act(w, lambda: w.host.stop(container(w, "web"), 1))
    wait(w, 5)  # heard: held as a person's stop
    for _ in range(3):  # sweeps mark how far the events were handled
        act(w, lambda: sweep(w))
        wait(w, 60)
    act(w, w.subject.crash)
    w.engine.kept[:] = []  # and the engine's ring rolls over: the store kept it (once F3)
    act(w, w.start)
    act(w, lambda: sweep(w))
    assert Promise.PERSON_STOP not in broken(w)


@pytest.mark.xfail(strict=True, reason=f"known bug F10: {KNOWN['F10']}")
def test_a_persons_stop_no_run_could_keep_is_not_undone(w: World) -> None:
    act(w, w.subject.cut)
    act(w, lambda: w.host.stop(container(w, "web"), 1))
    w.engine.kept[:] = []  # a busy host: the ring rolls over before Guardian reads it
    act(w, lambda: sweep(w))  # an exit nobody witnessed: restarted as a crash would be
    assert Promise.PERSON_STOP not in broken(w)


def test_a_restart_the_engine_still_carries_out_is_not_asked_again_after_a_step_forward(
    w: World,
) -> None:
    act(w, lambda: setattr(w.engine, "armed", Fault.TIMEOUT))
    act(w, lambda: w.host.sicken(container(w, "web"), "GET /health: 503"))
    act(w, lambda: sweep(w))  # timed out after sending: the engine restarts it within 10 s
    assert w.engine.deferred
    act(w, lambda: w.step_clock(600))
    act(w, w.subject.crash)
    act(w, w.start)
    act(w, lambda: sweep(w))  # the reconciled intent looks older than its stop timeout
    assert Promise.ONE_IN_FLIGHT not in broken(w)


def test_a_persons_stop_while_a_restart_awaits_its_verdict_is_not_undone(w: World) -> None:
    act(w, lambda: w.host.sicken(container(w, "web"), "GET /health: 503"))
    act(w, lambda: sweep(w))  # restarted: its verification awaits the next verify tick
    assert w.counts["engine received: restart"] == 1
    act(w, lambda: w.host.stop(container(w, "web"), 1))
    act(w, lambda: hear_all(w))  # the restart's events, then the person's: all taken as its own
    for _ in range(4):  # past the cooldown
        wait(w, 60)
        act(w, lambda: sweep(w))
    assert Promise.PERSON_STOP not in broken(w)


def test_a_persons_stop_while_a_restart_whose_events_were_lost_awaits_its_verdict_is_not_undone(
    w: World,
) -> None:
    act(w, lambda: w.host.sicken(container(w, "web"), "GET /health: 503"))
    act(w, lambda: sweep(w))  # restarted: its verification awaits the next verify tick
    assert w.counts["engine received: restart"] == 1
    act(w, w.subject.cut)
    w.engine.kept[:] = []  # and the engine's ring rolls over: the restart's events are lost
    act(w, lambda: w.host.stop(container(w, "web"), 1))
    act(w, w.subject.reconnect)
    act(w, lambda: hear_all(w))  # the person's stop; the restart's start was never heard
    for _ in range(4):  # past the cooldown
        wait(w, 60)
        act(w, lambda: sweep(w))
    assert Promise.PERSON_STOP not in broken(w)


# -- the work queue's interleavings -----------------------------------------------------------


def test_a_sweep_beside_a_restart_call_in_flight_leaves_the_container_to_its_worker(
    w: World,
) -> None:
    """KeyedQueue.turn: while web's worker waits on the engine's restart (carried out, its
    answer on the way), a sweep takes no turn of web; a look is left for the worker, which
    takes it once the call returned. One restart, nothing broken."""
    queue = w.subject.queue
    assert queue is not None
    beside: list[bool] = []

    def meanwhile(container_id: str, done: bool) -> None:
        if done and not beside:
            w.subject.sweep()
            beside.append(queue.waiting[container_id].look)

    w.engine.meanwhile = meanwhile
    act(w, lambda: w.host.sicken(container(w, "web"), "GET /health: 503"))
    act(w, lambda: hear_all(w))
    act(w, w.work)  # web's worker: the event's look decides and calls the engine at once
    assert beside == [True] and waiting(w) == ["web"]
    act(w, w.work)  # the look the sweep left
    assert w.counts["engine received: restart"] == 1 and not w.oracle.violations


def test_a_persons_stop_heard_while_a_restart_waits_for_its_worker_is_not_undone(
    w: World,
) -> None:
    act(w, lambda: w.host.sicken(container(w, "web"), "GET /health: 503"))
    act(w, w.subject.sweep)  # decided and claimed: the call waits for web's worker
    act(w, lambda: w.host.stop(container(w, "web")))
    act(w, lambda: hear_all(w))  # the person's stop, heard while the claim runs
    act(w, lambda: work_all(w))
    assert Promise.PERSON_STOP not in broken(w)


def test_a_silence_set_while_a_restart_waits_for_its_worker_holds_it_back(w: World) -> None:
    act(w, lambda: w.host.sicken(container(w, "web"), "GET /health: 503"))
    act(w, w.subject.sweep)  # decided and claimed: the call waits for web's worker
    act(w, lambda: silence(w, "web"))
    act(w, lambda: work_all(w))
    assert Promise.SILENCE not in broken(w)


@pytest.mark.xfail(strict=True, reason=f"known bug F6: {KNOWN['F6']}")
def test_a_restart_the_store_lost_is_not_vouched_for_by_the_next_runs_mark(w: World) -> None:
    w.subject.disk.full = True
    act(w, lambda: w.host.sicken(container(w, "web"), "GET /health: 503"))
    act(w, lambda: sweep(w))  # web restarted, its intent held in memory only
    act(w, w.subject.crash)
    w.subject.disk.full = False
    act(w, w.start)  # reads the engine's record: web's restart counted from it
    wait(w, 61)  # its cooldown
    act(w, lambda: w.host.sicken(container(w, "web"), "GET /health: 503"))
    act(w, lambda: sweep(w))  # restarted again, written; the mark: the store holds all so far
    act(w, w.subject.crash)
    w.engine.kept[:] = []  # a busy host: the ring no longer holds the first restart
    w.engine.kept_from = w.clock.now()
    act(w, w.start)  # the mark vouches for the part the ring lost: the first is forgotten
    for _ in range(3):  # each time its cooldown (with backoff) ends
        wait(w, 121)
        act(w, lambda: w.host.sicken(container(w, "web"), "GET /health: 503"))
        act(w, lambda: sweep(w))
    assert Promise.MAX_ATTEMPTS not in broken(w)
