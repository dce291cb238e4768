"""Namespace followers and orphans, from HostConfig's `container:<leader>` modes.

The list call tells each container's NetworkMode; PidMode and IpcMode come from the inspects the
loop does anyway (a candidate, an exit, a verification), kept for the container's life: its
HostConfig never changes. A pid follower dies with its leader, so its exit's inspect tells; an
ipc-only follower never inspected is not known. A follower whose leader no longer exists is an
orphan: a report-only `orphaned_namespace` problem.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from guardian.core.model import ContainerSnapshot, HealthCheckResult, ProblemType
from guardian.core.relations.namespaces import Shared, orphan_detail, shared
from guardian.logs import kv
from guardian.ports import Engine, EngineEvent, EngineUnavailable
from guardian.service.state.present import drop_absent

log = logging.getLogger("guardian.namespaces")
# A leader Guardian does not list (not watched) is looked up once, and again after this long in
# case its `destroy` event was missed (a reconnect of the event stream).
RECHECK = timedelta(minutes=10)
# Results an orphan's problem replaces: a healthy look or an unhealthy one (its own health check
# fails without the network), or an exit its leader's end caused (a pid follower is killed).
_ORPHAN_OVER = frozenset({None, "stopped_by_signal", "exit_code_ignored"})


@dataclass(frozen=True)
class _Listed:
    """What the last sweep's list told, replaced whole by the next (readers take it once)."""

    names: dict[str, str] = field(default_factory=dict)  # listed container id -> name
    by_ref: dict[str, str] = field(default_factory=dict)  # listed container id or name -> name
    network: dict[str, tuple[Shared, ...]] = field(default_factory=dict)  # id -> from the list


class Namespaces:
    """Keeps no lock. The sweep alone replaces what the list told (_Listed, one value swapped
    whole: a reader takes it once and never sees two lists mixed) and narrows the rest in
    place (drop_absent); the judges (the sweep's, the workers') and the events thread set or
    pop single keys (each atomic in CPython); a first warning is taken by dict.setdefault, so
    two judges at once warn once."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._listed = _Listed()
        self._full: dict[str, tuple[Shared, ...]] = {}  # container id -> every namespace, inspected
        self._unlisted: dict[str, datetime] = {}  # leader ids found outside the list -> when
        self._gone: dict[str, bool] = {}  # leader ids found removed (ids are never reused)
        self._warned: dict[str, object] = {}  # container ids whose refused modes were logged
        self._learned = False  # an inspect told more since the edges were last given

    # -- what the loop tells --------------------------------------------------------------------

    def follow(self, snapshots: list[ContainerSnapshot]) -> dict[str, list[tuple[str, str]]]:
        """The containers of a sweep: remember their modes and return the namespace edges
        (follower name -> (leader name, kind)) among them."""
        learned = {s.id: self._parse(s) for s in snapshots}
        names = {s.id: s.name for s in snapshots}
        listed = _Listed(
            names,
            {**names, **{s.name: s.name for s in snapshots}},
            {cid: joined for cid, joined in learned.items() if joined},
        )
        # Reset before the edges are read: an inspect that tells more from now on sets it
        # again, and one that told more before is in _full when they are read.
        self._learned = False
        self._listed = listed
        drop_absent(self._full, names.keys())
        drop_absent(self._warned, names.keys())
        referenced = {j.leader for cid in names for j in self._joined(cid, listed)}
        drop_absent(self._gone, referenced)
        drop_absent(self._unlisted, referenced)
        return self._edges(listed)

    def told_more(self) -> bool:
        """Whether an inspect told more since the edges were last given (learned() gives them)."""
        return self._learned

    def learned(self) -> dict[str, list[tuple[str, str]]] | None:
        """The namespace edges again when an inspect told more since a sweep last took them (a
        pid follower's exit, inspected after the sweep listed it); None when nothing changed.
        Only follow() says they were taken: the next sweep builds its graph with them, whoever
        asked here meanwhile."""
        return self._edges(self._listed) if self._learned else None

    def judge(self, snap: ContainerSnapshot, result: HealthCheckResult) -> HealthCheckResult:
        """A judge of the loop: learn the inspected modes, and turn a follower whose leader no
        longer exists into `orphaned_namespace`."""
        joined = self._parse(snap)
        if snap.inspected:
            before, self._full[snap.id] = self._full.get(snap.id), joined
            # The list read after the write: a sweep that swapped it in reads the edges after
            # resetting _learned, so either its edges have this write or the flag stays set.
            if before != joined and snap.id in self._listed.names:
                self._learned = True  # an edge the sweep's graph does not have yet
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
        if event.action == "destroy" and self._unlisted.pop(event.container_id, None) is not None:
            self._gone[event.container_id] = True

    # -- what the followers rule asks ---------------------------------------------------------

    def orphaned(self, container_id: str) -> bool:
        """A leader of this listed container is known removed."""
        return any(j.leader in self._gone for j in self._joined(container_id, self._listed))

    def relatives(self, name: str) -> tuple[tuple[str, ...], dict[str, str]]:
        """What a recreate of `name` needs to know (core.escalation.recreate.build): the names
        of the listed containers that joined its namespaces, and the listed ones' names by id
        (its own leaders named by name: a recreated leader gets a new id)."""
        listed = self._listed
        joined = tuple(
            sorted(
                f
                for f, leaders in self._edges(listed).items()
                if any(leader == name for leader, _ in leaders)
            )
        )
        return joined, dict(listed.names)

    # -- inside ------------------------------------------------------------------------------

    def _parse(self, snap: ContainerSnapshot) -> tuple[Shared, ...]:
        joined, refused = shared(snap.id, snap.namespaces)
        if refused:
            mine = object()
            if self._warned.setdefault(snap.id, mine) is mine:  # the first to warn
                log.warning(
                    "namespace mode refused: not followed",
                    extra=kv(container=snap.name, reason=refused),
                )
        return joined

    def _joined(self, cid: str, listed: _Listed) -> tuple[Shared, ...]:
        """Every namespace of a container known so far."""
        full = self._full.get(cid)
        return full if full is not None else listed.network.get(cid, ())

    def _edges(self, listed: _Listed) -> dict[str, list[tuple[str, str]]]:
        """Follower name -> (leader name, kind), leaders among those `listed`."""
        out: dict[str, list[tuple[str, str]]] = {}
        for cid, name in listed.names.items():
            for j in self._joined(cid, listed):
                leader = listed.by_ref.get(j.leader)
                if leader is not None and leader != name:
                    out.setdefault(name, []).append((leader, j.kind))
        return out

    def _exists(self, leader: str, now: datetime) -> bool:
        """Whether the leader is there: listed, or found by one inspect (cached)."""
        if leader in self._gone:
            return False
        if leader in self._listed.by_ref:
            return True
        seen = self._unlisted.get(leader)
        if seen is not None and now - seen < RECHECK:
            return True
        try:
            found = self.engine.inspect(leader)
        except EngineUnavailable:
            return True  # unknown: never an orphan on no evidence
        if found is None:
            self._gone[leader] = True
            self._unlisted.pop(leader, None)
            return False
        self._unlisted[leader] = now
        return True
