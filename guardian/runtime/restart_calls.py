"""Where restart calls run: each, once decided and recorded, holds its thread until the engine has
stopped and started its container, which can take that container's whole stop timeout.

Until the daemon starts (`guardian check`, tests), a call runs on the deciding thread and a recheck
waits for a sweep. Then every call is decided on its container's worker of the keyed work queue
(runtime/work_queue.py: an event's reaction, the sweep's applies handed to it, a follower's
restart) and runs there at once; a recheck is a delayed look at the container.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from datetime import datetime

from guardian.logs import kv
from guardian.ports import Clock, Metrics, StoreError
from guardian.runtime.work_queue import Call, KeyedQueue

log = logging.getLogger("guardian.daemon")
# Workers beside the jobs: a restart holds its container's worker for the stop timeout, and
# decide() keeps the calls within restart.max_concurrent (a reload may raise it).
MAX_RESTART_THREADS = 256
# The sweep's applies handed to their workers at once, at most: a first sweep judging a thousand
# containers starts no more workers than this beside the calls in flight (idle workers stay).
HANDED_AT_ONCE = 8


class RestartRunner:
    """The RestartCalls, Rechecks and Turns ports of `guardian run`, built with the loop it
    serves."""

    def __init__(self, metrics: Metrics, clock: Clock) -> None:
        self._metrics = metrics
        self._clock = clock
        self._queue: KeyedQueue | None = None
        self._freed: Callable[[], None] = lambda: None

    def start(self, queue: KeyedQueue, freed: Callable[[], None]) -> None:
        """From now on calls run on `queue`'s workers; `freed` is called (on a worker) when a
        call ends or gives its restart slot up, so whoever waits for one is judged again."""
        self._queue, self._freed = queue, freed

    def run(self, call: Call, slot_until: datetime | None, key: str) -> None:
        queue = self._queue
        if queue is None:
            call()
            return
        if not self.holds(key):
            # Every call is decided on its container's worker (the sweep hands its applies
            # there), and sent there at once: none waits for it, so none is sent after a
            # person changed the container unseen by its decision.
            raise RuntimeError(f"a restart call of {key[:12]} decided off its worker")
        if slot_until is not None:
            # Before the call, which holds this thread past the slot's end.
            queue.call_after((slot_until - self._clock.now()).total_seconds(), self._freed)
        self.carry(call)

    def holds(self, key: str) -> bool:
        """Whether the calling thread is `key`'s worker (a call for it runs here at once)."""
        return self._queue is not None and self._queue.holds(key)

    def turn(self, key: str, fn: Call) -> None:
        if self._queue is None:
            fn()
        else:
            self._queue.turn(key, fn)

    def hand(self, work: Sequence[tuple[str, Call]]) -> None:
        queue = self._queue
        if queue is None:
            for _, fn in work:
                fn()
            return
        for at in range(0, len(work), HANDED_AT_ONCE):
            handed = [queue.hand(key, fn) for key, fn in work[at : at + HANDED_AT_ONCE]]
            for each in handed:
                if each is not None:
                    queue.wait(each)

    def later(self, key: str, fn: Call) -> None:
        if self._queue is None:
            fn()
        else:
            self._queue.add_call(key, fn)

    def look(self, key: str, source: str, now: Call) -> None:
        if self._queue is None:
            now()
        else:
            with contextlib.suppress(RuntimeError):  # stopping: the next start judges it
                self._queue.add(key, None, source)

    def recheck(self, container_id: str, at: datetime) -> None:
        if self._queue is not None:
            self._queue.add_after(container_id, (at - self._clock.now()).total_seconds())

    def carry(self, call: Call) -> None:
        """Run one restart call on the worker that holds its container: its failures are
        logged here, and its slot is freed when it ends."""
        assert self._queue is not None
        try:
            with self._queue.calling():
                call()
        except StoreError as exc:
            self._metrics.store_failed()
            log.error(
                "store error; job abandoned until its next run", extra=kv(job="restart", reason=exc)
            )
        except Exception:
            log.exception("restart failed")
        finally:
            # A slot is free: the container held back longest for one need not wait for a sweep.
            self._freed()
