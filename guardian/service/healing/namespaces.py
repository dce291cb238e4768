"""Namespace followers and orphans, from HostConfig's `container:<leader>` modes.

The list call tells each container's NetworkMode; PidMode and IpcMode come from the inspects the
loop does anyway (a candidate, an exit, a verification), kept for the container's life: its
HostConfig never changes. A pid follower dies with its leader, so its exit's inspect tells; an
ipc-only follower never inspected is not known. A follower whose leader no longer exists is an
orphan: a report-only `orphaned_namespace` problem.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta

from guardian.core.model import ContainerSnapshot, HealthCheckResult, ProblemType
from guardian.core.relations.namespaces import Shared, orphan_detail, shared
from guardian.logs import kv
from guardian.ports import Engine, EngineEvent, EngineUnavailable

log = logging.getLogger("guardian.namespaces")
# A leader Guardian does not list (not watched) is looked up once, and again after this long in
# case its `destroy` event was missed (a reconnect of the event stream).
RECHECK = timedelta(minutes=10)
# Results an orphan's problem replaces: a healthy look or an unhealthy one (its own health check
# fails without the network), or an exit its leader's end caused (a pid follower is killed).
_ORPHAN_OVER = frozenset({None, "stopped_by_signal", "exit_code_ignored"})


class Namespaces:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._lock = threading.Lock()
        self._full: dict[str, tuple[Shared, ...]] = {}  # container id -> every namespace, inspected
        self._network: dict[str, tuple[Shared, ...]] = {}  # container id -> from the list
        self._names: dict[str, str] = {}  # listed container id -> name
        self._by_ref: dict[str, str] = {}  # listed container id or name -> name
        self._unlisted: dict[str, datetime] = {}  # leader ids found outside the list -> when
        self._gone: set[str] = set()  # leader ids found removed (ids are never reused)
        self._warned: set[str] = set()  # container ids whose refused modes were logged
        self._learned = False  # an inspect told more since the edges were last given

    # -- what the loop tells --------------------------------------------------------------------

    def follow(self, snapshots: list[ContainerSnapshot]) -> dict[str, list[tuple[str, str]]]:
        """The containers of a sweep: remember their modes and return the namespace edges
        (follower name -> (leader name, kind)) among them."""
        learned = {s.id: self._parse(s) for s in snapshots}
        with self._lock:
            self._names = {s.id: s.name for s in snapshots}
            self._by_ref = {**self._names, **{s.name: s.name for s in snapshots}}
            self._network = {cid: joined for cid, joined in learned.items() if joined}
            for cid in set(self._full) - set(self._names):
                del self._full[cid]
            self._warned &= set(self._names)
            referenced = {j.leader for cid in self._names for j in self._joined(cid)}
            self._gone &= referenced
            for leader in set(self._unlisted) - referenced:
                del self._unlisted[leader]
            self._learned = False
            return self._edges()

    def told_more(self) -> bool:
        """Whether an inspect told more since the edges were last given (learned() gives them)."""
        with self._lock:
            return self._learned

    def learned(self) -> dict[str, list[tuple[str, str]]] | None:
        """The namespace edges again when an inspect told more since a sweep last took them (a
        pid follower's exit, inspected after the sweep listed it); None when nothing changed.
        Only follow() says they were taken: the next sweep builds its graph with them, whoever
        asked here meanwhile."""
        with self._lock:
            return self._edges() if self._learned else None

    def judge(self, snap: ContainerSnapshot, result: HealthCheckResult) -> HealthCheckResult:
        """A judge of the loop: learn the inspected modes, and turn a follower whose leader no
        longer exists into `orphaned_namespace`."""
        joined = self._parse(snap)
        if snap.inspected:
            with self._lock:
                if snap.id in self._names and self._full.get(snap.id) != joined:
                    self._learned = True  # an edge the sweep's graph does not have yet
                self._full[snap.id] = joined
        if result.skipped not in _ORPHAN_OVER or not joined:
            return result
        gone = [j for j in joined if not self._exists(j.leader, result.observed_at)]
        if not gone:
            return result
        return HealthCheckResult(
            snap.id,
            snap.name,
            result.observed_at,
            ProblemType.ORPHANED_NAMESPACE,
            orphan_detail(gone, snap.labels),
            source=result.source,
        )

    def on_event(self, event: EngineEvent) -> None:
        if event.action == "destroy":
            with self._lock:
                if self._unlisted.pop(event.container_id, None) is not None:
                    self._gone.add(event.container_id)

    # -- what the followers rule asks ---------------------------------------------------------

    def orphaned(self, container_id: str) -> bool:
        """A leader of this listed container is known removed."""
        with self._lock:
            return any(j.leader in self._gone for j in self._joined(container_id))

    def relatives(self, name: str) -> tuple[tuple[str, ...], dict[str, str]]:
        """What a recreate of `name` needs to know (core.escalation.recreate.build): the names
        of the listed containers that joined its namespaces, and the listed ones' names by id
        (its own leaders named by name: a recreated leader gets a new id)."""
        with self._lock:
            joined = tuple(
                sorted(
                    f
                    for f, leaders in self._edges().items()
                    if any(leader == name for leader, _ in leaders)
                )
            )
            return joined, dict(self._names)

    # -- inside ------------------------------------------------------------------------------

    def _parse(self, snap: ContainerSnapshot) -> tuple[Shared, ...]:
        joined, refused = shared(snap.id, snap.namespaces)
        if refused:
            with self._lock:
                warn = snap.id not in self._warned
                self._warned.add(snap.id)
            if warn:
                log.warning(
                    "namespace mode refused: not followed",
                    extra=kv(container=snap.name, reason=refused),
                )
        return joined

    def _joined(self, cid: str) -> tuple[Shared, ...]:
        """Under the lock: every namespace of a container known so far."""
        full = self._full.get(cid)
        return full if full is not None else self._network.get(cid, ())

    def _edges(self) -> dict[str, list[tuple[str, str]]]:
        """Under the lock: follower name -> (leader name, kind), leaders among the listed."""
        out: dict[str, list[tuple[str, str]]] = {}
        for cid, name in self._names.items():
            for j in self._joined(cid):
                leader = self._by_ref.get(j.leader)
                if leader is not None and leader != name:
                    out.setdefault(name, []).append((leader, j.kind))
        return out

    def _exists(self, leader: str, now: datetime) -> bool:
        """Whether the leader is there: listed, or found by one inspect (cached)."""
        with self._lock:
            if leader in self._gone:
                return False
            if leader in self._by_ref:
                return True
            seen = self._unlisted.get(leader)
            if seen is not None and now - seen < RECHECK:
                return True
        try:
            found = self.engine.inspect(leader)
        except EngineUnavailable:
            return True  # unknown: never an orphan on no evidence
        with self._lock:
            if found is None:
                self._gone.add(leader)
                self._unlisted.pop(leader, None)
                return False
            self._unlisted[leader] = now
            return True
