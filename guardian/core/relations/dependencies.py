"""The dependency graph of the watched containers, from their labels, built once per sweep.

`guardian.depends_on=db,cache` and Compose's `com.docker.compose.depends_on` name what a container
needs; `guardian.restart_with=db` names a container to follow after Guardian healed it, and so
does a namespace joined from it (`--network container:db`, core.relations.namespaces). A name is a
container name, or a Compose service of the same project. Labels are hostile input: the graph is
built in O(containers + edges), and a cycle is reported, never followed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence

DEPENDS_ON = "guardian.depends_on"
RESTART_WITH = "guardian.restart_with"
RESTART_WITH_VIA = "restart_with"  # a follower by label, not by a namespace
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

    def __init__(
        self,
        labels: Mapping[str, Mapping[str, str]] | None = None,
        namespaces: Mapping[str, Sequence[tuple[str, str]]] | None = None,
    ) -> None:
        """`namespaces`: follower name -> (leader name, kind) for each namespace it joined."""
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
        # leader -> follower -> why it follows ("restart_with", or the namespaces: "network,pid")
        self._followers: dict[str, dict[str, str]] = {}
        for name in sorted(self.labels):
            for leader in self.resolve(name, names(self.labels[name].get(RESTART_WITH))):
                self._followers.setdefault(leader, {})[name] = RESTART_WITH_VIA
        for name in sorted(namespaces or {}):
            for leader, kind in (namespaces or {})[name]:
                if leader == name or leader not in self.labels or name not in self.labels:
                    continue
                # A follower needs its leader: not restarted on its own while the leader is
                # unhealthy or being verified (its restart as a follower comes after).
                if leader not in self._needs[name]:
                    self._needs[name].append(leader)
                vias = self._followers.setdefault(leader, {})
                was = vias.get(name, "")
                if was != RESTART_WITH_VIA and kind not in was.split(","):
                    vias[name] = f"{was},{kind}" if was else kind
        self._component, components = _strong_components(self._needs)
        self._depth = _depths(self._needs, self._component, components)
        self._waves: dict[str, dict[str, list[str]]] = {}  # root -> leader -> followers
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
        """Containers that follow `container` (`guardian.restart_with`, or a namespace joined
        from it), dependencies first."""
        return [name for name, _ in self.followers_after(container, container)]

    def via(self, leader: str, follower: str) -> str:
        """Why `follower` follows `leader`: "restart_with", or the namespaces ("network,pid")."""
        return self._followers.get(leader, {}).get(follower, "")

    def followers_after(self, root: str, leader: str) -> list[tuple[str, str]]:
        """(follower, why) restarted once `leader` is healthy again, in a wave that began with
        `root`'s healing: a follower of a follower (`--network container:app`, where app joined
        vpn's) waits for the one it joined. Every container is in a wave once, after the first
        leader that reaches it, and `root` never: a chain or a cycle ends."""
        return [(name, self.via(leader, name)) for name in self._wave(root).get(leader, ())]

    def _wave(self, root: str) -> dict[str, list[str]]:
        """Breadth first from `root` over the follower edges: leader -> the followers that wait
        for it. Linear in the graph; memoized, as the graph is immutable."""
        known = self._waves.get(root)
        if known is not None:
            return known
        seen = {root}
        wave: dict[str, list[str]] = {}
        todo = deque([root])
        while todo:
            leader = todo.popleft()
            nxt = self._followers.get(leader, {})
            for name in sorted(nxt, key=lambda n: (self.depth(n), n)):
                if name not in seen:
                    seen.add(name)
                    wave.setdefault(leader, []).append(name)
                    todo.append(name)
        self._waves[root] = wave
        return wave

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
