"""The daemon's keyed work queue (runtime/work_queue.py, KeyedQueue) on the simulator's one
thread, under the real RestartRunner (runtime/restart_calls.py: the RestartCalls, Rechecks and
Turns ports). What Guardian adds (an event's look, a recheck, an approval, a freed slot, a
restart call the sweep decided) waits under its container's key until the seeded scheduler
hands the key to a worker (World.work); the sweep's applies, handed to their keys' workers, wait
there too until the scheduler or the sweep's wait runs them (KeyedQueue.hand); a verify tick's
turn of a key is taken as KeyedQueue.turn takes it: at once while no worker holds the key (what
waits for it runs after), else a look left to that worker. Who runs now is a stack of
actors standing for the daemon's threads; a restart call in flight at the engine lets other
steps run beside its worker (World.in_flight), each as an actor of its own. kill -9 drops
everything queued (`drop`).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial

from guardian.ports import StoreError
from guardian.runtime.work_queue import Call, Handed, Work


class Killed(BaseException):
    """Guardian was killed (kill -9) while one of its calls was under way: raised through that
    run's frames so none of them goes on (Guardian's code catches Exception, never this)."""


@dataclass(eq=False)
class Actor:
    """One thread of the daemon: a job's, the events thread, or a worker holding a key."""

    name: str


