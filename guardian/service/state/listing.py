"""Listings: what a sweep asks the engine to list (docs/design.md rule 18): the whole list now
and then, in between only the containers it must judge again, so that an idle sweep costs what
changed, not a listing of every container.

While one event stream has stayed open since the last whole list was asked, every change of a
container that a judgement reads reaches the loop as an event of Docker's (create, start, die,
stop, kill, oom, health_status, pause, unpause, update, rename, destroy), and each is heard
(QuietRows.heard). A sweep then asks the engine, by id, only for the containers heard of since
the last sweep asked and for the watched ones whose last judgement does not hold by itself (no
quiet row, or one whose reset check is due); every other container is taken as the last list
showed it. A sweep with nothing to ask pings the engine instead: an engine that stopped
answering is still found at the next sweep.

Once `watch.resync` has passed since the last resync, the sweep is one (in case the stream lost
an event while it stayed open): it asks the engine for every container that does not run well
(Engine.list_unwell: the engine selects them, a few small answers on an idle host), takes those
as shown, and asks by id for each the last list showed not running well that is no longer among
them (it recovered, or is gone). So a container that failed or recovered unheard is judged
within `resync` and one `interval`, at a cost that grows with the failing containers, not with
all of them.

The whole list is read again at the first sweep; when no stream is open, or another was opened
or the one open was cut since the last whole list; on Podman (its list and events differ);
after a reload, a clock step or an outage (QuietRows.clear); when more than MAX_IDS containers
are to be asked for; and at every WHOLE_EVERY-th resync (`watch.resync` 0: at every sweep).
What only a whole list tells of a container running well waits for it: one created, removed or
renamed unheard, or connected to another network (the addresses its listing shows).
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
WHOLE_EVERY = 10  # resyncs to a whole list: 10 min at the default watch.resync of 1 min


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
    stream, when (monotonic seconds); and when its last resync was (the whole list's time
    until one other was made)."""

    settings: HealerSettings
    listed: list[ContainerSnapshot]
    watched: list[ContainerSnapshot]
    stream: int | None
    whole_at: float
    resynced_at: float


@dataclass(frozen=True)
class Asks:
    """What a sweep asks for between two whole lists: these ids, and whether it resyncs."""

    ids: set[str]
    resync: bool


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
        """(every container listed, the watched ones) for a sweep under `settings`: one
        request to the engine (a whole list, a list by id, or a ping), or at a resync the
        unwell ones and at most one list by id. Raises EngineUnavailable."""
        mono, now = self.clock.monotonic(), self.clock.now()
        stream = self.cache.stream() if on_docker else None
        # Taken before asking: what is heard from now on is the next sweep's to ask for.
        news = self.quiet.news()
        last = self._last
        if last is None or (asks := self._asks(last, settings, stream, news, mono, now)) is None:
            return self._whole(settings, stream, mono)
        ids, shown = asks.ids, {}
        if asks.resync:
            unwell = self.engine.list_unwell(settings.watch_label, settings.scope)
            shown = {c.id: c for c in unwell}
            # Shown unwell last time and not now: recovered or gone, asked for by id.
            ids.update(c.id for c in last.listed if not c.runs_well)
            ids.difference_update(shown)
            if len(ids) > MAX_IDS:
                return self._whole(settings, stream, mono)
        elif not ids:
            self.engine.ping()
            return last.listed, last.watched  # nothing asked: the last list, the very objects
        if ids:
            found = self.engine.list_containers(settings.watch_label, settings.scope, ids=ids)
            shown.update((c.id, c) for c in found)
        asked = ids | shown.keys()
        listed = []
        for c in last.listed:
            if c.id in shown:
                listed.append(shown.pop(c.id))  # asked for or shown unwell, and still there
            elif c.id not in asked:
                listed.append(c)  # taken as the last list showed it
        listed.extend(shown.values())  # created since the last list
        resynced_at = mono if asks.resync else last.resynced_at
        return self._keep(settings, listed, last.stream, last.whole_at, resynced_at)

    def _asks(
        self,
        last: LastList,
        settings: HealerSettings,
        stream: int | None,
        news: set[str] | None,
        mono: float,
        now: datetime,
    ) -> Asks | None:
        """What this sweep asks for; None: the whole list."""
        resync = settings.resync.total_seconds()
        if (
            stream is None
            or last.stream != stream
            or last.settings is not settings
            or news is None
            or mono - last.whole_at >= resync * WHOLE_EVERY
        ):
            return None
        ids = set(news)
        ids.update(self.quiet.unsettled(last.watched, now))
        if len(ids) > MAX_IDS:
            return None
        return Asks(ids, mono - last.resynced_at >= resync)

    def _whole(
        self, settings: HealerSettings, stream: int | None, mono: float
    ) -> tuple[list[ContainerSnapshot], list[ContainerSnapshot]]:
        listed = self.engine.list_containers(settings.watch_label, settings.scope)
        return self._keep(settings, listed, stream, mono, mono)

    def _keep(
        self,
        settings: HealerSettings,
        listed: list[ContainerSnapshot],
        stream: int | None,
        whole_at: float,
        resynced_at: float,
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
        self._last = LastList(settings, listed, watched, stream, whole_at, resynced_at)
        return listed, watched
