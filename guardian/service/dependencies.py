"""Dependency-aware healing: while a dependency is unhealthy its dependents are not restarted
(decide() says `dependency_unhealthy`, naming the dependency's incident), and a sweep acts on
dependencies first. The graph comes from the containers the last sweep listed (core.dependencies);
`guardian.restart_with` followers are restarted by the Remediator.
"""

from __future__ import annotations

import threading

from guardian.core.assessment import Assessment
from guardian.core.dependencies import DependencyGraph
from guardian.core.model import HOST_PROBLEMS, OPEN_STATES, ContainerSnapshot, HealthCheckResult
from guardian.ports import Store
from guardian.service.state import LoopState


class Dependencies:
    def __init__(self, store: Store, state: LoopState, host: str) -> None:
        self.store = store
        self.state = state
        self.host = host
        self._lock = threading.Lock()
        self._graph = DependencyGraph()
        self._ids: dict[str, str] = {}  # container name -> id, from the last sweep
        # Containers seen with a problem and not yet seen healthy: covers the moment between
        # detection and the incident being written (a sweep decides for all before acting).
        self._problems: set[str] = set()

    @property
    def graph(self) -> DependencyGraph:
        with self._lock:
            return self._graph

    def follow(self, snapshots: list[ContainerSnapshot]) -> None:
        """The containers of the last sweep make the graph."""
        graph = DependencyGraph({s.name: s.labels for s in snapshots})
        with self._lock:
            self._graph = graph
            self._ids = {s.name: s.id for s in snapshots}

    def detected(self, result: HealthCheckResult) -> None:
        with self._lock:
            self._problems.add(result.container_name)

    def recovered(self, container: str) -> None:
        with self._lock:
            self._problems.discard(container)

    def assessed(self, rows: list[Assessment]) -> None:
        """A whole sweep at once: every problem counts before any container is acted on."""
        with self._lock:
            for row in rows:
                if row.result.problem is not None:
                    self._problems.add(row.snapshot.name)
                elif row.result.skipped is None:
                    self._problems.discard(row.snapshot.name)

    def act_order(self, container: str) -> int:
        """A sweep acts on lower keys first: a dependency before its dependents."""
        return self.graph.depth(container)

    def unhealthy(self, container: str) -> tuple[str, ...]:
        """Dependencies of `container` with an unresolved incident: 'db (incident 4)'."""
        graph = self.graph
        out = []
        for dep in graph.depends_on(container):
            for incident in self.store.open_incidents(self.host, dep):
                if incident.type not in HOST_PROBLEMS and incident.state in OPEN_STATES:
                    out.append(f"{dep} (incident {incident.id}, {incident.type})")
                    break
            else:
                if self.state.verifying(dep):
                    out.append(f"{dep} (restart being verified)")
                else:
                    with self._lock:
                        problem = dep in self._problems
                    if problem:
                        out.append(f"{dep} (unhealthy)")
        return tuple(out)

    def followers(self, leader: str) -> tuple[str, ...]:
        """Ids of the containers that declared `guardian.restart_with` naming `leader`."""
        graph = self.graph
        with self._lock:
            return tuple(self._ids[n] for n in graph.followers(leader) if n in self._ids)
