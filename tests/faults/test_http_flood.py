"""The HTTP port under a connection flood: anyone who can reach it must not stop the healing.

A real `guardian run` with systemd's default open-file limit (1,024) and a test NOTIFY_SOCKET
takes 1,000 idle connections plus 20 endless header streams while /healthz is asked every
second, and a container breaks meanwhile.
"""

from __future__ import annotations

import itertools
import threading
import time
from datetime import datetime

from bench.flood import Answer, Flood, ask_healthz
from bench.probes import rss_mb
from tests.faults.conftest import report_figures
from tests.helpers import wait_until
from tests.integration.conftest import Containers
from tests.notify import NotifySocket

WATCHDOG_USEC = 2_000_000
EXITS_ON_FLAG = ["sh", "-c", "while [ ! -f /run/die ]; do sleep 0.1; done; exit 3"]


def _stamp(text: str) -> float:
    """Docker's RFC 3339 time with nanoseconds, as a Unix time."""
    whole, _, frac = text.rstrip("Z").partition(".")
    return datetime.fromisoformat(whole + "+00:00").timestamp() + float("0." + (frac or "0"))


def _break(containers: Containers, name: str) -> str:
    """Make `name` exit with code 3 by itself (a crash, not a person's stop)."""
    started = containers.started_at(name)
    containers.api.exec_start(containers.api.exec_create(name, ["touch", "/run/die"]))
    return started


def _restart_seconds(containers: Containers, name: str, started_before: str) -> float:
    """How long `name` stayed down: the engine's FinishedAt of the crash to its new StartedAt."""
    wait_until(
        lambda: (
            containers.started_at(name) != started_before
            and containers.inspect(name)["State"]["Running"]
        ),
        30,
        message=f"{name} restarted",
    )
    state = containers.inspect(name)["State"]
    return _stamp(state["StartedAt"]) - _stamp(state["FinishedAt"])


def test_a_connection_flood_starves_neither_healthz_nor_the_watchdog_nor_healing(
    containers, guardian
):
    calm = containers.run("calm", EXITS_ON_FLAG)
    stormy = containers.run("stormy", EXITS_ON_FLAG)
    sock = NotifySocket()
    g = guardian(
        start=False,
        env={"NOTIFY_SOCKET": sock.address, "WATCHDOG_USEC": str(WATCHDOG_USEC)},
        watch={"interval": "5s"},
        log={"level": "info"},
    )
    g.wrapper = ["prlimit", "--nofile=1024:1024", "--"]  # systemd's default for a service
    g.start()
    try:
        host, _, port = g.http_url.removeprefix("http://").rpartition(":")
        sock.wait_for("READY=1", 30)
        baseline = _restart_seconds(containers, calm, _break(containers, calm))

        flood = Flood(host, int(port), idle=1000, streams=20).start()
        answers: list[Answer] = []
        rss: list[float] = []
        broken: dict[str, str] = {}
        flood_started = time.monotonic()
        try:
            for second in range(10):
                tick = flood_started + second
                time.sleep(max(0.0, tick - time.monotonic()))
                answers.append(ask_healthz(host, int(port)))
                rss.append(rss_mb(g.proc.pid))
                if second == 1:
                    threading.Thread(
                        target=lambda: broken.update(before=_break(containers, stormy))
                    ).start()
            flood_ended = time.monotonic()
            streamed = flood.streamed
        finally:
            flood.stop()
        during = _restart_seconds(containers, stormy, wait_until(lambda: broken.get("before")))
    finally:
        sock.close()

    pings = [t for t in sock.times("WATCHDOG=1") if t <= flood_ended]
    gaps = [b - a for a, b in itertools.pairwise(pings) if b >= flood_started]
    report_figures(
        "http flood",
        {
            "healthz_s": [round(a.seconds, 3) for a in answers],
            "rss_max_mb": round(max(rss), 1),
            "watchdog_max_gap_s": round(max(gaps, default=float("inf")), 3),
            "restart_s_calm": round(baseline, 3),
            "restart_s_flood": round(during, 3),
        },
    )
    assert flood.connected == 1000 and streamed > 0, (flood.connected, flood.refused, streamed)
    assert [a.status for a in answers] == [200] * 10, answers
    assert max(a.seconds for a in answers) < 1.0, answers
    assert max(rss) < 120, rss
    assert gaps and max(gaps) < WATCHDOG_USEC / 1e6, gaps
    # As fast as without the flood, give or take the noise of a shared machine.
    assert during <= max(2 * baseline, baseline + 1.0), (baseline, during)
    log = g.log()
    assert "Traceback" not in log and "Too many open files" not in log
    assert all(line.startswith("ts=") for line in log.splitlines() if line.strip()), log[-3000:]
