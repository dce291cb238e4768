"""Log rules against a real engine and a real `guardian run` (issue 45): a container that logs
its own death is restarted within 2 s of the line, and a pattern built to make a backtracking
engine spin changes nothing. Judged by the engine's own record: the line's time as the engine
stamped it, the kill event's time."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import requests

from tests.helpers import wait_until
from tests.integration.conftest import Containers, EventRecorder

# Waits for /run/go (a tmpfs a restart empties: the new run waits again), then says it.
FATAL = "until [ -f /run/go ]; do sleep 0.05; done; echo 'FATAL: pool exhausted'; sleep 86400"
# 100,000 a's then a b, twenty times: `(a+)+$` never matches, and spins a backtracking engine.
HOSTILE = (
    "until [ -f /run/go ]; do sleep 0.05; done; "
    "for i in $(seq 20); do head -c 100000 /dev/zero | tr '\\0' a; echo b; done; sleep 86400"
)


def go(containers: Containers, name: str) -> None:
    containers.api.exec_start(containers.api.exec_create(name, ["touch", "/run/go"]))


def followed(guardian: Any, name: str) -> bool:
    return any(f"container={name}" in line for line in guardian.lines("log followed"))


def stamp(text: str) -> float:
    """An engine's RFC 3339 stamp (nanoseconds) as unix time, to the microsecond."""
    head, _, frac = text.rstrip("Z").partition(".")
    return datetime.fromisoformat(f"{head}.{frac[:6]:0<6}+00:00").timestamp()


def line_time(containers: Containers, name: str, text: str) -> float:
    """When the engine stamped the first line holding `text` (unix time)."""
    raw = containers.api.logs(name, stdout=True, stderr=True, timestamps=True).decode()
    return stamp(next(line.split(" ", 1)[0] for line in raw.splitlines() if text in line))


def test_a_container_that_logs_its_death_is_restarted_within_2s_of_the_line(
    containers: Containers, guardian: Any, engine_events: EventRecorder
) -> None:
    name = containers.run("fatal", ["sh", "-c", FATAL], labels={"guardian.logs.match": "FATAL"})
    g = guardian()
    wait_until(lambda: followed(g, name), 20, message="its log followed")
    go(containers, name)

    killed = engine_events.first(name, "kill", timeout=20)
    said = line_time(containers, name, "FATAL: pool exhausted")
    assert 0 <= killed - said < 2.0, killed - said
    detected = wait_until(lambda: g.lines("problem detected"), 10, message="the incident")
    assert "type=log_match" in detected[0] and "FATAL: pool exhausted" in detected[0]
    # The new run waits again (its /run is empty): verified after running stable, resolved.
    verified = wait_until(lambda: g.lines("restart verified"), 30, message="verified")
    assert "outcome=succeeded" in verified[0]
    assert engine_events.count(name, "kill") == 1

    # The new run is followed too: its own FATAL line restarts it again, as promptly.
    go(containers, name)
    wait_until(lambda: engine_events.count(name, "kill") == 2, 20, message="restarted again")
    again = [t for action, t in engine_events.of(name) if action == "kill"][1]
    raw = containers.api.logs(name, timestamps=True).decode()
    said_again = [line for line in raw.splitlines() if "FATAL" in line]
    assert len(said_again) == 2
    assert 0 <= again - stamp(said_again[1].split(" ", 1)[0]) < 2.0


def test_a_backtracking_pattern_on_long_lines_changes_nothing(
    containers: Containers, guardian: Any, engine_events: EventRecorder
) -> None:
    hostile = containers.run(
        "hostile", ["sh", "-c", HOSTILE], labels={"guardian.logs.match": "(a+)+$"}
    )
    normal = containers.run("normal", ["sh", "-c", FATAL], labels={"guardian.logs.match": "FATAL"})
    g = guardian()
    for name in (hostile, normal):
        wait_until(lambda name=name: followed(g, name), 20, message=f"{name} followed")
    go(containers, hostile)
    wait_until(
        lambda: containers.api.logs(hostile, tail=1).startswith(b"a" * 1000),
        20,
        message="the hostile lines written",
    )
    go(containers, normal)

    killed = engine_events.first(normal, "kill", timeout=20)
    assert killed - line_time(containers, normal, "FATAL: pool exhausted") < 2.0
    assert requests.get(f"{g.http_url}/healthz", timeout=2).status_code == 200
    assert engine_events.count(hostile, "kill") == 0
    assert not [line for line in g.lines("problem detected") if hostile in line]
