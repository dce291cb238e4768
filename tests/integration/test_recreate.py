"""A recreate from the container's own record against the real engine: the spec built from its
inspect, the old container removed, the new one created and started under the same name with
the same configuration; what the record cannot keep refused; an engine refusal typed."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import docker
import docker.errors
import pytest

from guardian.adapters.engine.recreator import DockerRecreator, Failed, Failure
from guardian.core.escalation.recreate import RecreateSpec, Refusal, build
from tests.helpers import wait_until
from tests.integration.conftest import IMAGE, PREFIX, RUN_ID

LABELS = {
    "com.docker.compose.project": "gdt-demo",
    "com.docker.compose.service": "web",
    "app.tier": "front",
}


@pytest.fixture
def networks(docker_api: docker.APIClient) -> Iterator[tuple[str, str, str]]:
    """Two user-defined networks of this run: (first, its subnet's prefix, second)."""
    made: list[str] = []
    third = random.randrange(200, 250)  # 172.31.200-249.0/24: clear of the engine's own pools
    for _ in range(20):
        name = f"{PREFIX}front"
        pool = docker.types.IPAMPool(subnet=f"172.31.{third}.0/24")
        try:
            docker_api.create_network(name, ipam=docker.types.IPAMConfig(pool_configs=[pool]))
            made.append(name)
            break
        except docker.errors.APIError:  # another run holds this subnet: try the next
            third = 200 + (third - 199) % 50
    assert made, "no free 172.31.2XX.0/24 subnet for the test network"
    docker_api.create_network(f"{PREFIX}back")
    made.append(f"{PREFIX}back")
    yield made[0], f"172.31.{third}", made[1]
    for name in made:
        for c in docker_api.inspect_network(name).get("Containers") or {}:
            docker_api.remove_container(c, force=True)
        docker_api.remove_network(name)


@pytest.fixture
def volume(docker_api: docker.APIClient) -> Iterator[str]:
    name = f"{PREFIX}data"
    docker_api.create_volume(name, labels={"guardian.test.run": RUN_ID})
    yield name
    docker_api.remove_volume(name, force=True)


def _create_web(containers: Any, networks: tuple[str, str, str], volume: str) -> str:
    """A Compose-like service: what `docker run` would be given, every option a recreate keeps."""
    front, prefix, back = networks
    api, name = containers.api, containers.name("web")
    host = api.create_host_config(
        binds=[f"{volume}:/data"],
        port_bindings={8080: ("127.0.0.1",)},  # an ephemeral host port
        restart_policy={"Name": "on-failure", "MaximumRetryCount": 3},
        mem_limit="64m",
        cap_add=["NET_ADMIN"],
        cap_drop=["MKNOD"],
        log_config={"Type": "json-file", "Config": {"max-size": "1m", "max-file": "2"}},
        network_mode=front,
    )
    endpoint = api.create_endpoint_config(aliases=["www"], ipv4_address=f"{prefix}.10")
    created = api.create_container(
        IMAGE,
        ["sh", "-c", "echo kept > /data/file; sleep 86400"],
        name=name,
        labels={**LABELS, "guardian.test.run": RUN_ID},
        environment={"GREETING": "hello there", "MODE": "test"},
        ports=[8080],
        healthcheck={"test": ["CMD-SHELL", "test -f /data/file"], "interval": int(1e9)},
        stop_signal="SIGKILL",
        host_config=host,
        networking_config=api.create_networking_config({front: endpoint}),
    )
    containers.created.append(created["Id"])
    api.connect_container_to_network(name, back, aliases=["web-back"])
    api.start(name)
    wait_until(lambda: containers.health(name) == "healthy", 20, message=f"{name} healthy")
    return name


def _kept(record: dict[str, Any]) -> dict[str, Any]:
    """What a recreate must keep, from an inspect."""
    c, h = record["Config"], record["HostConfig"]
    nets = record["NetworkSettings"]["Networks"]
    short = record["Id"][:12]
    return {
        "name": record["Name"],
        "image": record["Image"],
        "labels": c["Labels"],
        "env": c["Env"],
        "cmd": c["Cmd"],
        "healthcheck": c["Healthcheck"],
        "restart": h["RestartPolicy"],
        "memory": h["Memory"],
        "caps": (h["CapAdd"], h["CapDrop"]),
        "log": h["LogConfig"],
        "ports": h["PortBindings"],
        "exposed": c["ExposedPorts"],
        "binds": h["Binds"],
        "networks": {
            n: (
                sorted(set(s["Aliases"] or []) - {short}),
                (s["IPAMConfig"] or {}).get("IPv4Address"),
            )
            for n, s in nets.items()
        },
    }


def test_a_container_is_recreated_from_its_own_record(networks, volume, containers):
    name = _create_web(containers, networks, volume)
    api = containers.api
    old = containers.inspect(name)
    spec = build(old)
    assert isinstance(spec, RecreateSpec), spec
    recreator = DockerRecreator(api)
    assert recreator.remove(old["Id"], stop_timeout=1) is None
    new_id = recreator.create(spec)
    assert isinstance(new_id, str), new_id
    containers.created.append(new_id)
    new = containers.inspect(name)
    assert new["Id"] != old["Id"] and new["State"]["Running"]
    assert _kept(new) == _kept(old)
    front, prefix, _ = networks
    assert new["NetworkSettings"]["Networks"][front]["IPAddress"] == f"{prefix}.10"
    assert "www" in new["NetworkSettings"]["Networks"][front]["Aliases"]
    assert new["Id"][:12] in new["NetworkSettings"]["Networks"][front]["Aliases"]
    assert old["Id"][:12] not in new["NetworkSettings"]["Networks"][front]["Aliases"]
    assert new["Config"]["Hostname"] == new["Id"][:12]  # its own, not the old one's
    port = new["NetworkSettings"]["Ports"]["8080/tcp"][0]
    assert port["HostIp"] == "127.0.0.1" and port["HostPort"]
    out = api.exec_start(api.exec_create(name, ["cat", "/data/file"]))
    assert out.strip() == b"kept"
    wait_until(lambda: containers.health(name) == "healthy", 20, message=f"{name} healthy")
    wait_until(lambda: "start" in _after_destroy(containers, name), 10, message="events")
    after = _after_destroy(containers, name)
    assert after.index("create") < after.index("start"), after


def _after_destroy(containers: Any, name: str) -> list[str]:
    """The actions of `name` after its first destroy, in the engine's order."""
    actions = [a for a, _ in containers.events.of(name)]
    assert "destroy" in actions, actions
    return actions[actions.index("destroy") + 1 :]


def test_an_anonymous_volume_is_refused(containers):
    anonymous = docker.types.Mount("/scratch", None, type="volume")
    name = containers.run("anon", mounts=[anonymous], start=False)
    refusal = build(containers.inspect(name))
    assert isinstance(refusal, Refusal)
    assert "anonymous volume at /scratch" in refusal.reason
    assert refusal.command.startswith(f"docker rm -f {name}")


def test_a_create_the_engine_refuses_is_typed(containers, docker_api):
    name = containers.run("taken", start=False)
    spec = build(containers.inspect(name))
    assert isinstance(spec, RecreateSpec), spec
    failed = DockerRecreator(docker_api).create(spec)  # the old container still holds the name
    assert isinstance(failed, Failed) and failed.failure is Failure.NAME_TAKEN
    assert failed.reason.startswith("create: the name is taken") and not failed.container_id


def test_a_removed_image_is_typed(containers, docker_api):
    name = containers.run("gone", start=False)
    spec = build(containers.inspect(name))
    assert isinstance(spec, RecreateSpec), spec
    ghost = "sha256:" + "0" * 64
    body = {**json.loads(spec.config), "Image": ghost}
    ghost_spec = replace(spec, name=f"{name}-2", image_id=ghost, config=json.dumps(body))
    failed = DockerRecreator(docker_api).create(ghost_spec)
    assert isinstance(failed, Failed) and failed.failure is Failure.IMAGE_GONE, failed


def test_removing_a_container_already_gone_is_done(docker_api):
    assert DockerRecreator(docker_api).remove("0" * 64) is None


def test_an_unreachable_engine_is_typed(tmp_path):
    api = docker.APIClient(base_url=f"unix://{tmp_path}/none.sock", version="1.41", timeout=2)
    failed = DockerRecreator(api).remove("0" * 64)
    assert failed is not None and failed.failure is Failure.UNREACHABLE, failed


def test_a_port_taken_since_is_typed_and_the_new_container_left_created(containers, docker_api):
    holder = docker_api.create_container(
        IMAGE,
        ["sleep", "86400"],
        name=containers.name("holder"),
        labels={"guardian.test.run": RUN_ID},
        ports=[8080],
        stop_signal="SIGKILL",
        host_config=docker_api.create_host_config(port_bindings={8080: ("127.0.0.1",)}),
    )["Id"]
    containers.created.append(holder)
    docker_api.start(holder)
    taken = containers.inspect(holder)["NetworkSettings"]["Ports"]["8080/tcp"][0]["HostPort"]
    name = containers.run("wants", start=False)
    spec = build(containers.inspect(name))
    assert isinstance(spec, RecreateSpec), spec
    body = json.loads(spec.config)
    body["ExposedPorts"] = {"8080/tcp": {}}
    body["HostConfig"]["PortBindings"] = {"8080/tcp": [{"HostIp": "127.0.0.1", "HostPort": taken}]}
    failed = DockerRecreator(docker_api).create(
        replace(spec, name=f"{name}-2", config=json.dumps(body))
    )
    assert isinstance(failed, Failed), failed
    containers.created.append(failed.container_id)
    assert failed.failure is Failure.PORT_TAKEN and failed.reason.startswith("start: "), failed
    assert containers.inspect(failed.container_id)["State"]["Status"] == "created"
