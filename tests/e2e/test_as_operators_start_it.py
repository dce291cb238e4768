"""Promises checked end to end on `guardian run` as an operator starts it (issue 26): the store
is private from the first byte, and containers that ask for long stop timeouts never hold back
another container's healing, nor a stop of Guardian."""

from __future__ import annotations

import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from tests.helpers import wait_until
from tests.integration.conftest import (
    REPO,
    Containers,
    EventRecorder,
    GuardianProcess,
    base_config,
)

USUAL_UMASK = ["sh", "-c", 'umask 022 && exec "$@"', "umask022"]
HEALTH = "test ! -f /run/sick"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def store_modes(store: Path, made: list[Path]) -> dict[str, int]:
    files = [p for p in store.parent.iterdir() if p.name.startswith(store.name)]
    return {str(p): mode(p) for p in [*files, *made]}


def private(store: Path, made: list[Path]) -> dict[str, int]:
    files = [p for p in store.parent.iterdir() if p.name.startswith(store.name)]
    return {**{str(p): 0o600 for p in files}, **{str(d): 0o700 for d in made}}


def test_guardian_run_on_a_fresh_path_leaves_the_store_private(
    tmp_path: Path, guardian: Any
) -> None:
    tmp_path.chmod(0o755)
    store = tmp_path / "state" / "guardian" / "guardian.db"
    g: GuardianProcess = guardian(start=False, store={"path": str(store)})
    g.wrapper = USUAL_UMASK
    g.start()
    wait_until(lambda: g.lines('msg="sweep done"'), 20, message="a sweep")
    assert g.stop() == 0
    made = [tmp_path / "state", tmp_path / "state" / "guardian"]
    assert store.exists()
    assert store_modes(store, made) == private(store, made)
    assert mode(tmp_path) == 0o755  # a directory that existed is the operator's


def command_on_fresh_store(
    base: Path, *command: str
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    base.mkdir(mode=0o755)
    store = base / "new" / "guardian.db"
    config = base_config(base, store={"path": str(store)})
    (base / "config.yaml").write_text(yaml.safe_dump(config))
    done = subprocess.run(
        [
            *USUAL_UMASK,
            sys.executable,
            "-m",
            "guardian.entrypoints.cli",
            *command,
            "--config",
            str(base / "config.yaml"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return store, done


def test_check_apply_on_a_fresh_path_leaves_the_store_private(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    store, done = command_on_fresh_store(tmp_path / "check", "check", "--apply")
    assert done.returncode in (0, 1), done.stderr  # 1: it found something to report
    made = [store.parent]
    assert store_modes(store, made) == private(store, made)


def test_status_on_a_fresh_path_creates_nothing(tmp_path: Path) -> None:
    store, done = command_on_fresh_store(tmp_path / "status", "status")
    assert done.returncode != 0 and "no such file" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not store.parent.exists()


def kills(events: EventRecorder, name: str, signal: str) -> list[float]:
    """When the engine signalled `name` with `signal` (15: a stop began; 9: a kill)."""
    return [
        e["timeNano"] / 1e9
        for e in list(events.events)
        if e.get("Action") == "kill"
        and e["Actor"]["Attributes"].get("name") == name
        and e["Actor"]["Attributes"].get("signal") == signal
    ]


def restarts_done(events: EventRecorder, name: str) -> bool:
    """Whether the engine finished a restart of `name` (Docker's `restart` event)."""
    return any(
        e.get("Action") == "restart" and e["Actor"]["Attributes"].get("name") == name
        for e in list(events.events)
    )


def health_event(events: EventRecorder, name: str, status: str) -> float | None:
    times = [
        e["timeNano"] / 1e9
        for e in list(events.events)
        if e.get("Action") == f"health_status: {status}"
        and e["Actor"]["Attributes"].get("name") == name
    ]
    return times[-1] if times else None


def test_long_stops_never_hold_an_ordinary_restart_nor_a_stop(
    containers: Containers, guardian: Any, engine_events: EventRecorder
) -> None:
    """Twelve containers whose health check fails, whose PID 1 ignores SIGTERM and whose label
    asks for a 10-minute stop timeout, all depending on each other; then one ordinary
    container breaks."""
    names = [containers.name(f"slow{i}") for i in range(12)]
    operator_stop = 2.0
    g: GuardianProcess = guardian(
        start=False,
        restart={
            "max_concurrent": 4,
            "stop_timeout": f"{operator_stop:.0f}s",
            "max_per_minute": 100,
            "cooldown": "60s",
        },
        # Thirteen containers failing at once read as a host storm, a guard of its own.
        storm={"min_containers": 1000},
    )
    g.wrapper = USUAL_UMASK
    g.start()
    ordinary = containers.run("ordinary", health_cmd=HEALTH)
    containers.wait_health(ordinary, "healthy")
    for i, name in enumerate(names):
        others = ",".join(n for n in names if n != name)
        containers.run(
            f"slow{i}",
            health_cmd="false",
            stop_signal="SIGTERM",  # PID 1 ignores it: the engine waits out the stop timeout
            labels={"guardian.stop_timeout": "10m", "guardian.depends_on": others},
        )
    wait_until(
        lambda: all(kills(engine_events, n, "15") for n in names),
        40,
        message="every slow container's restart began",
    )
    began = sorted(t for n in names for t in kills(engine_events, n, "15"))
    assert len(began) == 12
    # max_concurrent still bounds what is asked of the engine: no five stops began within the
    # operator's stop timeout of each other.
    assert all(began[i + 4] - began[i] >= operator_stop / 2 for i in range(len(began) - 4))

    containers.make_unhealthy(ordinary)
    wait_until(lambda: kills(engine_events, ordinary, "9"), 20, message="ordinary restarted")
    unhealthy_at = health_event(engine_events, ordinary, "unhealthy")
    assert unhealthy_at is not None
    latency = kills(engine_events, ordinary, "9")[0] - unhealthy_at
    print(f"ordinary restarted {latency:.3f}s after its unhealthy event")  # bench/RESULTS.md
    assert latency <= 2.0

    sigterm_at = time.monotonic()
    assert g.stop(timeout=30) == 0
    stopped_in = time.monotonic() - sigterm_at
    print(f"guardian exited {stopped_in:.2f}s after SIGTERM, 12 restarts in flight")
    assert stopped_in <= 15, "the stop waited for the containers' stops"
    assert "restarts left to the engine" in g.log()
    assert all(containers.inspect(n)["State"]["Running"] for n in names)  # still stopping

    g.start()
    wait_until(
        lambda: len(g.lines("restart left to the engine at stop")) == 12,
        20,
        message="the twelve reconciled",
    )
    swept = len(g.lines('msg="sweep done"'))
    wait_until(lambda: len(g.lines('msg="sweep done"')) >= swept + 2, 20, message="two sweeps")
    assert {n: len(kills(engine_events, n, "15")) for n in names} == dict.fromkeys(names, 1)
    assert g.stop() == 0
    # The engine's restarts still wait out their 10-minute stops: end each (SIGKILL) and let it
    # start the container again before the fixture removes it. A removal during an engine's
    # restart can leave Docker 20.10 listing the container, nameless and "Removal In Progress",
    # until the engine restarts: later tests of this run would list it as theirs.
    for n in names:
        containers.api.kill(n)
    wait_until(
        lambda: all(restarts_done(engine_events, n) for n in names),
        30,
        message="the engine's restarts of the slow containers ended",
    )
