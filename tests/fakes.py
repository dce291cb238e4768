"""One fake per port, for unit tests of the loop without Docker or a wall clock."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from guardian.core.detection.usage import Usage
from guardian.core.escalation.recreate import RecreateSpec
from guardian.core.labels import in_scope
from guardian.core.model import ActionOutcome, ContainerSnapshot, Outcome
from guardian.core.outbound.hooks import HookEnd, HookRun
from guardian.ports import (
    EngineEvent,
    EngineHistory,
    EngineIdentity,
    EngineStep,
    EngineUnavailable,
)

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


class FakeClock:
    """Both readings of the Clock port. `advance` lets time pass (both move); `step` moves
    only the wall clock, as NTP or a person does on a host; `tick` moves only the monotonic
    clock (a wall clock slewed back over the same time)."""

    def __init__(self, start: datetime = T0, monotonic: float = 1000.0) -> None:
        self.current = start
        self.mono = monotonic

    def now(self) -> datetime:
        return self.current

    def monotonic(self) -> float:
        return self.mono

    def advance(self, seconds: float = 0, **kwargs: float) -> datetime:
        delta = timedelta(seconds=seconds, **kwargs)
        self.current += delta
        self.mono += delta.total_seconds()
        return self.current

    def step(self, seconds: float = 0, **kwargs: float) -> datetime:
        """The wall clock jumps (back when negative); no time passes."""
        self.current += timedelta(seconds=seconds, **kwargs)
        return self.current

    def tick(self, seconds: float = 0, **kwargs: float) -> float:
        """Only the monotonic clock moves."""
        self.mono += timedelta(seconds=seconds, **kwargs).total_seconds()
        return self.mono


class FakeLogStream:
    """A followed container's output as a test writes it (write, end); read() waits for it."""

    def __init__(self) -> None:
        self._blocks: list[bytes] = []
        self._cond = threading.Condition()
        self._ended = False
        self.closed = False
        self.raises: BaseException | None = None  # raised by the next read (a cut stream)
        self.written_at: datetime | None = None  # the engine's stamp of the last output read

    def write(self, data: bytes | str) -> None:
        with self._cond:
            self._blocks.append(data.encode() if isinstance(data, str) else data)
            self._cond.notify_all()

    def end(self) -> None:
        with self._cond:
            self._ended = True
            self._cond.notify_all()

    def read(self, limit: int) -> bytes:
        with self._cond:
            self._cond.wait_for(lambda: self._blocks or self._ended or self.raises, timeout=10)
            if self.raises is not None:
                raise self.raises
            if not self._blocks:
                return b""
            block = self._blocks.pop(0)
            if len(block) > limit:
                self._blocks.insert(0, block[limit:])
            return block[:limit]

    def close(self) -> None:
        self.closed = True
        self.end()


def fake_record(snap: ContainerSnapshot) -> dict[str, object]:
    """A container's inspect as a Docker engine answers it, for what a recreate reads
    (core.escalation.recreate): its name, id, image ID, labels, a network, no volumes."""
    return {
        "Id": snap.id,
        "Name": "/" + snap.name,
        "Image": "sha256:" + "a" * 64,
        "Config": {"Image": "app:1", "Labels": dict(snap.labels), "Hostname": snap.id[:12]},
        "HostConfig": {"NetworkMode": "bridge", "Binds": None},
        "Mounts": [],
        "NetworkSettings": {"Networks": {"bridge": {"Aliases": None, "IPAddress": ""}}},
    }


