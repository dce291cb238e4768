"""The recreate spec from a container's own record (core.escalation.recreate): what is kept, what
refuses it and why, and hostile records refused without a crash. The records are trimmed from
`docker inspect` of containers made on Docker 20.10 (API 1.41)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from guardian.core.escalation.recreate import Endpoint, RecreateSpec, Refusal, build

CID = "37e9bfc6da84bb358bdbe1fa2d5f7eabc78e014c507df78563b5d6de39170705"
LEADER = "5bdfd1350cf1d1aa6d1b1e8b11e0c7b1c8f1f1d6e6c0a0d9b0f5e4c3b2a19080"
IMAGE_ID = "sha256:44fc24d1bbd00b33c7feea430d9c9e82ef314b573db004d6b3bc2eb9755f8116"
ANON = "a4998dc8e0edde50b91a6135f3d6ec6b7de685c4172939224e8621ba07d5b582"

# `docker create --name demo-web-1 -l com.docker.compose.project=demo ... --network demo_front
#  --network-alias www --ip 172.31.231.10 -p 127.0.0.1::8080 --health-cmd true --restart
#  on-failure:3 --memory 64m --cpus 0.5 --pids-limit 100 --ulimit nofile=1024:2048 --cap-add
#  NET_ADMIN --cap-drop MKNOD --log-opt max-size=1m --init --read-only --add-host foo:10.0.0.1
#  --dns 9.9.9.9 --sysctl net.ipv4.ip_forward=1 --group-add 10 --shm-size 32m --stop-signal
#  SIGTERM --stop-timeout 7 -u 0 -w /tmp --hostname myhost`, then `docker network connect
#  --alias second demo_back`, started.
WEB: dict[str, Any] = {
    "Id": CID,
    "Image": IMAGE_ID,
    "Name": "/demo-web-1",
    "HostConfig": {
        "Binds": ["demo_data:/data"],
        "ContainerIDFile": "",
        "LogConfig": {"Type": "json-file", "Config": {"max-size": "1m"}},
        "NetworkMode": "demo_front",
        "PortBindings": {"8080/tcp": [{"HostIp": "127.0.0.1", "HostPort": ""}]},
        "RestartPolicy": {"Name": "on-failure", "MaximumRetryCount": 3},
        "AutoRemove": False,
        "VolumesFrom": None,
        "CapAdd": ["CAP_NET_ADMIN"],
        "CapDrop": ["CAP_MKNOD"],
        "CgroupnsMode": "host",
        "Dns": ["9.9.9.9"],
        "ExtraHosts": ["foo:10.0.0.1"],
        "GroupAdd": ["10"],
        "IpcMode": "private",
        "PidMode": "",
        "Links": None,
        "Privileged": False,
        "ReadonlyRootfs": True,
        "SecurityOpt": ["no-new-privileges"],
        "Tmpfs": {"/run": ""},
        "ShmSize": 33554432,
        "Sysctls": {"net.ipv4.ip_forward": "1"},
        "Runtime": "runc",
        "Memory": 67108864,
        "NanoCpus": 500000000,
        "MemorySwap": 134217728,
        "PidsLimit": 100,
        "Devices": [
            {"PathOnHost": "/dev/fuse", "PathInContainer": "/dev/fuse", "CgroupPermissions": "rwm"}
        ],
        "Ulimits": [{"Name": "nofile", "Hard": 2048, "Soft": 1024}],
        "Init": True,
    },
    "Mounts": [
        {
            "Type": "volume",
            "Name": "demo_data",
            "Source": "/var/lib/docker/volumes/demo_data/_data",
            "Destination": "/data",
            "Driver": "local",
            "Mode": "z",
            "RW": True,
            "Propagation": "",
        },
        {"Type": "tmpfs", "Source": "", "Destination": "/run", "Mode": "", "RW": True},
    ],
    "Config": {
        "Hostname": "myhost",
        "Domainname": "example.org",
        "User": "0",
        "AttachStdout": True,
        "AttachStderr": True,
        "ExposedPorts": {"8080/tcp": {}},
        "Env": ["FOO=bar", "PATH=/bin"],
        "Cmd": ["sleep", "1000"],
        "Healthcheck": {"Test": ["CMD-SHELL", "true"], "Interval": 5000000000},
        "Image": "guardian-test-busybox",
        "WorkingDir": "/tmp",
        "Entrypoint": None,
        "Labels": {
            "com.docker.compose.project": "demo",
            "com.docker.compose.service": "web",
            "com.docker.compose.config-hash": "9f2c",
        },
        "StopSignal": "SIGTERM",
        "StopTimeout": 7,
    },
    "NetworkSettings": {
        "Networks": {
            "demo_front": {
                "IPAMConfig": {"IPv4Address": "172.31.231.10"},
                "Links": None,
                "Aliases": ["www", "37e9bfc6da84", "myhost"],
                "IPAddress": "172.31.231.10",
                "MacAddress": "02:42:ac:1f:e7:0a",
                "DriverOpts": None,
            },
            "demo_back": {
                "IPAMConfig": {},
                "Links": None,
                "Aliases": ["second", "37e9bfc6da84", "myhost"],
                "IPAddress": "172.19.0.2",
                "MacAddress": "02:42:ac:13:00:02",
                "DriverOpts": {},
            },
        }
    },
}


def web(change: Callable[[dict[str, Any]], object] = lambda r: None) -> dict[str, Any]:
    record = copy.deepcopy(WEB)
    change(record)
    return record


def spec_of(record: dict[str, Any], **kw: Any) -> RecreateSpec:
    spec = build(record, **kw)
    assert isinstance(spec, RecreateSpec), spec
    return spec


def test_keeps_what_the_record_keeps():
    body = spec_of(web()).body()
    assert body["Image"] == IMAGE_ID
    kept_config = {k: v for k, v in WEB["Config"].items() if k != "Image"}
    assert {k: body[k] for k in kept_config} == kept_config  # hostname, labels, env, health...
    host = body["HostConfig"]
    assert {k: host[k] for k in WEB["HostConfig"]} == WEB["HostConfig"]  # resources, caps...


def test_the_image_is_asked_for_by_id_and_its_reference_kept_beside():
    spec = spec_of(web())
    assert (spec.image_id, spec.image_ref) == (IMAGE_ID, "guardian-test-busybox")


def test_the_create_attaches_its_network_and_the_others_are_connected_after():
    spec = spec_of(web())
    assert spec.name == "demo-web-1"
    assert spec.create_endpoint == Endpoint("demo_front", ("www",), ipv4="172.31.231.10")
    assert spec.connect_after == (Endpoint("demo_back", ("second",)),)
    endpoints = spec.body()["NetworkingConfig"]["EndpointsConfig"]
    assert endpoints == {
        "demo_front": {
            "Aliases": ["www"],
            "IPAMConfig": {"IPv4Address": "172.31.231.10"},
            "Links": None,
            "DriverOpts": None,
        }
    }


def test_the_spec_is_frozen_and_each_body_is_fresh():
    spec = spec_of(web())
    spec.body()["Env"].append("X=1")
    assert spec.body()["Env"] == ["FOO=bar", "PATH=/bin"]
    with pytest.raises(AttributeError):
        spec.name = "other"  # type: ignore[misc]
    assert json.loads(spec.config)["Image"] == IMAGE_ID


def _generated_hostname(r: dict[str, Any]) -> None:
    r["Config"]["Hostname"] = CID[:12]
    for n in r["NetworkSettings"]["Networks"].values():
        n["Aliases"] = [a for a in n["Aliases"] if a != "myhost"]


def _set_mac(mac: str) -> Callable[[dict[str, Any]], None]:
    return lambda r: r["Config"].__setitem__("MacAddress", mac)


# (what was made, how, what the body has: config key -> value, or absent)
ENGINE_MADE = [
    ("a hostname the engine generated", _generated_hostname, "Hostname", None),
    ("a hostname a person set", lambda r: None, "Hostname", "myhost"),
    ("a MAC derived from the address", _set_mac("02:42:ac:1f:e7:0a"), "MacAddress", None),
    ("a MAC a person set", _set_mac("92:d0:c6:0a:29:33"), "MacAddress", "92:d0:c6:0a:29:33"),
]


@pytest.mark.parametrize(
    ("what", "change", "key", "kept"), ENGINE_MADE, ids=[r[0] for r in ENGINE_MADE]
)
def test_what_the_engine_made_up_is_left_out_and_what_a_person_set_is_kept(what, change, key, kept):
    assert spec_of(web(change)).body().get(key) == kept


def test_a_container_mode_is_kept_by_its_leaders_name():
    def follower(r: dict[str, Any]) -> None:
        r["HostConfig"]["NetworkMode"] = f"container:{LEADER}"
        r["HostConfig"]["PidMode"] = f"container:{LEADER}"
        r["HostConfig"]["PortBindings"] = None
        r["Config"]["ExposedPorts"] = None
        r["NetworkSettings"]["Networks"] = {}

    spec = spec_of(web(follower), leaders={LEADER: "demo-vpn-1"})
    host = spec.body()["HostConfig"]
    assert host["NetworkMode"] == host["PidMode"] == "container:demo-vpn-1"
    assert spec.create_endpoint is None and spec.connect_after == ()
    assert "Hostname" not in spec.body()  # the leader's namespace names the host
    unknown = spec_of(web(follower)).body()["HostConfig"]
    assert unknown["NetworkMode"] == f"container:{LEADER}"  # by id while no name is known


def test_legacy_links_and_volumes_from_are_given_back_as_create_takes_them():
    def legacy(r: dict[str, Any]) -> None:
        r["HostConfig"]["Links"] = ["/demo-db-1:/demo-web-1/db"]
        r["HostConfig"]["VolumesFrom"] = [f"{LEADER}:ro"]

    host = spec_of(web(legacy), leaders={LEADER: "demo-files-1"}).body()["HostConfig"]
    assert host["Links"] == ["demo-db-1:db"]
    assert host["VolumesFrom"] == ["demo-files-1:ro"]


def test_a_network_named_by_id_is_found_by_it():
    def by_id(r: dict[str, Any]) -> None:
        r["HostConfig"]["NetworkMode"] = "d627dbd1cfb2"
        r["NetworkSettings"]["Networks"]["demo_front"]["NetworkID"] = "d627dbd1cfb2c05f2886"

    spec = spec_of(web(by_id))
    assert spec.create_endpoint is not None and spec.create_endpoint.network == "demo_front"
    assert spec.body()["HostConfig"]["NetworkMode"] == "demo_front"


def test_a_named_volume_with_a_hex_name_is_kept():
    def hex_named(r: dict[str, Any]) -> None:
        r["HostConfig"]["Binds"] = [f"{ANON}:/data"]
        r["Mounts"][0]["Name"] = ANON

    assert isinstance(build(web(hex_named)), RecreateSpec)


def _anonymous(r: dict[str, Any]) -> None:
    r["Mounts"].append({"Type": "volume", "Name": ANON, "Destination": "/data2", "Driver": "local"})


def _set(path: str, value: object) -> Callable[[dict[str, Any]], None]:
    *parents, key = path.split(".")

    def change(r: dict[str, Any]) -> None:
        for p in parents:
            r = r[p]
        r[key] = value

    return change


def _label(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda r: r["Config"]["Labels"].__setitem__(key, "x")


COMPOSE = "docker compose -p demo up -d --force-recreate web"
# (why, how the record differs, words the reason holds, the command)
REFUSED = [
    ("anonymous volume", _anonymous, "anonymous volume at /data2 would be lost", COMPOSE),
    ("swarm", _label("com.docker.swarm.task.id"), "Docker Swarm", "docker service update"),
    ("kubernetes", _label("io.kubernetes.pod.name"), "Kubernetes (pod x) owns it", "kubectl"),
    ("nomad", _label("com.hashicorp.nomad.alloc_id"), "Nomad owns it", "nomad alloc restart"),
    ("stray swarm label", _label("com.docker.swarm.node.id"), "an orchestrator", COMPOSE),
    ("--rm", _set("HostConfig.AutoRemove", True), "--rm (AutoRemove)", COMPOSE),
    ("no image id", _set("Image", "guardian-test-busybox"), "no image ID", COMPOSE),
    ("--cidfile", _set("HostConfig.ContainerIDFile", "/run/web.cid"), "--cidfile", COMPOSE),
    ("detached network", _set("HostConfig.NetworkMode", "gone"), "no longer attached", COMPOSE),
    ("odd link", _set("HostConfig.Links", ["db"]), "link 'db'", COMPOSE),
    ("a leader of itself", _set("HostConfig.IpcMode", f"container:{CID}"), "itself", COMPOSE),
    ("bad name", _set("Name", "/a b"), "not one Docker allows", COMPOSE),
    ("not an inspect", _set("HostConfig", None), "no HostConfig", COMPOSE),
    (
        "aliases not text",
        _set("NetworkSettings.Networks.demo_back.Aliases", [1]),
        "Aliases",
        COMPOSE,
    ),
]


@pytest.mark.parametrize(
    ("why", "change", "reason", "command"), REFUSED, ids=[r[0] for r in REFUSED]
)
def test_a_record_that_cannot_be_recreated_faithfully_is_refused(why, change, reason, command):
    refusal = build(web(change))
    assert isinstance(refusal, Refusal), refusal
    assert reason in refusal.reason and "\n" not in refusal.reason
    assert refusal.command.startswith(command)


def test_a_leader_with_followers_is_refused_naming_them():
    followers = [f"demo-sidecar-{i}" for i in range(8)]
    refusal = build(web(), followers=followers)
    assert isinstance(refusal, Refusal)
    assert refusal.reason.startswith("demo-sidecar-0, demo-sidecar-1")
    assert "and 3 more joined its namespaces (container:demo-web-1)" in refusal.reason


def test_a_plain_container_is_told_to_be_recreated_by_hand():
    def plain(r: dict[str, Any]) -> None:
        r["Config"]["Labels"] = None
        _anonymous(r)

    refusal = build(web(plain))
    assert isinstance(refusal, Refusal)
    assert refusal.command.startswith("docker rm -f demo-web-1, then docker run --name demo-web-1")
    unnamed = build(web(lambda r: (plain(r), r.__setitem__("Name", "/a b; rm -rf /"))))
    assert isinstance(unnamed, Refusal)
    assert unnamed.command.startswith("docker rm -f <container>, then")  # nothing a shell runs


def test_hostile_names_are_bounded_and_stripped_in_the_reason():
    refusal = build(web(), followers=["\x1b[31m" + "x" * 10_000])
    assert isinstance(refusal, Refusal)
    assert "\x1b" not in refusal.reason and len(refusal.reason) < 200
    label = "com.docker.swarm." + "\x07y" * 5000
    refusal = build(web(_label(label)))
    assert isinstance(refusal, Refusal) and len(refusal.reason) < 200


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


# (what, how the record is hostile, the bound named)
HOSTILE = [
    (
        "many labels",
        lambda r: r["Config"]["Labels"].update({f"l{i}": "" for i in range(30_000)}),
        "values",
    ),
    ("a huge env", lambda r: r["Config"]["Env"].append("X=" + "x" * 2_000_000), "characters"),
    ("deep nesting", lambda r: r["Config"]["Labels"].update(_nested(100)), "nested deeper"),
    ("not JSON", _set("Config.Env", {1, 2}), "type set"),
    ("a key not text", lambda r: r["HostConfig"]["Sysctls"].update({1: "x"}), "not text"),
    ("a huge number", _set("HostConfig.Memory", 10**5000), "64 bits"),
    ("not finite", _set("HostConfig.Memory", float("nan")), "not finite"),
    (
        "many networks",
        _set("NetworkSettings.Networks", {f"n{i}": {} for i in range(65)}),
        "64 networks",
    ),
    ("many aliases", _set("NetworkSettings.Networks.demo_back.Aliases", ["a"] * 65), "64 aliases"),
    ("labels not text", _set("Config.Labels", {"a": 1}), "labels are not all text"),
    ("mounts not a list", _set("Mounts", "x"), "Mounts"),
]


@pytest.mark.parametrize(("what", "change", "bound"), HOSTILE, ids=[r[0] for r in HOSTILE])
def test_a_hostile_record_is_refused_never_a_crash(what, change, bound):
    refusal = build(web(change))
    assert isinstance(refusal, Refusal), refusal
    assert bound in refusal.reason and len(refusal.reason) < 200


def test_a_record_that_is_not_a_mapping_at_all_is_refused():
    assert isinstance(build({}), Refusal)
    assert isinstance(build({"Name": 5}), Refusal)
