"""A container's condition as the status page's row says it: the one thing that matters now
(healthy; unhealthy for 3 min; restarting; stopped; in maintenance until 03:00; and a held-back
restart's reason), from the same status `guardian status` shows. Pure: time is an argument.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from guardian.core.history import Shade
from guardian.core.model import IncidentState
from guardian.readside.status import ContainerStatus

STOPPED = frozenset({"exited", "dead", "created", "removing"})
# What a condition paints the strip's current slot (the rest: healthy).
LIVE = {
    "unhealthy": Shade.UNHEALTHY,
    "failing": Shade.UNHEALTHY,
    "stopped": Shade.STOPPED,
    "maintenance": Shade.MAINTENANCE,
}
MINUTE = timedelta(minutes=1)


def lasted(since: datetime, now: datetime) -> tuple[str, datetime]:
    """How long since `since`, in words (whole minutes, hours or days), and when the words
    change next."""
    gone = max(now - since, timedelta(0))
    minutes = int(gone / MINUTE)
    if minutes < 1:
        return "under a minute", since + MINUTE
    if minutes < 60:
        return f"{minutes} min", since + (minutes + 1) * MINUTE
    if minutes < 48 * 60:
        hours, rest = divmod(minutes, 60)
        words = f"{hours} h {rest} min" if rest else f"{hours} h"
        return words, since + (minutes + 1) * MINUTE
    days = minutes // (24 * 60)
    return f"{days} days", since + (days + 1) * timedelta(days=1)


def _state(
    c: ContainerStatus, windows: list[dict[str, Any]], now: datetime
) -> tuple[str, str, datetime | None]:
    """(the shade, the words, when the clock alone changes the words) before a hold."""
    in_force = [w["in_force_until"] for w in windows if w["in_force_until"]]
    if in_force:
        until = datetime.fromisoformat(min(in_force)).astimezone(UTC)
        return "maintenance", f"in maintenance until {until:%H:%M} UTC", None
    problems = [i for i in c.incidents if i.is_open]
    if c.state == "restarting" or any(i.state is IncidentState.IN_PROGRESS for i in problems):
        return "restarting", "restarting", None
    if c.state in STOPPED:
        return "stopped", "stopped" if c.state != "created" else "created, not started", None
    if c.state != "running":
        return c.state, c.state, None  # paused
    if c.health == "unhealthy" or problems:
        shade = "unhealthy" if c.health == "unhealthy" else "failing"
        if not problems:
            return shade, shade, None
        first = min(problems, key=lambda i: i.began)
        words, changes = lasted(first.began, now)
        what = shade if c.health == "unhealthy" else f"failing ({first.type})"
        return shade, f"{what} for {words}", changes
    if c.health == "starting":
        return "starting", "starting", None
    if c.health == "healthy":
        return "healthy", "healthy", None
    return "running", "running, no health check", None


def condition(
    c: ContainerStatus, windows: list[dict[str, Any]], now: datetime
) -> tuple[str, str, datetime | None]:
    """(its shade: a word for the colour and the strip, the phrase, when the clock alone
    changes the phrase; None: never). `windows`: its maintenance windows as shown."""
    shade, words, changes = _state(c, windows, now)
    if c.held_back:
        words += f"; held back ({c.held_back})"
    for note in c.notes:
        words += f"; {note}"
    return shade, words, changes
