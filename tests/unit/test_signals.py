"""What Guardian reports is true: status of healthy and skipped containers, escalation shown
wherever a state is, and messages with true durations (over fakes and a fake clock)."""

from __future__ import annotations

import json
import socket
from datetime import timedelta

from guardian.core.model import Outcome
from guardian.core.verification import PendingVerify, verdict_detail
from guardian.entrypoints.api import Api
from guardian.entrypoints.cli import main
from guardian.entrypoints.http_server import Request, Routes
from tests.app import TestApp, make_app
from tests.fakes import T0


def api_get(g: TestApp, path: str) -> dict:
    routes = Routes()
    routes.mount("/api/v1", Api(g.healer, g.app.operator, "token"))
    headers = {"authorization": "Bearer token"}
    response = routes.dispatch(Request("GET", path, {}, headers, b""))
    return json.loads(response.body)


def containers(g: TestApp) -> dict[str, dict]:
    return {row["container"]: row for row in api_get(g, "/api/v1/containers")["containers"]}


def gave_up_on_web(tmp_path) -> TestApp:
    g = make_app(
        tmp_path, host=socket.gethostname(), restart={"cooldown": "10s", "max_attempts": 1}
    )
    g.engine.add("web", health="unhealthy")
    g.engine.after_restart_health = "unhealthy"
    g.healer.sweep()
    g.verify()
    g.clock.advance(11)
    g.healer.sweep()
    return g


def test_a_healthy_container_in_its_cooldown_has_no_next_restart(tmp_path):
    g = make_app(tmp_path, restart={"cooldown": "5m"})
    g.engine.add("web", health="unhealthy")
    g.healer.sweep()
    g.verify()  # restarted and healthy: the cooldown runs, but nothing needs a restart
    row = containers(g)["web"]
    assert (row["health"], row["next_restart"], row["held_back"]) == ("healthy", None, None)


def test_a_container_dockerd_killed_is_shown_skipped_as_check_says_not_restart_now(tmp_path):
    g = make_app(tmp_path)
    g.engine.add("web", state="exited", health=None, exit_code=137)  # SIGKILL, no OOM
    report = g.healer.sweep(apply=False)
    assert report.rows[0].result.skipped == "stopped_by_signal"
    row = containers(g)["web"]
    assert (row["next_restart"], row["held_back"]) == (None, "skipped: stopped_by_signal")


def test_an_escalated_incident_says_so_in_the_api_status_and_incidents_list(tmp_path, capsys):
    g = gave_up_on_web(tmp_path)
    [incident] = api_get(g, "/api/v1/incidents")["incidents"]
    assert (incident["state"], incident["escalated"]) == ("in_progress", True)
    assert containers(g)["web"]["incidents"] == f"#{incident['id']}:in_progress,escalated"
    config = str(tmp_path / "config.yaml")
    assert main(["incidents", "list", "--config", config]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert header.split()[4] == "ESCALATED" and row.split()[4] == "yes"


def test_unhealthy_after_restart_says_when_it_was_judged_not_a_timeout_it_did_not_wait_for(
    tmp_path,
):
    g = make_app(tmp_path)
    snap = g.engine.add("web", health="unhealthy", started_at=T0 + timedelta(seconds=4))
    p = PendingVerify(1, 1, "web", snap.id, T0, T0 + timedelta(minutes=2), None)
    detail = verdict_detail(Outcome.UNHEALTHY_AFTER_RESTART, snap, p, T0 + timedelta(seconds=4))
    assert detail == "unhealthy 4s after the restart (state=running health=unhealthy)"
    detail = verdict_detail(
        Outcome.UNHEALTHY_AFTER_RESTART, snap, p, T0 + timedelta(minutes=2, seconds=1)
    )
    assert detail == (
        "not healthy within verify_timeout (2m1s after the restart) "
        "(state=running health=unhealthy)"
    )
