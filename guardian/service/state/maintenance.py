"""Maintenance windows in force (core.detection.windows), held to their end: a container seen in a
window is not restarted until the window's end, as its real length places it (docs/design.md
rule 12: the end is held on the monotonic clock, so a step of the wall clock back does not end
the window early, nor a step forward).
And the windows' runs as the store records them (MaintenanceLog: the events feed's
maintenance.started and maintenance.ended)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import datetime

from guardian.core.detection.windows import (
    LABEL,
    MaintenancePeriod,
    MaintenanceWindow,
    in_force,
    periods_in_force,
)
from guardian.core.facts import ContainersListed, Fact
from guardian.core.model import ContainerSnapshot, Silence, same_snapshots
from guardian.core.stamps import Reading
from guardian.logs import kv
from guardian.ports import Clock, MaintenanceRecords, StoreError
from guardian.service.state.present import only_present

log = logging.getLogger("guardian.maintenance")

CALENDAR = "calendar"  # Silence.created_by of a window's hold
LABEL_ORIGIN = f"label {LABEL}"  # a window's origin when a container's label wrote it


class MaintenanceHolds:
    """Per container name, the end of the window that holds it (a moment of the monotonic
    clock) and the window.

    Invariant: once a container was seen in a window, it stays held until that window's end
    as its real length places it, whatever the wall clock says of the calendar meanwhile.

    Under the host lock (LoopState.lock), not one of its own: a hold is what decide() reads of
    the host for a container (docs/design.md rule 21), written by the workers' decisions and
    the status reads (HTTP handlers, `guardian status`) that keep the later end, and forgotten
    by the sweep; each keeps-the-later-end is one read and one write that must not interleave
    with another's or with the sweep's forgetting."""

    def __init__(self, clock: Clock, lock: threading.RLock) -> None:
        self._clock = clock
        self._lock = lock
        self._held: dict[str, tuple[float, MaintenanceWindow]] = {}

    def silence(
        self, host: str, name: str, windows: Iterable[MaintenanceWindow], now: datetime
    ) -> Silence | None:
        """The hold on `name` at `now` as a silence decide() honours (until the window's end,
        on the wall clock as it reads now), or None: no window holds it."""
        found = in_force(name, windows, now)
        clocks = Reading(self._clock.now(), self._clock.monotonic())
        at = clocks.mono_of(now)
        with self._lock:
            held = self._held.get(name)
            if found is not None and (held is None or clocks.mono_of(found[1]) > held[0]):
                held = (clocks.mono_of(found[1]), found[0])
                self._held[name] = held
            if held is not None and held[0] <= at:
                del self._held[name]
                held = None
        if held is None:
            return None
        until, window = held
        reason = f"maintenance window ({window.origin}): {window.describe()}"
        return Silence(None, host, name, now, clocks.wall_of(until), reason, CALENDAR)

    def keep_only(self, present: set[str]) -> None:
        """Forget the holds of containers no longer listed."""
        with self._lock:
            self._held = only_present(self._held, present)


class MaintenanceLog:
    """Writes each run of a maintenance window to the store when a sweep first sees it in force
    (ContainersListed: the windows of the watched containers, the operator's and their labels'),
    and its end when a sweep sees it over: at its end on the calendar, or now if it ended
    early (its container no longer watched, the window no longer configured). The runs not
    ended are read from the store at the first sweep, so a restart inside a window writes no
    second start, and a window that ended while Guardian was down is ended then, at its end.
    A write that fails (a full disk) is tried again at the next sweep.

    Owned by the sweep: ContainersListed is published only by Healer.sweep, and facts reach
    their subscribers on the publisher's thread; the daemon's sweep job runs one at a time
    (max_instances 1), so what is held here needs no lock."""

    def __init__(
        self,
        store: MaintenanceRecords,
        windows_of: Callable[[ContainerSnapshot], Iterable[MaintenanceWindow]],
        host: str,
        clock: Clock,
        tuning: Callable[[], object] = lambda: None,
    ) -> None:
        self.store = store
        self.windows_of = windows_of
        self.host = host
        self.clock = clock
        # What windows_of reads besides the snapshot (the settings in force): the windows of
        # the very snapshots under the very same settings are the last sweep's, not looked up
        # again container by container.
        self.tuning = tuning
        self._open: dict[tuple[str, str, str, datetime], MaintenancePeriod] | None = None
        self._seen: tuple[tuple[ContainerSnapshot, ...], object, set[MaintenanceWindow]] | None
        self._seen = None

    def on_fact(self, fact: Fact) -> None:
        if isinstance(fact, ContainersListed):
            self.observe(self._windows_of_all(fact.containers), self.clock.now())

    def _windows_of_all(self, listed: tuple[ContainerSnapshot, ...]) -> set[MaintenanceWindow]:
        tuning, seen = self.tuning(), self._seen
        if seen is not None and seen[1] is tuning and same_snapshots(seen[0], listed):
            return seen[2]
        windows = {w for snap in listed for w in self._windows(snap)}
        self._seen = (listed, tuning, windows)
        return windows

    def _windows(self, snap: ContainerSnapshot) -> Iterable[MaintenanceWindow]:
        """The container's windows; its label's named by the container (a label's window is
        read as any container's: `*`), so each container's label window is a run of its own."""
        for w in self.windows_of(snap):
            yield replace(w, containers=snap.name) if w.origin == LABEL_ORIGIN else w

    def observe(self, windows: Iterable[MaintenanceWindow], now: datetime) -> None:
        """Bring the store's runs up to date with `windows` at `now`."""
        seen = periods_in_force(windows, now)
        try:
            if self._open is None:
                self._open = {p.key: p for p in self.store.open_periods(self.host)}
            for key, period in list(self._open.items()):
                if key not in seen:
                    assert period.id is not None
                    self.store.end_period(period.id, min(now, period.until))
                    del self._open[key]
                    log.info("maintenance ended", extra=_fields(period))
            for key, period in seen.items():
                if key not in self._open:
                    self._open[key] = self.store.start_period(self.host, period)
                    log.info("maintenance started", extra=_fields(period))
        except StoreError as exc:
            log.warning("maintenance not recorded", extra=kv(reason=str(exc)))


def _fields(period: MaintenancePeriod) -> dict[str, object]:
    return kv(
        window=period.name,
        containers=period.containers,
        started_at=period.started_at.isoformat(),
        until=period.until.isoformat(),
    )
