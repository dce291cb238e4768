"""The delivery taxonomy and batching rules of core.outbound.delivery, table-driven."""

from __future__ import annotations

from datetime import timedelta

import pytest

from guardian.core.outbound.delivery import (
    Pending,
    Result,
    RetryPolicy,
    RowState,
    Status,
    next_state,
    pick_batch,
)
from tests.fakes import T0

S = timedelta(seconds=1)
POLICY = RetryPolicy(max_attempts=3, backoff=2 * S, max_backoff=5 * S, max_retry_after=10 * S)


@pytest.mark.parametrize(
    ("result", "attempts", "idempotent", "state", "wait"),
    [
        (Result(Status.DELIVERED), 1, False, RowState.DELIVERED, None),
        (Result(Status.PERMANENT, "404 no_service"), 1, True, RowState.DEAD, None),
        (Result(Status.TRANSIENT, "500"), 1, False, RowState.PENDING, 2 * S),
        (Result(Status.TRANSIENT, "500"), 2, False, RowState.PENDING, 4 * S),
        (Result(Status.TRANSIENT, "500"), 3, False, RowState.DEAD, None),
        (Result(Status.RATE_LIMITED, "429", 2 * S), 1, False, RowState.PENDING, 2 * S),
        (Result(Status.RATE_LIMITED, "429", 600 * S), 1, False, RowState.PENDING, 10 * S),
        (Result(Status.RATE_LIMITED, "429"), 1, False, RowState.PENDING, 2 * S),
        (Result(Status.UNKNOWN, "timeout"), 1, False, RowState.UNKNOWN, None),
        (Result(Status.UNKNOWN, "timeout"), 1, True, RowState.PENDING, 2 * S),
        (Result(Status.UNKNOWN, "timeout"), 3, True, RowState.DEAD, None),
    ],
)
def test_next_state_follows_the_delivery_taxonomy(result, attempts, idempotent, state, wait):
    nxt = next_state(result, attempts, POLICY, idempotent, T0)
    assert nxt.state is state
    assert nxt.at == (T0 + wait if wait is not None else None)


def test_backoff_is_capped():
    nxt = next_state(Result(Status.TRANSIENT), 2, RetryPolicy(10, 4 * S, 5 * S), False, T0)
    assert nxt.at == T0 + 5 * S


def p(row: int, incident: int, created: float, due: float | None = None) -> Pending:
    return Pending(row, incident, T0 + created * S, T0 + (created if due is None else due) * S)


def test_a_burst_waits_for_group_wait_then_goes_out_together():
    burst = [p(i, i, i * 0.05) for i in range(1, 21)]
    assert pick_batch(burst, 10 * S, 50, T0 + 9 * S) == []
    assert [x.row_id for x in pick_batch(burst, 10 * S, 50, T0 + 10.05 * S)] == list(range(1, 21))


def test_one_incident_goes_out_in_order_one_event_per_message():
    rows = [p(1, 7, 0), p(2, 7, 1), p(3, 8, 1)]
    assert [x.row_id for x in pick_batch(rows, 0 * S, 50, T0 + 2 * S)] == [1, 3]


def test_a_retry_that_is_not_due_holds_back_later_events_of_its_incident():
    rows = [p(1, 7, 0, due=30), p(2, 7, 1)]
    assert pick_batch(rows, 0 * S, 50, T0 + 5 * S) == []


def test_max_batch_limits_a_message():
    rows = [p(i, i, 0) for i in range(1, 6)]
    assert len(pick_batch(rows, 0 * S, 1, T0)) == 1
