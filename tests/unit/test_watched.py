"""One "watched" predicate: with watch.scope set, the sweep, `guardian status` and the API's
container list show the same containers."""

from __future__ import annotations

import json

from guardian.entrypoints.api import Api
from guardian.entrypoints.http_server import Request, Routes
from guardian.readside.status import container_status
from tests.app import make_app


def test_with_a_scope_the_sweep_status_and_the_api_list_the_same_containers(tmp_path):
    t = make_app(tmp_path, watch={"scope": "team=blue"})
    t.engine.add("blue-web", labels={"guardian.enable": "true", "team": "blue"})
    t.engine.add("blue-db", labels={"guardian.enable": "true", "team": "blue"})
    t.engine.add("red-web", labels={"guardian.enable": "true", "team": "red"})  # out of scope
    t.engine.add("blue-plain", labels={"team": "blue"})  # not opted in

    swept = sorted(r.snapshot.name for r in t.healer.sweep().rows)
    status = [c.name for c in container_status(t.healer, t.app.operator)]
    routes = Routes()
    routes.mount("/api/v1", Api(t.healer, t.app.operator, None, public_reads=True))
    response = routes.dispatch(Request("GET", "/api/v1/containers", {}, {}, b""))
    api = [row["container"] for row in json.loads(response.body)["containers"]]

    assert swept == status == api == ["blue-db", "blue-web"]
