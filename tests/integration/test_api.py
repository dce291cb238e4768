"""The /api/v1 endpoints of a running Guardian, over real HTTP, with a real container."""

from __future__ import annotations

from typing import Any

import requests

from tests.helpers import wait_until
from tests.integration.conftest import RUN_ID

HEALTH = "test ! -f /run/sick"
# Other test sessions may run Guardians on the same engine watching `guardian.enable`: opt in
# with a label of this run only, so no other Guardian touches these containers.
WATCH = {"label": f"gdt.{RUN_ID}.watch"}
OPT_IN = {"enable": None, "labels": {WATCH["label"]: "true"}}
TOKEN = "integration-token-0123456789abcdef"


def api(g: Any, method: str, path: str, token: str | None = None, **kwargs: Any) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return requests.request(
        method, f"{g.http_url}/api/v1{path}", headers=headers, timeout=10, **kwargs
    )


def test_the_api_reads_and_changes_state_only_with_the_token(containers, guardian):
    name = containers.run("api", health_cmd=HEALTH, **OPT_IN)
    containers.wait_health(name, "healthy")
    g = guardian(
        env={"GUARDIAN_API_TOKEN": TOKEN},
        watch={**WATCH, "interval": "1h"},
        restart={"dry_run": True},
    )
    containers.make_unhealthy(name)
    [incident] = wait_until(
        lambda: api(g, "GET", "/incidents", TOKEN, params={"container": name}).json()["incidents"],
        20,
        0.3,
        "incident via the API",
    )
    ack = f"/incidents/{incident['id']}/ack"
    # The incident's detail quotes the container's health output: not for anyone on the port.
    r = api(g, "GET", f"/incidents/{incident['id']}")
    assert r.status_code == 401 and "Bearer" in r.json()["error"]

    r = api(g, "POST", ack, json={"by": "alice"})
    assert r.status_code == 401 and "Bearer" in r.json()["error"]
    r = api(g, "POST", ack, token="not-the-token", json={"by": "alice"})
    assert r.status_code == 403 and r.json() == {"error": "the bearer token is not valid"}
    r = api(g, "POST", ack, token=TOKEN, data=b"{oops")
    assert r.status_code == 400 and r.json()["error"].startswith("malformed JSON body")
    r = api(g, "POST", ack, token=TOKEN, json={"by": "alice", "priority": "high"})
    assert r.status_code == 400 and "unknown field(s) priority" in r.json()["error"]
    r = api(g, "POST", ack, token=TOKEN, data=b"x" * (65 * 1024))
    assert r.status_code == 413
    shown = api(g, "GET", f"/incidents/{incident['id']}", TOKEN).json()
    assert shown["incident"]["state"] == "active"

    r = api(g, "POST", ack, token=TOKEN, json={"by": "alice"})
    assert r.status_code == 200 and r.json()["incident"]["state"] == "acknowledged"
    timeline = api(g, "GET", f"/incidents/{incident['id']}", TOKEN).json()["timeline"]
    assert ("alice", "active -> acknowledged") in [(e["actor"], e["event"]) for e in timeline]

    close = f"/incidents/{incident['id']}/close"
    r = api(g, "POST", close, token=TOKEN, json={"by": "alice"})
    assert r.status_code == 409
    assert r.json()["error"] == (
        f"cannot close incident {incident['id']}: it is acknowledged; resolve it first"
    )

    rows = api(g, "GET", "/containers", TOKEN).json()["containers"]
    [row] = [c for c in rows if c["container"] == name]
    assert (row["health"], row["held_back"]) == ("unhealthy", "dry_run")
    actions = api(g, "GET", "/actions", TOKEN, params={"since": "1h"}).json()["actions"]
    reasons = [a["reason"] for a in actions]
    assert reasons == ["dry_run"]

    body = {"container": name, "for": "1h", "reason": "upgrade", "by": "alice"}
    assert api(g, "POST", "/silences", json=body).status_code == 401
    assert api(g, "POST", "/silences", token=TOKEN, json=body).status_code == 201
    assert [s["container"] for s in api(g, "GET", "/silences", TOKEN).json()["silences"]] == [name]
    assert api(g, "DELETE", f"/silences/{name}", token=TOKEN, json={"by": "bob"}).status_code == 200
    assert api(g, "GET", "/silences", TOKEN).json()["silences"] == []
    assert api(g, "GET", "/nope", TOKEN).status_code == 404
    assert g.stop() == 0
    assert TOKEN not in g.log()


def test_without_a_token_the_api_is_off_unless_reads_are_public(guardian):
    g = guardian(env={"GUARDIAN_API_TOKEN": ""}, watch=WATCH)
    r = api(g, "POST", "/silences", token="anything", json={})
    assert r.status_code == 403 and "no API token is configured" in r.json()["error"]
    r = api(g, "GET", "/incidents")
    assert r.status_code == 403 and "api.public_reads: true" in r.json()["error"]
    assert g.stop() == 0
    g = guardian(env={"GUARDIAN_API_TOKEN": ""}, watch=WATCH, api={"public_reads": True})
    assert api(g, "GET", "/incidents").json() == {"incidents": []}
    assert api(g, "POST", "/silences", json={}).status_code == 403
