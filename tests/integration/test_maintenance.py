"""A maintenance window against a real engine and a real `guardian run` (issue 45): a container
broken inside its window is not restarted, and is healed at the window's end; one outside every
window is healed at once. Judged by the engine's own events."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.helpers import wait_until
from tests.integration.conftest import Containers, EventRecorder

HEALTH = "test ! -f /run/sick"
LEFT = 20.0  # seconds of the window left when the test begins


def first(events: EventRecorder, name: str, action: str) -> float:
    found = [t for a, t in events.of(name) if a == action]
    return found[0] if found else 0.0


def test_a_container_broken_inside_its_window_is_healed_at_the_windows_end(
    containers: Containers, guardian: Any, engine_events: EventRecorder
) -> None:
    held = containers.run("maint", health_cmd=HEALTH)
    free = containers.run("free", health_cmd=HEALTH)
    for name in (held, free):
        containers.wait_health(name, "healthy")
    # A daily window that began at the top of this minute and ends LEFT seconds from now.
    now = datetime.now(UTC)
    start = now.replace(second=0, microsecond=0)
    duration = math.ceil((now - start).total_seconds() + LEFT)
    ends_at = (start + timedelta(seconds=duration)).timestamp()
    window = {
        "containers": held,
        "cron": f"{start.minute} {start.hour} * * *",
        "duration": f"{duration}s",
    }
    guardian(maintenance={"windows": [window]})
    for name in (held, free):
        containers.make_unhealthy(name)

    wait_until(lambda: first(engine_events, free, "kill"), 30, message="the free one restarted")
    broke = wait_until(
        lambda: first(engine_events, held, "health_status: unhealthy"), 30, message="unhealthy"
    )
    assert broke < ends_at - 5, "the container broke too late in the window for the test"
    killed = wait_until(
        lambda: first(engine_events, held, "kill"), LEFT + 30, message="restarted at the end"
    )
    assert ends_at - 0.5 <= killed <= ends_at + 3, (killed - ends_at, time.time() - ends_at)
    containers.wait_health(held, "healthy", timeout=30)
