"""`guardian status` and GET /api/v1/containers are reads: they say why a restart is held back
(decide()'s own reasons, report-only and verifying among them) and change nothing in the loop."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from guardian.core.model import ProblemType
from guardian.entrypoints.api import Api
from guardian.entrypoints.http_server import Request, Routes
from guardian.readside.status import container_status
from guardian.service.state.state import LoopState
from tests.app import TestApp, make_app

TOKEN = "s3cret-token"


def containers_read(loop: TestApp) -> tuple[int, list[dict[str, object]]]:
    """GET /api/v1/containers, as a client with the token asks it."""
    routes = Routes()
    routes.mount("/api/v1", Api(loop.healer, loop.app.operator, TOKEN))
    headers = {"authorization": f"Bearer {TOKEN}"}
    response = routes.dispatch(Request("GET", "/api/v1/containers", {}, headers, b""))
    return response.status, json.loads(response.body)["containers"]


def crash_looping(tmp_path: Path) -> TestApp:
    loop = make_app(tmp_path, crash_loop={"restarts": 3, "window": "5m"})
    snap = loop.engine.add(
        "worker",
        health=None,
        restart_policy="always",
        state="restarting",
        labels={"guardian.enable": "true", "guardian.notify": "false"},
    )
    loop.engine.output[snap.id] = "error: cannot open /data\n"
    return loop


def state_of(state: LoopState) -> dict[tuple[str, str], object]:
    """What each part of the loop's state holds, without its lock, its clock or the parts it
    shares."""
    parts = [p for p in vars(state).values() if hasattr(p, "__dict__")]
    return copy.deepcopy(
        {
            (type(part).__name__, k): v
            for part in parts
            for k, v in vars(part).items()
            if k not in ("_lock", "_clock") and not any(v is p for p in parts)
        }
    )


def held_back(loop: TestApp) -> dict[str, str | None]:
    return {row.name: row.held_back for row in container_status(loop.healer, loop.app.operator)}


def test_reads_of_a_crash_loop_track_nothing_fetch_no_logs_and_mute_nothing(tmp_path: Path):
    loop = crash_looping(tmp_path)
    state = loop.healer.ctx.state
    logs: list[str] = []
    fetch = loop.engine.logs
    loop.engine.logs = lambda cid, tail: logs.append(cid) or fetch(cid, tail)  # type: ignore[method-assign]
    before = state_of(state)
    for count in range(6):  # a crash loop only status and the API look at
        loop.engine.set("worker", restart_count=count, exit_code=2)
        assert held_back(loop) == {"worker": "skipped: restarting_by_docker"}
        assert containers_read(loop)[0] == 200
        loop.clock.advance(10)
    assert state_of(state) == before and not state.routing.muted("worker")
    assert logs == []
    # The sweeps that do look track it, and status then says why it is never restarted.
    for count in range(6, 12):
        loop.engine.set("worker", restart_count=count, exit_code=2)
        loop.healer.sweep()
        loop.clock.advance(10)
    assert [i.type for i in loop.store.open_incidents(loop.host)] == [ProblemType.CRASH_LOOP]
    assert state.routing.muted("worker") and len(logs) == 1
    before = state_of(state)
    assert held_back(loop) == {"worker": "report_only"}
    [row] = containers_read(loop)[1]
    assert row["held_back"] == "report_only" and row["next_restart"] is None
    assert state_of(state) == before and len(logs) == 1
    assert loop.restarted() == []


def test_a_report_only_problem_is_recorded_once_with_its_reason(tmp_path: Path):
    loop = crash_looping(tmp_path)
    for count in range(12):
        loop.engine.set("worker", restart_count=count, exit_code=2)
        loop.healer.sweep()
        loop.clock.advance(10)
    decisions = [a for a in loop.actions("worker") if a.kind == "decision"]
    assert [(a.reason, a.outcome) for a in decisions] == [("report_only", "policy_denied")]
    assert "only reports it" in decisions[0].detail


def test_status_says_a_restart_awaits_its_verification(tmp_path: Path):
    loop = make_app(tmp_path, restart={"cooldown": "1s", "verify_timeout": "60s"})
    loop.engine.add("web", health="unhealthy")
    loop.engine.after_restart_health = "unhealthy"
    loop.healer.sweep()
    assert loop.restarted() == ["web"] and loop.healer.ctx.state.verifications.verifying("web")
    loop.engine.set("web", health="unhealthy")
    loop.clock.advance(5)  # the cooldown is over; the verification has not judged it
    assert held_back(loop) == {"web": "verifying"}
    loop.healer.sweep()
    assert loop.restarted() == ["web"]
