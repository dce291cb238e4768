"""Loop: what the entrypoints (the daemon, the watchdog, the commands) ask of the running loop,
so they need neither the loop's context nor its state's internals."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from guardian.service.state.state import LoopState


class Loop:
    """A small face of the LoopState parts for the entrypoints: what is running, pending or
    held; the event stream the container cache counts on; a step of the wall clock."""

    def __init__(self, state: LoopState, host: str, stepped: Callable[[timedelta], None]) -> None:
        self._state = state
        self.host = host
        # Told of a step of the wall clock, in order: the loop (Healer.follow_step: the store's
        # problem starts, the cache doubted), then what keeps wall stamps at an edge beside it
        # (also_stepped: the outbox's retry times).
        self._stepped = [stepped]

    def also_stepped(self, follow: Callable[[timedelta], None]) -> None:
        """`follow` keeps wall stamps of its own beside the loop (the delivery worker's outbox:
        its retry times): told of each step after the loop. At build time only."""
        self._stepped.append(follow)

    def follow_step(self, step: timedelta) -> None:
        """The wall clock stepped (service.watchers.clock_steps): the wall stamps kept at the
        store's edge move with it, so every duration keeps its length (those held in memory
        run on the monotonic clock)."""
        for follow in self._stepped:
            follow(step)

    def longest_stop(self) -> timedelta:
        """The longest stop timeout of the restarts running: extra time the loop may take."""
        return self._state.claims.longest_stop()

    def verifying(self) -> bool:
        """A restart awaits its verification's verdict."""
        return bool(self._state.verifications.pending())

    def approvals_awaited(self) -> dict[str, str]:
        """The containers whose restart waits for a person's approval: name -> id."""
        return self._state.approvals.awaited()

    def next_slot_waiter(self) -> str | None:
        """The id of the container held back longest for a restart slot, taken off the list."""
        return self._state.claims.next_slot_waiter()

    def leave_calls_to_engine(self) -> None:
        """Guardian stops: what restart calls still running return is not recorded."""
        self._state.claims.stop_recording()

    def follows_events(self, now: datetime) -> None:
        """The daemon follows the engine's events from `now`: what the loop inspects from then
        on may fill the container cache before the stream opens (it replays from then)."""
        self._state.cache.follow(now)

    def stream_opening(self, since: datetime | None, now: datetime) -> datetime:
        """An event stream opens: where the engine must replay it from (`since`, else from when
        the loop began to follow events), so that the container cache misses no event."""
        return self._state.cache.opening(since, now)

    def stream_lost(self) -> None:
        """The event stream is cut: the container cache's entries are doubtful until inspected
        again."""
        self._state.cache.lost()

    @property
    def engine_up(self) -> bool | None:
        return self._state.engine.up

    @property
    def watched(self) -> int:
        return self._state.engine.watched
