"""The rollback rung end to end (issue 66): a real engine, a real `guardian run`, a webhook
receiver. `app:latest` is v1 and runs healthy while Guardian watches; the tag moves to v2, whose
container never turns healthy, and the container is replaced under its name as `docker compose
up -d` does; with `restart.escalate: [rollback, stop]` the v2 container is restarted, then
destroyed, and v1's record is put back under the name; a kill -9 between the rollback's removal
and its create leaves one container at the next start, on v1's record. The engine's event stream
is the judge. Slow (about a minute each): the repository has no marker for slow tests, so none is
set."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors
import docker.types

from tests.helpers import wait_until
from tests.integration.conftest import IMAGE, PREFIX, RUN_ID, Containers
from tests.integration.notify_helpers import WATCH, notifying
from tests.integration.see_more import rows
from tests.proxy import HeldCreate
from tests.receiver import receiver

# Both versions check the same thing: the environment says version 1. v1's image says so, v2's
# says 2, so v2 never turns healthy, and a rollback that kept v2's environment (the trap of
# restoring the old image with the new record) never turns healthy either.
DOCKERFILE = """\
FROM {base}
ENV VERSION={version}
STOPSIGNAL SIGKILL
HEALTHCHECK --interval=1s --timeout=2s --retries=1 CMD test "$VERSION" = 1
"""
APP = f"{PREFIX}app"
RESTART = {
    "max_attempts": 1,
    "cooldown": "1s",
    "verify_timeout": "6s",
    "escalate": ["rollback", "stop"],
    "rollback_monitor": "5m",
}
SECRET = "gdtSecretRollback0123456789"
# What the engine does to a container; create, start and health_status are what it does itself.
DONE_TO = ("kill", "die", "stop", "restart", "destroy", "pause", "oom")
# A rollback verified as a restart is: the container it created healthy within verify_timeout.
VERIFIED = "SELECT * FROM actions WHERE kind='rollback' AND successor!='' AND outcome='succeeded'"


@dataclass
class Service:
    """A Compose service of one container, made here with the API as Compose makes it."""

    project: str
    network: str
    volume: str

    @property
    def name(self) -> str:
        return f"{self.project}-web-1"

    def labels(self, config_hash: str, replaces: str = "") -> dict[str, str]:
        labels = {
            "com.docker.compose.project": self.project,
            "com.docker.compose.service": "web",
            "com.docker.compose.container-number": "1",
            "com.docker.compose.oneoff": "False",
            "com.docker.compose.config-hash": hashlib.sha256(config_hash.encode()).hexdigest(),
            "guardian.test.run": RUN_ID,
            WATCH: "true",
        }
        if replaces:
            labels["com.docker.compose.replace"] = replaces
        return labels

    def create(self, containers: Any, name: str, config_hash: str, replaces: str = "") -> str:
        api: docker.APIClient = containers.api
        host = api.create_host_config(
            mounts=[docker.types.Mount("/data", self.volume, type="volume")],
            network_mode=self.network,
        )
        endpoint = api.create_endpoint_config(aliases=["web", self.name])
        created = api.create_container(
            f"{APP}:latest",
            name=name,
            labels=self.labels(config_hash, replaces),
            host_config=host,
            networking_config=api.create_networking_config({self.network: endpoint}),
        )
        cid: str = created["Id"]
        containers.created.append(cid)
        return cid

    def up(self, containers: Any, config_hash: str) -> str:
        """`docker compose up -d` of a project with no container yet."""
        cid = self.create(containers, self.name, config_hash)
        containers.api.start(cid)
        return cid

    def replace(self, containers: Any, config_hash: str) -> str:
        """`docker compose up -d` once the service changed, as Compose v2 recreates
        (pkg/compose/convergence.go, recreateContainer): the new container is created under
        the temporary name `<old id[:12]>_<name>` with the label com.docker.compose.replace,
        the old one is stopped and removed (its named volume kept), the new one is renamed to
        the name, then started."""
        api: docker.APIClient = containers.api
        old: str = api.inspect_container(self.name)["Id"]
        cid = self.create(containers, f"{old[:12]}_{self.name}", config_hash, replaces=old)
        api.stop(old, timeout=10)
        api.remove_container(old)
        api.rename(cid, self.name)
        api.start(cid)
        return cid


@dataclass
class RolledBack:
    """What the shared set-up leaves: v1 ran healthy, v2 replaced it, Guardian put v1 back."""

    service: Service
    guardian: Any
    told: Any  # () -> the notifications the webhook received
    v1_image: str
    v2_image: str
    v1: dict[str, Any]  # the inspect of v1's container, before the update
    v2: str  # the id of v2's container
    v2_destroyed: float
    restored: str  # the id of the container the rollback created


def _of(containers: Any, cid: str) -> list[tuple[str, float]]:
    """(action, unix time) of every event of the container with id `cid`, whatever its name."""
    return [
        (e["Action"], e["timeNano"] / 1e9)
        for e in list(containers.events.events)
        if e.get("id") == cid or (e.get("Actor") or {}).get("ID") == cid
    ]


def _after(events: list[tuple[str, float]], action: str, at: float) -> float | None:
    return next((t for a, t in events if a == action and t >= at), None)


def _waited(
    seen: Callable[[], list[tuple[str, float]]], action: str, at: float, timeout: float, why: str
) -> float:
    """The unix time of the first `action` in `seen()` at or after `at`, waiting for it: the
    engine's record, never a poll of the state."""
    found = wait_until(lambda: _after(seen(), action, at), timeout, 0.2, why)
    assert found is not None
    return found


