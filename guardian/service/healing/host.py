"""Host-level incidents: the storm breaker and an unreachable engine.

A storm is many counted containers (storm.count) turning unhealthy within a short window: a
shared cause is likelier than many sick containers, so one host incident is opened with one
notification, and decide() holds the containers that made it for `storm.hold`, then lets one
canary through: healed, restarts resume within the budget; not healed, the hold doubles (to
`storm.max_hold`) and the incident escalates once. Any other counted container is a bystander,
held one cooldown at most: whoever can start containers can make a storm. An acknowledgement
releases the hold at once.

The storm's window and hold and how long the engine has been unreachable run on the monotonic
clock; the wall clock only says them to people and to decide() (docs/design.md rule 12).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection
from dataclasses import replace
from datetime import datetime, timedelta

from guardian.core import incidents
from guardian.core.assessment import Assessment
from guardian.core.durations import format_duration, format_elapsed
from guardian.core.model import (
    HOST_SUBJECT,
    ContainerSnapshot,
    HealthCheckResult,
    Incident,
    IncidentState,
    Outcome,
    ProblemType,
)
from guardian.core.outbound import notifications
from guardian.core.stamps import Reading
from guardian.core.storm import StormHold, StormSettings, counts, next_hold, storm_size
from guardian.logs import kv
from guardian.ports import Clock, EngineEvent, Store
from guardian.service.healing.recorder import save_logged
from guardian.service.state.listing import Listed

log = logging.getLogger("guardian.host")


Announce = Callable[[str, Incident], None]


def log_notification(event: str, incident: Incident) -> None:
    """A log line for each notification queued (in the outbox) for a host incident."""
    log.warning(
        "notification",
        extra=kv(event=event, incident=incident.id, type=incident.type, detail=incident.detail),
    )


class HostWatch:
    """Opens and resolves host-level incidents from what the healer observes."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        host: str,
        storm: StormSettings,
        engine_timeout: timedelta,
        lock: threading.RLock,
        announce: Announce = log_notification,
    ) -> None:
        self.store = store
        self.clock = clock
        self.host = host
        self.settings = storm
        self.engine_timeout = engine_timeout
        self.announce = announce
        # The host lock (LoopState.lock), not one of its own: the storm's hold and canary are
        # what decide() reads of the host beside the restarts claimed, and its canary is set
        # with the claim under that lock, so no second canary is let through meanwhile.
        self._lock = lock
        self._watched: set[str] = set()  # the containers the storm counts (storm.count)
        # Moments of the monotonic clock, as every time held here.
        self._unhealthy: dict[str, float] = {}  # container -> first detection of this episode
        self._engine_down_since: float | None = None
        # The hold of the open storm (its incident id, length, end) and its canary in flight.
        self._storm_id: int | None = None
        self._hold = storm.hold
        self._hold_until: float | None = None
        self._canary: str | None = None
        self._failed_canary: str | None = None
        # When the storm opened (or was held afresh) and the containers that made it (unhealthy
        # within storm.window of then); any other counted container is a bystander.
        self._opened: float | None = None
        self._window = storm.window.total_seconds()
        self._members: frozenset[str] = frozenset()
        # Event threads and the sweep may judge at once: one opening per incident.
        self._judging = threading.Lock()

    def _clocks(self) -> Reading:
        return Reading(self.clock.now(), self.clock.monotonic())

    # -- storm ------------------------------------------------------------------------------

    def storm_holds(self, snap: ContainerSnapshot) -> StormHold | None:
        """The hold of an open storm nobody acknowledged on `snap` (an input to decide()), else
        None: no such storm, or a container storm.count leaves out (never held)."""
        if not counts(snap.labels, self.settings):
            return None
        incident = self.store.current_incident(self.host, HOST_SUBJECT, ProblemType.STORM)
        if incident is None or incident.state is not IncidentState.ACTIVE:
            return None
        clocks = self._clocks()
        with self._lock:
            if self._storm_id != incident.id or self._hold_until is None:
                # Opened by an earlier process: hold afresh from now rather than guess what that
                # process decided; the first sweep finds the containers it held.
                hold = self.settings.max_hold if incident.escalated else self.settings.hold
                self._begin_hold(incident.id, hold, clocks.mono)
                self._own((), clocks.mono)
            assert self._hold_until is not None and self._opened is not None
            bystander = self._bystander(snap.name, clocks.mono)
            return StormHold(
                clocks.wall_of(self._hold_until),
                self._canary,
                self._failed_canary,
                clocks.wall_of(bystander) if bystander is not None else None,
            )

    def _bystander(self, container: str, now: float) -> float | None:
        """None for one of the storm's own: unhealthy within storm.window of its opening, before
        or after (a shared cause fails containers over a few health checks). Else since when a
        bystander is held: its detection (now, for a problem not recorded yet: the judgement
        that records it), or the opening if later (call under the lock; monotonic)."""
        assert self._opened is not None
        if container in self._members:
            return None
        detected = self._unhealthy.get(container, now)
        if abs(detected - self._opened) <= self._window:
            return None
        return max(self._opened, detected)

    def _begin_hold(self, incident_id: int | None, hold: timedelta, now: float) -> None:
        self._storm_id, self._hold = incident_id, hold
        self._hold_until = now + hold.total_seconds()
        self._canary = self._failed_canary = None

    def _own(self, members: Collection[str], opened: float) -> None:
        """The storm opened at `opened`, made by `members` (they stay its own if they recover
        and fail again) and whoever turns unhealthy within storm.window (call under the lock)."""
        self._members, self._opened = frozenset(members), opened

    def canary_claimed(self, container: str) -> None:
        """decide() let `container` through as the storm's canary (called under the host lock,
        with the claim, so no second canary is let through meanwhile)."""
        with self._lock:
            self._canary = container
        log.warning("storm: restarting one container as a canary", extra=kv(container=container))

    def restart_ended(self, container: str, outcome: str) -> None:
        """A restart's final outcome: for the canary, release the storm or lengthen its hold."""
        with self._lock:
            if container != self._canary:
                return
            self._canary = None
        if outcome == Outcome.WITHDRAWN:
            return  # never sent, so it tells nothing of the storm: the next decision tries
        healed = outcome in (Outcome.SUCCEEDED, Outcome.UNKNOWN)
        with self._judging:
            current = self.store.current_incident(self.host, HOST_SUBJECT, ProblemType.STORM)
            if current is None or current.state is not IncidentState.ACTIVE:
                return  # acknowledged or over meanwhile: the canary changes nothing
            clocks = self._clocks()
            if healed:
                self._canary_healed(current, container, clocks.wall)
            else:
                self._canary_failed(current, container, outcome, clocks)

    def _canary_healed(self, storm: Incident, container: str, now: datetime) -> None:
        reason = f"canary {container} healthy after restart: restarts resume within the budget"
        change = incidents.start_remediation(storm, reason, now)
        note = notifications.storm_canary(change.incident, container, True, reason, now)
        self._save(change, note)
        log.warning("storm: canary healed, restarts resume", extra=kv(canary=container))

    def _canary_failed(
        self, storm: Incident, container: str, outcome: str, clocks: Reading
    ) -> None:
        now = clocks.wall
        with self._lock:
            self._begin_hold(storm.id, next_hold(self._hold, self.settings), clocks.mono)
            self._failed_canary = container
            hold, until = self._hold, self._hold_until
        assert until is not None
        next_canary = clocks.wall_of(until).isoformat(timespec="seconds")
        detail = (
            f"canary {container} not healed ({outcome}): restarts held for "
            f"{format_duration(hold)}, next canary at {next_canary}"
        )
        log.error("storm: canary not healed, hold doubled", extra=kv(canary=container, hold=hold))
        if storm.escalated:
            return  # escalated once already; reminders follow at notify.repeat_interval
        change = incidents.escalate(storm)
        note = notifications.storm_canary(change.incident, container, False, detail, now)
        self._save(change, note)

    def storm_speaks_for(self, container: str) -> bool:
        """True while a storm incident is open, acknowledged or not, that speaks for the
        incident `container` opens: one it counts and that made it. A bystander's incident is
        told as any other, or a storm anyone can make would mute the host's other containers."""
        incident = self.store.current_incident(self.host, HOST_SUBJECT, ProblemType.STORM)
        if incident is None or not incident.is_open:
            return False
        with self._lock:
            if not self._counted(container):
                return False
            if self._storm_id != incident.id or self._opened is None:
                return True  # opened before this process and not held since: as it was
            return self._bystander(container, self.clock.monotonic()) is None

    def follow(self, seen: Listed) -> None:
        """Keep the last sweep's counted containers (storm.count): a storm's size is a share of
        them."""
        with self._lock:
            if seen.changed:  # the same ones count the same
                self._watched = {s.name for s in seen.watched if counts(s.labels, self.settings)}
            for gone in set(self._unhealthy) - self._watched:
                del self._unhealthy[gone]

    def assessed(self, rows: list[Assessment]) -> None:
        """A whole sweep at once: count every problem before any container is acted on."""
        clocks = self._clocks()
        for row in rows:
            if row.result.problem is not None:
                self._detected(row.snapshot.name, clocks.mono_of(row.result.observed_at), False)
        with self._lock:
            # A healthy look ends its container's count; with none counted (an idle host) there
            # is nothing to end, and the rows are not walked again.
            if self._unhealthy:
                for row in rows:
                    if row.result.problem is None and row.result.skipped is None:
                        self._unhealthy.pop(row.snapshot.name, None)
        self._check(self.clock.monotonic())

    def detected(self, result: HealthCheckResult) -> None:
        self._detected(result.container_name, self._clocks().mono_of(result.observed_at))

    def on_event(self, event: EngineEvent) -> None:
        """An unhealthy health event is counted on the event stream's thread, before any
        reaction to it is scheduled: a reaction that decides without an inspect (the container
        cache) still finds every unhealthy event read before it, as a sweep counts its whole
        list before acting. Judging whether that makes a storm stays the reaction's (no store
        read on the stream's thread). Only a container the last sweep found counted: the event
        comes before the look that tells whether Guardian watches it."""
        if event.action != "health_status" or event.attributes.get("health_status") != "unhealthy":
            return
        at = self._clocks().mono_of(event.at)  # the event's time, in Guardian's frame
        with self._lock:
            if event.container_name in self._watched:
                self._unhealthy.setdefault(event.container_name, at)

    def _detected(self, container: str, at: float, check: bool = True) -> None:
        with self._lock:
            if not self._counted(container):
                return
            self._unhealthy.setdefault(container, at)
        if check:
            self._check(at)

    def _counted(self, container: str) -> bool:
        """Whether storm.count counts `container` (call under the lock). Without a selector,
        every watched container, one not yet listed by a sweep too; with one, those the last
        sweep found matching (a detection carries no labels)."""
        return not self.settings.count or container in self._watched

    def recovered(self, container: str, check: bool = True) -> None:
        with self._lock:
            was_unhealthy = self._unhealthy.pop(container, None) is not None
        if check and was_unhealthy:
            self._check(self.clock.monotonic())

    def _check(self, at: float) -> None:
        with self._judging:
            self._check_locked(at)

    def _check_locked(self, at: float) -> None:
        with self._lock:
            watched = max(len(self._watched), len(self._unhealthy))
            unhealthy = sorted(self._unhealthy)
            recent = sorted(n for n, t in self._unhealthy.items() if at - t <= self._window)
        need = storm_size(watched, self.settings)
        # The window is judged at the detection's time (`at`); the incident records when it was
        # judged (a storm is in force from then on, whatever the detection's own timestamp).
        clocks = self._clocks()
        now = clocks.wall
        current = self.store.current_incident(self.host, HOST_SUBJECT, ProblemType.STORM)
        if current is not None and current.is_open:
            if len(unhealthy) < need:
                reason = (
                    f"host recovered: {len(unhealthy)} of {watched} watched containers unhealthy"
                )
                change = incidents.record_recovery(current, reason, now)
                self._save(change, notifications.resolved(change.incident, reason, now))
                log.warning("storm over", extra=kv(unhealthy=len(unhealthy), watched=watched))
            return
        if len(recent) < need:
            return
        window = int(self.settings.window.total_seconds())
        counted = f" matching storm.count {self.settings.count}" if self.settings.count else ""
        detail = (
            f"{len(recent)} of {watched} watched containers{counted} unhealthy within {window}s: "
            + ", ".join(recent[:20])
        )
        result = HealthCheckResult("", HOST_SUBJECT, now, ProblemType.STORM, detail, source="host")
        change = incidents.record_detection(current, self.host, result, now)
        hold = self.settings.hold
        next_step = (
            f"restarts held for {format_duration(hold)}, then one container is restarted as a "
            "canary; acknowledge the incident to release them now"
        )
        note = replace(notifications.opened(change.incident, None, now), next_step=next_step)
        incident = self._save(change, note)
        with self._lock:
            self._begin_hold(incident.id, hold, clocks.mono)
            self._own(recent, clocks.mono)
        # Openings still waiting in the outbox (notify.group_wait) are withdrawn: the storm's
        # one notification names those containers.
        withdrawn = self.store.withdraw_unsent(self.host)
        log.error(
            "storm: holding per-container restarts",
            extra=kv(
                incident=incident.id, unhealthy=len(recent), watched=watched, withdrawn=withdrawn
            ),
        )
        self.announce("storm_opened", incident)

    # -- engine -----------------------------------------------------------------------------

    def engine_state(self, up: bool, error: str) -> None:
        """Open `engine_unreachable` after docker.timeout without an answer; resolve on answer."""
        with self._judging:
            self._engine_state_locked(up, error)

    def _engine_state_locked(self, up: bool, error: str) -> None:
        clocks = self._clocks()
        now = clocks.wall
        current = self.store.current_incident(
            self.host, HOST_SUBJECT, ProblemType.ENGINE_UNREACHABLE
        )
        if up:
            down_since, self._engine_down_since = self._engine_down_since, None
            if current is not None and current.is_open:
                # The outage began before the incident opened (docker.timeout earlier).
                began = (
                    clocks.wall_of(down_since)
                    if down_since is not None
                    else current.opened_at - self.engine_timeout
                )
                reason = (
                    f"docker engine answers again after {format_elapsed(now - began)} "
                    f"unreachable (since {began.isoformat(timespec='seconds')})"
                )
                change = incidents.record_recovery(current, reason, now)
                incident = self._save(change, notifications.resolved(change.incident, reason, now))
                self.announce("engine_reachable", incident)
            return
        if self._engine_down_since is None:
            self._engine_down_since = clocks.mono
        down = timedelta(seconds=clocks.mono - self._engine_down_since)
        if down < self.engine_timeout or (current is not None and current.is_open):
            return
        since = clocks.wall_of(self._engine_down_since)
        result = HealthCheckResult(
            "",
            HOST_SUBJECT,
            now,
            ProblemType.ENGINE_UNREACHABLE,
            f"docker engine unreachable since {since.isoformat(timespec='seconds')} "
            f"({format_elapsed(now - since)} when this incident opened): {error[:200]}",
            source="host",
        )
        change = incidents.record_detection(current, self.host, result, now)
        incident = self._save(change, notifications.opened(change.incident, None, now))
        log.error("docker engine unreachable: host incident opened", extra=kv(incident=incident.id))
        self.announce("engine_unreachable", incident)

    def _save(
        self, change: incidents.IncidentChange, note: notifications.Notification | None = None
    ) -> Incident:
        """Write the incident and its notification (into the outbox) in one transaction."""
        return save_logged(self.store, change, (note,) if note is not None else ())
