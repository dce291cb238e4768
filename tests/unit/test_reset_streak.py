"""The attempt counter resets only after reset_after of unbroken health (docs/design.md rule 2):
a stop Guardian leaves alone (a person's) breaks the healthy streak like a problem does, though
it is not judged (sim seed 1307)."""

from __future__ import annotations

from pathlib import Path

from guardian.core.model import ContainerSnapshot
from guardian.ports import EngineEvent
from tests.app import HOST, TestApp, make_app


def event(w: TestApp, action: str, snap: ContainerSnapshot, **extra: str) -> EngineEvent:
    attrs = {"guardian.enable": "true", "name": snap.name, **extra}
    return EngineEvent(action, snap.id, snap.name, w.clock.now(), attrs)


def test_a_persons_stop_breaks_the_healthy_streak_that_resets_the_attempt_counter(
    tmp_path: Path,
) -> None:
    w = make_app(tmp_path, restart={"reset_after": "10m"})
    w.engine.add("web")
    w.healer.sweep()  # healthy: its streak begins
    w.clock.advance(minutes=5)
    snap = w.engine.containers[w.engine.id_of("web")]
    w.healer.on_event(event(w, "kill", snap, signal="15"))  # docker stop web, heard
    snap = w.engine.set("web", state="exited", exit_code=143, finished_at=w.clock.now())
    w.healer.on_event(event(w, "die", snap, exitCode="143"))
    w.healer.on_event(event(w, "stop", snap))
    w.healer.sweep()  # exited by a person: left alone, not healthy
    assert w.engine.restarts == []
    w.clock.advance(minutes=6)
    w.engine.set("web", state="running", health="healthy", started_at=w.clock.now())
    w.healer.sweep()  # healthy again, 11 minutes after the first healthy look
    assert w.store.last_reset(HOST, "web") is None
    w.clock.advance(minutes=10)
    w.healer.sweep()  # 10 minutes of unbroken health since the start
    assert w.store.last_reset(HOST, "web") is not None