def _when(containers: Any, cid: str, action: str, at: float, timeout: float, why: str) -> float:
    """The first `action` event of container `cid` at or after `at` (see _waited)."""
    return _waited(lambda: _of(containers, cid), action, at, timeout, why)


def _build(api: docker.APIClient, version: int) -> str:
    """`<PREFIX>app:v<version>` built from the local busybox image (nothing can be pulled),
    its image ID returned; the set-up removes the run's tags at the end."""
    tag = f"{APP}:v{version}"
    dockerfile = DOCKERFILE.format(base=IMAGE, version=version).encode()
    log: list[str] = []
    for chunk in api.build(fileobj=io.BytesIO(dockerfile), tag=tag, rm=True, decode=True):
        log.append(chunk.get("stream", "") or chunk.get("error", ""))
        assert "error" not in chunk, "docker build failed:\n" + "".join(log)[-3000:]
    image_id: str = api.inspect_image(tag)["Id"]
    return image_id


def _hex(image_id: str) -> str:
    return image_id.removeprefix("sha256:")


def _kept(record: dict[str, Any]) -> dict[str, Any]:
    """What a rollback must put back of v1's record (the engine's own alias, the container's
    short id, left out)."""
    short = record["Id"][:12]
    return {
        "name": record["Name"],
        "image": record["Image"],
        "env": sorted(record["Config"]["Env"]),
        "cmd": record["Config"]["Cmd"],
        "entrypoint": record["Config"]["Entrypoint"],
        "healthcheck": record["Config"]["Healthcheck"],
        "labels": record["Config"]["Labels"],
        "networks": {
            n: sorted(set(s.get("Aliases") or []) - {short})
            for n, s in record["NetworkSettings"]["Networks"].items()
        },
        "volumes": [(m["Type"], m["Name"], m["Destination"]) for m in record["Mounts"]],
    }


def _kept_sql(name: str) -> str:
    """The records of `name` Guardian kept as run healthy."""
    return f"SELECT * FROM kept_records WHERE name='{name}' AND healthy_at IS NOT NULL"


