"""The keyed work queue (client-go's workqueue, kubelet's pod workers): every trigger only adds
a container's key; one key is never with two workers at once, so one container is judged and
acted on by one thread at a time. Work added while its key is with a worker waits for that worker
to finish and then runs again; work added twice before a worker takes it runs once.

A key's work is a look (judge the container again; the earliest problem time heard is kept) and
the calls handed to it (the sweep's apply, a follower's restart: `hand`), run in order on its
worker, which sends the restart call they decide at once. A look can be asked for later
(`add_after`, on the monotonic clock: a step of the wall clock never moves it). Workers are daemon
threads started only when work finds none idle, up to `limit`; idle, they sleep without a timer
unless a delayed look is due.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial

from guardian.logs import kv

log = logging.getLogger("guardian.daemon")
Call = Callable[[], None]
LOOK = "event"  # the source of a look nothing named otherwise (an event, a recheck, a slot)


@dataclass
class Work:
    """What waits under one key: a look (and the earliest problem time heard for it), and the
    calls decided for it, in the order they were added."""

    look: bool = False
    detected_at: datetime | None = None
    calls: list[Call] = field(default_factory=list)
    source: str = LOOK  # what asked for the look: an event, unless a watcher named itself

    def merge_look(self, detected_at: datetime | None, source: str = LOOK) -> None:
        self.look = True
        if detected_at is not None and (self.detected_at is None or detected_at < self.detected_at):
            self.detected_at = detected_at
        if source != LOOK:
            self.source = source


@dataclass
class Handed:
    """Work handed to a key's worker (KeyedQueue.hand): whether it returned or began its call,
    and what it raised before that."""

    key: str
    done: bool = False
    error: Exception | None = None


class KeyedQueue:
    """`handle(key, work)` runs on a worker, never for one key on two workers at once; what it
    raises is logged and the worker goes on. add() after close() raises RuntimeError."""

    def __init__(
        self,
        handle: Callable[[str, Work], None],
        limit: int,
        name: str = "reconcile",
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._handle = handle
        self._limit = limit
        self._name = name
        self._monotonic = monotonic
        self._cond = threading.Condition()
        self._waiting: dict[str, Work] = {}  # by key, in the order first added
        self._ready: deque[str] = deque()  # keys waiting that no worker holds, oldest first
        self._held: dict[int, str] = {}  # thread ident -> the key its worker holds
        self._borrowed: set[int] = set()  # threads holding a key for a turn (not workers)
        self._calling = 0  # workers inside a call (a restart the engine is carrying out)
        # Work handed to a key's worker whose hander waits (hand): the thread running it -> its
        # Handed, told once the work returns or its call begins.
        self._handed: dict[int, Handed] = {}
        # Delayed looks (due, order, key) and timers (due, order, function), one heap; a key
        # keeps only its earliest delayed look (_due).
        self._timers: list[tuple[float, int, str | None, Call | None]] = []
        self._due: dict[str, float] = {}
        self._order = itertools.count()
        self._threads = 0
        self._idle = 0
        self._closed = False

    # -- adding work ---------------------------------------------------------------------------

    def add(self, key: str, detected_at: datetime | None = None, source: str = LOOK) -> None:
        """Look at `key` again as soon as a worker is free for it (`source`: what asked)."""
        with self._cond:
            self._work_for(key).merge_look(detected_at, source)
            self._wake()

    def add_call(self, key: str, call: Call) -> None:
        """Run `call`, decided for `key`, on the key's worker."""
        with self._cond:
            self._work_for(key).calls.append(call)
            self._wake()

    def add_after(self, key: str, delay: float) -> None:
        """Look at `key` again `delay` seconds from now (the earliest of those asked wins)."""
        due = self._monotonic() + max(0.0, delay)
        with self._cond:
            self._refuse_when_closed()
            if key in self._due and self._due[key] <= due:
                return
            self._due[key] = due
            heapq.heappush(self._timers, (due, next(self._order), key, None))
            self._wake(timer=True)

    def call_after(self, delay: float, fn: Call) -> None:
        """Run `fn` (quick: it only adds work) on a worker `delay` seconds from now."""
        due = self._monotonic() + max(0.0, delay)
        with self._cond:
            self._refuse_when_closed()
            heapq.heappush(self._timers, (due, next(self._order), None, fn))
            self._wake(timer=True)

    def holds(self, key: str) -> bool:
        """Whether the calling thread is the worker that holds `key` now (a thread on a turn
        is not: a restart call it decides waits for the key's worker)."""
        me = threading.get_ident()
        with self._cond:
            return self._held.get(me) == key and me not in self._borrowed

    def turn(self, key: str, fn: Call) -> bool:
        """Run `fn` on the calling thread (a job's: the verify tick) as `key`'s turn, so that
        no worker holds the key meanwhile: True (at once when this thread holds it already).
        When a worker holds it now, the worker looks at the key again once done instead:
        False."""
        me = threading.get_ident()
        with self._cond:
            mine = self._held.get(me) == key
            if self._closed and not mine:
                return False
        if mine:
            fn()
            return True
        with self._cond:
            if key in self._held.values():
                self._work_for(key).merge_look(None)
                return False
            if key in self._ready:
                self._ready.remove(key)  # its work waits for the turn's end
            self._held[me] = key
            self._borrowed.add(me)
        try:
            fn()
        finally:
            with self._cond:
                del self._held[me]
                self._borrowed.discard(me)
                if key in self._waiting:
                    self._ready.append(key)
                    self._wake()
        return True

    def hand(self, key: str, fn: Call) -> Handed | None:
        """Run `fn` on `key`'s worker as its next work (a job's: the sweep's apply), so that
        the restart call it decides runs there at once; wait() on what it returns. When a worker
        (or a turn) holds the key now, or work for it waits already (a follower's restart, a
        look), the key's worker looks at it again once done with that instead, as turn() does,
        and `fn` is not run: None (and None once closed). (A follower's restart, which must
        run after that work, is add_call()'s.)"""
        handed = Handed(key)
        with self._cond:
            if self._closed:
                return None
            if key in self._held.values() or key in self._waiting:
                # Never queued behind work that may be a restart call (up to its stop timeout):
                # the hander would wait for it.
                self._work_for(key).merge_look(None)
                return None
            self._work_for(key).calls.append(partial(self._run_handed, handed, fn))
            self._wake()
        return handed

    def wait(self, handed: Handed) -> None:
        """Until `handed`'s work returned or began its call (what it decided is written by
        then; the call itself is not waited for), or the queue closed (its work dropped). What
        the work raised before its call is raised here, to the hander (the worker goes on)."""
        with self._cond:
            while not handed.done and not self._closed:
                self._cond.wait()
        if handed.error is not None:
            raise handed.error

    def _run_handed(self, handed: Handed, fn: Call) -> None:
        me = threading.get_ident()
        with self._cond:
            self._handed[me] = handed
        try:
            fn()
        except Exception as exc:
            with self._cond:
                if self._handed.get(me) is not handed:
                    raise  # after its call began: the worker logs it
                handed.error = exc
        finally:
            with self._cond:
                self._tell(me)

    def _tell(self, me: int) -> None:
        """Under the lock: the work handed to thread `me` is done with deciding."""
        handed = self._handed.pop(me, None)
        if handed is not None:
            handed.done = True
            self._cond.notify_all()

    @contextmanager
    def calling(self) -> Iterator[None]:
        """Around a call on a worker: close() gives calls a grace of their own; the work handed
        to this worker is done with deciding (hand)."""
        with self._cond:
            self._calling += 1
            self._tell(threading.get_ident())
        try:
            yield
        finally:
            with self._cond:
                self._calling -= 1
                self._cond.notify_all()

    def busy(self) -> int:
        """Keys held by a worker or waiting for one."""
        with self._cond:
            return len(self._held) + len(self._ready)

    def _work_for(self, key: str) -> Work:
        self._refuse_when_closed()
        work = self._waiting.get(key)
        if work is None:
            work = self._waiting[key] = Work()
            if key not in self._held.values():
                self._ready.append(key)
        return work

    def _refuse_when_closed(self) -> None:
        if self._closed:
            raise RuntimeError("work queue closed: Guardian is stopping")

    def _wake(self, timer: bool = False) -> None:
        """A worker for the new work: an idle one, else a new one while under the limit."""
        if self._idle == 0 and self._threads < self._limit and (self._ready or timer):
            self._threads += 1
            threading.Thread(
                target=self._work, name=f"{self._name}-{self._threads}", daemon=True
            ).start()
        elif timer:
            self._cond.notify_all()  # each idle worker recomputes when the next timer is due
        else:
            self._cond.notify()

    # -- workers -------------------------------------------------------------------------------

    def _work(self) -> None:
        me = threading.get_ident()
        while True:
            with self._cond:
                taken = self._take()
                if taken is None:
                    self._threads -= 1
                    self._cond.notify_all()
                    return
                key, work = taken
                if key is not None:
                    self._held[me] = key
            try:
                if key is None:
                    for fn in work.calls:
                        fn()
                else:
                    self._handle(key, work)
            except Exception:  # the worker goes on: one container's failure stops no other
                log.exception("work failed", extra=kv(key=(key or "")[:12]))
            finally:
                with self._cond:
                    self._held.pop(me, None)
                    if key is not None and key in self._waiting:
                        self._ready.append(key)  # added while held: its next turn
                        self._cond.notify()
                    self._cond.notify_all()

    def _take(self) -> tuple[str | None, Work] | None:
        """Under the lock: the next key and its work, or due timers to run (key None); None
        once closed."""
        self._idle += 1
        try:
            while not self._closed:
                fns = self._fire_due()
                if fns:
                    return None, Work(calls=fns)
                if self._ready:
                    key = self._ready.popleft()
                    return key, self._waiting.pop(key)
                wait = self._timers[0][0] - self._monotonic() if self._timers else None
                self._cond.wait(wait)
            return None
        finally:
            self._idle -= 1

    def _fire_due(self) -> list[Call]:
        """Move the delayed looks that are due to the ready keys; the timers due, to run."""
        now = self._monotonic()
        fns: list[Call] = []
        while self._timers and self._timers[0][0] <= now:
            due, _, key, fn = heapq.heappop(self._timers)
            if fn is not None:
                fns.append(fn)
            elif key is not None and self._due.get(key) == due:
                del self._due[key]
                self._work_for(key).merge_look(None)
        return fns

    # -- stopping ------------------------------------------------------------------------------

    def close(
        self,
        wait: float,
        call_wait: float | None = None,
        monotonic: Callable[[], float] | None = None,
    ) -> int:
        """Refuse new work, drop what waits, and wait up to `wait` seconds for the workers
        under way; a worker inside a call is waited for only `call_wait` seconds more (default:
        within `wait`). Returns how many are still under way (a call left to the engine)."""
        clock = monotonic or self._monotonic
        start = clock()
        with self._cond:
            self._closed = True
            self._waiting.clear()
            self._ready.clear()
            self._timers.clear()
            self._due.clear()
            self._cond.notify_all()
            while len(self._held) > self._calling and clock() - start < wait:
                self._cond.wait(wait - (clock() - start))
            limit = start + wait if call_wait is None else clock() + call_wait
            while self._held and clock() < limit:
                self._cond.wait(limit - clock())
            return len(self._held)
