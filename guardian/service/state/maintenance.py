"""Maintenance windows in force (core.detection.windows), held to their end: a container seen in a
window is not restarted until the window's end, as its real length places it (DESIGN 12: a clock
step moves the end with it, so a step back does not end the window early, nor a step forward)."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from datetime import datetime, timedelta

from guardian.core.detection.windows import MaintenanceWindow, in_force
from guardian.core.model import Silence

CALENDAR = "calendar"  # Silence.created_by of a window's hold


class MaintenanceHolds:
    """Per container name, the end of the window that holds it and the window.

    Invariant: once a container was seen in a window, it stays held until that window's end
    (moved with every clock step), whatever the wall clock says of the calendar meanwhile."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, tuple[datetime, MaintenanceWindow]] = {}

    def silence(
        self, host: str, name: str, windows: Iterable[MaintenanceWindow], now: datetime
    ) -> Silence | None:
        """The hold on `name` at `now` as a silence decide() honours (until the window's end),
        or None: no window holds it."""
        found = in_force(name, windows, now)
        with self._lock:
            held = self._held.get(name)
            if found is not None and (held is None or found[1] > held[0]):
                held = (found[1], found[0])
                self._held[name] = held
            if held is not None and held[0] <= now:
                del self._held[name]
                held = None
        if held is None:
            return None
        until, window = held
        reason = f"maintenance window ({window.origin}): {window.describe()}"
        return Silence(None, host, name, now, until, reason, CALENDAR)

    def move_stamps(self, step: timedelta) -> None:
        """The wall clock stepped by `step`: each hold keeps its length (DESIGN 12)."""
        with self._lock:
            self._held = {k: (end + step, w) for k, (end, w) in self._held.items()}

    def keep_only(self, present: set[str]) -> None:
        """Forget the holds of containers no longer listed."""
        with self._lock:
            self._held = {k: v for k, v in self._held.items() if k in present}
