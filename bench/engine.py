"""The engine the benchmark runs against, and the fleets of containers it creates there.

A private dockerd (own socket, data root, exec root and pidfile under a temp dir; a bridge of
its own, no iptables) keeps hundreds of benchmark containers off a shared engine. Every container
carries the label `guardian.bench=<run id>` and the name prefix `gbench-<run id>-`; cleanup
removes exactly those.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests

IMAGE = "guardian-test-busybox:latest"
REPO = Path(__file__).resolve().parents[1]
BENCH_LABEL = "guardian.bench"
HEALTH_CMD = "test ! -f /run/sick"
REMOVE_TRIES = 3  # a removal asked again after a timeout, at most this many times in all


class PrivateEngine:
    """A dockerd of the benchmark's own; stopped (and its directory removed) by stop()."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or Path(tempfile.mkdtemp(prefix="gbench-engine-", dir="/tmp"))
        self.socket = self.root / "docker.sock"
        self.proc: subprocess.Popen[bytes] | None = None
        # A bridge of its own: with `--bridge=none` dockerd deletes the shared engine's docker0.
        self.bridge = ("gbbr" + self.root.name[-8:])[:15]

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def start(self, timeout: float = 60) -> PrivateEngine:
        r = self.root
        subprocess.run(["ip", "link", "add", self.bridge, "type", "bridge"], capture_output=True)
        subprocess.run(["ip", "link", "set", self.bridge, "up"], capture_output=True)
        log = open(r / "dockerd.log", "ab")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(
            [
                "dockerd",
                f"--host={self.url}",
                f"--data-root={r / 'data'}",
                f"--exec-root={r / 'exec'}",
                f"--pidfile={r / 'dockerd.pid'}",
                f"--bridge={self.bridge}",
                "--iptables=false",
                "--ip-masq=false",
                "--containerd-namespace=guardian-bench",
                "--containerd-plugins-namespace=guardian-bench-plugins",
                "--cgroup-parent=guardian-bench",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"private dockerd exited; see {r / 'dockerd.log'}")
            with contextlib.suppress(Exception):
                api = docker.APIClient(base_url=self.url, version="auto", timeout=5)
                api.ping()
                api.close()
                break
            time.sleep(0.5)
        else:
            self.stop()
            raise RuntimeError(f"private dockerd did not answer in {timeout:.0f}s")
        env = {**os.environ, "DOCKER_HOST": self.url}
        subprocess.run([str(REPO / "tests/images/build-busybox.sh"), IMAGE], check=True, env=env)
        return self

    def stop(self) -> None:
        """Stop this dockerd only (by its own pid), then remove its directory."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        subprocess.run(["ip", "link", "delete", self.bridge], capture_output=True)
        # Container mounts under the data root are gone once dockerd stopped; ignore stragglers.
        shutil.rmtree(self.root, ignore_errors=True)


class Fleet:
    """Creates benchmark containers on one engine and removes exactly those."""

    def __init__(self, url: str, run_id: str | None = None, checks: Any = None) -> None:
        self.url = url
        # Podman: who runs the healthchecks (bench.podman.HealthChecks); None: the engine does.
        self.checks = checks
        self.run_id = run_id or uuid.uuid4().hex[:8]
        self.prefix = f"gbench-{self.run_id}-"
        self.api = docker.APIClient(base_url=url, version="auto", timeout=120)
        self.scope = f"{BENCH_LABEL}={self.run_id}"
        self._counter = 0

    def create(
        self,
        count: int,
        tag: str,
        *,
        health: bool = False,
        command: list[str] | None = None,
        binds: list[str] | None = None,
        health_cmd: str = HEALTH_CMD,
        health_interval: float = 1.0,
        labels: dict[str, str] | None = None,
        workers: int = 4,
    ) -> list[str]:
        """Create and start `count` opted-in containers; returns their names. `labels` are
        added to the benchmark's own (e.g. `guardian.action`)."""
        names = [f"{self.prefix}{tag}-{self._next()}" for _ in range(count)]
        check = (health_cmd, health_interval) if health else None
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(lambda n: self._run(n, tag, check, command, binds, labels), names))
        return names

    def _next(self) -> int:
        self._counter += 1
        return self._counter

    def _run(
        self,
        name: str,
        tag: str,
        check: tuple[str, float] | None,
        command: list[str] | None,
        binds: list[str] | None,
        labels: dict[str, str] | None = None,
    ) -> None:
        healthcheck = None
        if check is not None:
            healthcheck = {
                "test": ["CMD-SHELL", check[0]],
                "interval": int(check[1] * 1e9),
                "timeout": int(2e9),
                "retries": 1,
            }
        host_config = self.api.create_host_config(
            tmpfs={"/run": ""}, network_mode="none", binds=binds
        )
        c = self.api.create_container(
            IMAGE,
            command=command or ["sleep", "86400"],
            name=name,
            labels={
                **(labels or {}),
                BENCH_LABEL: self.run_id,
                f"{BENCH_LABEL}.set": tag,
                "guardian.enable": "true",
            },
            healthcheck=healthcheck,
            host_config=host_config,
            stop_signal="SIGKILL",
        )
        self.api.start(c["Id"])
        if self.checks is not None and check is not None:
            self.checks.add(name, check[1])

    def exec_all(self, names: Iterable[str], cmd: list[str], workers: int = 8) -> None:
        def one(name: str) -> None:
            # In a burst, Guardian may be restarting this container already: not running when
            # the exec is created (409) or when it starts (500 "is not running": it stopped in
            # between). Again, once it runs.
            for _ in range(50):
                try:
                    self.api.exec_start(self.api.exec_create(name, cmd))
                    return
                except docker.errors.APIError as exc:
                    stopped = "is not running" in str(exc.explanation or "")
                    if exc.status_code != 409 and not stopped:
                        raise
                    time.sleep(0.1)
            raise TimeoutError(f"{name}: not running for 5 s")

        held = self.checks.paused() if self.checks is not None else contextlib.nullcontext()
        with held, ThreadPoolExecutor(workers) as pool:  # no check straddles the change
            list(pool.map(one, names))

    def health(self, name: str) -> str | None:
        h = self.api.inspect_container(name)["State"].get("Health")
        return h["Status"] if h else None

    def healthy(self, tag: str) -> int:
        """How many containers of a set the engine reports healthy: one list call, not an
        inspect each (100 inspects ten times a second would load the engine being measured)."""
        selector = f"{BENCH_LABEL}.set={tag}"
        filters = {"label": [self.scope, selector], "health": "healthy"}
        return len(self.api.containers(all=True, filters=filters))

    def ours(self, tag: str | None = None) -> list[dict[str, Any]]:
        selector = f"{BENCH_LABEL}.set={tag}" if tag else self.scope
        items: list[dict[str, Any]] = self.api.containers(
            all=True, filters={"label": [self.scope, selector]}
        )
        return items

    def remove(self, tag: str | None = None, workers: int = 4) -> None:
        """Remove this run's containers (of one set, or all of them). A removal the engine did
        not answer within the client's timeout (an engine whose cores a test run shares) is
        asked again, up to REMOVE_TRIES times, before the run fails."""

        def one(cid: str) -> None:
            for tries_left in range(REMOVE_TRIES - 1, -1, -1):
                try:
                    with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
                        self.api.remove_container(cid, force=True, v=True)
                    return
                except requests.exceptions.ReadTimeout:
                    if not tries_left:
                        raise

        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(one, [c["Id"] for c in self.ours(tag)]))

    def close(self) -> None:
        self.api.close()


def engine_versions(url: str) -> dict[str, str]:
    api = docker.APIClient(base_url=url, version="auto", timeout=30)
    try:
        v = api.version()
        info = api.info()
    finally:
        api.close()
    return {
        "engine": str(v.get("Version", "?")),
        "api": str(v.get("ApiVersion", "?")),
        "storage": str(info.get("Driver", "?")),
        "kernel": str(info.get("KernelVersion", "?")),
        "cpus": str(info.get("NCPU", "?")),
        "memory_gib": f"{int(info.get('MemTotal', 0)) / 2**30:.1f}",
    }
