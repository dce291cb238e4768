"""The /api/v1 handler without a socket: auth, validation, and each endpoint over fakes."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from guardian.config import ConfigError, load_settings
from guardian.core import incidents
from guardian.core.model import HealthCheckResult, ProblemType
from guardian.credentials import load_token
from guardian.entrypoints.api import Api
from guardian.entrypoints.http_server import Request, Response, Routes
from tests.app import TestApp, make_app

TOKEN = "s3cret-token"
HOST = "host"


@pytest.fixture
def g(tmp_path: Path) -> TestApp:
    return make_app(tmp_path, host=HOST)


def make_api(g: TestApp, token: str | None = TOKEN) -> Api:
    return Api(g.healer, g.app.operator, token)


def call(
    api: Api, method: str, path: str, body: Any = None, token: str | None = TOKEN, **query: str
) -> tuple[int, dict[str, Any], Response]:
    raw = body if isinstance(body, bytes) else (json.dumps(body).encode() if body else b"")
    headers = {"authorization": f"Bearer {token}"} if token else {}
    routes = Routes()
    routes.mount("/api/v1", api)
    response = routes.dispatch(
        Request(method, path, {k: [v] for k, v in query.items()}, headers, raw)
    )
    assert response.content_type == "application/json"
    return response.status, json.loads(response.body), response


def open_incident(g: TestApp, container: str = "app") -> int:
    now = g.clock.now()
    result = HealthCheckResult("id", container, now, ProblemType.UNHEALTHY, "probe failed")
    saved = g.store.save_incident(incidents.record_detection(None, HOST, result, now))
    return saved.id or 0


def test_mutations_need_the_right_bearer_token(g: TestApp) -> None:
    api = make_api(g)
    iid = open_incident(g)
    path = f"/api/v1/incidents/{iid}/ack"
    status, doc, response = call(api, "POST", path, {"by": "alice"}, token=None)
    assert status == 401 and "Bearer" in doc["error"]
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    status, doc, _ = call(api, "POST", path, {"by": "alice"}, token="wrong")
    assert (status, doc["error"]) == (403, "the bearer token is not valid")
    assert g.store.get_incident(iid).state == "active"  # type: ignore[union-attr]
    status, doc, _ = call(api, "POST", path, {"by": "alice"})
    assert status == 200 and doc["incident"]["state"] == "acknowledged"


READS = [
    "/api/v1/incidents",
    "/api/v1/incidents/{iid}",
    "/api/v1/actions",
    "/api/v1/containers",
    "/api/v1/silences",
]


@pytest.mark.parametrize("path", READS)
def test_reads_need_the_token_unless_public_reads_are_on(g: TestApp, path: str) -> None:
    path = path.format(iid=open_incident(g))
    status, doc, response = call(make_api(g), "GET", path, token=None)
    assert status == 401 and "Bearer" in doc["error"]
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert call(make_api(g), "GET", path, token="wrong")[0] == 403
    assert call(make_api(g), "GET", path)[0] == 200
    public = Api(g.healer, g.app.operator, TOKEN, public_reads=True)
    assert call(public, "GET", path, token=None)[0] == 200


def test_without_a_token_reads_are_off_unless_public(g: TestApp) -> None:
    open_incident(g)
    status, doc, _ = call(make_api(g, None), "GET", "/api/v1/incidents", token=None)
    assert status == 403 and "api.public_reads: true" in doc["error"]
    public = Api(g.healer, g.app.operator, None, public_reads=True)
    status, doc, _ = call(public, "GET", "/api/v1/incidents", token=None)
    assert status == 200 and [i["container"] for i in doc["incidents"]] == ["app"]
    status, doc, _ = call(public, "POST", "/api/v1/silences", {}, token=None)
    assert status == 403 and "no API token is configured" in doc["error"]


def test_without_a_configured_token_mutations_are_off(g: TestApp) -> None:
    iid = open_incident(g)
    status, doc, _ = call(make_api(g, None), "POST", f"/api/v1/incidents/{iid}/ack", {"by": "a"})
    assert status == 403 and "no API token is configured" in doc["error"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "malformed JSON body"),
        (b"[1, 2]", "must be a JSON object"),
        ({"by": "alice", "colour": "red"}, "unknown field(s) colour; allowed: by, reason"),
        ({"reason": "x"}, "missing field(s): by"),
        ({"by": 7}, "field by must be a string"),
        ({"by": ""}, "is required"),
        ({"by": "a" * 101}, "longer than 100"),
    ],
)
def test_bad_bodies_are_400_with_a_message(g: TestApp, body: Any, message: str) -> None:
    iid = open_incident(g)
    status, doc, _ = call(make_api(g), "POST", f"/api/v1/incidents/{iid}/ack", body)
    assert status == 400 and message in doc["error"]


def test_refused_transitions_are_409_with_the_state_machine_message(g: TestApp) -> None:
    iid = open_incident(g)
    api = make_api(g)
    status, doc, _ = call(api, "POST", f"/api/v1/incidents/{iid}/close", {"by": "alice"})
    assert status == 409
    assert doc["error"] == f"cannot close incident {iid}: it is active; resolve it first"
    status, doc, _ = call(api, "POST", f"/api/v1/incidents/{iid}/resolve", {"by": "alice"})
    assert status == 400 and doc["error"] == "missing field(s): reason"
    status, doc, _ = call(
        api, "POST", f"/api/v1/incidents/{iid}/resolve", {"by": "alice", "reason": "fixed"}
    )
    assert status == 200 and doc["incident"]["resolved_by"] == "alice"
    status, doc, _ = call(api, "POST", f"/api/v1/incidents/{iid}/close", {"by": "alice"})
    assert status == 200 and doc["incident"]["state"] == "closed"


def test_incident_with_timeline_and_not_found(g: TestApp) -> None:
    iid = open_incident(g)
    api = make_api(g)
    call(api, "POST", f"/api/v1/incidents/{iid}/ack", {"by": "alice", "reason": "looking"})
    status, doc, _ = call(api, "GET", f"/api/v1/incidents/{iid}")
    assert status == 200
    assert [(e["actor"], e["event"]) for e in doc["timeline"]] == [
        ("guardian", "opened -> active"),
        ("alice", "active -> acknowledged"),
    ]
    assert call(api, "GET", "/api/v1/incidents/999")[0] == 404
    assert call(api, "GET", "/api/v1/incidents/abc")[0] == 404
    assert call(api, "GET", "/api/v1/nothing")[0] == 404
    assert call(api, "PUT", "/api/v1/incidents")[0] == 404


def test_incident_filters(g: TestApp) -> None:
    open_incident(g, "a")
    open_incident(g, "b")
    api = make_api(g)
    _, doc, _ = call(api, "GET", "/api/v1/incidents", container="b")
    assert [i["container"] for i in doc["incidents"]] == ["b"]
    _, doc, _ = call(api, "GET", "/api/v1/incidents", state="closed")
    assert doc["incidents"] == []
    status, doc, _ = call(api, "GET", "/api/v1/incidents", state="bogus")
    assert status == 400 and "expected one of" in doc["error"]


def test_silence_endpoints_and_the_decision_they_cause(g: TestApp) -> None:
    api = make_api(g)
    engine = g.engine
    engine.add("app", health="unhealthy")
    body = {"container": "app", "for": "2h", "reason": "upgrade", "by": "alice"}
    assert call(api, "POST", "/api/v1/silences", body, token=None)[0] == 401
    status, doc, _ = call(api, "POST", "/api/v1/silences", body)
    assert status == 201 and doc["silence"]["active"] is True
    _, doc, _ = call(api, "GET", "/api/v1/containers")
    [row] = doc["containers"]
    assert row["held_back"] == "silenced"
    assert row["next_restart"] == (g.clock.now() + timedelta(hours=2)).isoformat("T", "seconds")
    status, doc, _ = call(api, "POST", "/api/v1/silences", {**body, "for": "forever"})
    assert status == 400 and "for 'forever'" in doc["error"]

    assert call(api, "DELETE", "/api/v1/silences/app", {"by": "bob"})[0] == 200
    _, doc, _ = call(api, "GET", "/api/v1/silences")
    assert doc["silences"] == []
    _, doc, _ = call(api, "GET", "/api/v1/silences", all="true")
    assert [s["ended_by"] for s in doc["silences"]] == ["bob"]
    assert call(api, "DELETE", "/api/v1/silences/app", {"by": "bob"})[0] == 404


def test_actions_endpoint(g: TestApp) -> None:
    engine = g.engine
    engine.add("app", health="unhealthy")
    g.healer.sweep()
    api = make_api(g)
    _, doc, _ = call(api, "GET", "/api/v1/actions", container="app")
    assert [(a["kind"], a["reason"]) for a in doc["actions"]] == [("restart", "allowed")]
    g.clock.advance(hours=2)
    _, doc, _ = call(api, "GET", "/api/v1/actions", since="1h")
    assert doc["actions"] == []
    assert call(api, "GET", "/api/v1/actions", since="soon")[0] == 400


def test_token_comes_from_the_named_variable_or_a_file(tmp_path: Path) -> None:
    settings = load_settings(None, env={})
    assert load_token(settings, {"GUARDIAN_API_TOKEN": " abc \n"}) == "abc"
    assert load_token(settings, {}) is None
    named = load_settings(None, env={"GUARDIAN_API_TOKEN_ENV": "MY_TOKEN"})
    assert load_token(named, {"MY_TOKEN": "xyz"}) == "xyz"
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    token_file.chmod(0o600)
    from_file = load_settings(None, env={"GUARDIAN_API_TOKEN_FILE": str(token_file)})
    assert load_token(from_file, {"GUARDIAN_API_TOKEN": "ignored"}) == "from-file"
    token_file.write_text("")
    with pytest.raises(ConfigError, match="the file is empty"):
        load_token(from_file, {})
    missing = load_settings(None, env={"GUARDIAN_API_TOKEN_FILE": str(tmp_path / "nope")})
    with pytest.raises(ConfigError, match="cannot read"):
        load_token(missing, {})


@pytest.mark.parametrize("mode", [0o644, 0o604, 0o666, 0o602])
def test_a_token_file_other_users_may_read_or_write_is_refused(tmp_path: Path, mode: int) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    token_file.chmod(mode)
    settings = load_settings(None, env={"GUARDIAN_API_TOKEN_FILE": str(token_file)})
    with pytest.raises(ConfigError) as refused:
        load_token(settings, {})
    assert str(refused.value) == (
        f"api.token_file = {str(token_file)!r}: other users may read or write it (mode "
        f"0{mode:o}); chmod 600 it (640 if a group needs it)"
    )
    assert "from-file" not in str(refused.value)


def test_a_token_file_for_a_group_is_accepted(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    token_file.chmod(0o640)
    settings = load_settings(None, env={"GUARDIAN_API_TOKEN_FILE": str(token_file)})
    assert load_token(settings, {}) == "from-file"
