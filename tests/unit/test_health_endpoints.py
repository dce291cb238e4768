"""/healthz, /readyz, /metrics and the route table, over a fake engine and a fake clock."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from guardian.entrypoints.daemon import Daemon
from guardian.entrypoints.http_server import Request, Response, Routes
from tests.app import make_app


@pytest.fixture
def daemon(tmp_path: Path) -> Daemon:
    """A daemon over a fake engine, a real store in tmp and a fake clock; interval 10s."""
    t = make_app(tmp_path, daemon=True, watch={"interval": "10s"})
    t.engine.add("web")
    yield Daemon(t.app)
    t.store.close()


def get(routes: Routes, path: str, method: str = "GET") -> Response:
    return routes.dispatch(Request(method, path, {}, {}, b""))


def test_healthz_answers_from_the_monotonic_clock_through_wall_clock_steps(daemon):
    """A step back of an hour used to give a negative age and "ok" for the hour; a step
    forward, a false stall. The wall clock is not what /healthz measures."""
    clock, routes = daemon.app.clock, daemon.routes()
    daemon.sweep_job()
    clock.step(hours=-1)
    clock.advance(61)  # the sweep stalled: 61s passed since it turned, whatever the wall says
    assert get(routes, "/healthz").body == b"sweep stalled for 61s (limit 60s)\n"
    daemon.sweep_job()
    clock.step(hours=2)
    assert get(routes, "/healthz").body == b"ok: last sweep 0.0s ago\n"


def test_healthz_is_503_before_the_first_sweep(daemon):
    response = get(daemon.routes(), "/healthz")
    assert response.status == 503
    assert response.body == b"no sweep completed yet\n"


def test_healthz_turns_503_when_the_sweep_stalls_and_200_when_it_recovers(daemon):
    """The watchdog's rule: 3 x interval (10s) plus docker.timeout (30s), on the monotonic
    clock."""
    clock, routes = daemon.app.clock, daemon.routes()
    daemon.sweep_job()
    assert get(routes, "/healthz").status == 200

    clock.advance(60)  # exactly the limit: still fine
    assert get(routes, "/healthz").status == 200

    clock.advance(1)  # no sweep has turned since: the loop is stalled
    response = get(routes, "/healthz")
    assert response.status == 503
    assert response.body == b"sweep stalled for 61s (limit 60s)\n"
    assert not daemon.systemd.liveness.alive()  # the watchdog's answer is the same one

    daemon.sweep_job()
    response = get(routes, "/healthz")
    assert response.status == 200
    assert response.body.startswith(b"ok")


def test_healthz_stays_200_while_the_engine_is_unreachable_and_readyz_says_so(daemon):
    """An unreachable engine is no stall: the loop turns, and restarting Guardian would not
    bring the engine back (docs/monitoring.md). /readyz and the docker_up gauge report the
    engine."""
    clock, engine, routes = daemon.app.clock, daemon.app.engine, daemon.routes()
    registry = daemon.app.metrics.registry
    engine.reachable = False
    for _ in range(5):
        clock.advance(10)
        daemon.sweep_job()
        response = get(routes, "/healthz")
        assert response.status == 200, response.body
        assert response.body == b"ok: last sweep 0.0s ago; docker engine unreachable\n"
    assert get(routes, "/readyz").status == 503
    assert registry.get_sample_value("guardian_docker_up") == 0
    never = registry.get_sample_value("guardian_last_sweep_timestamp_seconds")
    assert never is not None and math.isnan(never)  # no sweep completed yet

    engine.reachable = True
    clock.advance(5)
    daemon.sweep_job()
    assert get(routes, "/healthz").body.startswith(b"ok: last sweep 0.0s ago\n")
    assert get(routes, "/readyz").status == 200
    assert registry.get_sample_value("guardian_docker_up") == 1
    assert registry.get_sample_value("guardian_last_sweep_timestamp_seconds") == (
        clock.now().timestamp()
    )


def test_healthz_body_is_one_line(daemon):
    daemon.sweep()
    daemon.app.clock.advance(3600)
    body = get(daemon.routes(), "/healthz").body.decode()
    assert body.count("\n") == 1 and body.endswith("\n")


def test_readyz_reports_an_unreachable_engine(daemon):
    routes = daemon.routes()
    assert get(routes, "/readyz").status == 200
    daemon.app.engine.reachable = False
    response = get(routes, "/readyz")
    assert response.status == 503
    assert response.body == b"fake engine unreachable\n"


def test_readyz_reports_a_closed_store(daemon):
    daemon.app.store.close()
    response = get(daemon.routes(), "/readyz")
    assert response.status == 503
    assert response.body.startswith(b"store not usable")


def test_metrics_endpoint_serves_the_text_exposition(daemon):
    daemon.sweep()
    response = get(daemon.routes(), "/metrics")
    assert response.status == 200
    assert response.content_type.startswith("text/plain; version=0.0.4")
    assert b"guardian_containers_watched 1.0\n" in response.body
    assert get(daemon.routes(), "/metrics", "POST").status == 405


def test_unknown_paths_are_404_and_mounted_prefixes_reach_their_handler(daemon):
    routes = daemon.routes()
    seen: list[str] = []

    def api(request: Request) -> Response:
        seen.append(request.path)
        return Response.text(200, "api")

    routes.mount("/api/v1/", api)
    assert get(routes, "/nothing").status == 404
    assert get(routes, "/api/v1/incidents").body == b"api\n"
    assert get(routes, "/api/v1").status == 200
    assert get(routes, "/healthz").status == 503  # exact routes still win
    assert seen == ["/api/v1/incidents", "/api/v1"]


def test_a_failing_store_is_counted_and_stalls_the_sweep(daemon):
    daemon.app.engine.set("web", health="unhealthy")  # the sweep must write an incident
    daemon.app.store.close()
    daemon.sweep()
    assert daemon.app.metrics.registry.get_sample_value("guardian_store_errors_total") == 1
    assert get(daemon.routes(), "/healthz").status == 503


def test_the_probe_tick_runs_only_while_a_container_has_a_probe(tmp_path):
    t = make_app(tmp_path, daemon=True)
    engine, store = t.engine, t.store
    d = Daemon(t.app)
    d.schedule()
    d.scheduler.start(paused=True)  # jobs are kept and judged, none runs
    try:
        probes = lambda: d.scheduler.get_job("probes").next_run_time  # noqa: E731
        engine.add("web")
        d.sweep_job()
        d.follow_work()  # the main loop's tick
        assert probes() is None  # nothing to probe: no tick
        engine.add(
            "db",
            addresses=("172.17.0.9",),
            labels={"guardian.enable": "true", "guardian.probe.tcp": ":5432"},
        )
        d.sweep_job()
        d.follow_work()
        assert probes() is not None
        engine.set("db", state="exited", exit_code=0)  # stopped: nothing to probe
        d.sweep_job()
        d.follow_work()
        assert probes() is None
    finally:
        d.scheduler.shutdown(wait=False)
        store.close()
