"""A person's rollback (guardian rollback NAME, POST /api/v1/containers/NAME/rollback), over
fakes: refused at once, in one line, where there is nothing to roll back to; otherwise a
request the loop decides through decide() (a silence holds it), carried out once, recorded with
who asked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from guardian.adapters.sqlite.store import SqliteStore
from guardian.bootstrap import build_operator
from guardian.core.model import ActionKind, Outcome
from guardian.entrypoints.api import Api
from guardian.entrypoints.cli import main as cli_main
from guardian.entrypoints.http_server import Request, Routes
from guardian.service.operator import NotFound, Refused
from tests.app import TestApp, make_app
from tests.rollbacks import V1, V2, rollbacks, rolling, version, web

TOKEN = "s3cret-token"


def ran_v1_then_v2(w: TestApp, v2_health: str = "healthy") -> None:
    """v1 ran healthy and was kept; v2 replaced it (as `docker compose up -d` does)."""
    version(w, 1)
    w.healer.sweep()
    w.clock.advance(60)
    version(w, 2, health=v2_health)
    w.healer.sweep()


def requests(w: TestApp) -> list[dict[str, Any]]:
    return [dict(r) for r in w.store.db.query("SELECT * FROM rollback_requests")]


def test_a_person_rolls_a_healthy_container_back_to_the_last_record_that_ran_healthy(
    tmp_path: Path,
) -> None:
    w = rolling(tmp_path)
    ran_v1_then_v2(w)
    steps = len(w.engine.steps)
    request, to = w.app.operator.request_rollback("web", "ana", "v2 loses orders")
    assert to.image_id == V1 and request.by == "ana"
    # The loop looked at once (its fact): removed, then created from v1's record.
    assert w.engine.steps[steps:] == [("remove", "web"), ("create", "web")]
    record = w.engine.record(web(w).id) or {}
    assert record["Image"] == V1 and record["Config"]["Env"] == ["VERSION=1"]
    [done] = rollbacks(w)
    assert done.reason == "requested" and done.extra["by"] == "ana"
    assert "rolled back at the request of ana from app:latest (sha256:2222" in done.detail
    assert done.successor == web(w).id
    w.verify()
    [done] = rollbacks(w)
    assert done.outcome is Outcome.SUCCEEDED
    [incident] = w.store.list_incidents(w.host, container="web")
    assert incident.type == "rollback_requested" and incident.resolved_by == "guardian"


def test_a_request_is_used_once(tmp_path: Path) -> None:
    w = rolling(tmp_path)
    ran_v1_then_v2(w)
    request, _ = w.app.operator.request_rollback("web", "ana")
    assert request.id is not None
    assert not w.store.use_rollback_request(request.id, w.clock.now())  # used by the rollback
    steps = len(w.engine.steps)
    for _ in range(3):
        w.healer.sweep()
        w.healer.react(web(w).id, None, "rollback")
        w.clock.advance(5)
    assert w.engine.steps[steps:] == [] and len(rollbacks(w)) == 1
    # v2, which it left, is kept as failed: nothing else ran healthy to go back to.
    with pytest.raises(Refused, match="nothing to roll back to"):
        w.app.operator.request_rollback("web", "ana")


@pytest.mark.parametrize(
    ("setup", "error", "message"),
    [
        ("only-v1", Refused, "web: nothing to roll back to: no earlier record of web ran healthy"),
        ("unknown", NotFound, "no container named ghost"),
        ("image-gone", Refused, "no longer on the host and Guardian pulls nothing; docker pull"),
    ],
)
def test_nothing_to_roll_back_to_is_refused_in_one_line_and_nothing_written(
    tmp_path: Path, setup: str, error: type[Exception], message: str
) -> None:
    w = rolling(tmp_path)
    if setup == "only-v1":
        version(w, 1)
        w.healer.sweep()
    else:
        ran_v1_then_v2(w)
    if setup == "image-gone":
        w.engine.images = {V2}
    steps = list(w.engine.steps)
    with pytest.raises(error) as refused:
        w.app.operator.request_rollback("ghost" if setup == "unknown" else "web", "ana")
    assert message in str(refused.value) and "\n" not in str(refused.value)
    assert requests(w) == [] and w.engine.steps == steps


def test_a_silence_holds_the_rollback_then_it_happens_when_the_silence_ends(
    tmp_path: Path,
) -> None:
    w = rolling(tmp_path)
    ran_v1_then_v2(w)
    w.app.operator.silence("web", _minutes(10), "deploy window", "bo")
    steps = len(w.engine.steps)
    w.app.operator.request_rollback("web", "ana")
    assert w.engine.steps[steps:] == []  # held: decide() said wait for the silence
    [row] = requests(w)
    assert row["used_at"] is None
    w.clock.advance(11 * 60)
    w.healer.react(web(w).id, None, "recheck")  # the recheck the hold asked for, at its end
    assert w.engine.steps[steps:] == [("remove", "web"), ("create", "web")]
    assert (w.engine.record(web(w).id) or {})["Image"] == V1


def test_the_daemon_acts_on_a_request_another_process_wrote(tmp_path: Path) -> None:
    """`guardian rollback` writes the store from another process; the daemon hears it from the
    store's change feed and looks at the container on its worker."""
    w = rolling(tmp_path)
    w = w.restart_guardian()
    w = _daemon(w)
    ran_v1_then_v2(w)
    other = SqliteStore(w.settings["store.path"])
    op = build_operator(w.settings, store=other, clock=w.clock, host=w.host, engine=w.engine)
    steps = len(w.engine.steps)
    op.request_rollback("web", "ana")
    assert w.engine.steps[steps:] == []  # another process: nothing here yet
    assert w.app.elsewhere is not None
    w.app.elsewhere.look()
    assert w.engine.steps[steps:] == [("remove", "web"), ("create", "web")]
    other.close()


