"""Guardian under a real NOTIFY_SOCKET and WATCHDOG_USEC, as systemd runs a Type=notify unit."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from guardian.adapters.clock import SystemClock
from guardian.adapters.systemd import SystemdSupervisor
from guardian.core.model import ContainerSnapshot
from guardian.entrypoints.daemon import Daemon
from tests.app import make_app
from tests.fakes import FakeClock, FakeEngine
from tests.helpers import run_in_main_thread, wait_until
from tests.notify import NotifySocket
from tests.proxy import DockerProxy

HEALTH = "test ! -f /run/sick"


def after(times: list[float], t0: float) -> list[float]:
    return [t for t in times if t > t0]


def test_ready_while_the_first_sweep_waits_on_the_engine_then_pings_status_and_stopping(
    containers, guardian, tmp_path
):
    name = containers.run("app", health_cmd=HEALTH)
    containers.wait_health(name, "healthy")
    release = threading.Event()

    def hold_container_list(method: str, path: str) -> None:
        if path == "/containers/json":
            release.wait(30)  # the first sweep cannot complete until the test says so
        return None

    proxy = DockerProxy(tmp_path / "docker.sock", rule=hold_container_list).start()
    sock = NotifySocket()
    try:
        g = guardian(
            env={"NOTIFY_SOCKET": sock.address, "WATCHDOG_USEC": "1000000"},
            docker={"url": proxy.url},
            restart={"dry_run": True},  # the incident stays open, so STATUS shows it
        )
        wait_until(lambda: proxy.count("GET", "^/containers/json$"), 10, message="first sweep")
        wait_until(lambda: len(sock.times("WATCHDOG=1")) >= 2, 10, message="watchdog pings")
        # Serving: ready, though the first sweep is still waiting on the engine.
        [ready] = sock.times("READY=1")
        assert sock.values("STATUS") == ["serving; looking for the docker engine"]

        release.set()

        sock.wait_for("STATUS=watching 1 container, 0 open incidents")
        wait_until(lambda: len(after(sock.times("WATCHDOG=1"), ready)) >= 4, 10, message="pings")
        pings = sock.times("WATCHDOG=1")
        assert max(b - a for a, b in itertools.pairwise(pings)) < 1.0  # WATCHDOG_USEC

        containers.make_unhealthy(name)
        sock.wait_for("STATUS=watching 1 container, 1 open incident")

        assert g.stop() == 0
        sock.wait_for("STOPPING=1")
        assert len(sock.times("READY=1")) == 1
    finally:
        sock.close()
        proxy.stop()


@dataclass
class GatedEngine(FakeEngine):
    """A fake engine whose container list blocks while `gate` is clear: a sweep that hangs."""

    gate: threading.Event = field(default_factory=threading.Event)
    waiting: int = 0

    def list_containers(
        self,
        label: str,
        scope: str = "",
        names: Collection[str] = (),
        ids: Collection[str] = (),
    ) -> list[ContainerSnapshot]:
        self.waiting += 1
        self.gate.wait()
        return super().list_containers(label, scope, names, ids)


def test_watchdog_pings_stop_while_the_sweep_is_stalled_and_resume_after(tmp_path: Path):
    config = {
        "watch": {"interval": "500ms", "events": False},
        "docker": {"timeout": "1s"},
        "restart": {"stop_timeout": "0s"},  # a sweep stalled for 2.5 s counts as stalled
        "store": {"path": str(tmp_path / "guardian.db")},
        "http": {"listen": "127.0.0.1:0"},
    }
    engine = GatedEngine(FakeClock(datetime.now(UTC)))
    engine.add("web")
    sock = NotifySocket()
    notifier = SystemdSupervisor.from_env(
        {"NOTIFY_SOCKET": sock.address, "WATCHDOG_USEC": "1000000"}
    )
    app = make_app(
        tmp_path, engine=engine, clock=SystemClock(), daemon=True, supervisor=notifier, **config
    ).app
    daemon = Daemon(app)
    seen: dict[str, Any] = {}

    def scenario() -> None:
        wait_until(lambda: engine.waiting >= 1, 10, message="first sweep")
        wait_until(lambda: len(sock.times("WATCHDOG=1")) >= 2, 10, message="pings")
        seen["ready_before_first_sweep"] = sock.times("READY=1")
        engine.gate.set()
        ready = sock.wait_for("STATUS=watching 1 container, 0 open incidents")
        wait_until(lambda: len(after(sock.times("WATCHDOG=1"), ready)) >= 3, 10)

        engine.gate.clear()  # the next sweep hangs in the engine call
        n = engine.waiting
        wait_until(lambda: engine.waiting > n, 10, message="stalled sweep")
        stalled_at = time.monotonic()
        withheld = sock.wait_for("STATUS=sweep stalled for 3s", 10)
        seen["stalled_after"] = withheld - stalled_at
        # Absence over a window: three watchdog half-periods without one ping.
        time.sleep(1.5)
        seen["pings_while_stalled"] = after(sock.times("WATCHDOG=1"), withheld)

        resumed = time.monotonic()
        engine.gate.set()
        wait_until(lambda: after(sock.times("WATCHDOG=1"), resumed), 10, message="resumed")
        seen["resumed"] = True

    def end() -> None:
        engine.gate.set()
        daemon.stopping.set()

    try:
        # the real main loop, in the main thread; returns once stopping
        run_in_main_thread(daemon.run_forever, scenario, end)
    finally:
        sock.wait_for("STOPPING=1", 5)
        sock.close()

    assert len(seen["ready_before_first_sweep"]) == 1  # serving, though no sweep completed
    assert 2.0 < seen["stalled_after"] < 4.0  # the limit is 2.5 s
    assert seen["pings_while_stalled"] == []
    assert seen["resumed"]
