"""Whether a restart healed: the judgement of one pending verification from a fresh snapshot.

A restart is `succeeded` only when the container is observed healthy (or, without a healthcheck,
running and stable) within verify_timeout. Nothing is reported healed otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from guardian.core.durations import format_elapsed
from guardian.core.model import ContainerSnapshot, Outcome

# Without a healthcheck, "healed" means running without a restart for this long.
STABLE_FOR = timedelta(seconds=10)


@dataclass(frozen=True)
class PendingVerify:
    """A restart Guardian requested (or found unfinished at start-up), awaiting its verdict."""

    action_id: int
    incident_id: int | None
    container: str
    container_id: str
    restarted_at: datetime
    deadline: datetime
    previous_started_at: datetime | None
    attempt: int = 0
    max_attempts: int = 0
    # Found at start-up: Guardian stopped while the engine still waited out the container's
    # stop timeout. No restart seen by the deadline means it never happened (interrupted).
    left_to_engine: bool = False
    # A follower's restart: the container whose healing began the wave ("" otherwise). Once
    # healthy, its own followers are restarted in that wave.
    after: str = ""


# The detail of an `unknown` verdict: the container was seen healthy, the restart not confirmed
# (no start since the request). The verdict is reached: unlike an unknown call's outcome (sent,
# no answer), it is not verified again (Store.unanswered_restarts).
UNCONFIRMED = "observed healthy, but the restart was not confirmed"


def restarted(p: PendingVerify, snap: ContainerSnapshot) -> bool:
    """Whether the snapshot shows a start after the restart was requested."""
    if snap.started_at is None:
        return False
    if p.previous_started_at is not None:
        return snap.started_at > p.previous_started_at
    # Clocks of engine and Guardian may differ slightly; a second of slack is plenty.
    return snap.started_at >= p.restarted_at - timedelta(seconds=1)


def awaiting_first_check(p: PendingVerify, snap: ContainerSnapshot, now: datetime) -> bool:
    """No verdict yet, whatever else an inspect would show: the container runs and its health
    check has not answered since its start (`starting`), and the deadline is ahead. The list
    call's summary tells this as well as an inspect does."""
    return snap.state == "running" and snap.health == "starting" and now < p.deadline


def judge(
    p: PendingVerify, snap: ContainerSnapshot, now: datetime, timeout: timedelta
) -> Outcome | None:
    """Outcome of a pending verification, or None to keep watching."""
    if awaiting_first_check(p, snap, now):
        return None
    did_restart = restarted(p, snap)
    if snap.state in ("exited", "dead") and did_restart:
        return Outcome.UNHEALTHY_AFTER_RESTART
    if snap.state == "running":
        if snap.health == "healthy":
            return Outcome.SUCCEEDED if did_restart else Outcome.UNKNOWN
        if snap.health == "unhealthy" and did_restart:
            # Docker resets health to "starting" on restart: unhealthy now is a fresh failure.
            return Outcome.UNHEALTHY_AFTER_RESTART
        stable = snap.started_at is not None and now - snap.started_at >= min(STABLE_FOR, timeout)
        if snap.health is None and did_restart and stable:
            return Outcome.SUCCEEDED
    if now >= p.deadline:
        if p.left_to_engine and not did_restart:
            return Outcome.INTERRUPTED
        return Outcome.UNHEALTHY_AFTER_RESTART
    return None


def verdict_detail(
    outcome: Outcome, snap: ContainerSnapshot, p: PendingVerify, now: datetime
) -> str:
    """What the verification saw, and when, for the action's record and its notification."""
    if outcome is Outcome.SUCCEEDED:
        return f"observed {snap.health or 'running and stable'} after restart"
    if outcome is Outcome.UNKNOWN:
        return UNCONFIRMED
    if outcome is Outcome.INTERRUPTED:
        return (
            "Guardian stopped mid-restart; the container did not restart within its stop"
            f" timeout and verify_timeout (state={snap.state} health={snap.health or 'none'})"
        )
    seen = f"(state={snap.state} health={snap.health or 'none'})"
    after = f"{format_elapsed(now - p.restarted_at)} after the restart"
    if now < p.deadline:
        # Judged before verify_timeout: it failed again, it did not run out of time.
        what = "exited" if snap.state in ("exited", "dead") else snap.health or snap.state
        return f"{what} {after} {seen}"
    return f"not healthy within verify_timeout ({after}) {seen}"
