"""One container as the cache keeps it between inspects (docs/design.md rule 18): what an
inspect leaves in an entry, how an engine event changes it, and what makes it doubtful, so that
the engine must be asked again before anything is decided on it. Pure: every time is an
argument.

Only a health status is applied to an entry. Every other event changes something an entry cannot
follow from the event alone (a start: RestartCount, the start time, the health; a pause: the
state; an update: the restart policy or the memory limit; a rename: the name the loop keys
restarts by), so it makes the entry doubtful until the next inspect.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from guardian.core.model import ContainerSnapshot

# An event stamped less than the entry's margin after the inspect behind it may be older than
# what that inspect showed: the entry cannot tell whether it is news, so it is doubtful. One
# stamped the margin or more before the inspect was asked happened before it: what it did, the
# inspect shows (a stream replaying from before the inspect delivers such events). The margin is
# how far an engine stamp in Guardian's frame may be off (adapters.engine.engine_clock: the engine's
# Date answers bound it) and SLACK more; ORDER_MARGIN while nothing bounds it yet.
ORDER_MARGIN = timedelta(seconds=2)
SLACK = timedelta(milliseconds=250)
# What one entry keeps of a container's labels (hostile input, docs/design.md rule 9); beyond,
# the entry keeps none and stays doubtful: that container is inspected as before.
MAX_LABELS = 128
MAX_LABEL_CHARS = 16 * 1024
HEALTH_STATES = frozenset({"healthy", "unhealthy", "starting"})
# What Docker's health event carries besides the container's labels (the status as EngineEvent
# holds it): any other attribute is a label the entry does not hold.
HEALTH_EVENT_ATTRIBUTES = frozenset({"name", "image", "health_status"})
# Why an entry is doubtful (the reasons that are not an event's name).
NOT_INSPECTED = "never inspected"
LABELS_UNBOUNDED = "labels beyond the cache's bounds"


@dataclass(frozen=True)
class CacheEntry:
    """A container as its last inspect showed it, moved on by the health events since.

    `asked_at` and `answered_at`: when that inspect was asked and answered (Guardian's clock).
    `doubt`: why it must be inspected again before it is decided on; "" while it is fresh."""

    snapshot: ContainerSnapshot
    asked_at: datetime
    answered_at: datetime
    doubt: str = ""
    margin: timedelta = ORDER_MARGIN  # order_margin() when it was answered

    @property
    def fresh(self) -> bool:
        return not self.doubt

    @property
    def worth_reading(self) -> bool:
        """Whether an inspect could make it fresh (labels beyond the bounds stay beyond)."""
        return self.doubt != LABELS_UNBOUNDED

    def doubted(self, why: str) -> CacheEntry:
        """The entry, doubtful (the first reason stays)."""
        return self if self.doubt else replace(self, doubt=why)


def labels_bounded(labels: Mapping[str, str]) -> bool:
    """Whether an entry may keep these labels: at most MAX_LABELS, MAX_LABEL_CHARS in all."""
    if len(labels) > MAX_LABELS:
        return False
    return sum(len(k) + len(v) for k, v in labels.items()) <= MAX_LABEL_CHARS


def order_margin(uncertainty: timedelta | None) -> timedelta:
    """How close to an inspect an event cannot be ordered against it, when an engine stamp in
    Guardian's frame may be off by `uncertainty` (None: not known yet)."""
    return ORDER_MARGIN if uncertainty is None else max(uncertainty, timedelta(0)) + SLACK


def entry_of(
    snap: ContainerSnapshot,
    asked_at: datetime,
    answered_at: datetime,
    margin: timedelta = ORDER_MARGIN,
) -> CacheEntry:
    """The entry an inspect leaves: without what only the inspect's moment tells (the last
    probe's output and times: a later event's time stands for them, core.detection.checks.heard) or
    what no decision reads (command, mounts, pid); doubtful when it is no inspect or its labels are
    beyond the bounds (then it keeps none)."""
    kept = replace(
        snap,
        health_output="",
        health_log_at=None,
        unhealthy_since=None,
        unhealthy_by=None,
        pid=0,
        command=(),
        mounts=(),
    )
    entry = CacheEntry(kept, asked_at, answered_at, margin=margin)
    if not snap.inspected:
        return entry.doubted(NOT_INSPECTED)
    if not labels_bounded(snap.labels):
        return replace(entry, snapshot=replace(kept, labels={}), doubt=LABELS_UNBOUNDED)
    return entry


def applied(
    entry: CacheEntry, action: str, name: str, at: datetime, attributes: Mapping[str, str]
) -> CacheEntry | None:
    """The entry after one engine event about its container (Docker's names, as EngineEvent
    carries them); None: the container is gone."""
    if action == "destroy":
        return None
    if not entry.fresh or at <= entry.asked_at - entry.margin:
        return entry  # an event that far before the inspect was asked: the inspect shows it
    why = _doubt(entry, action, name, at, attributes)
    if why:
        return entry.doubted(why)
    snap = replace(entry.snapshot, health=attributes["health_status"])
    return replace(entry, snapshot=snap)


def _doubt(
    entry: CacheEntry, action: str, name: str, at: datetime, attributes: Mapping[str, str]
) -> str:
    """Why the event leaves the entry doubtful; "" when the entry takes it in."""
    snap = entry.snapshot
    if at < entry.answered_at + entry.margin:
        return f"{action[:40]} event close to the inspect"
    if action != "health_status":
        return f"{action[:40]} event"
    if attributes.get("health_status", "") not in HEALTH_STATES:
        return "health event without a known status"
    if snap.state != "running":
        return "health event while not running"
    if name != snap.name:
        return "health event under another name"
    # Docker's events carry the container's labels: they must be the entry's, all of them.
    if _labels(attributes) != _labels(snap.labels):
        return "health event with other labels"
    return ""


def _labels(attributes: Mapping[str, str]) -> dict[str, str]:
    """The labels as an event can show them (Docker's own attributes replace labels so named)."""
    return {k: v for k, v in attributes.items() if k not in HEALTH_EVENT_ATTRIBUTES}


def same_listing(snap: ContainerSnapshot, listed: ContainerSnapshot) -> bool:
    """Whether the list call shows the container as the entry holds it: its id, name, state,
    labels, and the health its status text shows (only while it runs)."""
    health = snap.health if snap.state == "running" else None
    return (
        snap.id == listed.id
        and snap.name == listed.name
        and snap.state == listed.state
        and health == listed.health
        and snap.labels == listed.labels
    )
