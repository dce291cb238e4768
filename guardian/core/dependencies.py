"""The dependency graph of the watched containers, from their labels.

`guardian.depends_on=db,cache` and Compose's `com.docker.compose.depends_on` name what a container
needs; `guardian.restart_with=db` names a container to follow after Guardian healed it. A name
is a container name, or a Compose service of the same project.
"""

from __future__ import annotations

from collections.abc import Mapping

DEPENDS_ON = "guardian.depends_on"
RESTART_WITH = "guardian.restart_with"
COMPOSE_DEPENDS_ON = "com.docker.compose.depends_on"
COMPOSE_PROJECT = "com.docker.compose.project"
COMPOSE_SERVICE = "com.docker.compose.service"
MAX_DEPTH = 10


def names(value: str | None) -> list[str]:
    """`db,cache` -> [db, cache]; Compose writes `db:service_healthy:false,cache:...`."""
    if not value:
        return []
    out = []
    for part in value.split(","):
        name = part.strip().split(":", 1)[0].strip()
        if name and name not in out:
            out.append(name)
    return out


class DependencyGraph:
    """An immutable view of one sweep's containers (name -> labels)."""

    def __init__(self, labels: Mapping[str, Mapping[str, str]] | None = None) -> None:
        self.labels: Mapping[str, Mapping[str, str]] = dict(labels or {})

    def resolve(self, of: str, refs: list[str]) -> list[str]:
        """A reference is a container name, or a Compose service of the same project."""
        project = self.labels.get(of, {}).get(COMPOSE_PROJECT)
        out: list[str] = []
        for ref in refs:
            if ref in self.labels:
                matches = [ref]
            else:
                matches = sorted(
                    n
                    for n, lab in self.labels.items()
                    if project
                    and lab.get(COMPOSE_PROJECT) == project
                    and lab.get(COMPOSE_SERVICE) == ref
                )
            out += [m for m in matches if m != of and m not in out]
        return out

    def depends_on(self, container: str) -> list[str]:
        labels = self.labels.get(container, {})
        refs = names(labels.get(DEPENDS_ON)) + names(labels.get(COMPOSE_DEPENDS_ON))
        return self.resolve(container, refs)

    def followers(self, container: str) -> list[str]:
        """Containers that declared `guardian.restart_with` naming `container`."""
        return sorted(
            name
            for name, labels in self.labels.items()
            if container in self.resolve(name, names(labels.get(RESTART_WITH)))
        )

    def depth(self, container: str, seen: frozenset[str] = frozenset()) -> int:
        """0 without dependencies, else 1 + the deepest dependency (cycles cut)."""
        deps = [d for d in self.depends_on(container) if d not in seen]
        if not deps or len(seen) > MAX_DEPTH:
            return 0
        return 1 + max(self.depth(d, seen | {container}) for d in deps)
