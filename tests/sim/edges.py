"""The edges of Guardian under simulation other than the engine, each failing when the seed
says: the store's disk (a real SQLite database whose writes fail while it is full) and the
notification channel (the Notifier port, answering from the simulation's dice).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from guardian.adapters.sqlite.db import Database
from guardian.core.outbound.delivery import DELIVERED, Result, Status
from guardian.ports import StoreError


@dataclass
class Disk:
    """The store's disk: while `full`, every write transaction fails as on a full disk."""

    full: bool = False


class FillingDatabase(Database):
    """A real SQLite database whose writes fail while its disk is full."""

    def __init__(self, path: Path, disk: Disk) -> None:
        self.disk = disk
        super().__init__(path)

    @contextmanager
    def transaction(self) -> Iterator[object]:  # type: ignore[override]
        if self.disk.full:
            raise StoreError(f"store {self.path}: database or disk is full")
        with super().transaction() as conn:
            yield conn


@dataclass
class Channel:
    """A notification channel (the Notifier port) that answers from the simulation's dice:
    mostly delivered; sometimes a 5xx, a 429, a 4xx, or no answer after sending."""

    rng: random.Random
    name: str = "sim"
    idempotent: bool = False
    max_batch: int = 50
    min_interval: timedelta = timedelta(0)
    down: int = 0  # the next sends that fail (a channel outage)
    sent: int = 0

    def send(self, batch: object) -> Result:
        self.sent += 1
        if self.down > 0:
            self.down -= 1
            return Result(Status.TRANSIENT, "503 (simulated outage)")
        roll = self.rng.random()
        if roll < 0.04:
            return Result(Status.TRANSIENT, "502 (simulated)")
        if roll < 0.06:
            return Result(Status.RATE_LIMITED, "429 (simulated)", timedelta(seconds=30))
        if roll < 0.07:
            return Result(Status.PERMANENT, "400 invalid_payload (simulated)")
        if roll < 0.08:
            return Result(Status.UNKNOWN, "timed out after sending (simulated)")
        return DELIVERED
