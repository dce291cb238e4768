"""The keyed work queue (runtime/work_queue.py): a key is never with two workers, work added
while its key is held runs once after, different keys run at once, delayed looks wait on the
monotonic clock and the earliest asked for wins."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta
from typing import Any

from guardian.runtime.work_queue import KeyedQueue, Work
from tests.fakes import T0
from tests.helpers import wait_until


class Recorder:
    """A handle that records each turn (key, work) and how many workers held each key at once;
    a key in `hold` blocks its worker until released."""

    def __init__(self) -> None:
        self.turns: list[tuple[str, Work]] = []
        self.now: Counter[str] = Counter()
        self.most: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.hold: dict[str, threading.Event] = {}
        self.inside: dict[str, threading.Event] = {}
        self.held_by_me: list[tuple[str, bool, bool]] = []
        self.queue: KeyedQueue | None = None

    def __call__(self, key: str, work: Work) -> None:
        with self.lock:
            self.now[key] += 1
            self.most[key] = max(self.most[key], self.now[key])
            self.turns.append((key, work))
        if self.queue is not None:
            self.held_by_me.append((key, self.queue.holds(key), self.queue.holds("other")))
        if key in self.hold:
            self.inside.setdefault(key, threading.Event()).set()
            self.hold[key].wait(10)
        with self.lock:
            self.now[key] -= 1


def test_a_key_is_never_with_two_workers_and_work_added_meanwhile_runs_once_after() -> None:
    handle = Recorder()
    queue = KeyedQueue(handle, limit=8)
    handle.hold["web"] = threading.Event()
    handle.inside["web"] = threading.Event()
    queue.add("web")
    handle.inside["web"].wait(5)
    adders = [threading.Thread(target=queue.add, args=("web",)) for _ in range(20)]
    for t in adders:
        t.start()
    for t in adders:
        t.join()
    handle.hold["web"].set()
    wait_until(lambda: len(handle.turns) == 2 and queue.busy() == 0, 5, message="two turns")
    assert handle.most["web"] == 1
    assert queue.close(1) == 0


def test_different_keys_run_at_once() -> None:
    together = threading.Barrier(3, timeout=5)
    queue = KeyedQueue(lambda key, work: together.wait(), limit=8)
    for key in ("a", "b", "c"):
        queue.add(key)
    wait_until(lambda: queue.busy() == 0, 5, message="all three ran")
    assert not together.broken
    queue.close(1)


def test_the_earliest_problem_time_heard_is_kept_and_calls_run_in_order() -> None:
    handle = Recorder()
    queue = KeyedQueue(handle, limit=1)
    handle.hold["first"] = threading.Event()
    queue.add("first")
    wait_until(lambda: handle.turns, 5, message="the worker is busy")
    ran: list[int] = []
    queue.add("web", T0 + timedelta(seconds=5))
    queue.add_call("web", lambda: ran.append(1))
    queue.add("web", T0)
    queue.add("web", None, "probe")  # a watcher's look names it: recorded as its finding
    queue.add("web", None)
    queue.add_call("web", lambda: ran.append(2))
    handle.hold["first"].set()
    wait_until(lambda: len(handle.turns) == 2, 5, message="web's turn")
    key, work = handle.turns[1]
    assert (key, work.look, work.detected_at, len(work.calls)) == ("web", True, T0, 2)
    assert work.source == "probe"
    for call in work.calls:
        call()
    assert ran == [1, 2]
    queue.close(1)


def test_a_delayed_look_waits_on_the_monotonic_clock_and_the_earliest_wins() -> None:
    now = [100.0]
    handle = Recorder()
    queue = KeyedQueue(handle, limit=2, monotonic=lambda: now[0])
    queue.add_after("web", 30)
    queue.add_after("web", 10)  # earlier: wins
    queue.add_after("web", 20)  # later than the one pending: ignored
    queue.add("poke")  # a worker turns: nothing is due yet
    wait_until(lambda: [k for k, _ in handle.turns] == ["poke"], 5, message="the poke")
    now[0] = 110.0
    queue.add("poke")  # wakes a worker, which finds the look due
    wait_until(lambda: Counter(k for k, _ in handle.turns)["web"] == 1, 5, message="due")
    now[0] = 140.0
    queue.add("poke")
    wait_until(lambda: Counter(k for k, _ in handle.turns)["poke"] == 3, 5, message="pokes")
    assert Counter(k for k, _ in handle.turns)["web"] == 1  # the later ones were never kept
    queue.close(1)


def test_a_worker_knows_the_key_it_holds() -> None:
    handle = Recorder()
    queue = KeyedQueue(handle, limit=2)
    handle.queue = queue
    queue.add("web")
    wait_until(lambda: handle.held_by_me, 5, message="web's turn")
    assert handle.held_by_me == [("web", True, False)]
    assert not queue.holds("web")  # not on this thread
    queue.close(1)


def test_a_timer_runs_on_a_worker_when_due() -> None:
    ran: list[Any] = []
    queue = KeyedQueue(lambda key, work: None, limit=1)
    queue.call_after(0, lambda: ran.append(threading.current_thread().name))
    wait_until(lambda: ran, 5, message="the timer ran")
    assert ran[0].startswith("reconcile-")
    queue.close(1)


def test_close_drops_what_waits_and_refuses_new_work() -> None:
    handle = Recorder()
    queue = KeyedQueue(handle, limit=1)
    handle.hold["first"] = threading.Event()
    queue.add("first")
    wait_until(lambda: handle.turns, 5, message="busy")
    queue.add("waits")
    left: list[int] = []
    closer = threading.Thread(target=lambda: left.append(queue.close(5)))
    closer.start()

    def refused() -> bool:
        try:
            queue.add("x")
        except RuntimeError as exc:
            return "stopping" in str(exc)
        return False

    wait_until(refused, 5, message="closed")
    handle.hold["first"].set()  # the worker under way is waited for
    closer.join(10)
    assert left == [0]
    assert [k for k, _ in handle.turns] == ["first"]
    try:
        queue.add_after("x", 1)
    except RuntimeError as exc:
        assert "stopping" in str(exc)
    else:
        raise AssertionError("a closed queue took work")


def test_a_turn_runs_on_the_callers_thread_and_what_came_meanwhile_runs_after() -> None:
    handle = Recorder()
    queue = KeyedQueue(handle, limit=2)
    seen: list[tuple[str, bool]] = []

    def sweeping() -> None:
        seen.append((threading.current_thread().name, queue.holds("web")))
        queue.add("web")  # an event's look while the sweep has the container's turn
        assert handle.turns == []  # no worker takes the key during the turn

    assert queue.turn("web", sweeping)
    assert seen == [(threading.current_thread().name, False)]  # its calls go to the worker
    wait_until(lambda: [k for k, _ in handle.turns] == ["web"], 5, message="the look after")
    queue.close(1)


def test_a_turn_for_a_key_its_worker_holds_is_not_run_and_the_worker_looks_again() -> None:
    handle = Recorder()
    queue = KeyedQueue(handle, limit=2)
    handle.hold["web"] = threading.Event()
    queue.add("web")
    wait_until(lambda: handle.turns, 5, message="the worker holds web")
    ran: list[str] = []
    assert not queue.turn("web", lambda: ran.append("sweep"))
    handle.hold["web"].set()
    wait_until(lambda: len(handle.turns) == 2, 5, message="the worker looked again")
    assert ran == [] and handle.most["web"] == 1
    queue.close(1)


def test_a_call_added_while_its_worker_holds_the_key_runs_there_once_it_is_done() -> None:
    handle = Recorder()
    queue = KeyedQueue(lambda key, work: [handle(key, work), *(c() for c in work.calls)], 2)
    handle.hold["web"] = threading.Event()
    queue.add("web")
    wait_until(lambda: handle.turns, 5, message="the worker holds web")
    ran: list[str] = []
    queue.add_call("web", lambda: ran.append(threading.current_thread().name))
    assert ran == []
    handle.hold["web"].set()
    wait_until(lambda: ran, 5, message="run by the worker after")
    assert ran[0].startswith("reconcile-")
    queue.close(1)


def test_a_turn_asked_by_the_thread_that_holds_the_key_runs_at_once() -> None:
    ran: list[str] = []
    queue: KeyedQueue

    def handle(key: str, work: Work) -> None:
        queue.turn(key, lambda: ran.append(key))

    queue = KeyedQueue(handle, limit=1)
    queue.add("web")
    wait_until(lambda: ran == ["web"], 5, message="the nested turn ran")
    assert queue.busy() == 0
    queue.close(1)


def test_a_failing_turn_of_work_is_logged_and_the_worker_goes_on() -> None:
    ran: list[str] = []

    def handle(key: str, work: Work) -> None:
        if key == "bad":
            raise RuntimeError("boom")
        ran.append(key)

    queue = KeyedQueue(handle, limit=1)
    queue.add("bad")
    queue.add("good")
    wait_until(lambda: ran == ["good"], 5, message="the next key's turn")
    queue.close(1)


def test_work_handed_to_a_key_runs_on_its_worker_and_is_waited_for_until_its_call_begins() -> None:
    queue = KeyedQueue(lambda key, work: [call() for call in work.calls], limit=4)
    release, ran = threading.Event(), []

    def decides_then_calls() -> None:
        ran.append((threading.current_thread().name, queue.holds("web")))
        with queue.calling():  # the call it decided, at once on this worker
            release.wait(10)

    handed = queue.hand("web", decides_then_calls)
    assert handed is not None
    queue.wait(handed)  # returns while the call runs
    assert ran == [("reconcile-1", True)] and not release.is_set()
    release.set()
    wait_until(lambda: queue.busy() == 0, 5, message="the call's end")

    def fails() -> None:
        raise RuntimeError("the store refused")

    failing = queue.hand("web", fails)
    assert failing is not None
    try:
        queue.wait(failing)
    except RuntimeError as exc:
        assert str(exc) == "the store refused"  # raised to the hander, as a turn raises it
    else:
        raise AssertionError("the hander is told what the work raised")
    assert queue.close(1) == 0


def test_work_handed_to_a_key_a_worker_holds_is_left_to_that_worker_as_a_look() -> None:
    handle = Recorder()
    queue = KeyedQueue(handle, limit=4)
    handle.hold["web"] = threading.Event()
    handle.inside["web"] = threading.Event()
    queue.add("web")
    assert handle.inside["web"].wait(5)
    assert queue.hand("web", lambda: None) is None  # not run: its worker looks again
    handle.hold["web"].set()
    wait_until(lambda: len(handle.turns) == 2 and queue.busy() == 0, 5, message="the look")
    assert handle.turns[1][1].look and handle.turns[1][1].calls == []
    assert queue.close(1) == 0


def test_the_sweeps_apply_is_not_queued_behind_a_followers_restart_waiting_for_the_worker() -> None:
    # Every worker is busy (one here, judging db) when a leader's follower restart is handed to
    # web's worker; then the sweep hands web's apply. The sweep does not wait behind that restart
    # (up to its stop timeout): web is left a look, judged once the restart is done.
    looks: list[str] = []
    inside, release, restarting, restarted = (threading.Event() for _ in range(4))

    def handle(key: str, work: Work) -> None:
        for call in work.calls:
            call()
        if work.look:
            looks.append(key)
            if key == "db":
                inside.set()
                release.wait(10)

    queue = KeyedQueue(handle, limit=1)

    def follower_restart() -> None:
        with queue.calling():
            restarting.set()
            restarted.wait(10)  # the engine stops the container: its whole stop timeout

    applied: list[str] = []
    queue.add("db")
    assert inside.wait(5)
    queue.add_call("web", follower_restart)
    swept = threading.Event()

    def sweep() -> None:
        handed = queue.hand("web", lambda: applied.append("web"))
        release.set()  # db's look ends: the worker takes web
        if handed is not None:
            queue.wait(handed)
        swept.set()

    threading.Thread(target=sweep, daemon=True).start()
    try:
        wait_until(swept.is_set, 5, message="the sweep went on")
        assert restarting.wait(5) and not restarted.is_set()
    finally:
        restarted.set()
    wait_until(lambda: queue.busy() == 0, 5, message="the restart's end")
    assert looks == ["db", "web"] and applied == []  # web judged again after its restart
    assert queue.close(1) == 0
