"""A real `guardian run` seen from Prometheus: /metrics passes promtool, a real heal shows in the
counters and histograms, and /healthz follows the sweep when the engine blocks and recovers."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import require_tool, wait_until
from tests.integration.conftest import RUN_ID

HEALTH = "test ! -f /run/sick"
DOCKER_SOCK = "/var/run/docker.sock"


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def scrape(base_url: str) -> tuple[str, dict[tuple[str, frozenset[tuple[str, str]]], float]]:
    status, text = get(base_url + "/metrics")
    assert status == 200
    samples = {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    return text, samples


def value(samples: dict, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def promtool_check_metrics(text: str) -> subprocess.CompletedProcess[str]:
    promtool = require_tool("promtool", "prometheus")
    return subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30
    )


def own_label(request: pytest.FixtureRequest) -> str:
    """An opt-in label only this test's containers carry: Guardians of other tests sharing the
    engine leave them alone, and this Guardian sees nothing else, so counts are exact."""
    return f"gdt.watch.{RUN_ID}.{request.node.name[:30]}"


def test_a_real_heal_shows_in_a_promtool_clean_scrape(containers, guardian, request):
    label = own_label(request)
    name = containers.run("metrics-app", health_cmd=HEALTH, enable=None, labels={label: "true"})
    containers.wait_health(name, "healthy")
    g = guardian(watch={"interval": "30s", "label": label})
    wait_until(lambda: get(g.http_url + "/healthz")[0] == 200, 10, message="first sweep")
    assert get(g.http_url + "/readyz") == (200, "ok\n")

    text, before = scrape(g.http_url)
    check = promtool_check_metrics(text)
    assert (check.returncode, check.stdout + check.stderr) == (0, "")
    assert value(before, "guardian_containers_watched") == 1
    assert value(before, "guardian_containers_unhealthy") == 0
    assert value(before, "guardian_docker_up") == 1
    assert value(before, "guardian_sweep_duration_seconds_count") >= 1
    assert value(before, "guardian_last_sweep_timestamp_seconds") > 0
    assert value(before, "guardian_incidents_total", type="unhealthy") == 0

    containers.make_unhealthy(name)
    healed = {"container": name, "outcome": "succeeded"}

    def healed_and_resolved() -> bool:
        # The verdict is counted a moment before the incident's gauge is recounted.
        now = scrape(g.http_url)[1]
        resolved = value(now, "guardian_incidents_open", type="unhealthy", state="resolved")
        return value(now, "guardian_restarts_total", **healed) == 1 and resolved == 1

    wait_until(healed_and_resolved, 30, message="restart counted as succeeded, incident resolved")
    text, after = scrape(g.http_url)
    check = promtool_check_metrics(text)
    assert (check.returncode, check.stdout + check.stderr) == (0, "")
    assert value(after, "guardian_incidents_total", type="unhealthy") == 1
    restart = {"decision": "restart", "reason": "allowed"}
    assert value(after, "guardian_restart_decisions_total", **restart) == 1
    assert value(after, "guardian_incidents_open", type="unhealthy", state="resolved") == 1
    # From Docker's unhealthy event to the restart request: one event, well under the sweep.
    assert value(after, "guardian_detection_to_restart_seconds_count") == 1
    assert 0 < value(after, "guardian_detection_to_restart_seconds_sum") < 2.0
    assert value(after, "guardian_detection_to_restart_seconds_bucket", le="2.0") == 1
    assert value(after, "guardian_restart_duration_seconds_count") == 1
    assert value(after, "guardian_restart_duration_seconds_sum") > 0
    assert g.stop() == 0


class SocketProxy:
    """A Unix socket in front of the real Docker socket that can hold every byte: a Docker
    engine that stops answering, without touching the engine other tests share."""

    def __init__(self, path: Path, upstream: str = DOCKER_SOCK) -> None:
        self.path, self.upstream = path, upstream
        self.open = threading.Event()
        self.open.set()
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(16)
        self.sockets: list[socket.socket] = [self.server]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            engine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            engine.connect(self.upstream)
            self.sockets += [client, engine]
            threading.Thread(target=self._pump, args=(client, engine), daemon=True).start()
            threading.Thread(target=self._pump, args=(engine, client), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while chunk := src.recv(65536):
                self.open.wait()  # held here while the "engine" hangs
                dst.sendall(chunk)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.open.set()
        for s in self.sockets:
            with contextlib.suppress(OSError):
                s.close()


@pytest.fixture
def proxy() -> Iterator[SocketProxy]:
    directory = Path(tempfile.mkdtemp(prefix="gdt-"))  # short: a socket path has ~100 bytes
    p = SocketProxy(directory / "docker.sock")
    yield p
    p.close()
    shutil.rmtree(directory, ignore_errors=True)


def test_healthz_follows_the_watchdogs_rule_while_the_engine_hangs(
    docker_api, guardian, proxy, request
):
    """One liveness rule for /healthz and the watchdog: an engine call that hangs is bounded by
    docker.timeout, then the sweep turns with the engine unreachable, which is no stall
    (restarting Guardian would not bring the engine back). /healthz stays 200 and says so,
    the last-sweep timestamp stops, and both move again once the engine answers."""
    label = own_label(request)
    g = guardian(
        docker={"url": f"unix://{proxy.path}", "timeout": "3s"},
        watch={"interval": "1s", "label": label, "events": False},
    )
    wait_until(lambda: get(g.http_url + "/healthz")[0] == 200, 10, message="first sweep")

    proxy.open.clear()  # every engine call now hangs until docker.timeout
    seen: list[tuple[int, str]] = []

    def unreachable() -> bool:
        seen.append(get(g.http_url + "/healthz"))
        return seen[-1][1].endswith("; docker engine unreachable\n")

    wait_until(unreachable, 15, message="the sweep turns with the engine unreachable")
    assert {status for status, _ in seen} == {200}, seen  # never a stall meanwhile
    _, stalled = scrape(g.http_url)  # /metrics still answers while the engine hangs
    last = value(stalled, "guardian_last_sweep_timestamp_seconds")

    proxy.open.set()
    wait_until(
        lambda: get(g.http_url + "/healthz")[1].endswith("ago\n"), 15, message="engine again"
    )
    assert value(scrape(g.http_url)[1], "guardian_last_sweep_timestamp_seconds") > last
    assert g.stop() == 0
