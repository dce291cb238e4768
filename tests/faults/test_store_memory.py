"""The cap holds when the store could not remember (issue 43): restarts made while the disk was
full live only in Guardian's memory; after `kill -9` the next Guardian counts them from the
engine's record. Restarts are counted from the engine's own event stream, never from Guardian."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests

from tests.faults.conftest import Factory, fill_disk, sample, scrape
from tests.faults.exposure import Exposure
from tests.helpers import wait_until
from tests.integration.conftest import Containers
from tests.receiver import FakeReceiver, receiver

MAX_ATTEMPTS = 3


@pytest.fixture
def rx() -> Iterator[FakeReceiver]:
    with receiver() as r:
        yield r


def _sick_for_good(containers: Containers, name: str) -> None:
    """/sick is on the container's own file system, which a restart keeps: never healthy again."""
    containers.api.exec_start(containers.api.exec_create(name, ["touch", "/sick"]))


@pytest.mark.parametrize("between", ["space freed", "store deleted"])
def test_restarts_made_on_a_full_disk_still_count_after_kill_9(
    guardian: Factory,
    containers: Containers,
    mount_tmpfs: Callable[..., Path],
    exposure: Exposure,
    rx: FakeReceiver,
    between: str,
) -> None:
    disk = mount_tmpfs("disk", "4m")
    name = containers.run("nomemory", health_cmd="test ! -f /sick")
    containers.wait_health(name, "healthy")  # no Guardian runs yet: the state is stable
    g = guardian(
        env={"GDT_HOOK_URL": rx.url("/hook")},
        notify={"webhook_url_env": "GDT_HOOK_URL", "group_wait": "0s", "pacing": "0s"},
        store={"path": str(disk / "guardian.db")},
        restart={"cooldown": "2s", "verify_timeout": "3s", "max_attempts": MAX_ATTEMPTS},
    )
    url = g.http_url
    wait_until(lambda: g.lines("sweep done"), 20, message="first sweep")

    filler = fill_disk(disk)
    _sick_for_good(containers, name)
    events = containers.events
    # Every attempt of the first run, while nothing could be written.
    wait_until(lambda: events.count(name, "restart") >= MAX_ATTEMPTS, 90, message="3 restarts")
    wait_until(lambda: g.lines("giving up"), 30, message="first run gives up")
    assert g.lines("store write failed")
    # A store that keeps failing is heard: not ready, with the reason, and the intents counted.
    ready = requests.get(f"{url}/readyz", timeout=5)
    assert ready.status_code == 503 and "held in memory only" in ready.text, ready.text
    health = requests.get(f"{url}/healthz", timeout=5)
    assert health.status_code == 200 and "store degraded" in health.text, health.text
    held = sample(scrape(url, exposure), "guardian_store_held_intents")
    assert held is not None and held >= MAX_ATTEMPTS
    # What could not be queued was still told, once, marked as unrecorded.
    told = lambda: [  # noqa: E731
        n
        for r in rx.requests
        for n in r.json["notifications"]
        if n["container"] == name and "not recorded" in n["next_step"]
    ]
    wait_until(lambda: any(n["kind"] == "gave_up" for n in told()), 30, message="give-up told")
    assert {n["kind"] for n in told()} >= {"attempt", "gave_up"}, told()
    g.kill9()

    filler.unlink()
    if between == "store deleted":
        for path in disk.glob("guardian.db*"):
            os.unlink(path)
    g.start()
    # The second run judges the container, still unhealthy, with its budget spent.
    wait_until(lambda: g.lines("attempts counted from the engine's record"), 30, message="counted")
    wait_until(lambda: g.lines("giving up"), 30, message="second run gives up")
    sweeps = len(g.lines("sweep done"))
    wait_until(lambda: len(g.lines("sweep done")) >= sweeps + 3, 30, message="three more sweeps")
    assert events.count(name, "restart") == MAX_ATTEMPTS, events.of(name)
