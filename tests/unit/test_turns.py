"""One container, one thread at a time (docs/design.md rule 21): a sweep that finds a container
its worker is judging (an event's look) leaves it to that worker instead of judging it beside
it, so the two never open its incident twice nor tell people twice; a watcher's tick only asks
for a look, judged on the container's worker."""

from __future__ import annotations

import threading
from pathlib import Path

from guardian.core.detection.usage import Usage
from guardian.core.model import ContainerSnapshot
from guardian.entrypoints.daemon import Daemon
from guardian.runtime.restart_calls import HANDED_AT_ONCE
from tests.app import TestApp, make_app
from tests.fakes import FakeClock, FakeEngine, FakeResourceReader
from tests.helpers import wait_until


class HeldInspects(FakeEngine):
    """An engine whose inspects from the work queue's workers wait until released: an event's
    look is under way, on its worker, for as long as a test needs."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)
        self.release = threading.Event()
        self.waiting = threading.Event()

    def inspect(self, container_id: str) -> ContainerSnapshot | None:
        if threading.current_thread().name.startswith("reconcile-"):
            self.waiting.set()
            self.release.wait(10)
        return super().inspect(container_id)


def opened(t: TestApp) -> int:
    """The "opened" notifications queued in the outbox."""
    return len(t.store.db.query("SELECT id FROM outbox WHERE kind='opened'"))


def test_a_sweep_leaves_a_container_to_the_worker_judging_it_and_one_incident_is_opened(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    engine = HeldInspects(clock)
    t = make_app(tmp_path, daemon=True, engine=engine, clock=clock)
    cid = engine.add("web", health="unhealthy").id
    d = Daemon(t.app)
    t.app.restarts.start(d.reactions, d.slot_freed)
    try:
        d.react_soon(cid, None)  # the event's look: its worker inspects, and waits there
        assert engine.waiting.wait(5)
        t.healer.sweep()  # finds web unhealthy while its worker holds it
        assert t.store.open_incidents(t.host, "web") == [] and t.restarted() == []
        engine.release.set()
        wait_until(lambda: t.restarted() == ["web"], 5, message="the worker restarted it")
        wait_until(lambda: d.reactions.busy() == 0, 5, message="the look after the sweep")
        assert len(t.store.open_incidents(t.host, "web")) == 1 and opened(t) == 1
        assert t.restarted() == ["web"]
    finally:
        engine.release.set()
        d.reactions.close(10)
        d.wakeup.close()
        t.store.close()


def test_a_resource_breach_is_judged_on_the_containers_worker_and_recorded_as_the_rules(
    tmp_path: Path,
) -> None:
    # The tick only asks for a look: the judgement, the decision and the restart run on the
    # container's worker (`reconcile-N`), never on the tick's thread, and the incident still
    # says which watcher found it.
    reader = FakeResourceReader()
    rule = {"guardian.enable": "true", "guardian.memory.max": "256MiB", "guardian.memory.for": "0s"}
    t = make_app(tmp_path, daemon=True, resource_reader=reader)
    leak = t.engine.add("leak", labels=rule, health=None)
    reader.usage[leak.id] = Usage(301 << 20, 0)
    d = Daemon(t.app)
    t.app.restarts.start(d.reactions, d.slot_freed)
    judged_on: list[str] = []  # the threads that inspected it to judge it, after the sweep
    inspect = t.engine.inspect

    def inspecting(container_id: str) -> ContainerSnapshot | None:
        judged_on.append(threading.current_thread().name)
        return inspect(container_id)

    try:
        t.healer.sweep()
        t.engine.inspect = inspecting  # type: ignore[method-assign]
        t.healer.resource_tick(t.app.resources)
        wait_until(lambda: t.restarted() == ["leak"], 5, message="the worker restarted it")
        assert judged_on and set(judged_on) == {"reconcile-1"}
        [incident] = t.store.open_incidents(t.host, "leak")
        transitions = t.store.transitions(incident.id)
        assert "detected by resources" in transitions[0].reason
    finally:
        d.reactions.close(10)
        d.wakeup.close()
        t.store.close()


class SlowRestarts(FakeEngine):
    """An engine whose restarts wait until released, noting the thread that asked and whether
    it held the container's key."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)
        self.release = threading.Event()
        self.asked: list[tuple[str, bool]] = []
        self.holds = lambda key: False

    def restart(self, container_id, timeout, started_at=None):  # type: ignore[no-untyped-def]
        self.asked.append((threading.current_thread().name, self.holds(container_id)))
        self.release.wait(10)
        return super().restart(container_id, timeout, started_at)


def test_a_sweep_decides_on_the_containers_worker_which_sends_the_call_at_once(
    tmp_path: Path,
) -> None:
    # The sweep hands each container's apply to its worker: the decision and the restart call
    # run there, one after the other, and the sweep goes on once the call began (it does not
    # wait for the engine). A dependent decided after its dependency names its incident.
    clock = FakeClock()
    engine = SlowRestarts(clock)
    t = make_app(tmp_path, daemon=True, engine=engine, clock=clock, restart={"cooldown": "60s"})
    engine.holds = t.app.restarts.holds
    engine.add(
        "app", health="unhealthy", labels={"guardian.enable": "true", "guardian.depends_on": "db"}
    )
    db = engine.add("db", health="unhealthy").id
    d = Daemon(t.app)
    t.app.restarts.start(d.reactions, d.slot_freed)
    decided_on: list[str] = []
    decided = t.healer.remediator.decided

    def deciding(*args, **kwargs):  # type: ignore[no-untyped-def]
        decided_on.append(threading.current_thread().name)
        return decided(*args, **kwargs)

    t.healer.remediator.decided = deciding  # type: ignore[method-assign]
    try:
        t.healer.sweep()  # returns while db's restart call waits at the engine
        assert len(engine.asked) == 1 and not engine.release.is_set()
        [(thread, held)] = engine.asked
        assert held and thread.startswith("reconcile-")
        assert decided_on[0] == thread  # db decided where its call was sent
        assert decided_on[1].startswith("reconcile-")  # app, held back on its own worker
        [hold] = [a for a in t.actions("app") if a.kind == "decision"]
        db_incident = t.store.open_incidents(t.host, "db")[0]
        assert f"db (incident {db_incident.id}" in hold.detail
        assert t.healer.ctx.state.claims.sent("db")
        engine.release.set()
        wait_until(lambda: t.restarted() == ["db"], 5, message="db's restart")
        assert engine.containers[db].state == "running"
    finally:
        engine.release.set()
        d.reactions.close(10)
        d.wakeup.close()
        t.store.close()


def test_a_sweep_judging_many_containers_hands_a_few_applies_at_a_time(tmp_path: Path) -> None:
    # A first sweep judges every container: its applies go to their workers a few at a time,
    # so it starts no more workers than that (the idle ones stay).
    t = make_app(tmp_path, daemon=True)
    for n in range(40):
        t.engine.add(f"web{n}")
    d = Daemon(t.app)
    t.app.restarts.start(d.reactions, d.slot_freed)
    before = {th.ident for th in threading.enumerate()}
    try:
        t.healer.sweep()
        workers = [
            th
            for th in threading.enumerate()
            if th.ident not in before and th.name.startswith("reconcile-")
        ]
        assert 1 <= len(workers) <= HANDED_AT_ONCE
        assert t.store.open_incidents(t.host) == []
        wait_until(lambda: d.reactions.busy() == 0, 5, message="the workers free")
    finally:
        d.reactions.close(10)
        d.wakeup.close()
        t.store.close()
