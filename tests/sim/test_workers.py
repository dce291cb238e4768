"""The simulator's work queue (tests/sim/workers.py) keeps KeyedQueue's contract on one thread:
each case here is one of tests/unit/test_work_queue.py's, where threads run the real queue.
"""

from __future__ import annotations

from datetime import timedelta

from guardian.runtime.work_queue import Work
from tests.fakes import T0
from tests.sim.workers import Killed, SimQueue


class Handle:
    """The daemon's reconcile as a record: each turn (key, work), whether the worker holds its
    key, and what to do inside a turn."""

    def __init__(self) -> None:
        self.turns: list[tuple[str, Work]] = []
        self.held: list[bool] = []
        self.inside: dict[str, list[object]] = {}  # key -> what to do inside its next turn
        self.queue: SimQueue

    def __call__(self, key: str, work: Work) -> None:
        self.turns.append((key, work))
        self.held.append(self.queue.holds(key) and not self.queue.holds("other"))
        for call in work.calls:
            call()
        for do in self.inside.pop(key, []):
            do()  # type: ignore[operator]


def queue_of(handle: Handle, raised: list[Exception] | None = None) -> SimQueue:
    clock = [1000.0]
    queue = SimQueue(handle, lambda: clock[0], (raised if raised is not None else []).append)
    handle.queue = queue
    return queue


def test_work_added_while_its_key_is_held_runs_once_after() -> None:
    handle = Handle()
    queue = queue_of(handle)
    queue.add("web")
    handle.inside["web"] = [lambda: [queue.add("web") for _ in range(20)]]
    queue.run("web")
    assert queue.ready == ["web"]  # once, after the worker let the key go
    queue.run("web")
    assert [k for k, _ in handle.turns] == ["web", "web"] and queue.busy() == 0
    assert handle.held == [True, True]


def test_the_earliest_problem_time_heard_is_kept_and_calls_run_in_order() -> None:
    handle = Handle()
    queue = queue_of(handle)
    ran: list[int] = []
    queue.add("web", T0 + timedelta(seconds=5))
    queue.add_call("web", lambda: ran.append(1))
    queue.add("web", T0)
    queue.add_call("web", lambda: ran.append(2))
    queue.run("web")
    ((_, work),) = handle.turns
    assert work.look and work.detected_at == T0 and ran == [1, 2]


def test_a_turn_runs_at_once_and_what_waits_for_the_key_runs_after() -> None:
    handle = Handle()
    queue = queue_of(handle)
    queue.add("web")  # an event's look, not yet taken by a worker
    seen: list[bool] = []

    def sweeping() -> None:
        seen.append(queue.holds("web"))  # a turn's holder is not the worker
        queue.add("web")
        assert queue.ready == []  # no worker takes the key during the turn

    with queue.acting("sweep"):
        assert queue.turn("web", sweeping)
    assert seen == [False] and queue.ready == ["web"] and handle.turns == []


def test_a_turn_for_a_key_its_worker_holds_is_left_to_the_worker() -> None:
    handle = Handle()
    queue = queue_of(handle)
    ran: list[str] = []

    def beside() -> None:  # a sweep and a follower's restart while the worker is in a call
        with queue.acting("sweep"):
            assert not queue.turn("web", lambda: ran.append("sweep"))
            queue.add_call("web", lambda: ran.append("later"))

    handle.inside["web"] = [beside]
    queue.add("web")
    queue.run("web")
    assert ran == [] and queue.ready == ["web"]
    queue.run("web")  # the worker looks again, and runs what was asked for later
    (_, work) = handle.turns[-1]
    assert work.look and ran == ["later"]


def test_a_turn_asked_by_the_worker_that_holds_the_key_runs_at_once() -> None:
    handle = Handle()
    queue = queue_of(handle)
    ran: list[str] = []
    handle.inside["web"] = [lambda: queue.turn("web", lambda: ran.append("web"))]
    queue.add("web")
    queue.run("web")
    assert ran == ["web"] and queue.busy() == 0


def test_a_delayed_look_waits_on_the_monotonic_clock_and_the_earliest_wins() -> None:
    handle = Handle()
    queue = queue_of(handle)
    queue.add_after("web", 30)
    queue.add_after("web", 10)
    queue.add_after("web", 20)
    assert queue.fire_due(1009.0) == [] and queue.ready == []
    assert queue.fire_due(1010.0) == ["web"] and queue.ready == ["web"]
    assert queue.fire_due(1030.0) == []  # the later ones were dropped for the earliest


def test_a_failing_turn_of_work_is_told_and_the_worker_goes_on() -> None:
    handle = Handle()
    raised: list[Exception] = []
    queue = queue_of(handle, raised)
    handle.inside["bad"] = [lambda: 1 / 0]
    queue.add("bad")
    queue.add("good")
    queue.run("bad")
    queue.run("good")
    assert [type(e) for e in raised] == [ZeroDivisionError]
    assert [k for k, _ in handle.turns] == ["bad", "good"] and queue.busy() == 0


def test_kill_9_drops_what_waits_and_unwinds_what_runs() -> None:
    handle = Handle()
    queue = queue_of(handle)

    def killed() -> None:
        queue.drop()
        raise Killed("kill -9")

    queue.add("web")
    queue.add_call("api", lambda: None)
    queue.add_after("db", 5)
    handle.inside["web"] = [killed]
    try:
        queue.run("web")
    except Killed:
        pass
    else:
        raise AssertionError("Killed did not unwind the worker")
    assert queue.busy() == 0 and queue.waiting == {} and queue.next_due() is None
    queue.add("web")  # the dying run's frames: kept nowhere
    assert queue.busy() == 0
