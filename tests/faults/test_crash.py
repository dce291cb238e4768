"""Crash: kill -9 Guardian at random moments during a restart storm, then check what survived.

Restarts are counted from Docker's own events (a live subscription), never from Guardian's
records. Sizes come from the environment so bench/soak.sh can run the same test longer:
GUARDIAN_FAULT_CONTAINERS (10), GUARDIAN_FAULT_KILLS (20), GUARDIAN_FAULT_SEED (random), and
GUARDIAN_FAULT_REPORT (a JSON file to write the figures to).
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker.errors

from tests.faults.conftest import Factory, container_env, report_figures
from tests.faults.exposure import Exposure
from tests.faults.notify_check import (
    APPRISE_CHANNEL,
    as_report,
    check_notifications,
    expose_received,
    notify_channels,
)
from tests.helpers import wait_until
from tests.integration.conftest import Containers, EventRecorder
from tests.receiver import FakeReceiver

CONTAINERS = int(os.environ.get("GUARDIAN_FAULT_CONTAINERS", "10"))
KILLS = int(os.environ.get("GUARDIAN_FAULT_KILLS", "20"))
MAX_ATTEMPTS = 3
WINDOW = 30.0  # seconds: short, so the storm goes on across the whole run
# Docker reports a restart when it has finished; Guardian counts from its request. The two
# differ by one restart's duration (seconds under load), so the window is checked on Docker's
# times less this slack; a lost budget would show as 4+ restarts within ~10 s, far inside it.
SLACK = 8.0


def most_in_window(times: list[float], window: float) -> int:
    """The largest number of `times` inside any interval of length `window`."""
    times = sorted(times)
    best, j = 0, 0
    for i, t in enumerate(times):
        while times[j] <= t - window:
            j += 1
        best = max(best, i - j + 1)
    return best


def test_the_window_check_sees_a_fourth_restart_only_inside_the_window() -> None:
    assert most_in_window([0, 1, 2, 40, 41, 42], 22) == 3
    assert most_in_window([0, 1, 2, 10], 22) == 4  # the budget lost to a crash
    assert most_in_window([], 22) == 0


def query(store: Path, sql: str) -> list[Any]:
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def drained(store: Path) -> Callable[[], bool]:
    """A wait_until condition: nothing pending or undispatched in the outbox, and no new
    notification for 3 s (the resolve notifications of the healed containers may still come)."""
    last = (-1, time.monotonic())  # (outbox rows, since when)

    def check() -> bool:
        nonlocal last
        rows, depth = query(
            store,
            "SELECT (SELECT count(*) FROM outbox), (SELECT count(*) FROM deliveries"
            " WHERE state = 'pending') + (SELECT count(*) FROM outbox WHERE dispatched = 0)",
        )[0]
        now = time.monotonic()
        if rows != last[0]:
            last = (rows, now)
            return False
        return depth == 0 and now - last[1] >= 3.0

    return check


def test_kill_9_during_a_restart_storm_loses_nothing_and_never_exceeds_the_cap(
    guardian: Factory,
    containers: Containers,
    engine_events: EventRecorder,
    exposure: Exposure,
) -> None:
    rx = FakeReceiver()
    try:
        storm_and_check(guardian, containers, engine_events, exposure, rx)
    finally:
        rx.stop()
        expose_received(exposure, rx)


def heal(containers: Containers, name: str) -> None:
    """Remove the container's /sick, once it runs, until a look finds it gone: the engine may
    still be carrying out a restart the last killed Guardian asked for (409 "is not running"
    meanwhile, or the restart's kill ending the `rm` before it ran)."""

    def ran(command: list[str]) -> bool:
        exec_id = containers.api.exec_create(name, command)
        containers.api.exec_start(exec_id)
        return containers.api.exec_inspect(exec_id)["ExitCode"] == 0

    def healed() -> bool:
        try:
            return ran(["rm", "-f", "/sick"]) and ran(["test", "!", "-f", "/sick"])
        except docker.errors.APIError as exc:
            if exc.status_code == 409:
                return False
            raise

    wait_until(healed, 60, 0.2, f"{name} healed by the test")


def storm_and_check(
    guardian: Factory,
    containers: Containers,
    engine_events: EventRecorder,
    exposure: Exposure,
    rx: FakeReceiver,
) -> None:
    seed = int(os.environ.get("GUARDIAN_FAULT_SEED") or random.randrange(1 << 30))
    rng = random.Random(seed)
    print(f"crash test seed {seed}: GUARDIAN_FAULT_SEED={seed} reproduces the kill moments")
    names = []
    for i in range(CONTAINERS):
        # /sick lives in the container's own file system, so a restart does not heal it.
        name = containers.run(
            f"storm{i}",
            health_cmd="test ! -f /sick",
            tmpfs_run=False,
            environment=container_env(),
        )
        containers.api.exec_start(containers.api.exec_create(name, ["touch", "/sick"]))
        names.append(name)
    env, notify = notify_channels(rx)
    g = guardian(
        env=env,
        start=False,
        notify=notify,
        # Every container here fails at once, on purpose: the storm breaker (which would rightly
        # hold them all) is off, so the restart cap is what is tested.
        storm={"threshold": "100%"},
        watch={"interval": "1s"},
        restart={
            "cooldown": "1s",
            "max_attempts": MAX_ATTEMPTS,
            "window": f"{int(WINDOW)}s",
            "max_per_minute": 1000,
            "max_concurrent": 10,
        },
    )
    started = time.monotonic()
    starts: list[float] = []  # time.monotonic() before each run, to place what rx received
    for _ in range(KILLS):
        starts.append(time.monotonic())
        g.start()
        time.sleep(rng.uniform(0.2, 4.0))  # a random moment of the storm
        g.kill9()
    storm_seconds = time.monotonic() - started

    # Heal every container, then let one last Guardian reconcile what the kills left unfinished.
    for name in names:
        heal(containers, name)
    for name in names:
        containers.wait_health(name, "healthy", timeout=60)
    starts.append(time.monotonic())
    g.start()
    unfinished = "SELECT count(*) FROM actions WHERE outcome IS NULL OR outcome = 'restarted'"
    wait_until(lambda: query(g.store_path, unfinished)[0][0] == 0, 60, message="reconciled")
    wait_until(drained(g.store_path), 90, message="notification outbox drained")
    assert g.stop() == 0

    # Notifications: none lost, none sent twice to Slack or Apprise but in the window of a kill.
    channels = ("slack", "webhook", APPRISE_CHANNEL)
    notified = check_notifications(g.store_path, rx, starts, KILLS, channels)
    assert notified.notifications > 0, "no notification at all"
    assert not notified.problems, "; ".join(notified.problems)
    assert notified.slack_duplicates <= KILLS and notified.apprise_duplicates <= KILLS

    restarts = {name: [t for a, t in engine_events.of(name) if a == "restart"] for name in names}
    total = sum(len(t) for t in restarts.values())
    assert total >= CONTAINERS, f"no storm: only {total} restarts"
    worst = {name: most_in_window(t, WINDOW - SLACK) for name, t in restarts.items()}
    over = {name: n for name, n in worst.items() if n > MAX_ATTEMPTS}
    assert not over, f"restarted more than {MAX_ATTEMPTS} times within {WINDOW - SLACK}s: {over}"

    duplicates = query(
        g.store_path,
        "SELECT container, type, count(*) FROM incidents WHERE state != 'closed'"
        " GROUP BY container, type HAVING count(*) > 1",
    )
    assert duplicates == [], f"duplicate open incidents: {duplicates}"
    assert query(g.store_path, unfinished)[0][0] == 0, "an intent without an outcome"
    # Nothing lost: every restart Docker saw had its intent written before it.
    intents = dict(
        query(
            g.store_path,
            "SELECT container, count(*) FROM actions WHERE kind = 'restart' GROUP BY container",
        )
    )
    for name in names:
        assert len(restarts[name]) <= intents.get(name, 0), f"{name}: a restart without intent"

    outcomes = dict(query(g.store_path, "SELECT outcome, count(*) FROM actions GROUP BY outcome"))
    report_figures(
        "crash",
        {
            "seed": seed,
            "containers": CONTAINERS,
            "kills_survived": KILLS,
            "storm_seconds": round(storm_seconds),
            "docker_restarts": total,
            "restart_intents": sum(intents.values()),
            "most_restarts_in_window": max(worst.values()),
            "cap": MAX_ATTEMPTS,
            "window_seconds": WINDOW,
            "incidents": query(g.store_path, "SELECT count(*) FROM incidents")[0][0],
            "duplicate_open_incidents": len(duplicates),
            "outcomes": outcomes,
            **as_report(notified),
        },
    )
