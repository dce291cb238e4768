"""Dependency-aware healing: while a dependency is unhealthy its dependents are not restarted
(decide() says `dependency_unhealthy`, naming the dependency's incident), and a sweep acts on
dependencies first. The graph comes from the containers the last sweep listed
(core.relations.dependencies) and the namespaces they joined (service.healing.namespaces); followers
(`guardian.restart_with`, or a `container:<leader>` namespace) are restarted by the Remediator.
Containers of one cycle hold none of each other back: a cycle is reported once and never blocks a
restart."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from guardian.core.assessment import Assessment
from guardian.core.model import (
    HOST_PROBLEMS,
    OPEN_STATES,
    HealthCheckResult,
)
from guardian.core.relations.dependencies import DependencyGraph
from guardian.logs import kv
from guardian.ports import Store
from guardian.service.healing.namespaces import Namespaces
from guardian.service.state.listing import Listed
from guardian.service.state.verifications import Verifications

log = logging.getLogger("guardian.dependencies")
SHOWN = 20  # names of a cycle written in its warning


@dataclass(frozen=True)
class _View:
    """What the last sweep listed, as one value: the graph and what it was made from."""

    graph: DependencyGraph = field(default_factory=DependencyGraph)
    labels: dict[str, dict[str, str]] = field(default_factory=dict)  # to rebuild the graph
    ids: dict[str, str] = field(default_factory=dict)  # container name -> id


class Dependencies:
    """No lock. The sweep alone makes a view (follow) and swaps it in with one assignment;
    readers take the reference once and read that one view. When an inspect taught a namespace
    the view lacks, followers() rebuilds the graph on its worker and leaves it beside the view
    it was made from (one assignment of a pair), taken only while that view is current; the
    namespaces keep what was taught until the next sweep's follow() builds it in, so a pair
    left stale by a sweep loses nothing. The containers with a problem are one set, added to
    and taken from one member at a time (atomic in CPython) by the judges on workers and the
    sweep; the cycles reported, the sweep's alone."""

    def __init__(
        self,
        store: Store,
        verifications: Verifications,
        host: str,
        namespaces: Namespaces | None = None,
    ) -> None:
        self.store = store
        self.verifications = verifications
        self.host = host
        self.namespaces = namespaces
        self._view = _View()
        # A graph rebuilt with what an inspect taught (followers()), and the view it was
        # rebuilt from: stale once follow() swaps another view in.
        self._learned: tuple[_View, DependencyGraph] | None = None
        # Containers seen with a problem and not yet seen healthy: covers the moment between
        # detection and the incident being written (a sweep decides for all before acting).
        self._problems: set[str] = set()
        self._cycles: frozenset[tuple[str, ...]] = frozenset()  # reported, still present (sweep)

    @property
    def graph(self) -> DependencyGraph:
        view, learned = self._view, self._learned
        return learned[1] if learned is not None and learned[0] is view else view.graph

    def follow(self, seen: Listed) -> None:
        """The containers of the last sweep make the graph (the same ones, the same graph,
        unless an inspect told of a namespace the graph does not have)."""
        ns = self.namespaces
        if not seen.changed and (ns is None or not ns.told_more()):
            return
        snapshots = seen.watched
        labels = {s.name: s.labels for s in snapshots}
        shared = self.namespaces.follow(snapshots) if self.namespaces is not None else {}
        graph = DependencyGraph(labels, shared)
        self._view = _View(graph, labels, {s.name: s.id for s in snapshots})
        fresh = [c for c in graph.cycles if c not in self._cycles]
        self._cycles = frozenset(graph.cycles)
        for cycle in fresh:
            shown = ",".join(cycle[:SHOWN]) + (
                f" (and {len(cycle) - SHOWN} more)" if len(cycle) > SHOWN else ""
            )
            log.warning(
                "dependency cycle: these containers do not order or hold back one another",
                extra=kv(containers=len(cycle), cycle=shown),
            )

    def detected(self, result: HealthCheckResult) -> None:
        self._problems.add(result.container_name)

    def recovered(self, container: str) -> None:
        self._problems.discard(container)

    def assessed(self, rows: list[Assessment]) -> None:
        """A whole sweep at once: every problem counts before any container is acted on."""
        problems = [row.snapshot.name for row in rows if row.result.problem is not None]
        self._problems.update(problems)
        if len(self._problems) == len(problems):
            return  # none counted but this sweep's own: no healthy look ends one
        for row in rows:
            if row.result.problem is None and row.result.skipped is None:
                self._problems.discard(row.snapshot.name)

    def act_order(self, container: str) -> int:
        """A sweep acts on lower keys first: a dependency before its dependents."""
        return self.graph.depth(container)

    def unhealthy(self, container: str) -> tuple[str, ...]:
        """Dependencies of `container` with an unresolved incident: 'db (incident 4)'."""
        graph = self.graph
        out = []
        for dep in graph.depends_on(container):
            if graph.same_cycle(container, dep):
                continue  # waiting on each other would hold both back for ever
            for incident in self.store.open_incidents(self.host, dep):
                if incident.type not in HOST_PROBLEMS and incident.state in OPEN_STATES:
                    out.append(f"{dep} (incident {incident.id}, {incident.type})")
                    break
            else:
                if self.verifications.verifying(dep):
                    out.append(f"{dep} (restart being verified)")
                elif dep in self._problems:
                    out.append(f"{dep} (unhealthy)")
        return tuple(out)

    def followers(self, leader: str, root: str) -> tuple[tuple[str, str], ...]:
        """(id, why) of the containers to restart now that `leader` is healthy again, in the
        wave that `root`'s healing began (core.relations.dependencies.followers_after), dependencies
        first. An orphan (its leader removed) is never among them: no restart can fix it."""
        view, learned = self._view, self._learned
        shared = self.namespaces.learned() if self.namespaces is not None else None
        if shared is not None:
            graph = DependencyGraph(view.labels, shared)
            self._learned = (view, graph)
        elif learned is not None and learned[0] is view:
            graph = learned[1]
        else:
            graph = view.graph
        found = [
            (view.ids[n], via) for n, via in graph.followers_after(root, leader) if n in view.ids
        ]
        ns = self.namespaces
        return tuple((cid, via) for cid, via in found if ns is None or not ns.orphaned(cid))
