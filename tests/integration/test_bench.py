"""The benchmark's code path on a tiny size (3 containers, 1 trial), so it cannot rot.

No timing is asserted: only that every measurement ran, that a sweep made exactly one list
request plus one inspect per candidate, that Guardian's main thread slept through the idle
window, and that the benchmark removed what it created.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import docker

from bench.__main__ import main
from bench.engine import BENCH_LABEL
from guardian.adapters.engine.docker_engine import DockerEngine


def test_the_benchmark_runs_end_to_end_on_a_tiny_fleet(
    docker_api: docker.APIClient, tmp_path: Path
) -> None:
    out = tmp_path / "RESULTS.md"
    results = main(
        [
            "--trials=1",
            "--sizes=3",
            "--idle-containers=3",
            "--idle-seconds=1",
            "--idle-sizes=3",
            "--idle-health-interval=1",
            "--bursts=3",
            "--burst-runs=1",
            "--storm-containers=3",
            "--storm-hold=2",
            "--poll-interval=2",
            "--flood-seconds=1",
            f"--out={out}",
        ]
    )
    assert [(x.mode, len(x.samples)) for x in results.latency] == [
        ("events", 1),
        ("bare listener", 1),  # the floor, in alternating rounds with Guardian
        ("polling", 1),
        ("events (podman)", 1),  # the same latency against a private podman system service
    ]
    healers = [x for x in results.latency if x.mode != "bare listener"]
    assert all(x.guardian_hist["count"] == 1 for x in healers)
    [sweep] = results.sweeps
    assert (sweep.size, sweep.lists, sweep.other) == (3, 1, 0)
    assert sweep.inspects == sweep.candidates == 2 and sweep.exact
    assert results.overhead is not None and results.overhead.peak_rss_mb > 0
    assert results.storm is not None and results.storm.all_healthy_s is not None
    storm = results.storm
    assert storm.restarts == 3
    # Whether 3 containers trip the breaker depends on how close their probes fall; tripped,
    # it was acknowledged. Either way, every incident's opening and resolution was delivered.
    assert storm.storm_opened_s is None or storm.acked_s is not None
    assert storm.notifications.get("opened", 0) >= 1
    assert storm.notifications.get("resolved", 0) == storm.notifications["opened"]
    assert results.flood is not None and results.flood.flooded.answers
    [idle] = results.idle
    assert idle.containers == 3 and idle.guardian.rss_mb > 0 < idle.poller.rss_mb
    # Outside systemd's watchdog the main thread has no timer: idle, it never runs.
    assert idle.threads["MainThread"] == 0, idle.threads
    assert idle.autoheal is not None and idle.autoheal.rss_mb > 0  # docker-autoheal's loop ran
    [burst] = results.bursts
    # Guardian, with events on and off (its sweep found the burst), and both listeners healed
    # every container of the burst, once each, and saw the engine's kill of each.
    assert burst.size == 3
    assert {name: [len(r.requests) for r in runs] for name, runs in burst.runs.items()} == {
        "Guardian": [3],
        "Guardian, events off (sweep every 2s)": [3],
        "bare listener": [3],
        "listener, inspect first": [3],
    }
    assert all(len(r.samples) == 3 for runs in burst.runs.values() for r in runs)
    assert [(x.command, x.heavy) for x in results.imports] == [
        ("guardian --version", []),
        ("guardian config validate", []),
    ]
    text = out.read_text()
    assert [x.cycles for x in results.graph if x.shape == "all pairs"] == [1, 1, 1, 1]
    for heading in (
        "Detection → restart",
        "Sweep cost",
        "Overhead",
        "Storm",
        "Dependency graph",
        "Connection flood",
        "polling baseline",
        "Bursts",
        "CLI start-up imports",
    ):
        assert heading in text
    leftovers = docker_api.containers(
        all=True, filters={"label": f"{BENCH_LABEL}={results.run_id}"}
    )
    assert leftovers == []


def test_the_engine_client_skips_proxy_lookups_on_a_unix_socket(
    docker_api: docker.APIClient,
) -> None:
    # requests reads the proxy variables on every request; no proxy applies to a Unix socket,
    # and the sweep benchmark at 500 containers showed the lookup (bench/RESULTS.md).
    engine = DockerEngine("unix:///var/run/docker.sock", timedelta(seconds=30))
    try:
        engine.ping()
        assert engine.reads_proxy_env is False
        assert engine.list_containers("guardian.enable", "guardian.bench=none") == []
    finally:
        engine.close()
