"""What the engine's JSON means, on Docker and on Podman's Docker-compatible API: which engine
answers /version, events under either engine's names and shapes (payloads as each sends them), and
the list call's snapshots (the same one for an unchanged container).
"""

from __future__ import annotations

from typing import Any

import pytest

from guardian.adapters.engine.engine_payloads import (
    ListedSnapshots,
    identify,
    parse_event,
    summary_snapshot,
)
from guardian.ports import EngineEvent
from tests.app import make_app
from tests.fakes import FakeClock, FakeEngine

DOCKER_VERSION = {
    "Platform": {"Name": "Docker Engine - Community"},
    "Components": [
        {"Name": "Engine", "Version": "20.10.24+dfsg1", "Details": {"ApiVersion": "1.41"}},
        {"Name": "containerd", "Version": "1.6.20"},
    ],
    "Version": "20.10.24+dfsg1",
    "ApiVersion": "1.41",
}
PODMAN_VERSION = {
    "Platform": {"Name": "linux/amd64/debian-12"},
    "Components": [
        {"Name": "Podman Engine", "Version": "4.3.1", "Details": {"APIVersion": "4.3.1"}},
        {"Name": "Conmon", "Version": "conmon version 2.1.6, commit: unknown"},
    ],
    "Version": "4.3.1",
    "ApiVersion": "1.41",
}


def event(action: str, **extra: Any) -> dict[str, Any]:
    attributes = {"name": "app", "guardian.enable": "true"}
    actor = {"ID": "c1", "Attributes": attributes}
    return {"Type": "container", "Action": action, "Actor": actor, "timeNano": 10**18, **extra}


def test_the_engine_kind_comes_from_the_version_components():
    docker, podman = identify(DOCKER_VERSION), identify(PODMAN_VERSION)
    assert (docker.kind, docker.version, docker.api_version) == ("docker", "20.10.24+dfsg1", "1.41")
    assert (podman.kind, podman.version, podman.api_version) == ("podman", "4.3.1", "1.41")
    assert identify({}).kind == "docker"  # an engine that says nothing is taken for Docker


@pytest.mark.parametrize(
    ("raw", "action", "health"),
    [
        (event("health_status: unhealthy"), "health_status", "unhealthy"),  # Docker
        (event("health_status", HealthStatus="healthy"), "health_status", "healthy"),  # Podman
        (event("die"), "die", None),
        (event("died"), "die", None),  # Podman's filter name, should it reach the stream
        (event("destroy"), "destroy", None),
        (event("remove"), "destroy", None),  # Podman
    ],
)
def test_events_read_the_same_under_either_engines_names(raw, action, health):
    parsed = parse_event(raw)
    assert parsed is not None and parsed.action == action
    assert parsed.container_id == "c1" and parsed.container_name == "app"
    assert parsed.attributes.get("health_status") == health


def test_exec_events_are_dropped_on_both_engines():
    assert parse_event(event("exec_die")) is None  # Docker
    assert parse_event(event("exec_died")) is None  # Podman


@pytest.mark.parametrize("status", ["unhealthy", "healthy", "starting", ""])
def test_any_health_event_of_a_watched_container_means_inspect_now(tmp_path, status):
    # Podman's event carries the status before the check that sent it: only an inspect is true.
    w = make_app(tmp_path, engine=FakeEngine(FakeClock(), kind="podman"))
    snap = w.engine.add("app")
    labels = {"health_status": status, **snap.labels}  # an event carries the container's labels
    health = EngineEvent("health_status", snap.id, "app", w.clock.now(), labels)
    assert w.healer.on_event(health) is True
    other = EngineEvent("health_status", "x", "other", w.clock.now(), {"health_status": status})
    assert w.healer.on_event(other) is False  # not opted in: no inspect spent on it


def listed_item(**fields: object) -> dict[str, object]:
    item: dict[str, object] = {
        "Id": "c1" * 32,
        "Names": ["/web"],
        "Labels": {"guardian.enable": "true"},
        "State": "running",
        "Status": "Up 5 minutes (healthy)",
        "HostConfig": {"NetworkMode": "bridge"},
        "NetworkSettings": {"Networks": {"bridge": {"IPAddress": "172.17.0.2"}}},
    }
    return {**item, **fields}


def test_an_unchanged_container_is_listed_as_the_same_snapshot() -> None:
    listed = ListedSnapshots()
    [first] = listed.snapshots([listed_item()], complete=True)
    # The Status text moves with the clock; only its health is part of the snapshot.
    [again] = listed.snapshots([listed_item(Status="Up 6 minutes (healthy)")], complete=True)
    assert again is first


@pytest.mark.parametrize(
    "changed",
    [
        {"Status": "Up 6 minutes (unhealthy)"},
        {"State": "paused"},
        {"Names": ["/web-2"]},
        {"Labels": {"guardian.enable": "false"}},
        {"HostConfig": {"NetworkMode": "container:" + "d" * 64}},
        {"NetworkSettings": {"Networks": {"bridge": {"IPAddress": "172.17.0.3"}}}},
    ],
)
def test_a_changed_listing_is_a_new_snapshot_as_the_list_shows_it(
    changed: dict[str, object],
) -> None:
    listed = ListedSnapshots()
    [first] = listed.snapshots([listed_item()], complete=True)
    [again] = listed.snapshots([listed_item(**changed)], complete=True)
    assert again is not first
    assert again == summary_snapshot(listed_item(**changed))


def test_only_a_whole_list_is_kept_for_the_next() -> None:
    listed = ListedSnapshots()
    [first] = listed.snapshots([listed_item()], complete=True)
    listed.snapshots([listed_item(Id="d1" * 32)], complete=False)  # a list of some names
    [again] = listed.snapshots([listed_item()], complete=True)
    assert again is first
    listed.snapshots([], complete=True)  # it is gone from a whole list: forgotten
    [anew] = listed.snapshots([listed_item()], complete=True)
    assert anew is not first and anew == first