@contextlib.contextmanager
def _v1_running(containers: Any, short: str) -> Iterator[tuple[Service, str, str, dict[str, Any]]]:
    """A Compose project of one service whose container runs v1, healthy, a marker in its named
    volume; yields (service, v1's image ID, v2's image ID, v1's inspect) and removes the
    project's containers, network, volume and the app's tags at the end."""
    api: docker.APIClient = containers.api
    service = Service(f"{PREFIX}{short}", f"{PREFIX}{short}_default", f"{PREFIX}{short}_data")
    api.create_network(service.network, labels={"guardian.test.run": RUN_ID})
    api.create_volume(service.volume, labels={"guardian.test.run": RUN_ID})
    try:
        v1_image, v2_image = _build(api, 1), _build(api, 2)
        assert v1_image != v2_image
        api.tag(f"{APP}:v1", APP, "latest", force=True)
        v1_id = service.up(containers, "v1")
        wait_until(lambda: containers.health(service.name) == "healthy", 20, 0.2, "v1 healthy")
        api.exec_start(api.exec_create(v1_id, ["sh", "-c", "echo kept > /data/marker"]))
        v1 = containers.inspect(v1_id)
        assert v1["Image"] == v1_image and "VERSION=1" in v1["Config"]["Env"]
        yield service, v1_image, v2_image, v1
    finally:
        for c in api.containers(all=True, filters={"label": f"guardian.test.run={RUN_ID}"}):
            if c["Labels"].get("com.docker.compose.project") == service.project:
                with contextlib.suppress(docker.errors.APIError):
                    api.remove_container(c["Id"], force=True)
        with contextlib.suppress(docker.errors.APIError):
            api.remove_network(service.network)
        with contextlib.suppress(docker.errors.APIError):
            api.remove_volume(service.volume)
        for tag in ("latest", "v1", "v2"):
            with contextlib.suppress(docker.errors.APIError):
                api.remove_image(f"{APP}:{tag}")


@contextlib.contextmanager
def _rolled_back(containers: Any, guardian: Any, short: str) -> Iterator[RolledBack]:
    """v1 runs healthy while Guardian watches and keeps its record; Guardian is killed with -9
    and started again; `app:latest` moves to v2 and Compose replaces the container; yields once
    the engine showed the v2 container destroyed and one created under the name healthy."""
    api: docker.APIClient = containers.api
    with _v1_running(containers, short) as (service, v1_image, v2_image, v1), receiver() as rx:
        env = {"GDT_HOOK": rx.url(f"/hook/{SECRET}")}
        notify = {
            "group_wait": "0s",
            "pacing": "0s",
            "channels": [{"name": "hook", "type": "webhook", "url_env": "GDT_HOOK"}],
            "default": ["hook"],
        }

        def told() -> list[dict[str, Any]]:
            return [n for r in rx.answered() for n in r.json["notifications"]]

        with notifying(guardian, notify, env, absent=(SECRET,)) as make:
            g = make(restart=RESTART, storm={"threshold": "100%"})
            kept_sql = _kept_sql(service.name)
            [kept] = wait_until(lambda: rows(g.store_path, kept_sql), 30, 0.2, "v1 kept")
            assert _hex(kept["image_id"]) == _hex(v1_image)
            assert kept["container_id"] == v1["Id"]
            g.kill9()
            g.start()
            assert [r["container_id"] for r in rows(g.store_path, kept_sql)] == [v1["Id"]]
            api.tag(f"{APP}:v2", APP, "latest", force=True)
            v2 = service.replace(containers, "v2")
            assert containers.inspect(service.name)["Image"] == v2_image
            created = _when(containers, v2, "create", 0, 10, "v2 created")
            destroyed = _when(containers, v2, "destroy", created, 90, "v2 destroyed")
            events = containers.events
            made = _waited(
                lambda: events.of(service.name),
                "create",
                destroyed,
                30,
                "a container created under the name after the rollback's removal",
            )
            restored: str = containers.inspect(service.name)["Id"]
            _when(containers, restored, "health_status: healthy", made, 30, "v1 back, healthy")
            # Verified as a restart is: its verdict written before anything else happens.
            wait_until(lambda: rows(g.store_path, VERIFIED), 20, 0.2, "the rollback verified")
            yield RolledBack(service, g, told, v1_image, v2_image, v1, v2, destroyed, restored)


