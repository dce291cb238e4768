"""A dozen containers whose labels ask for the worst, beside one ordinary container, on the real
engine: each depends on all the others (one big cycle), restarts with each other, has an HTTP
probe at a port that accepts and never answers with the longest timeout a label can say, a
10-minute stop timeout it would need (PID 1 ignores SIGTERM), and one probe aims at Guardian's
own loopback. The ordinary container must heal as fast as without them, the sweep stay cheap and
SIGTERM stop Guardian at once.
"""

from __future__ import annotations

import statistics
import time
import urllib.request
from typing import Any

from tests.faults.conftest import Factory
from tests.helpers import wait_until
from tests.integration.conftest import Containers, EventRecorder

HEALTH = "test ! -f /run/sick"
HOSTILE = 12
SICK = ("health_status: unhealthy",)
KILL = ("kill", "die", "restart")  # the first sign of Guardian's restart
FLIPS = 5
# Event timestamps on a shared 2-core engine jitter by tens of ms: a baseline below this is
# counted as this much, so "2x" compares latencies rather than scheduler noise.
LEAST = 0.1
# Accepts every connection and never answers (each connection gets a `sleep` of its own).
TARPIT = ["nc", "-ll", "-p", "8080", "-e", "sleep", "100000"]


def hostile_labels(me: str, names: list[str]) -> dict[str, str]:
    others = ",".join(n for n in names if n != me)
    return {
        "guardian.depends_on": others,
        "guardian.restart_with": others,
        "guardian.probe.http": "http://:8080/",
        "guardian.probe.timeout": "1m",  # the longest a label can say
        "guardian.probe.period": "1s",  # the shortest
        "guardian.probe.failure_threshold": "1",
        "guardian.stop_timeout": "10m",
    }


def flip_latencies(containers: Containers, events: EventRecorder, g: Any, name: str) -> list[float]:
    """Docker's `health_status: unhealthy` -> the kill of Guardian's restart, FLIPS times."""
    out = []
    for i in range(FLIPS):
        containers.wait_health(name, "healthy", timeout=60)
        # The previous restart is verified first, or the flip would count as a failed verification.
        wait_until(lambda i=i: _verified(g) >= i, 60, 0.2, "previous restart verified")
        since = time.time() - 0.05
        containers.make_unhealthy(name)
        unhealthy = wait_until(lambda s=since: _first(events, name, SICK, s), 30)
        restart = wait_until(lambda u=unhealthy: _first(events, name, KILL, u), 30)
        out.append(restart - unhealthy)
    return out


def _first(
    events: EventRecorder, name: str, actions: tuple[str, ...], since: float
) -> float | None:
    return next((t for a, t in events.of(name) if a in actions and t >= since), None)


def _verified(g: Any) -> int:
    return int(_samples(g).get("guardian_restarts_total", {}).get("succeeded", 0))


def _samples(g: Any) -> dict[str, dict[str, float]]:
    """{metric: {le or outcome: value}} of the few series this test reads."""
    with urllib.request.urlopen(g.http_url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        key, _, value = line.rpartition(" ")
        name, _, labels = key.partition("{")
        for tag in ("le", "outcome"):
            if f'{tag}="' in labels:
                label = labels.split(f'{tag}="')[1].split('"')[0]
                bucket = out.setdefault(name, {})
                bucket[label] = bucket.get(label, 0.0) + float(value)
    return out


def config() -> dict[str, dict[str, Any]]:
    return {
        "watch": {"interval": "1s"},
        "restart": {"cooldown": "1s", "max_attempts": 100, "max_per_minute": 100},
        "storm": {"threshold": 100},
        "log": {"level": "info"},
    }


def test_a_dozen_hostile_containers_do_not_slow_the_ordinary_ones_healing(
    containers: Containers, guardian: Factory, engine_events: EventRecorder
) -> None:
    app = containers.run("app", health_cmd=HEALTH)
    containers.wait_health(app, "healthy")
    alone = guardian(**config())
    baseline = flip_latencies(containers, engine_events, alone, app)
    assert alone.stop() == 0

    names = [containers.name(f"hostile{i}") for i in range(HOSTILE)]
    for i, name in enumerate(names):
        labels = hostile_labels(name, names)
        if i == 0:
            labels["guardian.probe.http"] = "http://127.0.0.1:9/"  # Guardian's own loopback
        containers.run(f"hostile{i}", TARPIT, labels=labels, stop_signal="SIGTERM")
    g = guardian(**config())
    # Every hostile probe is running (and hanging) before the ordinary container flips.
    wait_until(lambda: g.lines("dependency cycle"), 30, message="the cycle reported")
    beside = flip_latencies(containers, engine_events, g, app)

    sweeps = _samples(g)["guardian_sweep_duration_seconds_bucket"]
    assert sweeps["+Inf"] >= 5
    started = time.monotonic()
    assert g.stop(timeout=60) == 0
    stopped_in = time.monotonic() - started

    print(f"\nunhealthy -> restart: alone {baseline}, beside {HOSTILE} hostile {beside}")
    print(
        f"sweeps <= 100 ms: {sweeps['0.1']:.0f} of {sweeps['+Inf']:.0f}; SIGTERM {stopped_in:.1f}s"
    )
    least = max(statistics.median(baseline), LEAST)
    assert statistics.median(beside) <= 2 * least, (baseline, beside)
    # Sweeps that restarted the ordinary container include its restart call: all but those.
    assert sweeps["+Inf"] - sweeps["0.1"] <= FLIPS, sweeps
    assert stopped_in < 10
    [cycle] = g.lines("dependency cycle")
    assert f"containers={HOSTILE}" in cycle
    refused = [ln for ln in g.lines("bad label ignored") if "probe.allow_hosts" in ln]
    assert len(refused) == 1 and names[0] in refused[0]
    assert not g.lines("maximum number of running instances")
