"""The one limiter of wrong credentials, on a fake monotonic clock: per client, an overall
limit that only slows, and never a refusal of the right token or of a client without failures."""

from __future__ import annotations

import logging

import pytest

from guardian.entrypoints.credential_limiter import CredentialLimiter


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def limiter(clock: Clock, per_client: int = 3, overall: int = 10) -> CredentialLimiter:
    return CredentialLimiter(per_client=per_client, overall=overall, window=60, now=clock)


def test_a_client_past_its_limit_waits_until_its_oldest_failure_leaves_the_window() -> None:
    clock = Clock()
    lim = limiter(clock)
    assert [lim.attempt("a", right=False) for _ in range(3)] == [0, 0, 0]
    clock.t += 20
    assert lim.attempt("a", right=False) == 40
    # Each refused guess counts too: a guesser that keeps going stays refused.
    for _ in range(2):
        clock.t += 10
        assert lim.attempt("a", right=False) > 0
    clock.t += 21  # past the first three; the refused ones of 41, 31 and 21 s ago still count
    assert lim.attempt("a", right=False) == 19
    clock.t += 61
    assert lim.failures("a") == 0
    assert lim.attempt("a", right=False) == 0


def test_the_right_token_is_never_refused_however_many_failures_came_before() -> None:
    clock = Clock()
    lim = limiter(clock)
    for _ in range(50):
        lim.attempt("a", right=False)
    assert lim.attempt("a", right=True) == 0
    assert lim.attempt("b", right=True) == 0


def test_the_overall_limit_never_refuses_a_client_without_failures_of_its_own() -> None:
    clock = Clock()
    lim = limiter(clock, per_client=5, overall=10)
    for client in ("a", "b", "c", "d", "e"):
        assert [lim.attempt(client, right=False) for _ in range(2)] == [0, 0]
    # Ten failures in the window: every client that already failed is refused at once...
    assert lim.attempt("a", right=False) > 0
    # ...a fresh one is answered as usual (403) the first time, then refused.
    assert lim.attempt("f", right=False) == 0
    assert lim.attempt("f", right=False) > 0
    assert lim.attempt("g", right=True) == 0


def test_clients_are_forgotten_after_the_window_and_memory_is_bounded() -> None:
    clock = Clock()
    lim = CredentialLimiter(per_client=3, overall=1000, window=60, now=clock, max_clients=5)
    for i in range(20):
        lim.attempt(f"10.0.0.{i}", right=False)
    assert len(lim._clients) == 5  # noqa: SLF001 - the bound is the point
    clock.t += 61
    lim.attempt("fresh", right=False)
    assert list(lim._clients) == ["fresh"]  # noqa: SLF001


def test_a_limited_client_is_logged_once_per_streak_not_once_per_guess(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    lim = limiter(clock)
    with caplog.at_level(logging.WARNING, logger="guardian.http"):
        for _ in range(50):
            lim.attempt("10.0.0.9", right=False)
        clock.t += 61
        for _ in range(4):
            lim.attempt("10.0.0.9", right=False)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["wrong credentials limited"] * 2


def test_a_full_table_of_clients_still_limits_a_new_client_and_never_refuses_the_right_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    lim = CredentialLimiter(per_client=10, overall=20, window=60, now=clock, max_clients=50)
    for i in range(60):
        assert lim.attempt(f"10.0.0.{i}", right=False) == 0
    with caplog.at_level(logging.WARNING, logger="guardian.http"):
        answers = [lim.attempt("10.9.9.9", right=False) for _ in range(11)]
    assert answers[0] == 0 and all(wait > 0 for wait in answers[1:]), answers
    assert [r.getMessage() for r in caplog.records] == ["wrong credentials limited"]
    assert lim.attempt("10.9.9.10", right=True) == 0
    # Room is made by forgetting the client whose latest failure is oldest.
    assert len(lim._clients) == 50  # noqa: SLF001 - the bound is the point
    assert "10.0.0.0" not in lim._clients and "10.9.9.9" in lim._clients  # noqa: SLF001


def test_a_full_table_refuses_a_guesser_past_its_own_limit_though_the_overall_is_slack() -> None:
    clock = Clock()
    lim = CredentialLimiter(per_client=10, overall=10_000, window=60, now=clock, max_clients=5)
    for i in range(5):
        lim.attempt(f"10.0.0.{i}", right=False)
    answers = [lim.attempt("10.9.9.9", right=False) for _ in range(11)]
    assert answers[:10] == [0] * 10 and answers[10] > 0, answers