@dataclass
class FakeEngine:
    """An engine holding containers in a dict; restarts follow a script of outcomes.

    `on_restart(snapshot) -> snapshot` decides what a restarted container looks like (default:
    running and healthy if it has a healthcheck). `restart_outcomes` are consumed first.
    """

    clock: FakeClock
    containers: dict[str, ContainerSnapshot] = field(default_factory=dict)
    reachable: bool = True
    restart_outcomes: list[ActionOutcome] = field(default_factory=list)
    restart_raises: BaseException | None = None  # a restart call that breaks, not an outcome
    restarts: list[str] = field(default_factory=list)  # container ids, in order
    stops: list[str] = field(default_factory=list)  # container ids, in order
    list_calls: int = 0
    listed_ids: list[set[str]] = field(default_factory=list)  # per list call: the ids asked
    pings: int = 0
    unwell_calls: int = 0
    uncertainty: timedelta | None = None  # stamp_uncertainty(): None, as before any answer
    _listed: dict[str, ContainerSnapshot] = field(default_factory=dict)  # the last whole list's
    inspect_calls: int = 0
    inspects_at_restart: list[int] = field(default_factory=list)  # inspect_calls at each restart
    after_restart_health: str | None = "healthy"
    url: str = "fake://engine"
    kind: str = "docker"  # what identity() reports
    output: dict[str, str] = field(default_factory=dict)  # container id -> log text
    # What the engine still keeps of its events (history()); `kept_from`: its oldest event.
    kept: list[EngineEvent] = field(default_factory=list)
    kept_from: datetime | None = None
    usage: dict[str, Usage] = field(default_factory=dict)  # container id -> stats() reading
    stats_calls: list[str] = field(default_factory=list)  # container ids, in order
    # follow_logs(): every stream handed out, with what it was asked (id, since, tail).
    follows: list[tuple[str, datetime, int, FakeLogStream]] = field(default_factory=list)
    # The calls that change a container, in order: (restart|stop|remove|create, name).
    steps: list[tuple[str, str]] = field(default_factory=list)
    # record(): what a container's inspect holds beyond what fake_record makes of its snapshot
    # (by name; e.g. "Mounts" with an anonymous volume).
    record_extra: dict[str, dict[str, object]] = field(default_factory=dict)
    create_refusal: str = ""  # a create the engine refuses (a port taken): its reason
    images: set[str] | None = None  # the image IDs the engine holds (has_image); None: all
    _specs: dict[str, RecreateSpec] = field(default_factory=dict)  # name -> the last create's
    _removed: dict[str, ContainerSnapshot] = field(default_factory=dict)  # name -> as removed
    _made: dict[str, RecreateSpec] = field(default_factory=dict)  # id -> the spec it was made from

    def add(self, name: str, **fields: object) -> ContainerSnapshot:
        base = {
            "id": f"{name}-id".ljust(64, "0"),
            "name": name,
            "labels": {"guardian.enable": "true"},
            "state": "running",
            "health": "healthy",
            "started_at": self.clock.now() - timedelta(hours=1),
        }
        base.update(fields)
        snap = ContainerSnapshot(inspected=True, **base)  # type: ignore[arg-type]
        self.containers[snap.id] = snap
        return snap

    def clock_stepped(self, step: timedelta) -> None:
        """Guardian's wall clock stepped: the stamps already shown move with it, as DockerEngine
        presents them (adapters.engine.engine_clock)."""
        for cid, c in self.containers.items():
            moved = {
                k: getattr(c, k) + step
                for k in (
                    "started_at",
                    "finished_at",
                    "health_log_at",
                    "unhealthy_since",
                    "unhealthy_by",
                )
                if getattr(c, k) is not None
            }
            self.containers[cid] = replace(c, **moved)  # type: ignore[arg-type]

    def set(self, name: str, **fields: object) -> ContainerSnapshot:
        cid = self.id_of(name)
        self.containers[cid] = replace(self.containers[cid], **fields)  # type: ignore[arg-type]
        return self.containers[cid]

    def id_of(self, name: str) -> str:
        return next(c.id for c in self.containers.values() if c.name == name)

    def _check(self) -> None:
        if not self.reachable:
            raise EngineUnavailable("fake engine unreachable")

    def ping(self) -> None:
        self._check()
        self.pings += 1

    def identity(self) -> EngineIdentity:
        self._check()
        return EngineIdentity(self.kind, "0.0-fake", "1.41")

    def list_containers(
        self,
        label: str,
        scope: str = "",
        names: Collection[str] = (),
        ids: Collection[str] = (),
    ) -> list[ContainerSnapshot]:
        self._check()
        self.list_calls += 1
        self.listed_ids.append(set(ids))
        out = []
        for c in self.containers.values():
            if (names and c.name not in names) or (ids and c.id not in ids):
                continue
            if (label == "all" or label in c.labels) and in_scope(c.labels, scope):
                # As DockerEngine's list does: the same snapshot for an unchanged container.
                listed = self.as_listed(c)
                before = self._listed.get(c.id)
                out.append(before if before == listed else listed)
        if ids:
            kept = {k: v for k, v in self._listed.items() if k not in ids}
            self._listed = {**kept, **{s.id: s for s in out}}
        elif not names:
            self._listed = {s.id: s for s in out}
        return out

    def list_unwell(self, label: str, scope: str = "") -> list[ContainerSnapshot]:
        self._check()
        self.unwell_calls += 1
        out = []
        for c in self.containers.values():
            listed = self.as_listed(c)
            if listed.runs_well or not (label == "all" or label in c.labels):
                continue
            if in_scope(c.labels, scope):
                before = self._listed.get(c.id)
                out.append(before if before == listed else listed)
        self._listed.update({s.id: s for s in out})
        return out

    def remove(self, name: str) -> None:
        del self.containers[self.id_of(name)]

    def recreate(self, name: str, **fields: object) -> ContainerSnapshot:
        """`docker compose up` replaced it: the same name, a new id."""
        old = self.containers.pop(self.id_of(name))
        snap = replace(old, id=f"{name}-new".ljust(64, "1"), started_at=self.clock.now())
        snap = replace(snap, **fields)  # type: ignore[arg-type]
        self.containers[snap.id] = snap
        return snap

    def stamp_uncertainty(self) -> timedelta | None:
        return self.uncertainty

    def as_listed(self, snap: ContainerSnapshot) -> ContainerSnapshot:
        """As the real engines' lists show a container (DockerEngine.as_listed, held equal to
        them by tests/integration/test_docker_engine.py)."""
        listed = snap.as_listed()
        return replace(listed, namespaces=()) if self.kind == "podman" else listed

    def inspect(self, container_id: str) -> ContainerSnapshot | None:
        self._check()
        self.inspect_calls += 1
        return self.containers.get(container_id)

    def restart(
        self, container_id: str, stop_timeout: timedelta, previous_started_at: datetime | None
    ) -> ActionOutcome:
        self.restarts.append(container_id)
        if container_id in self.containers:
            self.steps.append(("restart", self.containers[container_id].name))
        self.inspects_at_restart.append(self.inspect_calls)
        if self.restart_raises is not None:
            raise self.restart_raises
        if self.restart_outcomes:
            outcome = self.restart_outcomes.pop(0)
            if outcome.outcome is not Outcome.RESTARTED:
                return outcome
        elif not self.reachable:
            return ActionOutcome(Outcome.TRANSIENT_FAILURE, "unreachable", True)
        if container_id not in self.containers:
            return ActionOutcome(Outcome.PERMANENT_FAILURE, "container no longer exists (404)")
        snap = self.containers[container_id]
        for _, leader in snap.namespaces:
            if leader not in self.containers:
                # Docker: the follower cannot start without the namespace it joined.
                return ActionOutcome(Outcome.PERMANENT_FAILURE, f"No such container: {leader}")
        health = self.after_restart_health if snap.health is not None else None
        self.containers[container_id] = replace(
            snap,
            state="running",
            health=health,
            started_at=self.clock.now(),
            exit_code=0,
            oom_killed=False,
        )
        return ActionOutcome(Outcome.RESTARTED, "restart request completed")

    def record(self, container_id: str) -> Mapping[str, object] | None:
        self._check()
        snap = self.containers.get(container_id)
        if snap is None:
            return None
        spec = self._made.get(container_id)
        if spec is not None:  # made by a create: the record it was made from, its own id
            config = json.loads(spec.config)
            host = config.pop("HostConfig")
            return {
                **fake_record(snap),
                "Image": spec.image_id,
                "Config": config,
                "HostConfig": host,
            }
        return {**fake_record(snap), **self.record_extra.get(snap.name, {})}

    def remove_container(self, container_id: str, stop_timeout: timedelta) -> EngineStep:
        if not self.reachable:
            return EngineStep(False, "unreachable", sent=False)
        snap = self.containers.pop(container_id, None)
        if snap is not None:
            self.steps.append(("remove", snap.name))
            self._removed[snap.name] = snap
        return EngineStep(True)

    def create_container(self, spec: RecreateSpec) -> EngineStep:
        """A new container under the spec's name: a new id, the labels of its record."""
        if not self.reachable:
            return EngineStep(False, "unreachable", sent=False)
        self.steps.append(("create", spec.name))
        if self.create_refusal:
            return EngineStep(False, self.create_refusal)
        if any(c.name == spec.name for c in self.containers.values()):
            return EngineStep(False, "create: the name is taken")
        self._specs[spec.name] = spec
        old = self._removed.get(spec.name) or ContainerSnapshot(
            inspected=True, id="", name=spec.name, state="created"
        )
        made = sum(1 for verb, name in self.steps if verb == "create" and name == spec.name)
        labels = json.loads(spec.config).get("Labels") or {}
        snap = replace(
            old,
            id=f"{spec.name}-r{made}".ljust(64, "2"),
            labels=labels,
            state="running",
            health=self.after_restart_health if old.health is not None else None,
            started_at=self.clock.now(),
            exit_code=0,
            restart_count=0,
        )
        self.containers[snap.id] = snap
        self._made[snap.id] = spec
        return EngineStep(True, container_id=snap.id)

    def has_image(self, image_id: str) -> bool:
        self._check()
        return self.images is None or image_id in self.images

    def spec_of(self, name: str) -> RecreateSpec:
        """The spec the last create of `name` was asked with."""
        return self._specs[name]

    def stop(self, container_id: str, stop_timeout: timedelta) -> ActionOutcome:
        self.stops.append(container_id)
        if container_id in self.containers:
            self.steps.append(("stop", self.containers[container_id].name))
        if not self.reachable:
            return ActionOutcome(Outcome.TRANSIENT_FAILURE, "unreachable", True)
        if container_id not in self.containers:
            return ActionOutcome(Outcome.PERMANENT_FAILURE, "container no longer exists (404)")
        snap = self.containers[container_id]
        self.containers[container_id] = replace(
            snap,
            state="exited",
            health=None if snap.health is None else snap.health,
            exit_code=143,
            finished_at=self.clock.now(),
        )
        return ActionOutcome(Outcome.STOPPED, "stop request completed")

    def logs(self, container_id: str, tail: int) -> str:
        self._check()
        return "\n".join(self.output.get(container_id, "").splitlines()[-tail:])

    def follow_logs(self, container_id: str, since: datetime, tail: int) -> FakeLogStream:
        self._check()
        stream = FakeLogStream()
        if container_id not in self.containers:
            stream.end()
        self.follows.append((container_id, since, tail, stream))
        return stream

    def log_stream(self, name: str, timeout: float = 5) -> FakeLogStream:
        """The latest stream a follower attached to `name`'s output (waiting for one)."""
        cid = self.id_of(name)
        deadline = threading.Event()
        for _ in range(int(timeout / 0.01)):
            found = [s for c, _, _, s in self.follows if c == cid and not s.closed]
            if found:
                return found[-1]
            deadline.wait(0.01)
        raise AssertionError(f"no follower attached to {name}")

    def events(self, since: datetime | None) -> Iterator[EngineEvent]:
        self._check()
        return iter(())

    def stop_events(self) -> None:
        pass

    def history(self, since: datetime, until: datetime) -> EngineHistory:
        self._check()
        events = tuple(e for e in self.kept if since <= e.at <= until)
        oldest = self.kept_from or (min(e.at for e in events) if events else None)
        return EngineHistory(events, oldest)

    def stats(self, container_id: str) -> Usage | None:
        self._check()
        self.stats_calls.append(container_id)
        snap = self.containers.get(container_id)
        if snap is None or snap.state != "running":
            return None
        return self.usage.get(container_id)

    def close(self) -> None:
        pass


