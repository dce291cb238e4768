"""Typed delivery outcomes and what the outbox does next: the same taxonomy as restarts.

Pure: channels classify a response into a Result, `next_state()` turns it into the row's next
state and time, `pick_batch()` chooses what one message to a channel carries.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from guardian.core.stamps import no_later_than


class Status(StrEnum):
    DELIVERED = "delivered"  # 2xx
    RATE_LIMITED = "rate_limited"  # 429: wait Retry-After (capped), then retry
    TRANSIENT = "transient"  # 5xx or not sent at all: retry with backoff
    PERMANENT = "permanent"  # 4xx such as invalid_payload, no_service: never retried
    UNKNOWN = "unknown"  # sent, no answer: resend only where the channel deduplicates


class RowState(StrEnum):
    PENDING = "pending"
    DELIVERED = "delivered"
    DEAD = "dead"  # dead letter: permanent failure or retries exhausted; kept and listed
    UNKNOWN = "unknown"  # outcome unknown on a channel without idempotency: never resent


@dataclass(frozen=True)
class Result:
    """What one send to one channel came to; `reason` is one line, without secrets."""

    status: Status
    reason: str = ""
    retry_after: timedelta | None = None

    @property
    def ok(self) -> bool:
        return self.status is Status.DELIVERED


DELIVERED = Result(Status.DELIVERED)


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5
    backoff: timedelta = timedelta(seconds=2)
    max_backoff: timedelta = timedelta(minutes=5)
    max_retry_after: timedelta = timedelta(minutes=5)

    @property
    def longest(self) -> timedelta:
        """The longest wait next_state() puts before a retry."""
        return max(self.max_backoff, self.max_retry_after)


@dataclass(frozen=True)
class Next:
    state: RowState
    at: datetime | None = None  # when to try again (PENDING only)


def next_state(
    result: Result, attempts: int, policy: RetryPolicy, idempotent: bool, now: datetime
) -> Next:
    """The row's state after its `attempts`-th send (1-based) came to `result`."""
    match result.status:
        case Status.DELIVERED:
            return Next(RowState.DELIVERED)
        case Status.PERMANENT:
            return Next(RowState.DEAD)
        case Status.UNKNOWN if not idempotent:
            return Next(RowState.UNKNOWN)
        case _:
            pass
    if attempts >= policy.max_attempts:
        return Next(RowState.DEAD)
    if result.status is Status.RATE_LIMITED:
        wait = min(result.retry_after or policy.backoff, policy.max_retry_after)
        return Next(RowState.PENDING, now + wait)
    wait = min(policy.backoff * (2 ** (attempts - 1)), policy.max_backoff)
    return Next(RowState.PENDING, now + wait)


@dataclass(frozen=True)
class Pending:
    """A pending delivery as the worker sees it (one row of one channel)."""

    row_id: int
    incident_id: int | None
    created_at: datetime
    due_at: datetime


def _heads(pending: list[Pending]) -> dict[object, Pending]:
    """The oldest pending row of each incident (a row without one stands alone)."""
    heads: dict[object, Pending] = {}
    for p in sorted(pending, key=lambda p: p.row_id):
        heads.setdefault(p.incident_id if p.incident_id is not None else ("row", p.row_id), p)
    return heads


def pick_batch(
    pending: list[Pending], group_wait: timedelta, max_batch: int, now: datetime
) -> list[Pending]:
    """The deliveries one message to a channel carries now (empty: nothing to send yet).

    Notifications of one incident go out in order, one per message; different incidents that
    arrive within `group_wait` of the oldest go out together (at most `max_batch`).
    """
    heads = _heads(pending)
    ready = [p for p in heads.values() if p.due_at <= now]
    # A notification stamped ahead of the clock (it stepped back since) was queued now.
    if not ready or min(no_later_than(p.created_at, now) for p in ready) + group_wait > now:
        return []  # nothing due, or the oldest still waits for its group to gather
    return ready[:max_batch]


def next_batch_at(
    pending: list[Pending], group_wait: timedelta, now: datetime | None = None
) -> datetime | None:
    """The first time `pick_batch()` chooses something from `pending` (None: nothing pending):
    the earliest head of an incident both due and past its group_wait. The worker sleeps until
    then instead of asking again and again. Given `now`, a notification stamped ahead of it
    counts as queued now, as in pick_batch()."""
    heads = _heads(pending)

    def queued(p: Pending) -> datetime:
        return p.created_at if now is None else no_later_than(p.created_at, now)

    return min((max(p.due_at, queued(p) + group_wait) for p in heads.values()), default=None)