@dataclass(eq=False)
class SimQueue:
    """KeyedQueue's contract on one thread: one key is never with two actors at once; work added
    while its key is held waits for the holder to finish; a look added twice before a worker
    takes it runs once (the earliest problem time kept). `handle(key, work)` is the daemon's
    reconcile; what it raises (but Killed) is told to `raised`, and the worker goes on."""

    handle: Callable[[str, Work], None]
    monotonic: Callable[[], float]
    raised: Callable[[Exception], None]
    stamp: Callable[[], object] = lambda: None  # the moment a call is queued (the oracle's)
    asked: list[object] = field(default_factory=list)  # of the calls running: when queued
    waiting: dict[str, Work] = field(default_factory=dict)  # by key, in the order first added
    ready: list[str] = field(default_factory=list)  # keys waiting that no actor holds
    held: dict[str, tuple[Actor, bool]] = field(default_factory=dict)  # key -> (by, a turn)
    actors: list[Actor] = field(default_factory=lambda: [Actor("main")])
    timers: list[tuple[float, int, str | None, Call | None]] = field(default_factory=list)
    due: dict[str, float] = field(default_factory=dict)  # a key's earliest delayed look
    handed: dict[Actor, Handed] = field(default_factory=dict)  # by the worker running it
    dead: bool = False
    _queued: object = None
    _order: itertools.count[int] = field(default_factory=itertools.count)

    @property
    def actor(self) -> Actor:
        return self.actors[-1]

    @contextmanager
    def acting(self, name: str) -> Iterator[None]:
        """Code run as a thread of its own (a job, the events thread), not as the actor now."""
        self.actors.append(Actor(name))
        try:
            yield
        finally:
            self.actors.pop()

    # -- KeyedQueue's interface, as RestartRunner uses it ------------------------------------

    def add(self, key: str, detected_at: datetime | None = None) -> None:
        self._work_for(key).merge_look(detected_at)

    def add_call(self, key: str, call: Call) -> None:
        self._work_for(key).calls.append(partial(self._asked, self.stamp(), call))

    def add_after(self, key: str, delay: float) -> None:
        if self.dead:
            return
        due = self.monotonic() + max(0.0, delay)
        if key in self.due and self.due[key] <= due:
            return
        self.due[key] = due
        heapq.heappush(self.timers, (due, next(self._order), key, None))

    def call_after(self, delay: float, fn: Call) -> None:
        if not self.dead:
            due = self.monotonic() + max(0.0, delay)
            heapq.heappush(self.timers, (due, next(self._order), None, fn))

    def holds(self, key: str) -> bool:
        """Whether the actor now is the worker holding `key` (a turn's holder is not)."""
        held = self.held.get(key)
        return held is not None and held[0] is self.actor and not held[1]

    def turn(self, key: str, fn: Call) -> bool:
        """KeyedQueue.turn: `fn` now as `key`'s turn (True), or left to the worker holding the
        key as a look (False)."""
        held = self.held.get(key)
        if held is not None and held[0] is self.actor:
            fn()
            return True
        if self.dead:
            return False
        if held is not None:
            self._work_for(key).merge_look(None)
            return False
        if key in self.ready:
            self.ready.remove(key)  # its work waits for the turn's end
        self.held[key] = (self.actor, True)
        try:
            fn()
        finally:
            self._release(key)
        return True

    def hand(self, key: str, fn: Call) -> Handed | None:
        """KeyedQueue.hand: `fn` waits under `key` as its next call, for a worker (the seeded
        scheduler's, or wait()'s), unless an actor holds the key or work for it waits already:
        then a look is left to it (None)."""
        if self.dead:
            return None
        if key in self.held or key in self.waiting:
            self._work_for(key).merge_look(None)
            return None
        handed = Handed(key)
        self._work_for(key).calls.append(partial(self._run_handed, handed, fn))
        return handed

    def wait(self, handed: Handed) -> None:
        """KeyedQueue.wait: what the scheduler has not run yet of `handed`'s key runs now, on
        its worker; what `fn` raised before its call is raised here."""
        while not handed.done and not self.dead and handed.key in self.ready:
            self.run(handed.key)
        if handed.error is not None:
            raise handed.error

    def _run_handed(self, handed: Handed, fn: Call) -> None:
        self.handed[self.actor] = handed
        try:
            fn()
        except Exception as exc:
            if self.handed.get(self.actor) is not handed:
                raise  # after its call began: the worker's
            handed.error = exc
        finally:
            self._tell()

    def _tell(self) -> None:
        handed = self.handed.pop(self.actor, None)
        if handed is not None:
            handed.done = True

    @contextmanager
    def calling(self) -> Iterator[None]:
        """Around a restart call on a worker (RestartRunner.carry, which logs what the call
        raises and goes on): a raise is told to `raised` first. `asked` says, while it runs,
        when it was decided: queued then, or (None) now, by the worker itself."""
        self.asked.append(self._queued)
        self._queued = None
        self._tell()  # the work handed to this worker is done with deciding
        try:
            yield
        except StoreError:
            raise
        except Exception as exc:
            self.raised(exc)
            raise
        finally:
            self.asked.pop()

    def _asked(self, stamp: object, call: Call) -> None:
        self._queued = stamp  # for calling(), which the call (RestartRunner.carry) enters first
        call()

    def busy(self) -> int:
        return len(self.held) + len(self.ready)

    def _work_for(self, key: str) -> Work:
        if self.dead:
            return Work()  # a dying run's frames: kept nowhere
        work = self.waiting.get(key)
        if work is None:
            work = self.waiting[key] = Work()
            if key not in self.held:
                self.ready.append(key)
        return work

    def _release(self, key: str) -> None:
        del self.held[key]
        if key in self.waiting and not self.dead:
            self.ready.append(key)  # added while held: its next turn

    # -- the scheduler's side ----------------------------------------------------------------

    def run(self, key: str) -> Work:
        """A worker takes `key` (ready) and runs its work: the daemon's reconcile."""
        self.ready.remove(key)
        work = self.waiting.pop(key)
        me = Actor(f"worker {key[:12]}")
        self.held[key] = (me, False)
        self.actors.append(me)
        try:
            self.handle(key, work)
        except Exception as exc:  # noqa: BLE001 - KeyedQueue logs it, the worker goes on
            self.raised(exc)
        finally:
            self.actors.pop()
            self._release(key)
        return work

    def next_due(self) -> float | None:
        """When the earliest delayed look or timer is due (monotonic), if any."""
        return self.timers[0][0] if self.timers else None

    def fire_due(self, by: float) -> list[str]:
        """The delayed looks due by `by` (monotonic; the clock is there, to the microsecond it
        keeps) made ready, the timers due run (a freed slot's look): the keys whose look came
        due."""
        keys: list[str] = []
        while self.timers and self.timers[0][0] <= by and not self.dead:
            due, _, key, fn = heapq.heappop(self.timers)
            if fn is not None:
                with self.acting("worker (a timer)"):
                    fn()
            elif key is not None and self.due.get(key) == due:
                del self.due[key]
                self._work_for(key).merge_look(None)
                keys.append(key)
        return keys

    def drop(self) -> int:
        """kill -9: every look and call waiting is gone (how many keys had some)."""
        dropped = len(self.waiting)
        self.dead = True
        self.waiting.clear()
        self.ready.clear()
        self.timers.clear()
        self.due.clear()
        return dropped
