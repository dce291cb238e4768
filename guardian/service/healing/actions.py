"""The rows a decision leaves in the history (RemediationAction), and a held-back decision in
words: one shape for the restart path, its refusals and the followers' waves."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from guardian.core.model import ActionKind, Decision, Outcome, RemediationAction
from guardian.ports import Clock

ACTION_KEY = "action"  # a held-back decision's extra: the container's guardian.action
STOP_TIMEOUT_KEY = "stop_timeout"  # an intent's extra: the seconds the engine may wait to stop
# An intent's extra: the monotonic clock when it was written (Clock.monotonic, host-wide: a
# later run of Guardian on the same boot reads the same clock), so a later run tells how long
# ago a restart was asked whatever the wall clock did since.
MONOTONIC_KEY = "monotonic"
# A restart's outcomes that say its call never made the engine stop the container: refused
# (by the engine, a socket proxy, a connection refused), the container gone, never sent.
NOT_CARRIED_OUT = frozenset(
    {
        Outcome.POLICY_DENIED,
        Outcome.PERMANENT_FAILURE,
        Outcome.TRANSIENT_FAILURE,
        Outcome.WITHDRAWN,
    }
)


def stamped(clock: Clock) -> dict[str, str]:
    """An intent's extra for the monotonic clock's reading now (as it is written)."""
    return {MONOTONIC_KEY: f"{clock.monotonic():.6f}"}


def monotonic_of(action: RemediationAction) -> float | None:
    """The monotonic reading kept with `action`'s intent (None: none kept, or unreadable)."""
    try:
        return float(action.extra[MONOTONIC_KEY])
    except (KeyError, ValueError):
        return None


def held_back(decision: Decision) -> str:
    """Why a restart did not happen, for the history: the verdict, when it may, and why."""
    when = f"; retry at {decision.retry_at.isoformat()}" if decision.retry_at else ""
    why = f"; {decision.detail}" if decision.detail else ""
    return f"{decision.verdict}{when}{why}"


def action_row(
    host: str,
    incident_id: int | None,
    container: tuple[str, str],
    kind: ActionKind,
    now: datetime,
    reason: str,
    decision: Decision,
    outcome: Outcome | None = None,
    detail: str = "",
    extra: dict[str, str] | None = None,
) -> RemediationAction:
    """A row of the history about `container` (name, id); a decision row is finished now."""
    name, container_id = container
    return RemediationAction(
        None,
        incident_id,
        host,
        name,
        container_id,
        kind,
        now,
        reason,
        outcome=outcome,
        detail=detail,
        finished_at=now if kind is ActionKind.DECISION else None,
        attempt=decision.attempt,
        extra=extra or {},
    )


def restart_calls(
    actions: Sequence[RemediationAction], container_id: str, fallback: timedelta
) -> tuple[tuple[datetime, timedelta], ...]:
    """The restarts of the container of `container_id` among `actions` whose call may have
    stopped it (sent, or its outcome unknown): when each was asked, with its stop timeout
    (recorded with the intent; `fallback`, the operator's, when absent)."""
    calls = []
    for a in actions:
        if a.kind != ActionKind.RESTART or a.container_id != container_id:
            continue
        if a.outcome in NOT_CARRIED_OUT:
            continue
        calls.append((a.requested_at, stop_timeout_of(a, fallback)))
    return tuple(calls)


def stop_timeout_of(action: RemediationAction, fallback: timedelta) -> timedelta:
    """The stop timeout recorded with a restart's intent (how long the engine may take to
    stop the container); `fallback`, the operator's, when the row has none."""
    recorded = action.extra.get(STOP_TIMEOUT_KEY, "")
    return timedelta(seconds=int(recorded)) if recorded.isdigit() else fallback
