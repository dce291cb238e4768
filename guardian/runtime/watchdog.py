"""What the daemon tells systemd: READY once it serves, STATUS, WATCHDOG, RELOADING, STOPPING.

READY=1 means "Guardian is serving" (the store is open, the HTTP listener is up); it never waits
for the engine, whose state STATUS reports, so a host whose engine is down still boots.

Watchdog pings come from the daemon's main loop, and only while the sweep job still turns: a
sweep that hangs (or a scheduler that stopped starting them) withholds the pings, so systemd
kills and restarts Guardian after `WatchdogSec`. An unreachable engine is not a hang: the sweep
returns with an error, the loop turns, and restarting Guardian would not help. Nor is a restart
that waits for a container's stop timeout (up to 10 m by label): it extends the allowance.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import timedelta

from guardian.adapters.systemd import SystemdSupervisor
from guardian.config import Settings
from guardian.logs import kv

log = logging.getLogger("guardian.systemd")

MAX_TICK = 1.0  # a ping goes at most this long before half the watchdog timeout (seconds)


def stall_limit(settings: Settings) -> timedelta:
    """How long a sweep may run (or be missing) before it counts as stalled, restarts aside.

    Three intervals plus the longest engine call, for the watchdog and /healthz alike. A
    restart in progress adds its own stop timeout while it runs (SweepLiveness's
    `allowance`), so a container's `guardian.stop_timeout` never makes a legitimate restart
    look like a stall.
    """
    limit: timedelta = 3 * settings["watch.interval"] + settings["docker.timeout"]
    return limit


STARTING = "serving; looking for the docker engine"


class SweepLiveness:
    """Tracks the sweep job: alive while a sweep runs for less than `limit`, or ended within it.

    `allowance()` is extra time granted now: the longest stop timeout of the restarts running.

    A sweep that runs counts from its start, one that ended from its end: either way from the
    sweep job's last sign of progress, one monotonic reading. It is replaced by one assignment
    and read by one (the sweep job writes it, the main loop's tick and /healthz read it), so
    no lock: a reader sees the last start or end, never half of one.
    """

    def __init__(
        self,
        limit: timedelta,
        now: Callable[[], float] = time.monotonic,
        allowance: Callable[[], timedelta] = timedelta,
    ) -> None:
        self.limit = limit.total_seconds()
        self._now = now
        self._allowance = allowance
        self._progress = now()  # the first sweep starts at once; count from start-up

    def started(self) -> None:
        self._progress = self._now()

    def finished(self) -> None:
        self._progress = self._now()

    def set_limit(self, limit: timedelta) -> None:
        """A reload changed watch.interval: sweeps may now be that far apart."""
        self.limit = limit.total_seconds()

    def stalled_for(self) -> float:
        """Seconds since the sweep job last showed progress; compare with `limit`."""
        return self._now() - self._progress

    def limit_now(self) -> float:
        """Seconds the sweep may show no progress now: `limit` plus the allowance."""
        return self.limit + self._allowance().total_seconds()

    def alive(self) -> bool:
        """The one liveness rule, for the watchdog and for /healthz."""
        return self.stalled_for() <= self.limit_now()


class SupervisorLink:
    """The daemon's side of the conversation with systemd (a no-op outside systemd)."""

    def __init__(
        self,
        supervisor: SystemdSupervisor,
        liveness: SweepLiveness,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.supervisor = supervisor
        self.liveness = liveness
        self._now = now
        self._status = ""
        self._last_ping: float | None = None
        self._withholding = False

    @property
    def tick_interval(self) -> float:
        """How early before half the watchdog timeout a ping goes (a quarter of the timeout, at
        most 1 s), and how often a stalled sweep is looked at again while pings are withheld."""
        if self.supervisor.watchdog is None:
            return MAX_TICK
        return max(0.01, min(MAX_TICK, self.supervisor.watchdog.total_seconds() / 4))

    def next_tick_in(self) -> float | None:
        """Seconds the main loop may sleep before the next tick(): until the next ping falls
        due (None: no watchdog, so no timer). While pings are withheld, a tick_interval."""
        watchdog = self.supervisor.watchdog
        if watchdog is None:
            return None
        if self._withholding:
            return self.tick_interval
        if self._last_ping is None:
            return 0.0
        return max(0.0, self._last_ping + self._ping_every(watchdog) - self._now())

    def _ping_every(self, watchdog: timedelta) -> float:
        """A tick_interval before half the watchdog timeout (systemd's advice: half)."""
        return watchdog.total_seconds() / 2 - self.tick_interval

    def sweep_started(self) -> None:
        self.liveness.started()

    def serving(self, status: str) -> None:
        """READY=1: the store is open and the HTTP listener is up. STATUS is the latest sweep's
        if one has finished already, else `status`."""
        self._status = self._status or status
        self.supervisor.ready(self._status)
        log.debug("told systemd ready", extra=kv(status=self._status))

    def sweep_finished(self, status: str) -> None:
        """After each sweep, whatever its outcome: the loop turned; STATUS when it changed."""
        self.liveness.finished()
        if status != self._status:
            self._status = status
            self.supervisor.status(status)

    def reloading(self) -> None:
        self.supervisor.reloading()

    def reloaded(self) -> None:
        """The reload is over (applied or refused): READY=1 again, with the current STATUS."""
        self.supervisor.ready(self._status)

    def tick(self) -> None:
        """From the main loop: ping the watchdog every half timeout while the sweep is alive."""
        watchdog = self.supervisor.watchdog
        if watchdog is None:
            return
        now = self._now()
        if not self.liveness.alive():
            if not self._withholding:
                self._withholding = True
                stalled = self.liveness.stalled_for()
                log.error(
                    "sweep stalled; withholding watchdog pings so systemd restarts Guardian",
                    extra=kv(stalled_for=f"{stalled:.0f}s", limit=f"{self.liveness.limit:.0f}s"),
                )
                self.supervisor.status(f"sweep stalled for {stalled:.0f}s")
            return
        if self._withholding:
            self._withholding = False
            log.info("sweep alive again; watchdog pings resumed")
        # Called when next_tick_in() says, or sooner: ping a tick_interval before half the timeout.
        if self._last_ping is None or now - self._last_ping >= self._ping_every(watchdog):
            self._last_ping = now
            self.supervisor.ping()

    def stopping(self) -> None:
        self.supervisor.stopping()
