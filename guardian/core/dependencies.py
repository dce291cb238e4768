"""The dependency graph of the watched containers, from their labels, built once per sweep.

`guardian.depends_on=db,cache` and Compose's `com.docker.compose.depends_on` name what a container
needs; `guardian.restart_with=db` names a container to follow after Guardian healed it. A name
is a container name, or a Compose service of the same project. Labels are hostile input: the
graph is built in O(containers + edges), and a cycle is reported, never followed.
"""

from __future__ import annotations

from collections.abc import Mapping

DEPENDS_ON = "guardian.depends_on"
RESTART_WITH = "guardian.restart_with"
COMPOSE_DEPENDS_ON = "com.docker.compose.depends_on"
COMPOSE_PROJECT = "com.docker.compose.project"
COMPOSE_SERVICE = "com.docker.compose.service"


def names(value: str | None) -> list[str]:
    """`db,cache` -> [db, cache]; Compose writes `db:service_healthy:false,cache:...`."""
    if not value:
        return []
    out: dict[str, None] = {}  # insertion-ordered set: linear in the label's length
    for part in value.split(","):
        name = part.strip().split(":", 1)[0].strip()
        if name:
            out[name] = None
    return list(out)


class DependencyGraph:
    """An immutable view of one sweep's containers (name -> labels): the edges are resolved,
    the act order computed and the cycles found once, when it is built."""

    def __init__(self, labels: Mapping[str, Mapping[str, str]] | None = None) -> None:
        self.labels: Mapping[str, Mapping[str, str]] = dict(labels or {})
        self._services: dict[tuple[str, str], list[str]] = {}
        for name in sorted(self.labels):
            lab = self.labels[name]
            project, service = lab.get(COMPOSE_PROJECT), lab.get(COMPOSE_SERVICE)
            if project and service:
                self._services.setdefault((project, service), []).append(name)
        self._needs = {
            name: self.resolve(
                name, names(lab.get(DEPENDS_ON)) + names(lab.get(COMPOSE_DEPENDS_ON))
            )
            for name, lab in self.labels.items()
        }
        self._followers: dict[str, list[str]] = {}
        for name in sorted(self.labels):
            for leader in self.resolve(name, names(self.labels[name].get(RESTART_WITH))):
                self._followers.setdefault(leader, []).append(name)
        self._component, components = _strong_components(self._needs)
        self._depth = _depths(self._needs, self._component, components)
        self.cycles: tuple[tuple[str, ...], ...] = tuple(
            sorted(tuple(sorted(c)) for c in components if len(c) > 1)
        )

    def resolve(self, of: str, refs: list[str]) -> list[str]:
        """A reference is a container name, or a Compose service of the same project."""
        project = self.labels.get(of, {}).get(COMPOSE_PROJECT)
        out: dict[str, None] = {}
        for ref in refs:
            if ref in self.labels:
                matches = [ref]
            else:
                matches = self._services.get((project, ref), []) if project else []
            out.update((m, None) for m in matches if m != of)
        return list(out)

    def depends_on(self, container: str) -> list[str]:
        return list(self._needs.get(container, ()))

    def followers(self, container: str) -> list[str]:
        """Containers that declared `guardian.restart_with` naming `container`."""
        return list(self._followers.get(container, ()))

    def depth(self, container: str) -> int:
        """0 without dependencies, else 1 + the deepest dependency outside its own cycle:
        containers of one cycle share a depth, so none of them orders the others."""
        return self._depth.get(container, 0)

    def same_cycle(self, a: str, b: str) -> bool:
        return a != b and a in self._component and self._component[a] == self._component.get(b)


def _strong_components(
    edges: Mapping[str, list[str]],
) -> tuple[dict[str, int], list[list[str]]]:
    """Tarjan's strongly connected components, iterative (a chain of 10,000 containers must not
    hit Python's recursion limit). Components come out dependencies first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    component: dict[str, int] = {}
    components: list[list[str]] = []
    for root in edges:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            targets = edges.get(node, [])
            if i < len(targets):
                work.append((node, i + 1))
                nxt = targets[i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                members = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component[member] = len(components)
                    members.append(member)
                    if member == node:
                        break
                components.append(members)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return component, components


def _depths(
    edges: Mapping[str, list[str]], component: Mapping[str, int], components: list[list[str]]
) -> dict[str, int]:
    """The longest chain of dependencies below each container, over the graph of components
    (Tarjan lists a component after every component it depends on)."""
    level = [0] * len(components)
    for c, members in enumerate(components):
        for member in members:
            for dep in edges.get(member, ()):
                d = component[dep]
                if d != c:
                    level[c] = max(level[c], level[d] + 1)
    return {name: level[c] for name, c in component.items()}
