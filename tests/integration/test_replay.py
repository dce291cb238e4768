"""What happened while Guardian was not listening is judged at its start (issue 43): the engine's
events since the last one handled are replayed, not left to the next sweep. Judged by the
engine's own event stream."""

from __future__ import annotations

import time
from typing import Any

from tests.helpers import wait_until
from tests.integration.conftest import Containers


def test_turned_unhealthy_while_guardian_was_stopped_restarted_at_start_once(
    guardian: Any, containers: Containers
) -> None:
    name = containers.run("gap", health_cmd="test ! -f /run/sick")
    containers.wait_health(name, "healthy")  # no Guardian runs yet: the state is stable
    g = guardian(watch={"interval": "10m"})
    wait_until(lambda: g.lines("sweep done"), 20, message="first sweep")
    assert g.stop() == 0

    containers.make_unhealthy(name)
    events = containers.events
    events.first(name, "health_status: unhealthy")  # no Guardian runs: nothing ends it
    started = time.time()  # the engine's clock is this host's
    g.start(wait_ready=False)
    # The restart begins with the engine's kill (its start follows once the container stopped).
    restarted = events.first(name, "kill", timeout=20)
    assert restarted - started <= 2.0, f"restarted {restarted - started:.1f}s after the start"
    # Healed, and judged by its verification: nothing else restarts it.
    wait_until(lambda: g.lines("restart verified"), 30, message="verified")
    assert g.lines("replayed"), g.log()
    assert events.count(name, "restart") == 1, events.of(name)
