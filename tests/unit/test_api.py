"""The /api/v1 handler without a socket: auth, validation, and each endpoint over fakes."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from guardian.config import ConfigError, load_settings
from guardian.config.credentials import load_token
from guardian.core import incidents
from guardian.core.model import HealthCheckResult, ProblemType
from guardian.core.redaction import Redactor
from guardian.entrypoints.api import Api
from guardian.entrypoints.cli import main as cli_main
from guardian.entrypoints.credential_limiter import PER_CLIENT, CredentialLimiter
from guardian.entrypoints.http_server import Request, Response, Routes
from guardian.entrypoints.page.sessions import Sessions, SignInRefused
from tests.app import TestApp, make_app

TOKEN = "s3cret-token"  # handed to Api directly; a token from the config is at least 32 long
LONG = "0123456789abcdef" * 2
FROM_FILE = "from-file-" + "f" * 32
HOST = "host"


@pytest.fixture
def g(tmp_path: Path) -> TestApp:
    return make_app(tmp_path, host=HOST)


def make_api(g: TestApp, token: str | None = TOKEN) -> Api:
    return Api(g.healer, g.app.operator, token)


def call(
    api: Api,
    method: str,
    path: str,
    body: Any = None,
    token: str | None = TOKEN,
    client: str = "10.0.0.1",
    **query: str,
) -> tuple[int, dict[str, Any], Response]:
    raw = body if isinstance(body, bytes) else (json.dumps(body).encode() if body else b"")
    headers = {"authorization": f"Bearer {token}"} if token else {}
    routes = Routes()
    routes.mount("/api/v1", api)
    response = routes.dispatch(
        Request(method, path, {k: [v] for k, v in query.items()}, headers, raw, client)
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


def test_wrong_tokens_share_the_sign_in_limiter_and_never_lock_out_the_right_one(
    g: TestApp,
) -> None:
    clock = [0.0]
    limiter = CredentialLimiter(now=lambda: clock[0])
    api = Api(g.healer, g.app.operator, TOKEN, limiter=limiter)
    sessions = Sessions(TOKEN, 3600, now=lambda: clock[0], limiter=limiter)
    with pytest.raises(SignInRefused):
        sessions.sign_in("guess", "mallory", "10.0.0.9")
    statuses = [call(api, "GET", "/api/v1/incidents", token="guess", client="10.0.0.9")[0]]
    statuses += [
        call(api, "GET", "/api/v1/incidents", token=f"g{i}", client="10.0.0.9")[0]
        for i in range(PER_CLIENT)
    ]
    assert statuses == [403] * (PER_CLIENT - 1) + [429, 429]
    status, doc, response = call(api, "GET", "/api/v1/incidents", token="guess", client="10.0.0.9")
    assert status == 429 and int(response.headers["Retry-After"]) == 60
    assert "10.0.0.9" not in doc["error"]
    with pytest.raises(SignInRefused) as limited:
        sessions.sign_in("guess", "mallory", "10.0.0.9")
    assert limited.value.retry_after == 60
    # The right token passes, from the guesser's address too (a proxy's, a shared NAT).
    assert call(api, "GET", "/api/v1/incidents", client="10.0.0.9")[0] == 200
    assert sessions.sign_in(TOKEN, "alice", "10.0.0.9").name == "alice"
    assert call(api, "GET", "/api/v1/incidents", token="guess", client="10.0.0.2")[0] == 403
    clock[0] += 61
    assert call(api, "GET", "/api/v1/incidents", token="guess", client="10.0.0.9")[0] == 403


def test_a_missing_endpoint_is_not_echoed(g: TestApp) -> None:
    status, doc, _ = call(make_api(g), "GET", "/api/v1/<img src=x>")
    assert (status, doc) == (404, {"error": "no such endpoint"})
    status, doc, _ = call(make_api(g), "GET", "/api/v1/incidents/<img src=x>")
    assert status == 404 and "img" not in doc["error"]


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
    assert status == 400 and doc["error"].startswith("for: expected a duration")
    assert "forever" not in doc["error"]  # an answer carries no text the asker wrote

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
    assert load_token(settings, {"GUARDIAN_API_TOKEN": f" {LONG} \n"}) == LONG
    assert load_token(settings, {}) is None
    named = load_settings(None, env={"GUARDIAN_API_TOKEN_ENV": "MY_TOKEN"})
    assert load_token(named, {"MY_TOKEN": LONG + "x"}) == LONG + "x"
    token_file = tmp_path / "token"
    token_file.write_text(f"{FROM_FILE}\n")
    token_file.chmod(0o600)
    from_file = load_settings(None, env={"GUARDIAN_API_TOKEN_FILE": str(token_file)})
    assert load_token(from_file, {"GUARDIAN_API_TOKEN": "ignored"}) == FROM_FILE
    token_file.write_text("")
    with pytest.raises(ConfigError, match="the file is empty"):
        load_token(from_file, {})
    missing = load_settings(None, env={"GUARDIAN_API_TOKEN_FILE": str(tmp_path / "nope")})
    with pytest.raises(ConfigError, match="cannot read"):
        load_token(missing, {})


@pytest.mark.parametrize("mode", [0o644, 0o604, 0o666, 0o602])
def test_a_token_file_other_users_may_read_or_write_is_refused(tmp_path: Path, mode: int) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(f"{FROM_FILE}\n")
    token_file.chmod(mode)
    settings = load_settings(None, env={"GUARDIAN_API_TOKEN_FILE": str(token_file)})
    with pytest.raises(ConfigError) as refused:
        load_token(settings, {})
    assert str(refused.value) == (
        f"api.token_file = {str(token_file)!r}: other users may read or write it (mode "
        f"0{mode:o}); chmod 600 it (640 if a group needs it)"
    )
    assert FROM_FILE not in str(refused.value)


def test_a_token_file_for_a_group_is_accepted(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(f"{FROM_FILE}\n")
    token_file.chmod(0o640)
    settings = load_settings(None, env={"GUARDIAN_API_TOKEN_FILE": str(token_file)})
    assert load_token(settings, {}) == FROM_FILE


@pytest.mark.parametrize("length", [1, 3, 31])
def test_a_short_token_is_refused_at_load_with_how_to_make_one(tmp_path: Path, length: int) -> None:
    short = "k" * length
    settings = load_settings(None, env={})
    with pytest.raises(ConfigError) as refused:
        load_token(settings, {"GUARDIAN_API_TOKEN": short})
    assert str(refused.value) == (
        f"api.token_env = 'GUARDIAN_API_TOKEN': the token is {length} characters; expected at "
        "least 32 (make one with `guardian token new` or `openssl rand -hex 32`)"
    )
    token_file = tmp_path / "token"
    token_file.write_text(short)
    token_file.chmod(0o600)
    from_file = load_settings(None, env={"GUARDIAN_API_TOKEN_FILE": str(token_file)})
    with pytest.raises(ConfigError, match=r"^api.token_file = .*: the token is \d+ characters"):
        load_token(from_file, {})


def test_guardian_token_new_prints_a_token_that_loads_and_is_masked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli_main(["token", "new"]) == 0
    token = capsys.readouterr().out.strip()
    assert len(token) == 64 and int(token, 16) >= 0
    assert load_token(load_settings(None, env={}), {"GUARDIAN_API_TOKEN": token}) == token
    redact = Redactor()
    redact.add(token)
    assert token not in redact(f"Authorization: Bearer {token}")
