"""Dependency-aware healing: while a dependency is unhealthy its dependents are not restarted
(decide() says `dependency_unhealthy`, naming the dependency's incident), and a sweep acts on
dependencies first. The graph comes from the containers the last sweep listed
(core.relations.dependencies) and the namespaces they joined (service.healing.namespaces); followers
(`guardian.restart_with`, or a `container:<leader>` namespace) are restarted by the Remediator.
Containers of one cycle hold none of each other back: a cycle is reported once and never blocks a
restart."""

from __future__ import annotations

import logging
import threading

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


class Dependencies:
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
        self._lock = threading.Lock()
        self._graph = DependencyGraph()
        self._labels: dict[str, dict[str, str]] = {}  # the last sweep's, to rebuild the graph
        self._ids: dict[str, str] = {}  # container name -> id, from the last sweep
        # Containers seen with a problem and not yet seen healthy: covers the moment between
        # detection and the incident being written (a sweep decides for all before acting).
        self._problems: set[str] = set()
        self._cycles: frozenset[tuple[str, ...]] = frozenset()  # reported, still present

    @property
    def graph(self) -> DependencyGraph:
        with self._lock:
            return self._graph

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
        with self._lock:
            self._graph = graph
            self._labels = labels
            self._ids = {s.name: s.id for s in snapshots}
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
        with self._lock:
            self._problems.add(result.container_name)

    def recovered(self, container: str) -> None:
        with self._lock:
            self._problems.discard(container)

    def assessed(self, rows: list[Assessment]) -> None:
        """A whole sweep at once: every problem counts before any container is acted on."""
        problems = [row.snapshot.name for row in rows if row.result.problem is not None]
        with self._lock:
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
                else:
                    with self._lock:
                        problem = dep in self._problems
                    if problem:
                        out.append(f"{dep} (unhealthy)")
        return tuple(out)

    def followers(self, leader: str, root: str) -> tuple[tuple[str, str], ...]:
        """(id, why) of the containers to restart now that `leader` is healthy again, in the
        wave that `root`'s healing began (core.relations.dependencies.followers_after), dependencies
        first. An orphan (its leader removed) is never among them: no restart can fix it."""
        shared = self.namespaces.learned() if self.namespaces is not None else None
        with self._lock:
            if shared is not None:
                self._graph = DependencyGraph(self._labels, shared)
            graph = self._graph
            found = [
                (self._ids[n], via)
                for n, via in graph.followers_after(root, leader)
                if n in self._ids
            ]
        ns = self.namespaces
        return tuple((cid, via) for cid, via in found if ns is None or not ns.orphaned(cid))
