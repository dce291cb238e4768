"""One change reaching the open status pages, against a real `guardian run` and real
containers: `python -m bench.page real` (bench/page.py) prints these rows. A fake engine hides
what a real read costs (the engine's JSON, its inspects); this measures it.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.engine import Fleet
from bench.page import StreamClient, thread_cpu
from bench.probes import EventLog, GuardianRun, wait_for

CHANGES = 40  # per row of real_change_cost: about a second each

FLIP_INTERVAL = 1.0  # s: the flipped container's health check (retries 1)
# The others' checks at Docker's default interval: at 1 s each, 100 containers would have the
# shared engine run 100 execs a second, none of which Guardian hears of (its event filter).
STILL_INTERVAL = 30.0
CHANGE_TIMEOUT = 30.0  # s: one health change seen by the engine, Guardian and every stream
TRANSITION = re.compile(rb'msg="incident transition" .*?\bcontainer=(\S+) .*?\bto_state=(\S+)')


class Transitions:
    """The incident transitions Guardian logs for one container, read as its log grows: reading
    the log costs Guardian nothing, where asking its API would read every container."""

    def __init__(self, path: Path, container: str) -> None:
        self.path = path
        self.container = container.encode()
        self.states: list[str] = []
        self.lines = 0  # every line Guardian logged so far
        self._offset = 0
        self._partial = b""

    def poll(self) -> Transitions:
        with self.path.open("rb") as f:
            f.seek(self._offset)
            data = f.read()
        self._offset += len(data)
        *lines, self._partial = (self._partial + data).split(b"\n")
        self.lines += len(lines)
        for line in lines:
            m = TRANSITION.search(line)
            if m and m.group(1) == self.container:
                self.states.append(m.group(2).decode())
        return self


def _health_events(events: EventLog, name: str) -> list[str]:
    """The engine's `health_status: ...` events of one container so far."""
    return [a for a, _ in events.of(name) if a.startswith("health_status")]


def _change_health(
    fleet: Fleet,
    name: str,
    sick: bool,
    events: EventLog,
    log: Transitions,
    clients: list[StreamClient],
) -> None:
    """Turn `name` unhealthy (or healthy again) and wait until the engine announced it, Guardian
    logged the incident's transition (opened or reopened; resolved) and every stream got an event
    since: one health change."""
    status, state = ("unhealthy", "active") if sick else ("healthy", "resolved")
    heard, logged = len(_health_events(events, name)), len(log.states)
    seen = [c.events for c in clients]
    cmd = ["rm", "-f", "/tmp/healthy"] if sick else ["touch", "/tmp/healthy"]
    fleet.api.exec_start(fleet.api.exec_create(name, cmd))

    def done() -> bool:
        health = _health_events(events, name)
        return (
            len(health) > heard
            and health[-1] == f"health_status: {status}"
            and state in log.poll().states[logged:]
            and all(c.events > n for c, n in zip(clients, seen, strict=True))
        )

    wait_for(done, CHANGE_TIMEOUT, f"{name} {status}, its incident {state}, every stream", 0.005)


def _settled(log: Transitions, clients: list[StreamClient], quiet: float = 0.5) -> None:
    """Until neither a stream nor Guardian's log moved for `quiet` seconds: the last change's
    store writes reach the streams after its transition is logged, and belong to it."""
    last: tuple[Any, ...] = ()
    since = time.monotonic()

    def still() -> bool:
        nonlocal last, since
        now = (log.poll().lines, *(c.events for c in clients))
        if now != last:
            last, since = now, time.monotonic()
        return time.monotonic() - since >= quiet

    wait_for(still, 10 + quiet, "the streams and Guardian's log to settle", 0.05)


def real_change_cost(containers: int, pages: list[int], changes: int) -> list[tuple[int, float]]:
    """(pages open, ms of Guardian's CPU per health change) of a real `guardian run` (the
    engine at DOCKER_HOST, `api.public_reads: true`) watching `containers` real containers.

    One of them (`guardian.action=notify`: an incident, never a restart) loses and regains its
    health `changes` times per row (rounded up to even: it ends healthy), after one warm-up round
    trip. A health change is one `health_status` event of the engine; Guardian's share of it is
    the event, the incident opened or reopened (or resolved) in the store, and, with pages open,
    the page read and sent. CPU: every thread's schedstat over the changes, divided by the
    `health_status` events the engine sent meanwhile."""
    changes += changes % 2
    url = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    fleet = Fleet(url)
    events = None
    out = []
    try:
        command = ["sh", "-c", "touch /tmp/healthy; exec sleep 86400"]
        check = {"health": True, "command": command, "health_cmd": "test -f /tmp/healthy"}
        flip = fleet.create(
            1, "flip", **check, health_interval=FLIP_INTERVAL, labels={"guardian.action": "notify"}
        )[0]
        if containers > 1:
            fleet.create(
                containers - 1, "still", **check, health_interval=STILL_INTERVAL, workers=8
            )
        wait_for(
            lambda: fleet.healthy("flip") + fleet.healthy("still") == containers,
            STILL_INTERVAL + 60,
            f"{containers} containers healthy",
            every=1.0,
        )
        events = EventLog(url, fleet.scope)
        with tempfile.TemporaryDirectory() as tmp:
            public = {"public_reads": True}
            with GuardianRun(Path(tmp), url, fleet.scope, api=public, page={"streams": 16}) as g:
                port = int(g.base_url.rsplit(":", 1)[1])
                log = Transitions(g.log_path, flip)
                for k in pages:
                    clients = [StreamClient(port) for _ in range(k)]
                    try:
                        wait_for(
                            lambda cs=clients: all(c.events >= 1 for c in cs),
                            10,
                            "every stream's first event",
                            0.005,
                        )
                        for sick in (True, False):  # warm-up (the first run opens the incident)
                            _change_health(fleet, flip, sick, events, log, clients)
                        _settled(log, clients)
                        heard = len(_health_events(events, flip))
                        before = thread_cpu(g.pid)
                        for n in range(changes):
                            _change_health(fleet, flip, n % 2 == 0, events, log, clients)
                        _settled(log, clients)
                        spent = thread_cpu(g.pid) - before
                        counted = len(_health_events(events, flip)) - heard
                    finally:
                        for c in clients:
                            c.close()
                    out.append((k, spent / counted * 1000))
    finally:
        if events is not None:
            events.close()
        fleet.remove()
        fleet.close()
    return out


def print_rows(containers: int, changes: int) -> None:
    """The rows of real_change_cost, with the pages' share (k pages minus none)."""
    rows = real_change_cost(containers, [0, 1, 8], changes)
    base = rows[0][1]
    print(
        f"Real engine, {containers} containers; per health change: one `health_status` event "
        f"of the engine (healthy -> unhealthy with its incident opened or reopened, or back "
        f"with it resolved), {changes + changes % 2} per row; Guardian's CPU from every "
        f"thread's schedstat."
    )
    print()
    print(
        "| containers | pages open | guardian CPU per health change | pages' share (k - 0 pages) |"
    )
    print("|---:|---:|---:|---:|")
    for k, ms in rows:
        share = f"{ms - base:+.2f} ms" if k else "-"
        print(f"| {containers} | {k} | {ms:.2f} ms | {share} |")
