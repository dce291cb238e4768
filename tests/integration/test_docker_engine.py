"""DockerEngine against the real engine: what it sees, how many requests it makes, what it
returns for a restart, a removed container and an absent engine."""

from __future__ import annotations

import os
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from guardian.adapters.clock import monotonic
from guardian.adapters.engine.docker_engine import DockerEngine
from guardian.core.model import Outcome
from guardian.ports import EngineUnavailable
from tests.helpers import wait_until
from tests.integration.conftest import ENGINES, RUN_ID
from tests.proxy import DockerProxy

SCOPE = f"guardian.test.run={RUN_ID}"


def test_one_list_request_sees_state_and_health(containers, tmp_path: Path):
    sick = containers.run("sick", health_cmd="false")
    fine = containers.run("fine")
    out = containers.run("out", ["sh", "-c", "exit 4"])
    containers.wait_health(sick, "unhealthy")
    wait_until(lambda: containers.inspect(out)["State"]["Status"] == "exited", 10)
    proxy = DockerProxy(tmp_path / "count.sock").start()
    try:
        engine = DockerEngine(proxy.url, timedelta(seconds=10))
        engine.ping()
        before = len(proxy.requests)
        snaps = {s.name: s for s in engine.list_containers("guardian.enable", SCOPE)}
        assert len(proxy.requests) - before == 1  # exactly one request for the whole sweep
        assert snaps[sick].health == "unhealthy" and snaps[fine].state == "running"
        assert snaps[out].state == "exited" and not snaps[out].inspected
        full = engine.inspect(snaps[out].id)
        assert full is not None and full.exit_code == 4 and full.inspected
        # Listed again, an unchanged container is the same snapshot (service/state/quiet.py).
        again = {s.name: s for s in engine.list_containers("guardian.enable", SCOPE)}
        assert all(again[name] is snaps[name] for name in (sick, fine, out))
        # The unwell ones (a sweep's resync): two requests, the engine selects, the same snapshots.
        before = len(proxy.requests)
        unwell = engine.list_unwell("guardian.enable", SCOPE)
        assert len(proxy.requests) - before == 2
        assert sorted(s.name for s in unwell) == sorted([sick, out])
        assert all(s is snaps[s.name] for s in unwell)
        engine.close()
    finally:
        proxy.stop()


def test_a_list_by_id_is_one_request_for_exactly_those_ids(containers, tmp_path):
    """A sweep between two whole lists asks by id (service/state/listing.py). The engine's id filter
    matches a pattern too (a prefix of an id matches it): only the exact ids come back, one
    removed since comes back as nothing, and an unchanged one as the same snapshot."""
    web, db, other = containers.run("web"), containers.run("db"), containers.run("other")
    gone = containers.run("gone")
    proxy = DockerProxy(tmp_path / "count.sock").start()
    try:
        engine = DockerEngine(proxy.url, timedelta(seconds=10))
        engine.ping()
        whole = {s.name: s for s in engine.list_containers("guardian.enable", SCOPE)}
        ids = {whole[name].id: name for name in (web, db, gone)}
        containers.api.remove_container(whole[gone].id, force=True)
        before = len(proxy.requests)
        listed = engine.list_containers("guardian.enable", SCOPE, ids=set(ids))
        assert len(proxy.requests) - before == 1
        assert sorted(s.name for s in listed) == sorted([web, db])
        assert all(s is whole[s.name] for s in listed)
        assert engine.list_containers("guardian.enable", SCOPE, ids={whole[other].id[:12]}) == []
        engine.close()
    finally:
        proxy.stop()


def test_a_list_of_named_containers_is_one_request_for_exactly_those(containers, tmp_path):
    """The status page re-lists only the containers a change names. The engine's name filter
    matches a pattern (web matches web-2, and the run's prefix matches every name): only the
    exact names come back."""
    web = containers.run("web")
    containers.run("web-2")
    db = containers.run("db")
    proxy = DockerProxy(tmp_path / "count.sock").start()
    try:
        engine = DockerEngine(proxy.url, timedelta(seconds=10))
        engine.ping()
        before = len(proxy.requests)
        named = engine.list_containers("guardian.enable", SCOPE, {web, db, "gone-long-ago"})
        assert len(proxy.requests) - before == 1
        assert sorted(s.name for s in named) == sorted([web, db])
        assert engine.list_containers("guardian.enable", SCOPE, {web[:-1]}) == []
        engine.close()
    finally:
        proxy.stop()


@pytest.mark.parametrize("engine", ENGINES, indirect=True)
def test_an_inspect_shows_as_listed_what_the_list_call_shows(engine, containers):
    """The status page takes a container the loop just inspected as the list call would show
    it (Engine.as_listed): the two agree for every state and health on the engine."""
    leader = containers.run("leader", health_cmd="true")
    made = {
        "healthy": leader,
        "unhealthy": containers.run("sick", health_cmd="false"),
        "starting": containers.run("slow", health_cmd="true", health_interval=3600),
        "no-check": containers.run("plain"),
        "exited": containers.run("out", ["sh", "-c", "exit 3"], health_cmd="true"),
        "paused": containers.run("paused", health_cmd="true"),
        "created": containers.run("created", health_cmd="true", start=False),
        "follower": containers.run("follower", network_mode=f"container:{leader}"),
    }
    containers.wait_health(made["healthy"], "healthy")
    containers.wait_health(made["unhealthy"], "unhealthy")
    containers.wait_health(made["paused"], "healthy")
    engine.api.pause(made["paused"])
    wait_until(lambda: containers.inspect(made["exited"])["State"]["Status"] == "exited", 10)
    url = engine.url or os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    guardian = DockerEngine(url, timedelta(seconds=10))
    try:
        listed = {s.name: s for s in guardian.list_containers("guardian.enable", SCOPE)}
        for what, name in made.items():
            full = guardian.inspect(name)
            assert full is not None, what
            assert guardian.as_listed(full) == listed[name], what
        assert listed[made["starting"]].health == "starting"
        # What a resync lists (Engine.list_unwell): every container not running well, as listed.
        unwell = {s.name: s for s in guardian.list_unwell("guardian.enable", SCOPE)}
        astray = ("unhealthy", "starting", "exited", "paused", "created")
        assert sorted(unwell) == sorted(made[what] for what in astray)
        assert all(unwell[name] == listed[name] for name in unwell)
        assert listed[made["paused"]].state == "paused" and listed[made["paused"]].health is None
    finally:
        engine.api.unpause(made["paused"])
        engine.api.remove_container(made["follower"], force=True)  # Podman: before its leader
        guardian.close()


