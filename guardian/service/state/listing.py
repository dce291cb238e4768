"""Listings: what a sweep asks the engine to list (DESIGN 18): the whole list at a resync, in
between only the containers it must judge again, so that an idle sweep costs what changed, not
a listing of every container.

While one event stream has stayed open since the last whole list was asked, every change of a
container that a judgement reads reaches the loop as an event of Docker's (create, start, die,
stop, kill, oom, health_status, pause, unpause, update, rename, destroy), and each is heard
(QuietRows.heard). A sweep then asks the engine, by id, only for the containers heard of since
the last sweep asked and for the watched ones whose last judgement does not hold by itself (no
quiet row, or one whose reset check is due); every other container is taken as the last list
showed it. A sweep with nothing to ask pings the engine instead: an engine that stopped
answering is still found at the next sweep.

The whole list is read again (the resync) at the first sweep; when no stream is open, or another
was opened or the one open was cut since the last whole list; on Podman (its list and events
differ); after a reload, a clock step or an outage (QuietRows.clear); when more than MAX_IDS
containers are to be asked for; and once `watch.resync` has passed since the last whole list
(0: at every sweep). Between two, what no event tells of waits for the resync: a container
connected to another network (the addresses its listing shows).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from guardian.core.model import ContainerSnapshot, same_snapshots
from guardian.ports import Clock, Engine
from guardian.service.settings import HealerSettings
from guardian.service.state.container_cache import ContainerCache
from guardian.service.state.quiet import MAX_NEWS, QuietRows

MAX_IDS = MAX_NEWS  # containers one sweep asks for by id; beyond, it lists them all


@dataclass(frozen=True)
class Listed:
    """What a sweep listed, as its followers are told: every container, the watched ones, and
    whether the watched ones changed since the followers were last told (unchanged: the very
    list object they were told last, so nothing that follows from the list alone is worked out
    again)."""

    listed: list[ContainerSnapshot]
    watched: list[ContainerSnapshot]
    changed: bool


@dataclass(frozen=True)
class LastList:
    """What the last sweep listed, and of its last whole list: under which settings, in which
    stream, when (monotonic seconds)."""

    settings: HealerSettings
    listed: list[ContainerSnapshot]
    watched: list[ContainerSnapshot]
    stream: int | None
    whole_at: float


class Listings:
    def __init__(self, engine: Engine, cache: ContainerCache, quiet: QuietRows, clock: Clock):
        self.engine = engine
        self.cache = cache
        self.quiet = quiet
        self.clock = clock
        self._last: LastList | None = None

    def read(
        self, settings: HealerSettings, on_docker: bool
    ) -> tuple[list[ContainerSnapshot], list[ContainerSnapshot]]:
        """(every container listed, the watched ones) for a sweep under `settings`: ONE request
        to the engine (a list, whole or by id, or a ping). Raises EngineUnavailable."""
        mono, now = self.clock.monotonic(), self.clock.now()
        stream = self.cache.stream() if on_docker else None
        # Taken before asking: what is heard from now on is the next sweep's to ask for.
        news = self.quiet.news()
        last = self._last
        if last is None or (ids := self._asks(last, settings, stream, news, mono, now)) is None:
            return self._whole(settings, stream, mono)
        if not ids:
            self.engine.ping()
            return last.listed, last.watched  # nothing asked: the last list, the very objects
        found = self.engine.list_containers(settings.watch_label, settings.scope, ids=ids)
        got = {c.id: c for c in found}
        listed = []
        for c in last.listed:
            if c.id not in ids:
                listed.append(c)  # taken as the last list showed it
            elif c.id in got:
                listed.append(got.pop(c.id))  # asked for, and still there
        listed.extend(got.values())  # created since the last list
        return self._keep(settings, listed, last.stream, last.whole_at)

    def _asks(
        self,
        last: LastList,
        settings: HealerSettings,
        stream: int | None,
        news: set[str] | None,
        mono: float,
        now: datetime,
    ) -> set[str] | None:
        """The ids this sweep asks for; None: the whole list."""
        if (
            stream is None
            or last.stream != stream
            or last.settings is not settings
            or news is None
            or mono - last.whole_at >= settings.resync.total_seconds()
        ):
            return None
        ids = set(news)
        ids.update(self.quiet.unsettled(last.watched, now))
        return ids if len(ids) <= MAX_IDS else None

    def _whole(
        self, settings: HealerSettings, stream: int | None, mono: float
    ) -> tuple[list[ContainerSnapshot], list[ContainerSnapshot]]:
        listed = self.engine.list_containers(settings.watch_label, settings.scope)
        return self._keep(settings, listed, stream, mono)

    def _keep(
        self,
        settings: HealerSettings,
        listed: list[ContainerSnapshot],
        stream: int | None,
        whole_at: float,
    ) -> tuple[list[ContainerSnapshot], list[ContainerSnapshot]]:
        """`listed` becomes the last list; the watched ones are picked again only when it is not
        the last list's very snapshots under the same settings, and handed as the last list
        object while they are its very snapshots under the same settings (a sweep's followers
        take an unchanged list object for an unchanged list: Listed.changed)."""
        last = self._last
        if last is None or last.settings is not settings:
            watched = [c for c in listed if settings.watches(c.labels)]
        elif same_snapshots(last.listed, listed):
            listed, watched = last.listed, last.watched
        else:
            watched = [c for c in listed if settings.watches(c.labels)]
            if same_snapshots(last.watched, watched):
                watched = last.watched  # only containers it does not watch changed
        self._last = LastList(settings, listed, watched, stream, whole_at)
        return listed, watched
