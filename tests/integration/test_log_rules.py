"""Log rules against a real engine and a real `guardian run` (issue 45): a container that logs
its own death is restarted within 2 s of the line, and a pattern built to make a backtracking
engine spin changes nothing. Judged by the engine's own record: the line's time as the engine
stamped it, the kill event's time."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from guardian.service.watchers.log_watch import MAX_FOLLOWED
from tests.helpers import wait_until
from tests.integration.conftest import ENGINES, Containers, EventRecorder

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


def restarts(events: EventRecorder, name: str) -> int:
    """The restarts the engine recorded (Docker and Podman both say `restart`)."""
    return events.count(name, "restart")


def stopped_after(events: EventRecorder, name: str, since: float) -> float:
    """When the engine began stopping `name` after `since`: its first kill, die or restart
    event then (Podman stamps lines to the second: a line's time may read up to 1 s early)."""
    return next(
        t
        for action, t in events.of(name)
        if action in ("kill", "die", "died", "restart") and t >= since
    )


def stamp(text: str) -> float:
    """An engine's RFC 3339 stamp (nanoseconds) as unix time, to the microsecond."""
    head, _, frac = text.rstrip("Z").partition(".")
    return datetime.fromisoformat(f"{head}.{frac[:6]:0<6}+00:00").timestamp()


def line_time(containers: Containers, name: str, text: str) -> float:
    """When the engine stamped the first line holding `text` (unix time)."""
    raw = containers.api.logs(name, stdout=True, stderr=True, timestamps=True).decode()
    return stamp(next(line.split(" ", 1)[0] for line in raw.splitlines() if text in line))


@pytest.mark.parametrize("engine", ENGINES, indirect=True)
def test_a_container_that_logs_its_death_is_restarted_within_2s_of_the_line(
    containers: Containers, guardian: Any, engine_events: EventRecorder
) -> None:
    name = containers.run("fatal", ["sh", "-c", FATAL], labels={"guardian.logs.match": "FATAL"})
    g = guardian()
    wait_until(lambda: followed(g, name), 20, message="its log followed")
    go(containers, name)

    wait_until(lambda: restarts(engine_events, name) == 1, 20, message="restarted")
    said = line_time(containers, name, "FATAL: pool exhausted")
    assert 0 <= stopped_after(engine_events, name, said) - said < 2.0
    detected = wait_until(lambda: g.lines("problem detected"), 10, message="the incident")
    assert "type=log_match" in detected[0] and "FATAL: pool exhausted" in detected[0]
    # The new run waits again (its /run is empty): verified after running stable, resolved.
    verified = wait_until(lambda: g.lines("restart verified"), 30, message="verified")
    assert "outcome=succeeded" in verified[0]
    assert restarts(engine_events, name) == 1

    # The new run is followed too: its own FATAL line restarts it again, as promptly.
    go(containers, name)
    wait_until(lambda: restarts(engine_events, name) == 2, 20, message="restarted again")
    raw = containers.api.logs(name, timestamps=True).decode()
    said_again = [line for line in raw.splitlines() if "FATAL" in line]
    assert len(said_again) == 2
    again = stamp(said_again[1].split(" ", 1)[0])
    assert 0 <= stopped_after(engine_events, name, again) - again < 2.0


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

    wait_until(lambda: restarts(engine_events, normal) == 1, 20, message="restarted")
    said = line_time(containers, normal, "FATAL: pool exhausted")
    assert stopped_after(engine_events, normal, said) - said < 2.0
    assert requests.get(f"{g.http_url}/healthz", timeout=2).status_code == 200
    assert restarts(engine_events, hostile) == 0 and engine_events.count(hostile, "kill") == 0
    assert not [line for line in g.lines("problem detected") if hostile in line]
    # Its followers end with it: SIGTERM stops Guardian at once.
    asked = time.monotonic()
    g.stop(timeout=10)
    assert time.monotonic() - asked < 5


def unfollowed(g: Any) -> float | None:
    """guardian_log_rules_unfollowed as /metrics says it."""
    text = requests.get(f"{g.http_url}/metrics", timeout=5).text
    for family in text_string_to_metric_families(text):
        if family.name == "guardian_log_rules_unfollowed":
            return float(family.samples[0].value)
    return None


def test_labelled_containers_started_first_keep_no_slot_from_the_operators_rule(
    containers: Containers, guardian: Any, engine_events: EventRecorder
) -> None:
    """Issue 64: whoever can start opted-in containers fills every log slot with patterns that
    never match; the operator's rule still follows its container and restarts it."""
    g = guardian(logs={"rules": [{"containers": containers.name("victim-*"), "match": "FATAL"}]})
    squat = ["sh", "-c", "sleep 86400"]
    never = {"guardian.logs.match": "never-printed-[0-9]{40}"}
    squatters = [containers.run(f"squat-{n:03d}", squat, labels=never) for n in range(70)]
    wait_until(lambda: len(g.lines("log followed")) >= MAX_FOLLOWED, 60, message="slots filled")
    wait_until(lambda: unfollowed(g) == 70 - MAX_FOLLOWED, 30, message="the rest counted")

    victim = containers.run("victim-db", ["sh", "-c", FATAL])
    wait_until(lambda: followed(g, victim), 20, message="the operator's rule followed")
    go(containers, victim)
    wait_until(lambda: restarts(engine_events, victim) == 1, 20, message="restarted")
    assert [line for line in g.lines("problem detected") if victim in line]
    # The label's rule that gave its slot up, and those that never had one, are named and
    # counted; none of the squatters was touched.
    wait_until(lambda: unfollowed(g) == 70 - MAX_FOLLOWED + 1, 20, message="counted")
    named = {n for n in squatters for line in g.lines("log rule not followed") if n in line}
    assert named == set(squatters[MAX_FOLLOWED - 1 :])
    assert all(engine_events.count(n, "kill") == 0 for n in squatters)