def test_a_bad_update_is_rolled_back_to_the_record_that_ran_healthy(
    containers: Containers, guardian: Any
) -> None:
    with _rolled_back(containers, guardian, "rb1") as rb:
        time.sleep(8)  # several sweeps and cooldowns: nothing may be done to what was put back
        name, api = rb.service.name, containers.api
        v2 = [a for a, _ in _of(containers, rb.v2)]
        assert v2.count("restart") == RESTART["max_attempts"], v2
        assert "health_status: healthy" not in v2, v2
        assert v2[-1] == "destroy", v2
        since = [a for a, t in containers.events.of(name) if a == "create" and t > rb.v2_destroyed]
        assert since == ["create"]  # exactly one container created under the name since
        after = containers.inspect(name)
        assert after["Id"] == rb.restored != rb.v1["Id"]
        assert _kept(after) == _kept(rb.v1)  # v1's image by ID and v1's record as a whole
        assert after["Image"] == rb.v1_image and "VERSION=1" in after["Config"]["Env"]
        assert "VERSION=2" not in after["Config"]["Env"]
        # The create names the image by ID (the tag now names v2), so Config.Image is v1's ID:
        # the engine cannot hold the tag's name with another image under it.
        assert after["Config"]["Image"] in (rb.v1_image, rb.v1["Config"]["Image"])
        assert "com.docker.compose.replace" not in after["Config"]["Labels"]
        assert api.exec_start(api.exec_create(name, ["cat", "/data/marker"])) == b"kept\n"
        restored = _of(containers, rb.restored)
        assert "health_status: healthy" in [a for a, _ in restored]
        assert not [a for a, _ in restored if a in DONE_TO], restored  # nothing done to it after
        assert after["State"]["Running"] and after["State"]["Health"]["Status"] == "healthy"
        [action] = rows(rb.guardian.store_path, "SELECT * FROM actions WHERE kind='rollback'")
        assert action["successor"] == rb.restored and action["container_id"] == rb.v2
        # The record stored before the removal: a container's whole inspect (v2's, removed, or
        # v1's, put back: the interface says "the old record"; either is a whole record).
        assert json.loads(action["record"])["Id"] in (rb.v1["Id"], rb.v2)
        short = _hex(rb.v1_image)[:12]
        wait_until(
            lambda: [
                n for n in rb.told() if "rolled back to" in n["detail"] and short in n["detail"]
            ],
            20,
            0.2,
            "the rollback told",
        )


def test_a_second_update_to_the_same_failed_image_is_not_rolled_back_again(
    containers: Containers, guardian: Any
) -> None:
    with _rolled_back(containers, guardian, "rb2") as rb:
        # Watchtower's next run (or the next `docker compose up -d`): `app:latest` is still v2.
        again = rb.service.replace(containers, "v2")
        assert containers.inspect(rb.service.name)["Image"] == rb.v2_image
        created = _when(containers, again, "create", 0, 10, "v2 created again")
        # A restart stops the container too (the engine logs kill, die, stop, start, restart):
        # the stop rung's "stop" is the one after the restart.
        restarted = _when(containers, again, "restart", created, 60, "the restart")
        stopped = _when(containers, again, "stop", restarted, 60, "the stop rung")
        db = rb.guardian.store_path
        refused_sql = "SELECT * FROM actions WHERE kind='rollback' AND outcome='policy_denied'"
        [refused] = wait_until(lambda: rows(db, refused_sql), 20, 0.2, "the refused rollback")
        wait_until(
            lambda: [n for n in rb.told() if "rollback refused:" in n["detail"]],
            30,
            0.2,
            "the refusal told",
        )
        time.sleep(8)  # several sweeps and cooldowns: nothing may follow the stop
        seen = _of(containers, again)
        assert [a for a, _ in seen].count("restart") == RESTART["max_attempts"], seen
        assert not [a for a, t in seen if a in ("start", "restart", "destroy") and t > stopped]
        after = containers.inspect(rb.service.name)
        assert after["Id"] == again and after["State"]["Status"] == "exited"
        assert after["Image"] == rb.v2_image  # the stop rung leaves the image as it was
        since = [
            a for a, t in containers.events.of(rb.service.name) if a == "create" and t > created
        ]
        assert since == []  # nothing created under the name after the second update
        assert refused["container_id"] == again and "rollback refused:" in refused["detail"]
        rollbacks = rows(db, "SELECT * FROM actions WHERE kind='rollback' ORDER BY id")
        assert [r["successor"] for r in rollbacks] == [rb.restored, ""]


