"""The simulated host: its containers (the cast, with the policy the oracle holds Guardian to for
each) and what happens to them that Guardian does not do: a container falls ill, recovers or
exits, and a person stops, kills, removes (`docker rm -f`), starts or runs one again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from guardian.core.model import ContainerSnapshot
from tests.sim.engine import SIGKILL, SIGTERM, SimEngine

ENABLE = {"guardian.enable": "true"}
SWARM = {
    "com.docker.swarm.task.id": "t1",
    "com.docker.swarm.service.name": "shop_web",
    "com.docker.swarm.service.id": "s1",
}

# Guardian's configuration under simulation (tests/app.py settings_for's sections).
CONFIG: dict[str, dict[str, Any]] = {
    "restart": {
        "cooldown": "60s",
        "max_attempts": 3,
        "window": "1h",
        "backoff_factor": 2.0,
        "max_cooldown": "5m",
        "reset_after": "10m",
        "stop_timeout": "10s",
        "verify_timeout": "60s",
        "max_per_minute": 3,
        "max_concurrent": 2,
        "approval_ttl": "1h",
    },
}


@dataclass(frozen=True)
class Policy:
    """The restart rules the oracle holds Guardian to for one container: its own reading of the
    configuration and of the labels (which only tighten), shared with no Guardian code."""

    cooldown: timedelta = timedelta(seconds=60)
    max_attempts: int = 3
    window: timedelta = timedelta(hours=1)
    backoff_factor: float = 2.0
    max_cooldown: timedelta = timedelta(minutes=5)
    reset_after: timedelta = timedelta(minutes=10)
    max_per_minute: int = 3
    max_concurrent: int = 2

    def cooldown_after(self, attempts: int) -> float:
        """Seconds the next restart waits after the last, `attempts` counted before it."""
        base = self.cooldown.total_seconds()
        grown = base * self.backoff_factor ** max(attempts - 1, 0)
        return max(base, min(grown, self.max_cooldown.total_seconds()))


@dataclass(frozen=True)
class Role:
    """One container of the cast: its labels, whether it has a healthcheck, whether Guardian may
    ever act on it (the oracle's own reading of scope), and its policy."""

    name: str
    labels: dict[str, str]
    healthcheck: bool = True
    in_scope: bool = True
    policy: Policy = field(default_factory=Policy)
    asks: bool = False  # guardian.action=ask: every restart needs a person's approval


CAST: tuple[Role, ...] = (
    Role("web", ENABLE),
    Role("api", ENABLE),
    Role("db", ENABLE),
    Role("batch", ENABLE, healthcheck=False),
    # Labels tighten: a longer cooldown and fewer attempts apply.
    Role(
        "slow",
        {**ENABLE, "guardian.cooldown": "120s", "guardian.max_attempts": "2"},
        policy=Policy(cooldown=timedelta(seconds=120), max_attempts=2),
    ),
    # Labels asking for more than the operator allows are refused: the configured policy holds.
    Role("greedy", {**ENABLE, "guardian.cooldown": "5s", "guardian.max_attempts": "9"}),
    Role("asker", {**ENABLE, "guardian.action": "ask"}, asks=True),
    # Out of scope: opted out, never opted in, owned by Swarm.
    Role("off", {"guardian.enable": "false"}, in_scope=False),
    Role("plain", {}, in_scope=False),
    Role("swarm", {**ENABLE, **SWARM}, in_scope=False),
)
ROLES = {r.name: r for r in CAST}

Told = Callable[[str, str], None]  # (what a person did, container id)


class Host:
    """The cast on a SimEngine, and what happens to it besides Guardian. Each change emits the
    events Docker emits for it; a person's act is told to `on_person` first."""

    def __init__(self, engine: SimEngine) -> None:
        self.engine = engine
        self.on_person: list[Told] = []
        for role in CAST:
            engine.add(
                role.name, labels=dict(role.labels), health="healthy" if role.healthcheck else None
            )

    def running(self) -> list[ContainerSnapshot]:
        return [c for c in self.containers() if c.state == "running"]

    def containers(self) -> list[ContainerSnapshot]:
        """Every container, by name (an order that does not depend on ids or hashes)."""
        return sorted(self.engine.containers.values(), key=lambda c: c.name)

    def _tell(self, what: str, snap: ContainerSnapshot) -> None:
        self.engine.person_acts.add((snap.name, self.engine.clock.now()))
        self.engine.last_act[snap.name] = len(self.engine.emitted)
        for told in self.on_person:
            told(what, snap.id)

    # -- what containers do ------------------------------------------------------------------

    def sicken(self, snap: ContainerSnapshot, output: str) -> None:
        """Its healthcheck fails: unhealthy, with the probe's output."""
        now = self.engine.clock.now()
        self.engine.settle(snap.id)
        snap = self.engine.containers[snap.id]
        self.engine.put(
            replace(
                snap,
                health="unhealthy",
                unhealthy_since=now,
                health_log_at=now,
                health_output=output,
            )
        )
        self.engine.emit("health_status", snap, health_status="unhealthy")

    def recover(self, snap: ContainerSnapshot) -> None:
        """Its healthcheck passes again."""
        self.engine.settle(snap.id)
        snap = self.engine.containers[snap.id]
        now = self.engine.clock.now()
        self.engine.put(replace(snap, health="healthy", unhealthy_since=None, health_log_at=now))
        self.engine.emit("health_status", snap, health_status="healthy")

    def exit(self, snap: ContainerSnapshot, code: int, oom: bool = False) -> None:
        """Its process ends with `code` (killed by the kernel's OOM killer when `oom`)."""
        self.engine.settle(snap.id)
        snap = self.engine.containers[snap.id]
        if oom:
            self.engine.emit("oom", snap)
        self._exited(snap, code, oom)

    def _exited(self, snap: ContainerSnapshot, code: int, oom: bool = False) -> None:
        now = self.engine.clock.now()
        self.engine.put(
            replace(snap, state="exited", exit_code=code, oom_killed=oom, finished_at=now)
        )
        self.engine.emit("die", snap, exitCode=str(code))

    # -- what a person does ------------------------------------------------------------------

    def stop(self, snap: ContainerSnapshot, code: int = SIGTERM) -> None:
        """`docker stop`: SIGTERM, which its process may answer with an exit code of its own."""
        self._tell("stop", snap)
        self.engine.settle(snap.id)
        snap = self.engine.containers[snap.id]
        self.engine.emit("kill", snap, signal="15")
        self._exited(snap, code)
        self.engine.emit("stop", snap)

    def kill(self, snap: ContainerSnapshot) -> None:
        """`docker kill`."""
        self._tell("kill", snap)
        self.engine.settle(snap.id)
        snap = self.engine.containers[snap.id]
        self.engine.emit("kill", snap, signal="9")
        self._exited(snap, SIGKILL)

    def remove(self, snap: ContainerSnapshot) -> None:
        """`docker rm -f`: a kill if it runs, then the destroy."""
        self._tell("remove", snap)
        self.engine.settle(snap.id)
        snap = self.engine.containers[snap.id]
        if snap.state == "running":
            self.engine.emit("kill", snap, signal="9")
            self._exited(snap, SIGKILL)
        self.engine.emit("destroy", snap)
        del self.engine.containers[snap.id]
        self.engine.gone[snap.name] = snap
        for told in self.engine.on_change:
            told(snap.id, None)

    def start(self, snap: ContainerSnapshot) -> None:
        """`docker start` of a stopped container."""
        self._tell("start", snap)
        now = self.engine.clock.now()
        health = "starting" if snap.health is not None else None
        self.engine.put(replace(snap, state="running", health=health, started_at=now, exit_code=0))
        self.engine.emit("start", self.engine.containers[snap.id])

    def run(self, name: str) -> ContainerSnapshot:
        """`docker run` of a removed container's name: a new container, a new id."""
        old = self.engine.gone.pop(name)
        self.engine.generations[name] += 1
        new_id = f"{name}-run{self.engine.generations[name]}".ljust(64, "3")
        now = self.engine.clock.now()
        health = "starting" if old.health is not None else None
        snap = replace(
            old,
            id=new_id,
            state="running",
            health=health,
            started_at=now,
            exit_code=0,
            oom_killed=False,
        )
        self._tell("run", snap)
        self.engine.put(snap)
        self.engine.emit("start", snap)
        return snap