def test_restart_outcomes_from_the_real_engine(containers, docker_api):
    name = containers.run("target")
    engine = DockerEngine("unix:///var/run/docker.sock", timedelta(seconds=10))
    snap = engine.inspect(containers.inspect(name)["Id"])
    assert snap is not None and snap.started_at is not None
    result = engine.restart(snap.id, timedelta(seconds=1), snap.started_at)
    assert result.outcome is Outcome.RESTARTED
    after = engine.inspect(snap.id)
    assert after is not None and after.started_at is not None and after.started_at > snap.started_at

    docker_api.remove_container(snap.id, force=True)
    assert engine.inspect(snap.id) is None
    gone = engine.restart(snap.id, timedelta(seconds=1), None)
    assert gone.outcome is Outcome.PERMANENT_FAILURE and "404" in gone.detail
    engine.close()


def test_no_engine_is_engine_unavailable_or_a_transient_outcome(tmp_path: Path):
    engine = DockerEngine(f"unix://{tmp_path}/none.sock", timedelta(seconds=2))
    try:
        engine.ping()
        raise AssertionError("ping should fail without an engine")
    except EngineUnavailable as exc:
        assert "unreachable" in str(exc)
        # The one line says which socket it tried and how to point Guardian elsewhere.
        assert f"no socket at {tmp_path}/none.sock" in str(exc) and "docker.url" in str(exc)
    result = engine.restart("abc", timedelta(seconds=1), None)
    assert result.outcome is Outcome.TRANSIENT_FAILURE and result.retryable


def test_events_arrive_and_stop_events_ends_the_stream(containers):
    engine = DockerEngine("unix:///var/run/docker.sock", timedelta(seconds=10))
    seen: list[str] = []

    def listen() -> None:
        for event in engine.events(None):
            if event.container_name.startswith(f"gdt-{RUN_ID}"):
                seen.append(event.action)

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    wait_until(lambda: engine.subscribed, 10, message="subscribed")
    name = containers.run("evented", health_cmd="false")
    containers.wait_health(name, "unhealthy")
    wait_until(lambda: "start" in seen and "health_status" in seen, 10, message="events")
    engine.stop_events()
    thread.join(5)
    assert not thread.is_alive()
    engine.close()


class SkewedClock:
    """Guardian's clocks with the wall clock `skew` off the engine's (the engine is real)."""

    def __init__(self, skew: timedelta) -> None:
        self.skew = skew

    def now(self) -> datetime:
        return datetime.now(UTC) + self.skew

    def monotonic(self) -> float:
        return monotonic()


def test_a_local_engines_answers_bound_its_stamps_to_milliseconds():
    """The engine shares Guardian's clock here: its answers' Date headers (whole seconds) narrow
    how far its stamps may be off as they fall at other phases of a second, and the container
    cache orders events against inspects within that (core.cache_entry.order_margin)."""
    engine = DockerEngine(
        os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock"), timedelta(seconds=10)
    )
    try:
        assert engine.stamp_uncertainty() is None  # no answer yet
        engine.ping()
        first = engine.stamp_uncertainty()
        assert first is not None and first <= timedelta(seconds=1.5)

        def narrowed() -> timedelta | None:
            engine.ping()
            bound = engine.stamp_uncertainty()
            return bound if bound is not None and bound <= timedelta(milliseconds=100) else None

        wait_until(narrowed, 10, interval=0.07, message="the bounds narrow")
        assert abs(engine.engine_clock.skew) <= timedelta(milliseconds=100)
    finally:
        engine.close()


@pytest.mark.parametrize("minutes", [10, -10])
def test_the_engines_stamps_come_back_in_guardians_frame(containers, minutes):
    """Guardian's clock 10 minutes off the engine's: State.StartedAt, the health probe's time
    and event times are read in Guardian's frame (from the Date of the engine's answers)."""
    clock = SkewedClock(timedelta(minutes=minutes))
    engine = DockerEngine("unix:///var/run/docker.sock", timedelta(seconds=10), clock)
    seen: list[datetime] = []

    def listen() -> None:
        for event in engine.events(clock.now() - timedelta(seconds=1)):
            if event.container_name.startswith(f"gdt-{RUN_ID}-skew"):
                seen.append(event.at)

    engine.ping()
    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    wait_until(lambda: engine.subscribed, 10, message="event stream open")
    name = containers.run("skew", health_cmd="true")
    containers.wait_health(name, "healthy")
    snap = engine.inspect(containers.inspect(name)["Id"])
    assert snap is not None and snap.started_at is not None and snap.health_log_at is not None
    for stamp in (snap.started_at, snap.health_log_at):
        assert abs((clock.now() - stamp).total_seconds()) < 30, (stamp, clock.now())
    wait_until(lambda: seen, 10, message="the container's events")
    assert abs((clock.now() - seen[0]).total_seconds()) < 30
    engine.close()
    thread.join(timeout=5)