def test_kill_9_between_the_rollbacks_removal_and_create_gives_one_container_on_the_old_record(
    containers: Containers, guardian: Any, tmp_path: Path
) -> None:
    """A real kill -9 in the rollback's window (test_ladder.py's kill -9 test, on this rung):
    Guardian talks to the engine through a proxy that holds the rollback's create, so v2 is
    removed and the engine has no create yet when Guardian is killed; the held request is then
    dropped, never forwarded. The next start creates one container under the name from v1's
    record (v1's image by ID, v1's environment), healthy, and the rollback's action names it as
    its successor; a start after that creates nothing more."""
    api: docker.APIClient = containers.api
    with _v1_running(containers, "rb3") as (service, v1_image, v2_image, v1):
        name = service.name

        held = HeldCreate.on(tmp_path / "rb3.sock", name)
        proxy = held.proxy
        events = containers.events
        try:
            g = guardian(
                docker={"url": proxy.url},
                watch={"label": WATCH},
                restart=RESTART,
                storm={"threshold": "100%"},
            )
            db = g.store_path
            [kept] = wait_until(lambda: rows(db, _kept_sql(name)), 30, 0.2, "v1 kept")
            assert _hex(kept["image_id"]) == _hex(v1_image) and kept["container_id"] == v1["Id"]
            api.tag(f"{APP}:v2", APP, "latest", force=True)
            v2 = service.replace(containers, "v2")
            assert containers.inspect(name)["Image"] == v2_image
            created = _when(containers, v2, "create", 0, 10, "v2 created")
            destroyed = _when(containers, v2, "destroy", created, 90, "the rollback's removal")
            assert held.arrived.wait(30), "the rollback's create never reached the proxy"
            g.kill9()  # v2 removed, the create held: the window issue 66 names
            held.release.set()
            assert not api.containers(all=True, filters={"name": f"^/{name}$"})
            [intent] = rows(db, "SELECT * FROM actions WHERE kind='rollback'")
            assert intent["outcome"] is None and intent["container_id"] == v2
            assert json.loads(intent["record"])["Image"] == v1_image
            g.start()
            made = _waited(lambda: events.of(name), "create", destroyed, 30, "created at the start")
            restored: str = containers.inspect(name)["Id"]
            _when(containers, restored, "health_status: healthy", made, 30, "v1 back, healthy")
            wait_until(lambda: rows(db, VERIFIED), 20, 0.2, "the rollback verified")
            g.stop()
            g.start()  # and again: the outcome is written, nothing is created twice
            # Its first sweep reconciles what the last run left; the second follows it.
            wait_until(lambda: len(g.lines("sweep done")) >= 2, 20, 0.2, "two sweeps")
            g.stop()
            # A barrier on the engine's one ordered stream: once the marker's create is recorded,
            # every earlier event of the name is too.
            mark = containers.run("rb3-mark", enable=False, start=False)
            events.first(mark, "create", 30)
            assert [a for a, t in events.of(name) if a == "create" and t > destroyed] == ["create"]
            after = containers.inspect(name)
            assert after["Id"] == restored != v1["Id"]
            assert _kept(after) == _kept(v1)  # v1's image by ID and v1's record as a whole
            assert after["Image"] == v1_image and "VERSION=1" in after["Config"]["Env"]
            assert "VERSION=2" not in after["Config"]["Env"]
            assert after["State"]["Running"] and after["State"]["Health"]["Status"] == "healthy"
            back = _of(containers, restored)
            assert not [a for a, _ in back if a in DONE_TO], back  # nothing done to it after
            assert api.exec_start(api.exec_create(name, ["cat", "/data/marker"])) == b"kept\n"
            # Guardian's creates only: the test's go to the engine directly, and Compose's
            # replacement is created under a temporary name.
            assert len(held.creates()) == 2  # the held one, dropped, and the one forwarded
            assert "container rolled back" not in g.full_log()  # the killed run never created it
            assert g.full_log().count("recreate finished at start") == 1
            assert "reconciled unfinished actions" not in g.log()  # the second start's
            [action] = rows(db, "SELECT * FROM actions WHERE kind='rollback'")
            assert action["id"] == intent["id"] and action["successor"] == restored
            assert action["outcome"] == "succeeded"
        finally:
            held.release.set()
            proxy.stop()
