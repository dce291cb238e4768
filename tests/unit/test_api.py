"""The /api/v1 handler without a socket: auth, validation, and each endpoint over fakes."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from guardian.adapters.sqlite.store import SqliteStore
from guardian.api import Api, load_token
from guardian.checks import CheckSettings
from guardian.config import ConfigError, load_settings
from guardian.core import incidents
from guardian.core.model import HealthCheckResult, ProblemType
from guardian.core.policy import RestartPolicy
from guardian.healer import Healer, HealerSettings
from guardian.http import Request, Response, Routes
from guardian.metrics import Metrics
from tests.fakes import FakeClock, FakeEngine

TOKEN = "s3cret-token"
HOST = "host"


@pytest.fixture
def healer(tmp_path: Path) -> Healer:
    clock = FakeClock()
    settings = HealerSettings(
        host=HOST,
        watch_label="guardian.enable",
        policy=RestartPolicy(),
        checks=CheckSettings(),
        stop_timeout=timedelta(seconds=1),
        verify_timeout=timedelta(seconds=30),
    )
    store = SqliteStore(tmp_path / "guardian.db")
    return Healer(FakeEngine(clock), store, clock, settings, Metrics(CollectorRegistry()))


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


def open_incident(healer: Healer, container: str = "app") -> int:
    now = healer.clock.now()
    result = HealthCheckResult("id", container, now, ProblemType.UNHEALTHY, "probe failed")
    saved = healer.store.save_incident(incidents.record_detection(None, HOST, result, now))
    return saved.id or 0


def test_mutations_need_the_right_bearer_token(healer: Healer) -> None:
    api = Api(healer, TOKEN)
    iid = open_incident(healer)
    path = f"/api/v1/incidents/{iid}/ack"
    status, doc, response = call(api, "POST", path, {"by": "alice"}, token=None)
    assert status == 401 and "Bearer" in doc["error"]
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    status, doc, _ = call(api, "POST", path, {"by": "alice"}, token="wrong")
    assert (status, doc["error"]) == (403, "the bearer token is not valid")
    assert healer.store.get_incident(iid).state == "active"  # type: ignore[union-attr]
    status, doc, _ = call(api, "POST", path, {"by": "alice"})
    assert status == 200 and doc["incident"]["state"] == "acknowledged"


def test_reads_need_no_token(healer: Healer) -> None:
    open_incident(healer)
    status, doc, _ = call(Api(healer, TOKEN), "GET", "/api/v1/incidents", token=None)
    assert status == 200 and [i["container"] for i in doc["incidents"]] == ["app"]


def test_without_a_configured_token_mutations_are_off(healer: Healer) -> None:
    iid = open_incident(healer)
    status, doc, _ = call(Api(healer, None), "POST", f"/api/v1/incidents/{iid}/ack", {"by": "a"})
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
def test_bad_bodies_are_400_with_a_message(healer: Healer, body: Any, message: str) -> None:
    iid = open_incident(healer)
    status, doc, _ = call(Api(healer, TOKEN), "POST", f"/api/v1/incidents/{iid}/ack", body)
    assert status == 400 and message in doc["error"]


def test_refused_transitions_are_409_with_the_state_machine_message(healer: Healer) -> None:
    iid = open_incident(healer)
    api = Api(healer, TOKEN)
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


def test_incident_with_timeline_and_not_found(healer: Healer) -> None:
    iid = open_incident(healer)
    api = Api(healer, TOKEN)
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


def test_incident_filters(healer: Healer) -> None:
    open_incident(healer, "a")
    open_incident(healer, "b")
    api = Api(healer, TOKEN)
    _, doc, _ = call(api, "GET", "/api/v1/incidents", container="b")
    assert [i["container"] for i in doc["incidents"]] == ["b"]
    _, doc, _ = call(api, "GET", "/api/v1/incidents", state="closed")
    assert doc["incidents"] == []
    status, doc, _ = call(api, "GET", "/api/v1/incidents", state="bogus")
    assert status == 400 and "expected one of" in doc["error"]


def test_silence_endpoints_and_the_decision_they_cause(healer: Healer) -> None:
    api = Api(healer, TOKEN)
    engine: FakeEngine = healer.engine  # type: ignore[assignment]
    engine.add("app", health="unhealthy")
    body = {"container": "app", "for": "2h", "reason": "upgrade", "by": "alice"}
    assert call(api, "POST", "/api/v1/silences", body, token=None)[0] == 401
    status, doc, _ = call(api, "POST", "/api/v1/silences", body)
    assert status == 201 and doc["silence"]["active"] is True
    _, doc, _ = call(api, "GET", "/api/v1/containers")
    [row] = doc["containers"]
    assert row["held_back"] == "silenced"
    assert row["next_restart"] == (healer.clock.now() + timedelta(hours=2)).isoformat(
        "T", "seconds"
    )
    status, doc, _ = call(api, "POST", "/api/v1/silences", {**body, "for": "forever"})
    assert status == 400 and "for 'forever'" in doc["error"]

    assert call(api, "DELETE", "/api/v1/silences/app", {"by": "bob"})[0] == 200
    _, doc, _ = call(api, "GET", "/api/v1/silences")
    assert doc["silences"] == []
    _, doc, _ = call(api, "GET", "/api/v1/silences", all="true")
    assert [s["ended_by"] for s in doc["silences"]] == ["bob"]
    assert call(api, "DELETE", "/api/v1/silences/app", {"by": "bob"})[0] == 404


def test_actions_endpoint(healer: Healer) -> None:
    engine: FakeEngine = healer.engine  # type: ignore[assignment]
    engine.add("app", health="unhealthy")
    healer.sweep()
    api = Api(healer, TOKEN)
    _, doc, _ = call(api, "GET", "/api/v1/actions", container="app")
    assert [(a["kind"], a["reason"]) for a in doc["actions"]] == [("restart", "allowed")]
    healer.clock.advance(hours=2)  # type: ignore[attr-defined]
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
    from_file = load_settings(None, env={"GUARDIAN_API_TOKEN_FILE": str(token_file)})
    assert load_token(from_file, {"GUARDIAN_API_TOKEN": "ignored"}) == "from-file"
    token_file.write_text("")
    with pytest.raises(ConfigError, match="the file is empty"):
        load_token(from_file, {})
    missing = load_settings(None, env={"GUARDIAN_API_TOKEN_FILE": str(tmp_path / "nope")})
    with pytest.raises(ConfigError, match="cannot read"):
        load_token(missing, {})
