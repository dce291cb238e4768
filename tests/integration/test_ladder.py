"""The escalation ladder end to end: a real engine, a real `guardian run`, a webhook receiver.
A container that is never healthy is restarted max_attempts times, then recreated from its own
record under the same name (labels, network, named volume kept), then stopped, and nothing
after; the engine's event stream is the judge, each rung is told once."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from datetime import UTC, datetime
from typing import Any

import docker
import docker.errors

from guardian.adapters.sqlite.store import SqliteStore
from guardian.core.model import ActionKind, RemediationAction
from tests.helpers import wait_until
from tests.integration.conftest import PREFIX
from tests.integration.notify_helpers import WATCH, notifying
from tests.integration.see_more import rows
from tests.proxy import HeldCreate
from tests.receiver import receiver

SECRET = "gdtSecretLadder0123456789"


def _after(events: list[tuple[str, float]], action: str, at: float) -> float | None:
    return next((t for a, t in events if a == action and t >= at), None)


def test_restart_restart_recreate_stop_and_nothing_after(containers, guardian) -> None:
    api: docker.APIClient = containers.api
    net = f"{PREFIX}ladder-net"
    vol = f"{PREFIX}ladder-vol"
    api.create_network(net, labels={"guardian.test": "ladder"})
    api.create_volume(vol)
    name = containers.run(
        "ladder",
        health_cmd="false",
        labels={WATCH: "true", "com.example.team": "web"},
        binds={vol: {"bind": "/data", "mode": "rw"}},
        network_mode=net,
    )
    api.exec_start(api.exec_create(name, ["sh", "-c", "echo kept > /data/marker"]))
    before = containers.inspect(name)
    try:
        with receiver() as rx:
            env = {"GDT_HOOK": rx.url(f"/hook/{SECRET}"), "GDT_PAGER": rx.url(f"/pager/{SECRET}")}
            notify = {
                "group_wait": "0s",
                "pacing": "0s",
                "channels": [
                    {"name": "hook", "type": "webhook", "url_env": "GDT_HOOK"},
                    {"name": "pager", "type": "webhook", "url_env": "GDT_PAGER"},
                ],
                "routes": [{"receivers": ["pager"], "severity": ["critical"], "continue": True}],
                "default": ["hook"],
            }

            def told(path: str) -> list[dict[str, Any]]:
                return [
                    n
                    for r in rx.answered()
                    if r.path.startswith(f"/{path}/")
                    for n in r.json["notifications"]
                ]

            with notifying(guardian, notify, env, absent=(SECRET,)) as make:
                g = make(
                    restart={
                        "max_attempts": 2,
                        "cooldown": "1s",
                        "verify_timeout": "4s",
                        "escalate": ["recreate", "stop"],
                    },
                    storm={"threshold": "100%"},
                )
                events = containers.events
                created = events.first(name, "create", 90)  # the first create is the test's
                destroyed = wait_until(
                    lambda: _after(events.of(name), "destroy", created), 90, 0.2, "recreate"
                )
                recreated = wait_until(
                    lambda: _after(events.of(name), "create", destroyed), 30, 0.2, "create"
                )
                stopped = wait_until(
                    lambda: _after(events.of(name), "stop", recreated), 90, 0.2, "stop rung"
                )
                wait_until(
                    lambda: any("stop, the ladder" in n["detail"] for n in told("hook")),
                    30,
                    0.2,
                    "stop rung told",
                )
                time.sleep(8)  # several sweeps and cooldowns: nothing may follow the stop
                db = g.store_path
        seen = events.of(name)
        restarts = [t for a, t in seen if a == "restart" and t < destroyed]
        assert len(restarts) == 2
        assert not [a for a, t in seen if a in ("start", "restart", "destroy") and t > stopped]
        after = containers.inspect(name)
        assert after["Id"] != before["Id"] and after["State"]["Status"] == "exited"
        assert after["Config"]["Labels"] == before["Config"]["Labels"]
        assert list(after["NetworkSettings"]["Networks"]) == [net]
        assert [(m["Type"], m["Name"]) for m in after["Mounts"] if m["Type"] == "volume"] == [
            ("volume", vol)
        ]
        hook, pager = told("hook"), told("pager")
        rungs = [n for n in hook if "restarts did not help" in n["detail"]]
        assert [("recreate" in n["detail"].split(":")[1]) for n in rungs] == [True, False]
        assert len([n for n in rungs if n["outcome"] == "stopped"]) == 1
        assert [n["kind"] for n in pager] == ["attempt"]  # the stop rung only: critical
        assert pager[0]["outcome"] == "stopped"
        [recreate] = rows(db, "SELECT * FROM actions WHERE kind='recreate'")
        assert recreate["successor"] == after["Id"] and recreate["record"]
    finally:
        with contextlib.suppress(docker.errors.APIError):
            api.remove_container(name, force=True)
        with contextlib.suppress(docker.errors.APIError):
            api.remove_network(net)
        with contextlib.suppress(docker.errors.APIError):
            api.remove_volume(vol)


def test_a_recreate_cut_between_remove_and_create_is_created_at_the_next_start_once(
    containers, guardian, tmp_path
) -> None:
    """The store a Guardian killed (kill -9) after the removal and before the create leaves:
    the intent with the whole record, no outcome, and no container of that name. The next
    start creates it from the stored record, once; a start after it creates nothing more."""
    api: docker.APIClient = containers.api
    name = containers.run("cut", labels={WATCH: "true", "com.example.team": "web"})
    record = containers.inspect(name)
    g = guardian(start=False, watch={"label": WATCH})
    store = SqliteStore(g.store_path)
    store.record_intent(
        RemediationAction(
            None,
            None,
            socket.gethostname(),
            name,
            record["Id"],
            ActionKind.RECREATE,
            datetime.now(UTC),
            "escalated",
            record=json.dumps(record),
        )
    )
    store.close()
    api.remove_container(name, force=True)  # the removal the killed Guardian made
    events = containers.events
    removed = events.first(name, "destroy")
    try:
        g.start()
        made = wait_until(lambda: _after(events.of(name), "create", removed), 30, 0.2, "create")
        wait_until(lambda: rows(g.store_path, "SELECT * FROM actions WHERE successor!=''"), 20, 0.2)
        g.kill9()
        g.start()  # and again: the outcome is written, nothing is created twice
        time.sleep(4)  # its reconcile, and two sweeps
        after = containers.inspect(name)
        assert after["Config"]["Labels"] == record["Config"]["Labels"]
        assert [a for a, t in events.of(name) if a == "create" and t >= made] == ["create"]
        [action] = rows(g.store_path, "SELECT * FROM actions WHERE kind='recreate'")
        assert action["successor"] == after["Id"]
    finally:
        with contextlib.suppress(docker.errors.APIError):
            api.remove_container(name, force=True)


def test_kill_9_after_the_remove_and_before_the_create_is_created_at_the_next_start_once(
    containers, guardian, tmp_path
) -> None:
    """A real kill -9 in the window: Guardian talks to the engine through a proxy that holds
    the recreate's create request, so the removal is done and the engine has no create yet
    when Guardian is killed; the held request is then dropped, never forwarded. The next
    start creates the container from the stored record, once, with its labels and named
    volume, and the store holds the one recreate with its outcome naming the new container."""
    api: docker.APIClient = containers.api
    vol = f"{PREFIX}kill9-vol"
    api.create_volume(vol, labels={"guardian.test": "ladder"})
    name = containers.run(
        "kill9",
        health_cmd="false",
        labels={WATCH: "true", "com.example.team": "web"},
        binds={vol: {"bind": "/data", "mode": "rw"}},
    )
    api.exec_start(api.exec_create(name, ["sh", "-c", "echo kept > /data/marker"]))
    before = containers.inspect(name)

    held = HeldCreate.on(tmp_path / "kill9.sock", name)
    proxy = held.proxy
    events = containers.events
    try:
        g = guardian(
            docker={"url": proxy.url},
            watch={"label": WATCH},
            restart={
                "max_attempts": 1,
                "cooldown": "1s",
                "verify_timeout": "3s",
                "escalate": ["recreate"],
            },
            storm={"threshold": "100%"},
        )
        created = events.first(name, "create", 30)  # the first create is the test's
        destroyed = wait_until(
            lambda: _after(events.of(name), "destroy", created), 90, 0.2, "the recreate's removal"
        )
        assert held.arrived.wait(30), "the recreate's create never reached the proxy"
        g.kill9()  # the removal done, the create held: the window issue 55 names
        held.release.set()
        assert not api.containers(all=True, filters={"name": f"^/{name}$"})
        [intent] = rows(g.store_path, "SELECT * FROM actions WHERE kind='recreate'")
        assert intent["outcome"] is None and json.loads(intent["record"])["Id"] == before["Id"]
        g.start()
        recreated = wait_until(
            lambda: _after(events.of(name), "create", destroyed), 30, 0.2, "created at the start"
        )
        db = g.store_path
        # The new container is verified (never healthy) and the ladder is spent: a give-up, its
        # next try an hour away. Nothing may be created after the one create at the start.
        wait_until(
            lambda: rows(db, "SELECT * FROM actions WHERE outcome='retry_exhausted'"),
            30,
            0.2,
            "the give-up after the recreated container's verification",
        )
        g.stop()
        # A barrier on the engine's one ordered stream: once the marker's create is recorded,
        # every earlier event of the name is too.
        mark = containers.run("kill9-mark", enable=False, start=False)
        events.first(mark, "create", 30)
        after = containers.inspect(name)
        assert [a for a, t in events.of(name) if a == "create" and t > destroyed] == ["create"]
        assert after["Id"] != before["Id"] and recreated > destroyed
        assert after["Config"]["Labels"] == before["Config"]["Labels"]
        assert [(m["Type"], m["Name"]) for m in after["Mounts"] if m["Type"] == "volume"] == [
            ("volume", vol)
        ]
        kept = api.exec_start(api.exec_create(name, ["cat", "/data/marker"]))
        assert kept == b"kept\n"
        assert len(held.creates()) == 2  # the held one, dropped, and the one forwarded
        assert "container recreated" not in g.full_log()  # the killed run never created it
        assert len(g.lines("recreate finished at start")) == 1
        [action] = rows(db, "SELECT * FROM actions WHERE kind='recreate'")
        assert action["id"] == intent["id"] and action["successor"] == after["Id"]
        assert action["outcome"] == "unhealthy_after_restart"  # the new container's verdict
    finally:
        held.release.set()
        proxy.stop()
        with contextlib.suppress(docker.errors.APIError):
            api.remove_container(name, force=True)
        with contextlib.suppress(docker.errors.APIError):
            api.remove_volume(vol)
