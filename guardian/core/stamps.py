"""Stamps read back from the store, against a wall clock that steps.

A stamp ahead of the clock was written before the clock stepped back (or by a clock that ran
ahead): it counts as now, so a step makes Guardian wait longer, never act sooner
(docs/design.md rule 12).
"""

from __future__ import annotations

from datetime import datetime


def no_later_than(stamp: datetime, now: datetime) -> datetime:
    """`stamp`, or `now` when the stamp lies ahead of it."""
    return min(stamp, now)


def ahead(stamp: datetime | None, now: datetime) -> bool:
    """Whether `stamp` lies ahead of the clock: the clock stepped back since it was written."""
    return stamp is not None and stamp > now
