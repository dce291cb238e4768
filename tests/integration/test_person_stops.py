"""A person's `docker stop` Guardian did not hear (it was not running) is never undone: the
engine's record shows it (kill, die, stop), though the container's process answered SIGTERM with
exit code 1, which alone reads like a crash. A crash made while it was away is still restarted.
Judged by the engine's own event stream. Docker only: Podman 4.3's compat API answers a bounded
read of its past events (since, until) with none of a container's, so there such an exit reads
like a crash, as any exit no run heard and the engine no longer records (docs/reliability.md)."""

from __future__ import annotations

from typing import Any

from tests.helpers import wait_until
from tests.integration.conftest import Containers, EventRecorder
from tests.integration.see_more import rows

# Its process ends with exit code 1 on SIGTERM, as many do.
EXITS_1_ON_TERM = ["sh", "-c", "trap 'exit 1' TERM; while :; do sleep 0.1; done"]


def test_a_persons_stop_made_while_guardian_was_away_is_not_undone(
    guardian: Any, containers: Containers, engine_events: EventRecorder
) -> None:
    stopped = containers.run("stopped", EXITS_1_ON_TERM, stop_signal="SIGTERM")
    crashed = containers.run("crashed", ["sh", "-c", "sleep 1; exit 1"])
    containers.api.stop(stopped, timeout=10)
    assert containers.inspect(stopped)["State"]["ExitCode"] == 1
    wait_until(lambda: containers.inspect(crashed)["State"]["Status"] == "exited", 20)
    g = guardian(watch={"interval": "2s"}, restart={"cooldown": "1m"})
    wait_until(lambda: engine_events.count(crashed, "start") == 2, 30, message="crash restarted")
    wait_until(lambda: len(g.lines("sweep done")) >= 3, 30, message="three sweeps")
    assert engine_events.count(stopped, "start") == 1, str(engine_events.of(stopped))
    assert rows(g.store_path, "SELECT id FROM incidents WHERE container=?", stopped) == []
    assert g.stop() == 0
