"""The engine's event stream, followed on a thread of its own: each event a container should be
judged for at once becomes a reaction job; a lost stream is reconnected with a growing wait, and
a reconnect asks for a sweep (what the stream missed meanwhile).

At start the engine replays from the last event the previous run handled (the store's mark,
`events_through`, at most REPLAY_LIMIT back; without one, from when the daemon began to follow
events, so the container cache misses none, judging none of them: the first sweep does), and a
reconnect from the last event seen, out of
its ring (256 events on Docker 20.10): an unhealthy, die or OOM event in the gap is judged at
once, one judgement per container for the whole replay (the sweep that runs beside it goes
through the same decide(), so a container is restarted once). What has left the ring is lost,
and the sweep finds the problems from the engine's state instead. A lost event's time was only
ever evidence that a problem began earlier (Healer.reported_at): without it patience counts from
a later start, never a sooner one."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from guardian.bootstrap import App
from guardian.logs import kv
from guardian.ports import EngineUnavailable, StoreError
from guardian.service.state.engine_memory import EVENTS_THROUGH

log = logging.getLogger("guardian.daemon")

MAX_BACKOFF = 30.0
# How far back a start replays the engine's events at most (the ring bounds it further).
REPLAY_LIMIT = timedelta(hours=1)
# While the stream is up, events up to this long ago count as handled (one still on its way is
# replayed twice rather than lost: a replay judges each container once).
IN_FLIGHT = timedelta(seconds=5)


class EventListener:
    """`react(container_id, at)` schedules a reaction; `reconnected()` asks for a sweep."""

    def __init__(
        self,
        app: App,
        stopping: threading.Event,
        react: Callable[[str, datetime | None], None],
        reconnected: Callable[[], None],
    ) -> None:
        self.app = app
        self.stopping = stopping
        self.react = react
        self.reconnected = reconnected
        self.last_at: datetime | None = None  # the last event handled
        self._listening = False  # the stream is up

    def replay_from(self) -> datetime | None:
        """Where the previous run stopped handling events (None: nothing to replay)."""
        now = self.app.clock.now()
        try:
            mark = self.app.store.remembered(self.app.loop.host, EVENTS_THROUGH)
        except StoreError:
            return None
        if mark is None:
            return None
        # A mark ahead of the clock (it stepped back) replays from the limit, never skips.
        return max(mark, now - REPLAY_LIMIT) if mark <= now else now - REPLAY_LIMIT

    def handled_through(self) -> datetime | None:
        """Until when the engine's events were handled (the store's mark, replayed from at the
        next start): the last one, or while the stream is up, nearly now."""
        if not self._listening:
            return self.last_at
        recent = self.app.clock.now() - IN_FLIGHT
        return recent if self.last_at is None else max(self.last_at, recent)

    def run(self) -> None:
        engine, healer = self.app.engine, self.app.healer
        backoff, since = 1.0, self.replay_from()
        while not self.stopping.is_set():
            try:
                healer.read_engine_record()  # before anything replayed is judged
                connected_at = self.app.clock.now()
                judged: set[str] = set()  # containers judged for events before connecting
                self._listening = True
                # Judged: what happened since the mark (or the last event seen). Without either,
                # the stream replays only for the container cache (docs/design.md rule 18), and
                # the first sweep, which counts the whole host before acting, judges what it
                # finds.
                judge_from = since or connected_at
                since = self.app.loop.stream_opening(since, connected_at)
                for event in engine.events(since):
                    if backoff > 1.0:
                        log.info("event stream reconnected")
                        self.reconnected()
                    backoff = 1.0
                    since = self.last_at = event.at
                    if self.stopping.is_set():
                        return
                    if healer.on_event(event) and event.at >= judge_from:
                        if event.at < connected_at:
                            # Replayed: one judgement per container sees the state it is in now.
                            if event.container_id in judged:
                                continue
                            judged.add(event.container_id)
                            log.info(
                                "replayed engine event judged",
                                extra=kv(container=event.container_name, action=event.action),
                            )
                        self.react(event.container_id, healer.reported_at(event))
                self._listening = False
                self.app.loop.stream_lost()
                since = since or connected_at
            except EngineUnavailable as exc:
                self._listening = False
                self.app.loop.stream_lost()
                if not self.stopping.is_set():
                    log.debug("event stream lost", extra=kv(reason=str(exc), retry_in=backoff))
            except Exception:
                self._listening = False
                self.app.loop.stream_lost()
                log.exception("event stream failed")
            if self.stopping.wait(backoff):
                return
            backoff = min(backoff * 2, MAX_BACKOFF)
