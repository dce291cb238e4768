"""Engine outage: a private dockerd (never the shared one) stops for 20 s under a running Guardian.

Guardian stays up, guardian_docker_up goes 0 then 1, the event stream reconnects, the containers
the engine brings back (restart policy) are not failures, and no restart storm follows.
Guardian talks to the engine through a counting proxy, so its restart requests are counted
outside Guardian.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from tests.faults.conftest import (
    Factory,
    PrivateEngine,
    container_env,
    report_figures,
    sample,
    scrape,
)
from tests.faults.exposure import Exposure
from tests.helpers import wait_until
from tests.integration.conftest import Containers
from tests.proxy import DockerProxy

OUTAGE = 20.0
RESTART = r"^/containers/[^/]+/restart$"


def test_engine_outage_guardian_stays_up_reconnects_and_starts_no_storm(
    private_engine: PrivateEngine, guardian: Factory, exposure: Exposure
) -> None:
    ours = Containers(private_engine.api(), "outage")
    proxy = DockerProxy(
        Path(f"/tmp/gdt-out-{uuid.uuid4().hex[:8]}.sock"), upstream=str(private_engine.socket)
    ).start()
    try:
        names = [
            ours.run(
                f"outage{i}",
                health_cmd="test ! -f /run/sick",
                restart_policy={"Name": "always"},
                network_mode="none",
                environment=container_env(),
            )
            for i in range(3)
        ]
        for name in names:
            ours.wait_health(name, "healthy", timeout=30)
        g = guardian(docker={"url": proxy.url})
        url = g.http_url

        def docker_up() -> float | None:
            return sample(scrape(url, exposure), "guardian_docker_up")

        wait_until(lambda: docker_up() == 1, 20, message="docker up before the outage")
        started_before = {n: ours.started_at(n) for n in names}

        down_at = time.monotonic()
        private_engine.stop()
        wait_until(lambda: docker_up() == 0, 15, message="guardian_docker_up 0 during outage")
        assert g.lines("docker engine unreachable")
        # Stay down for the whole outage, checking that Guardian stays up meanwhile.
        wait_until(
            lambda: (
                g.proc is not None
                and g.proc.poll() is None
                and time.monotonic() - down_at >= OUTAGE
            ),
            OUTAGE + 5,
            message="outage over",
        )
        private_engine.start()
        down_for = time.monotonic() - down_at

        wait_until(lambda: docker_up() == 1, 40, message="guardian_docker_up 1 again")
        wait_until(lambda: g.lines("event stream reconnected"), 60, message="events reconnect")
        reconnected_after = time.monotonic() - down_at
        for name in names:
            ours.wait_health(name, "healthy", timeout=60)
            assert ours.started_at(name) != started_before[name], "the engine did not restart it"
        sweeps = len(g.lines("sweep done"))
        wait_until(lambda: len(g.lines("sweep done")) >= sweeps + 5, 30, message="5 sweeps after")

        assert g.proc is not None and g.proc.poll() is None, "guardian died in the outage"
        assert proxy.count("POST", RESTART) == 0, "Guardian restarted containers after the outage"
        assert not g.lines("problem detected"), "the engine's own restarts counted as failures"
        samples = scrape(url, exposure)
        assert sample(samples, "guardian_docker_up") == 1
        assert not [k for k in samples if k[0] == "guardian_incidents_total" and samples[k] > 0]
        report_figures(
            "outage",
            {
                "engine_down_seconds": round(down_for, 1),
                "events_reconnected_after_seconds": round(reconnected_after, 1),
                "restart_requests_after_outage": proxy.count("POST", RESTART),
                "containers_brought_back_by_engine": len(names),
            },
        )
    finally:
        proxy.stop()
        ours.remove_all()
