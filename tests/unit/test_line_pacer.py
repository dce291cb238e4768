"""LinePacer: one line per client per period on a monotonic clock, the held-back lines counted
into the next one, and a bounded table of clients."""

from __future__ import annotations

from guardian.runtime.line_pacer import LinePacer
from tests.fakes import FakeClock


def test_one_line_a_period_per_client_and_the_next_says_how_many_were_held() -> None:
    clock = FakeClock()
    pacer = LinePacer(period=60, now=clock.monotonic)
    assert [pacer.admit("a") for _ in range(5)] == [0, None, None, None, None]
    assert pacer.admit("b") == 0
    clock.tick(59.9)
    assert pacer.admit("a") is None
    clock.tick(0.1)
    assert pacer.admit("a") == 5
    assert pacer.admit("a") is None
    clock.tick(60)
    assert pacer.admit("a") == 1
    assert pacer.admit("b") == 0  # nothing held back for b


def test_the_table_forgets_the_client_whose_line_is_oldest() -> None:
    clock = FakeClock()
    pacer = LinePacer(period=60, max_clients=3, now=clock.monotonic)
    for client in ("a", "b", "c"):
        assert pacer.admit(client) == 0
        clock.tick(1)
    assert pacer.admit("b") is None  # counted, but b's last line is still its first
    assert pacer.admit("d") == 0  # a, the oldest line, is forgotten
    assert pacer.admit("b") is None and pacer.admit("c") is None
    assert pacer.admit("a") == 0  # a new client again: its own line
    assert pacer.admit("b") == 0  # b was oldest when a came back: forgotten with what it held
    for n in range(10_000):
        pacer.admit(f"10.0.{n // 256}.{n % 256}")
    assert len(pacer) == 3
