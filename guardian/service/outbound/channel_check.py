"""ChannelCheck: `guardian notify test` sends one marked test message through each channel now,
with the real transport, and says per channel whether it arrived, how, and how long it took.

The sends run side by side, so the check takes as long as the slowest channel, which each
channel's own timeout (notify.timeout) bounds. Nothing goes through the outbox: a test is
neither queued, retried nor recorded.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from guardian.core.outbound.delivery import Result, Status
from guardian.core.outbound.notifications import test_message
from guardian.core.redaction import Redactor
from guardian.ports import Clock, Notifier


@dataclass(frozen=True)
class ChannelReport:
    channel: str
    delivered: bool
    status: str  # a core.outbound.delivery.Status
    error: str  # one line, redacted ("" when delivered)
    seconds: float


class UnknownChannel(ValueError):
    """`--channel NAME` names no configured channel; the message lists those that are."""


class ChannelCheck:
    def __init__(
        self,
        channels: Sequence[Notifier],
        clock: Clock,
        host: str,
        redact: Redactor,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.channels = list(channels)
        self._clock = clock
        self._host = host
        self._redact = redact
        self._monotonic = monotonic

    def names(self) -> list[str]:
        return [c.name for c in self.channels]

    def run(self, only: str | None = None) -> list[ChannelReport]:
        """Send the test message to every channel (or the one named `only`), all at once."""
        chosen = [c for c in self.channels if only is None or c.name == only]
        if only is not None and not chosen:
            names = ", ".join(self.names()) or "none is configured"
            raise UnknownChannel(f"--channel {only[:60]!r}: no such channel; channels: {names}")
        reports: dict[str, ChannelReport] = {}
        threads = [
            threading.Thread(target=self._one, args=(c, reports), name=f"notify-test-{c.name}")
            for c in chosen
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return [reports[c.name] for c in chosen]

    def _one(self, channel: Notifier, reports: dict[str, ChannelReport]) -> None:
        message = test_message(self._host, channel.name, self._clock.now())
        started = self._monotonic()
        try:
            result = channel.send([message])
        except Exception as exc:  # noqa: BLE001 - a channel bug is this channel's failure
            result = Result(Status.TRANSIENT, f"channel error: {type(exc).__name__}")
        elapsed = self._monotonic() - started
        reports[channel.name] = ChannelReport(
            channel.name,
            result.ok,
            str(result.status),
            "" if result.ok else self._redact(result.reason),
            round(elapsed, 3),
        )