def test_guardian_rollback_answers_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    w = rolling(tmp_path)
    version(w, 1)
    w.healer.sweep()
    monkeypatch.setattr("guardian.bootstrap.engine_of", lambda *_: w.engine)
    monkeypatch.setattr("guardian.bootstrap.socket.gethostname", lambda: w.host)
    config = str(tmp_path / "config.yaml")
    assert cli_main(["rollback", "web", "--by", "ana", "-c", config]) == 1
    err = capsys.readouterr().err
    assert err.startswith("guardian: web: nothing to roll back to") and err.count("\n") == 1
    w.clock.advance(60)
    version(w, 2)
    w.healer.sweep()
    assert cli_main(["rollback", "web", "--by", "ana", "-c", config]) == 0
    out = capsys.readouterr().out
    assert out.startswith("rollback of web requested: back to app:latest (sha256:1111")
    assert "Guardian acts at its next look (through decide()" in out
    [row] = requests(w)
    assert row["by"] == "ana" and row["image_id"] == V1


def _call(api: Api, path: str, body: Any, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    routes = Routes()
    routes.mount("/api/v1", api)
    raw = json.dumps(body).encode()
    response = routes.dispatch(Request("POST", path, {}, headers, raw, "10.0.0.1"))
    return response.status, json.loads(response.body)


def test_the_api_rollback_needs_the_token_and_refuses_what_cannot_be_done(
    tmp_path: Path,
) -> None:
    w = rolling(tmp_path)
    version(w, 1)
    w.healer.sweep()
    api = Api(w.healer, w.app.operator, TOKEN)
    path, body = "/api/v1/containers/web/rollback", {"by": "ana"}
    bearer = {"authorization": f"Bearer {TOKEN}"}
    # A cross-site form carries the page's cookie at most, never the bearer: refused.
    cross_site = {"cookie": "guardian_session=x", "origin": "https://evil.example"}
    assert _call(api, path, body, cross_site)[0] == 401
    assert _call(api, path, body, {"authorization": "Bearer wrong"})[0] == 403
    status, doc = _call(api, path, body, bearer)
    assert status == 409 and doc["error"].startswith("web: nothing to roll back to")
    assert _call(api, "/api/v1/containers/ghost/rollback", body, bearer)[0] == 404
    w.clock.advance(60)
    version(w, 2)
    w.healer.sweep()
    steps = len(w.engine.steps)
    status, doc = _call(api, path, {"by": "ana", "reason": "bad release"}, bearer)
    assert status == 202 and doc["rollback"]["by"] == "ana"
    assert doc["message"].startswith("rollback of web requested: back to app:latest")
    assert w.engine.steps[steps:] == [("remove", "web"), ("create", "web")]
    [done] = [a for a in w.actions("web") if a.kind == ActionKind.ROLLBACK]
    assert done.extra["by"] == "ana"


def _minutes(n: int) -> Any:
    from datetime import timedelta

    return timedelta(minutes=n)


def _daemon(w: TestApp) -> TestApp:
    return make_app(
        w.tmp,
        engine=w.engine,
        clock=w.clock,
        sqlite=w.store,
        daemon=True,
        settings=w.settings,
    )
