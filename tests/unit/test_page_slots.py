"""The live streams' shares: a quarter kept for signed sessions, anonymous readers capped in
all and per client address."""

from __future__ import annotations

import pytest

from guardian.entrypoints.page.slots import StreamRefused, StreamSlots


@pytest.mark.parametrize(
    ("total", "signing_in", "per_address", "kept", "anonymous", "one_address"),
    [
        (8, True, 3, 2, 6, 3),  # the defaults
        (1, True, 3, 1, 0, 0),  # the one stream is an operator's
        (2, True, 3, 1, 1, 1),
        (5, True, 3, 2, 3, 3),  # a quarter, rounded up
        (64, True, 3, 16, 48, 3),
        (8, False, 3, 0, 8, 3),  # nobody can sign in: nothing to keep
        (8, True, None, 2, 6, 6),
        (8, True, 64, 2, 6, 6),  # never more than the anonymous share
    ],
)
def test_stream_slots_keep_a_quarter_for_signed_sessions_and_cap_each_address(
    total, signing_in, per_address, kept, anonymous, one_address
):
    slots = StreamSlots.shared(total, signing_in, per_address)
    assert total - slots.anonymous_share == kept
    assert slots.anonymous_share == anonymous and slots.per_address == one_address


def test_anonymous_streams_never_take_the_signed_share_nor_one_address_every_slot():
    slots = StreamSlots.shared(8, signing_in=True, per_address=3)
    mine = [slots.claim(False, "10.0.0.1") for _ in range(3)]
    with pytest.raises(StreamRefused, match="this address holds 3"):
        slots.claim(False, "10.0.0.1")
    theirs = [slots.claim(False, f"10.0.0.{n}") for n in (2, 3, 4)]
    with pytest.raises(StreamRefused, match="kept for signed sessions"):
        slots.claim(False, "10.0.0.5")
    signed = [slots.claim(True, "10.0.0.1") for _ in range(2)]
    with pytest.raises(StreamRefused, match=r"\(page\.streams\)"):
        slots.claim(True, "10.0.0.6")
    assert slots.open == 8
    slots.release(mine.pop())
    slots.claim(False, "10.0.0.1")  # its slot, free again
    for slot in mine + theirs + signed:
        slots.release(slot)
    assert slots.open == 1
