"""The stream of facts in one process: publish() hands each fact to the subscribers in order,
on the publisher's thread. Subscribers are cheap; one that raises is logged and the others still
hear the fact, so no reader can stop the loop."""

from __future__ import annotations

import logging
from collections.abc import Callable

from guardian.core.facts import Fact
from guardian.logs import kv

log = logging.getLogger("guardian.facts")


class FactStream:
    """ports.Facts: subscribe() while wiring, before anything publishes."""

    def __init__(self) -> None:
        self._subscribers: tuple[Callable[[Fact], None], ...] = ()

    def subscribe(self, subscriber: Callable[[Fact], None]) -> None:
        self._subscribers = (*self._subscribers, subscriber)

    def publish(self, fact: Fact) -> None:
        for subscriber in self._subscribers:
            try:
                subscriber(fact)
            except Exception as exc:  # a reader's fault must never reach the loop
                log.exception(
                    "a reader failed on a fact",
                    extra=kv(fact=type(fact).__name__, reason=str(exc)),
                )
