"""Fixtures of the fault suite: the integration fixtures, the secrets check, a private engine.

Every Guardian started here gets a secret in its environment and every container a secret in
its own; after each test, no secret may appear in anything the test exposed (see exposure.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.faults.exposure import SECRET_SOURCES, Exposure
from tests.helpers import wait_until
from tests.integration.conftest import (  # noqa: F401 - fixtures used by the fault tests
    IMAGE,
    REPO,
    RUN_ID,
    Containers,
    EventRecorder,
    GuardianProcess,
    _remove_leftovers,
    base_config,
    containers,
    docker_api,
    engine,
    engine_events,
)

SECRET_ENV = "GUARDIAN_TEST_SECRET"


def report_figures(section: str, figures: dict[str, Any]) -> None:
    """Add `figures` under `section` to the JSON file $GUARDIAN_FAULT_REPORT (bench/soak.sh)."""
    path = os.environ.get("GUARDIAN_FAULT_REPORT")
    if not path:
        return
    report = json.loads(Path(path).read_text()) if Path(path).exists() else {}
    report[section] = {**report.get(section, {}), **figures}
    Path(path).write_text(json.dumps(report, indent=2, sort_keys=True))


@pytest.fixture
def exposure() -> Iterator[Exposure]:
    """What this test exposed; fails the test if any configured secret shows up in it."""
    seen = Exposure()
    yield seen
    leaks = seen.leaks()
    assert not leaks, "secret leaked: " + "; ".join(leaks)


@pytest.fixture
def guardian(tmp_path: Path, exposure: Exposure) -> Iterator[Any]:
    """The integration `guardian` factory, plus: a secret in the environment, and every log
    line of every run handed to the secrets check at teardown."""
    started: list[GuardianProcess] = []

    def make(
        env: dict[str, str] | None = None, start: bool = True, **sections: dict[str, Any]
    ) -> GuardianProcess:
        full_env = {SECRET_ENV: SECRET_SOURCES["guardian environment"], **(env or {})}
        sub = tmp_path / f"g{len(started)}"
        sub.mkdir()
        config = base_config(sub, **sections)
        g = GuardianProcess(sub, config, full_env)
        started.append(g)
        return g.start() if start else g

    yield make
    for g in started:
        if g.proc is not None and g.proc.poll() is None:
            g.proc.kill()
            g.proc.wait(10)
        exposure.add(f"log of {g.tmp.name}", g.full_log())


def container_env() -> dict[str, str]:
    return {"DB_PASSWORD": SECRET_SOURCES["container environment"]}


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(url: str, exposure: Exposure) -> Samples:
    """GET /metrics (handed to the secrets check) -> {(name, labels): value}."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as resp:
        text = exposure.add(f"metrics {url}", resp.read())
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def sample(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def run_cli(
    exposure: Exposure, *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`guardian ARGS` as a user runs it; stdout and stderr go to the secrets check."""
    full_env = {**os.environ, SECRET_ENV: SECRET_SOURCES["guardian environment"], **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-m", "guardian.entrypoints.cli", *args],
        capture_output=True,
        text=True,
        errors="replace",
        env=full_env,
        cwd=REPO,
        timeout=timeout,
    )
    exposure.add(f"guardian {' '.join(args)[:60]} (stdout)", proc.stdout)
    exposure.add(f"guardian {' '.join(args)[:60]} (stderr)", proc.stderr)
    return proc


class PrivateEngine:
    """A second dockerd of our own, which the outage test may stop: the shared one never is."""

    def __init__(self) -> None:
        # Unix socket paths are limited to 108 bytes: keep the root short.
        self.root = Path(tempfile.mkdtemp(prefix="gdt-", dir="/tmp"))
        self.socket = self.root / "docker.sock"
        self.url = f"unix://{self.socket}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        # A bridge of its own: `--bridge none` would make dockerd delete the shared docker0.
        self.bridge = ("gdtbr" + self.root.name[-8:])[:15]

    def start(self) -> None:
        self.starts += 1
        subprocess.run(["ip", "link", "add", self.bridge, "type", "bridge"], capture_output=True)
        subprocess.run(["ip", "link", "set", self.bridge, "up"], capture_output=True)
        log = open(self.root / "dockerd.log", "ab")  # noqa: SIM115 - lives as long as dockerd
        self.proc = subprocess.Popen(
            [
                "dockerd",
                "--host",
                self.url,
                "--data-root",
                str(self.root / "data"),
                "--exec-root",
                str(self.root / "exec"),
                "--pidfile",
                str(self.root / "docker.pid"),
                "--bridge",
                self.bridge,
                "--iptables=false",
                "--ip-masq=false",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_until(self.answers, 60, message="private dockerd up")

    def answers(self) -> bool:
        try:
            api = docker.APIClient(base_url=self.url, version="auto", timeout=5)
            api.ping()
            api.close()
            return True
        except Exception:  # noqa: BLE001 - not up yet
            return False

    def stop(self) -> None:
        """SIGTERM, as `systemctl stop docker` does; the engine stops its containers."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(60)
        self.proc = None

    def api(self) -> docker.APIClient:
        return docker.APIClient(base_url=self.url, version="auto", timeout=60)

    def import_image(self) -> None:
        subprocess.run(
            [str(REPO / "tests/images/build-busybox.sh"), IMAGE],
            check=True,
            env={**os.environ, "DOCKER_HOST": self.url},
        )

    def destroy(self) -> None:
        with contextlib.suppress(Exception):
            if self.proc is None and not self.answers():
                self.start()
            api = self.api()
            for c in api.containers(all=True):
                api.remove_container(c["Id"], force=True)
        self.stop()
        subprocess.run(["ip", "link", "delete", self.bridge], capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def private_engine() -> Iterator[PrivateEngine]:
    """A running private dockerd with the test image; stopped and removed afterwards."""
    if shutil.which("dockerd") is None:
        pytest.fail("dockerd is required for the engine outage test")
    dockerd = PrivateEngine()
    try:
        dockerd.start()
        dockerd.import_image()
        yield dockerd
    finally:
        dockerd.destroy()


Factory = Callable[..., GuardianProcess]


@pytest.fixture
def mount_tmpfs(tmp_path: Path) -> Iterator[Callable[..., Path]]:
    """mount_tmpfs(name, size, ro=False) -> a fresh tmpfs mount point; unmounted afterwards."""
    mounted: list[Path] = []

    def mount(name: str, size: str, ro: bool = False) -> Path:
        point = tmp_path / name
        point.mkdir()
        opts = f"size={size}" + (",ro" if ro else "")
        subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(point)], check=True)
        mounted.append(point)
        return point

    yield mount
    for point in reversed(mounted):
        subprocess.run(["umount", "-l", str(point)], check=False)


def fill_disk(directory: Path) -> Path:
    """Write a file until the file system is full; returns it (delete it to free the space)."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        for size in (1 << 20, 65536, 4096, 512, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)
    return filler
