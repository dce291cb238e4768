"""The live streams' slots (`page.streams`) shared out: some kept for signed sessions, and
anonymous readers capped per client address, so neither a crowd nor one address leaves an
operator without a live page."""

from __future__ import annotations

import math
from dataclasses import dataclass


class StreamRefused(Exception):
    """No slot for one more live stream: str() says whose share is full."""


@dataclass(frozen=True)
class StreamSlot:
    """A live stream's slot, given back once with StreamSlots.release."""

    signed: bool
    client: str


class StreamSlots:
    """The live streams' slots (`page.streams`) shared out. A signed session's stream may take
    any free slot; anonymous readers (public reads) may hold at most `total - kept_for_signed`,
    and one client address at most `per_address` of those, so neither a crowd nor one address
    leaves an operator without a live page. No lock of its own: its one user, the Feed, claims
    and releases under the lock that keeps the streams these slots count."""

    def __init__(self, total: int, kept_for_signed: int = 0, per_address: int | None = None):
        self.total = total
        self.anonymous_share = max(0, total - kept_for_signed)
        self.per_address = min(per_address or total, self.anonymous_share)
        self._open = 0
        self._anonymous = 0
        self._by_address: dict[str, int] = {}  # anonymous streams held per client address

    @classmethod
    def shared(cls, total: int, signing_in: bool, per_address: int | None) -> StreamSlots:
        """The shares Guardian keeps: a quarter of the slots (at least one) for signed sessions
        while someone can sign in, the rest for anonymous readers, `per_address` of those
        (None: any number) to one address."""
        return cls(total, max(1, math.ceil(total / 4)) if signing_in else 0, per_address)

    @property
    def open(self) -> int:
        return self._open

    def claim(self, signed: bool, client: str) -> StreamSlot:
        """A slot for one more stream from `client`; StreamRefused when its share is full."""
        if self._open >= self.total:
            raise StreamRefused(f"{self.total} live pages are open already (page.streams)")
        if not signed:
            if self._anonymous >= self.anonymous_share:
                raise StreamRefused(
                    f"the live pages anyone may open ({self.anonymous_share} of "
                    f"{self.total}) are open already; the rest are kept for signed sessions"
                )
            if self._by_address.get(client, 0) >= self.per_address:
                raise StreamRefused(
                    f"this address holds {self.per_address} live pages already "
                    "(page.streams_per_address)"
                )
            self._anonymous += 1
            self._by_address[client] = self._by_address.get(client, 0) + 1
        self._open += 1
        return StreamSlot(signed, client)

    def release(self, slot: StreamSlot) -> None:
        self._open -= 1
        if not slot.signed:
            self._anonymous -= 1
            held = self._by_address.pop(slot.client) - 1
            if held:
                self._by_address[slot.client] = held