@dataclass
class FakeResourceReader:
    """Cgroup files as a dict: container id -> reading; a container absent has none visible
    (the watch then asks the engine's stats). `reads` records every container id asked."""

    usage: dict[str, Usage] = field(default_factory=dict)
    reads: list[str] = field(default_factory=list)

    def read(self, container_id: str) -> Usage | None:
        self.reads.append(container_id)
        return self.usage.get(container_id)


@dataclass
class FakeNotifier:
    """A channel that records every batch it was given and answers from a script of Results
    (then delivers)."""

    name: str = "fake"
    idempotent: bool = False
    max_batch: int = 50
    min_interval: timedelta = timedelta(0)
    results: list[object] = field(default_factory=list)
    sent: list[list[object]] = field(default_factory=list)

    def send(self, batch: object) -> object:
        from guardian.core.outbound.delivery import DELIVERED

        self.sent.append(list(batch))  # type: ignore[call-overload]
        return self.results.pop(0) if self.results else DELIVERED


@dataclass
class FakeHookRunner:
    """Starts no process: records every run (argv, environment) and answers from `results`
    (then: exit 0 at once). With `hold`, runs wait until release() or stop() (then they end
    interrupted), so a test sees hooks running and queued."""

    results: list[HookRun] = field(default_factory=list)
    runs: list[tuple[tuple[str, ...], dict[str, str]]] = field(default_factory=list)
    hold: bool = False
    running: int = 0
    stopped: bool = False
    _released: bool = False
    _cond: threading.Condition = field(default_factory=threading.Condition)

    def run(self, argv: Sequence[str], env: Mapping[str, str], timeout: timedelta) -> HookRun:
        with self._cond:
            self.runs.append((tuple(argv), dict(env)))
            self.running += 1
            self._cond.notify_all()
            try:
                if self.hold:
                    self._cond.wait_for(lambda: self._released or self.stopped, timeout=30)
                if self.stopped:
                    return HookRun(HookEnd.INTERRUPTED, 0.0)
                if self.results:
                    return self.results.pop(0)
                return HookRun(HookEnd.EXITED, 0.0, exit_code=0)
            finally:
                self.running -= 1

    def release(self) -> None:
        with self._cond:
            self._released = True
            self._cond.notify_all()

    def stop(self) -> None:
        with self._cond:
            self.stopped = True
            self._cond.notify_all()


class FakeRestartCalls:
    """The RestartCalls port keeping each restart call, not running it (as while the engine
    waits out a stop timeout): the test runs them from `held` when it chooses."""

    def __init__(self) -> None:
        self.held: list[Callable[[], None]] = []

    def run(self, call: Callable[[], None], slot_until: datetime | None, key: str) -> None:
        self.held.append(call)
