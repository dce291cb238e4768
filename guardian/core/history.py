"""A host's last day as the store remembers it, per container: the spans a problem or a
silence lasted, the actions taken, and when Guardian itself ran (the status page's strip).
Plain frozen values, read in one go for every container.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import IntEnum

RUN_MARK = "run:"  # a run's mark in the store: `run:<its first sweep>`, kept at its latest


class Shade(IntEnum):
    """What a span of time was for a container, by how much it matters: a slot shows the
    worst (highest) it saw."""

    HEALTHY = 0
    UNKNOWN = 1  # Guardian was not running for most of it
    MAINTENANCE = 2  # a silence or a maintenance window held it
    STOPPED = 3
    UNHEALTHY = 4  # unhealthy or failing (any problem but a stop)

    @property
    def word(self) -> str:
        return "unknown (Guardian not running)" if self is Shade.UNKNOWN else self.name.lower()


@dataclass(frozen=True)
class Span:
    """`shade` from `start` until `end` (None: still)."""

    shade: Shade
    start: datetime
    end: datetime | None
    incident: int | None = None  # the incident it is, if any


@dataclass(frozen=True)
class Mark:
    """An action on a container at `at`: a restart, a stop, a recreate, with its outcome."""

    kind: str
    at: datetime
    outcome: str | None  # None: not known yet


@dataclass(frozen=True)
class ContainerHistory:
    spans: tuple[Span, ...] = ()
    marks: tuple[Mark, ...] = ()  # oldest first


@dataclass(frozen=True)
class History:
    """What the store holds of the containers of one host since a time: each container's spans
    and marks by name (those with none are absent), and Guardian's runs as (first sweep, last
    sweep), oldest first."""

    containers: dict[str, ContainerHistory] = field(default_factory=dict)
    runs: tuple[tuple[datetime, datetime], ...] = ()
