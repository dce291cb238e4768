"""Who hears what: named receivers, routes by what happened, its severity and the container, a
default, and a container's own `guardian.notify=<receiver names>` label.

Pure. Routes are tried in order; a route matches when every condition it states holds; its
receivers hear the notification, and unless it says `continue`, no later route is tried and the
container's receivers are not added. When no route matched (or every matching route said
`continue`), the container's receivers hear it: those its label names, else notify.default.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from guardian.core.outbound.notifications import Kind, Notification


def severity(n: Notification) -> str:
    """critical: Guardian gave up, or the incident is escalated (its reminders, its
    acknowledgement and its resolution too, so the pager that was paged hears the end);
    info: a resolution or acknowledgement of any other incident, a start-up; warning: the rest."""
    if n.escalated or n.kind in (Kind.GAVE_UP, Kind.REMINDER):
        return "critical"
    if n.kind in (Kind.RESOLVED, Kind.ACKNOWLEDGED, Kind.STARTED, Kind.TEST):
        return "info"
    return "warning"


@dataclass(frozen=True)
class Route:
    receivers: tuple[str, ...]
    kinds: frozenset[str] = frozenset()  # empty: any
    severities: frozenset[str] = frozenset()  # empty: any
    containers: tuple[str, ...] = ()  # shell patterns (web-*); empty: any
    proceed: bool = False  # `continue: true`: later routes and the container's receivers too

    def matches(self, n: Notification) -> bool:
        if self.kinds and str(n.kind) not in self.kinds:
            return False
        if self.severities and severity(n) not in self.severities:
            return False
        return not self.containers or any(fnmatchcase(n.container, p) for p in self.containers)


def route_of(entry: Mapping[str, Any]) -> Route:
    """A route as notify.routes holds it (config.receivers.parse_routes)."""
    return Route(
        tuple(entry["receivers"]),
        frozenset(entry["kinds"]),
        frozenset(entry["severity"]),
        tuple(entry["containers"]),
        bool(entry["continue"]),
    )


@dataclass(frozen=True)
class Routing:
    """`receivers`: each receiver's name with the channels that deliver for it (an Apprise
    receiver may hold several URLs), in the order they were configured."""

    receivers: Mapping[str, tuple[str, ...]]
    routes: tuple[Route, ...] = ()
    default: tuple[str, ...] = ()  # empty: every receiver

    def unknown(self, names: Sequence[str]) -> list[str]:
        return [name for name in names if name not in self.receivers]

    def receivers_of(self, n: Notification) -> list[str]:
        """The receivers that hear `n`, each once, in the order routes name them."""
        chosen: list[str] = []
        own = True
        for route in self.routes:
            if route.matches(n):
                chosen += route.receivers
                if not route.proceed:
                    own = False
                    break
        if own:
            named = [r for r in (n.receivers or ()) if r in self.receivers]
            chosen += named or list(self.default or self.receivers)
        return list(dict.fromkeys(chosen))

    def channels_of(self, n: Notification) -> list[str]:
        """The channels (ports.Notifier names) that deliver `n`."""
        return [c for r in self.receivers_of(n) for c in self.receivers.get(r, ())]
