"""What other processes wrote to the store (a `guardian` command: an acknowledgement, a silence,
an approval), told to readers as facts from the store's change feed (ports.Feed), so a person's
write from the CLI brings up to date only what it names, as the same write through the API does.

A look reads at most MAX_ROWS rows; a write it cannot attribute (a row of a kind that names no
record, or no container; more rows than that; rows retention forgot after the cursor; a write
the feed tells nothing of, such as `guardian check` counting an occurrence) is
StoreWrittenElsewhere: readers read everything again, as they did for every such write before.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from guardian.core.facts import FEED_WRITES, RecordWrittenElsewhere, StoreWrittenElsewhere
from guardian.logs import kv
from guardian.ports import FEED_NAME, Facts, Feed, FeedRow

log = logging.getLogger("guardian.elsewhere")

# Rows a look reads at most: a person's command writes one or two; a flood of commands between
# two looks costs one "read everything" rather than a fact per row.
MAX_ROWS = 100
ROLLBACK_REQUESTED = "rollback.requested"  # the feed's kind of a person's rollback request


def attributed(row: FeedRow) -> RecordWrittenElsewhere | None:
    """The fact a row tells, or None when it names no container's record a reader can read
    again alone (a kind not in FEED_WRITES; an empty, overlong or unprintable name: a control
    character, an escape sequence)."""
    name = row.container
    if row.kind.split(".", 1)[0] not in FEED_WRITES:
        return None
    if not 0 < len(name) <= FEED_NAME or not name.isprintable():
        return None
    return RecordWrittenElsewhere(name, row.incident, row.kind)


class Elsewhere:
    """Looks at the store's change feed for other processes' writes and publishes what they
    name; one look at a time (the daemon's store watch, or its sweep where there is none)."""

    def __init__(
        self,
        feed: Feed,
        facts: Facts,
        host: str,
        max_rows: int = MAX_ROWS,
        on_rollback: Callable[[], object] | None = None,
    ) -> None:
        """`on_rollback`: called when a person's rollback request may have been written (the
        loop then looks at the containers it names)."""
        self.feed = feed
        self.facts = facts
        self.host = host
        self.max_rows = max_rows
        self.on_rollback = on_rollback

    def look(self) -> bool:
        """Whether another process wrote the store since the last look; its writes are
        published: one fact per record named (in the order first written), or one
        StoreWrittenElsewhere. Raises StoreError (the next look tells what this one read as
        a write of anything)."""
        found = self.feed.written_elsewhere(self.host, self.max_rows)
        if not found.changed:
            return False
        told = [attributed(row) for row in found.rows]
        asked = not found.whole or any(row.kind == ROLLBACK_REQUESTED for row in found.rows)
        if asked and self.on_rollback is not None:
            self.on_rollback()
        if not found.whole or not told or None in told:
            log.debug(
                "store written elsewhere; read again whole",
                extra=kv(rows=len(found.rows), whole=found.whole),
            )
            self.facts.publish(StoreWrittenElsewhere())
            return True
        for fact in dict.fromkeys(told):  # each record once, in the order first written
            assert fact is not None
            self.facts.publish(fact)
        return True
