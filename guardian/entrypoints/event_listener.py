"""The engine's event stream, followed on a thread of its own: each event a container should be
judged for at once becomes a reaction job; a lost stream is reconnected with a growing wait, and
a reconnect asks for a sweep (what the stream missed meanwhile).

A reconnect asks the engine to replay from the last event seen, out of its ring (256 events on
Docker 20.10): what has left the ring is lost, and that sweep finds the problems from the
engine's state instead. A lost event's time was only ever evidence that a problem began earlier
(Healer.reported_at): without it patience counts from a later start, never a sooner one."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime

from guardian.bootstrap import App
from guardian.logs import kv
from guardian.ports import EngineUnavailable

log = logging.getLogger("guardian.daemon")

MAX_BACKOFF = 30.0


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

    def run(self) -> None:
        engine, healer = self.app.engine, self.app.healer
        backoff, since = 1.0, None
        while not self.stopping.is_set():
            try:
                connected_at = self.app.clock.now()
                for event in engine.events(since):
                    if backoff > 1.0:
                        log.info("event stream reconnected")
                        self.reconnected()
                    backoff = 1.0
                    since = event.at
                    if self.stopping.is_set():
                        return
                    if healer.on_event(event):
                        self.react(event.container_id, healer.reported_at(event))
                since = since or connected_at
            except EngineUnavailable as exc:
                if not self.stopping.is_set():
                    log.debug("event stream lost", extra=kv(reason=str(exc), retry_in=backoff))
            except Exception:
                log.exception("event stream failed")
            if self.stopping.wait(backoff):
                return
            backoff = min(backoff * 2, MAX_BACKOFF)
