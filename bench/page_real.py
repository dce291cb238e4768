"""One change reaching the open status pages, against a real `guardian run` and real
containers: `python -m bench.page real` (bench/page.py) prints these rows. A fake engine hides
what a real read costs (the engine's JSON, its inspects); this measures it.
"""

from __future__ import annotations

import os
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.engine import Fleet
from bench.idle import schedstat
from bench.page import StreamClient, cpu_since
from bench.probes import EventLog, GuardianRun, wait_for

CHANGES = 60  # per row of real_change_cost: about a second each
ROUNDS = 6  # the rows measured in turn, this many times
SWEEPS = "1h"  # watch.interval of the Guardian measured

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


def real_change_cost(
    containers: int, pages: list[int], changes: int, rounds: int = ROUNDS
) -> list[tuple[int, list[float]]]:
    """(pages open, ms of Guardian's CPU per health change in each round) of a real `guardian
    run` (the engine at DOCKER_HOST, `api.public_reads: true`) watching `containers` real
    containers.

    One of them (`guardian.action=notify`: an incident, never a restart) loses and regains its
    health `changes` times per row; Guardian sweeps once, at its start (watch.interval SWEEPS),
    and hears of the changes by the engine's events. The rows are measured in `rounds` rounds,
    each row in turn (its pages opened, a round trip unmeasured, the changes, its pages closed),
    the order rotated every round: the machine's drift over the run falls on every row alike.
    A health change is one `health_status` event of the engine; Guardian's share of it is the
    event, the incident opened or reopened (or resolved) in the store, and, with pages open,
    the page read and sent. CPU: every thread's schedstat over the changes (cpu_since), divided
    by the `health_status` events the engine sent meanwhile."""
    per_round = max(2, -(-changes // rounds))
    per_round += per_round % 2  # even: every round ends healthy
    url = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    fleet = Fleet(url)
    events = None
    spent: dict[int, list[float]] = {k: [] for k in pages}
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
            # No sweep during the rows (the first one runs at start): a sweep of every container
            # costs tens of milliseconds, and whether one falls in a row or not would weigh more
            # than the pages do.
            watch = {"interval": SWEEPS}
            with GuardianRun(
                Path(tmp),
                url,
                fleet.scope,
                api=public,
                page={"streams": 16, "streams_per_address": 16},
                watch=watch,
            ) as g:
                port = int(g.base_url.rsplit(":", 1)[1])
                log = Transitions(g.log_path, flip)
                for r in range(rounds):
                    for k in pages[r % len(pages) :] + pages[: r % len(pages)]:
                        clients = [StreamClient(port) for _ in range(k)]
                        try:
                            wait_for(
                                lambda cs=clients: all(c.events >= 1 for c in cs),
                                10,
                                "every stream's first event",
                                0.005,
                            )
                            # Unmeasured: the streams of the row before end at the first
                            # write to them (a closed page costs one more read).
                            for sick in (True, False):
                                _change_health(fleet, flip, sick, events, log, clients)
                            _settled(log, clients)
                            heard = len(_health_events(events, flip))
                            before = schedstat(g.pid)
                            for n in range(per_round):
                                _change_health(fleet, flip, n % 2 == 0, events, log, clients)
                            _settled(log, clients)
                            used = cpu_since(g.pid, before)
                            counted = len(_health_events(events, flip)) - heard
                        finally:
                            for c in clients:
                                c.close()
                        spent[k].append(used / counted * 1000)
    finally:
        if events is not None:
            events.close()
        fleet.remove()
        fleet.close()
    return [(k, spent[k]) for k in pages]


def print_rows(containers: int, changes: int) -> None:
    """The rows of real_change_cost, with the pages' share (k pages minus none), over the
    whole run and its lowest and highest in a round."""
    rows = real_change_cost(containers, [0, 1, 8], changes)
    base = rows[0][1]
    per_round = len(base)
    print(
        f"Real engine, {containers} containers; per health change: one `health_status` event "
        f"of the engine (healthy -> unhealthy with its incident opened or reopened, or back "
        f"with it resolved), {changes} or a few more per row over {per_round} rounds, the "
        f"rows in turn; Guardian's CPU from every thread's schedstat."
    )
    print()
    print(
        "| containers | pages open | guardian CPU per health change "
        "| pages' share (k - 0 pages) | the share's lowest / highest round |"
    )
    print("|---:|---:|---:|---:|---:|")
    mean0 = statistics.mean(base)
    for k, ms in rows:
        if not k:
            print(f"| {containers} | {k} | {statistics.mean(ms):.2f} ms | - | - |")
            continue
        shares = [m - b for m, b in zip(ms, base, strict=True)]
        print(
            f"| {containers} | {k} | {statistics.mean(ms):.2f} ms "
            f"| {statistics.mean(ms) - mean0:+.2f} ms "
            f"| {min(shares):+.2f} / {max(shares):+.2f} ms |"
        )
