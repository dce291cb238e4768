"""A private `podman system service` for the benchmark and the Podman test tier: its own socket,
storage, state and events under one temp dir, no network namespace for its containers, and the
test image loaded from Docker. Without systemd Podman never runs healthchecks itself:
HealthChecks does, on a timer.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import docker

from bench.probes import stop_process, wait_for

# Root here lacks CAP_SYS_RESOURCE: without these limits Podman's default (raise nofile/nproc
# to the hard maximum) fails every container start. netns=none: its containers touch no host
# network (no bridge, no address allocation shared with other Podman users of the machine).
CONTAINERS_CONF = """\
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
netns = "none"
"""


class HealthChecks:
    """Runs `podman healthcheck run NAME` every `interval` for the containers registered, as
    Podman's systemd timers would. `paused()` holds the runner, so a test can change what a
    check will see without a check straddling the change."""

    def __init__(self, podman: list[str], env: dict[str, str]) -> None:
        self.podman, self.env = podman, env
        self.due: dict[str, tuple[float, float]] = {}  # name -> (interval, next run)
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="podman-healthchecks")
        self.thread.start()

    def add(self, name: str, interval: float) -> None:
        with self.lock:
            self.due[name] = (interval, time.monotonic() + interval)

    def remove(self, name: str) -> None:
        with self.lock:
            self.due.pop(name, None)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        with self.lock:
            yield

    def _run(self) -> None:
        while not self.stopping.wait(0.1):
            with self.lock:
                now = time.monotonic()
                for name, (interval, at) in list(self.due.items()):
                    if at <= now:
                        # A paused or stopped container's check fails to run: no state change.
                        subprocess.run(
                            [*self.podman, "healthcheck", "run", name],
                            env=self.env,
                            capture_output=True,
                            timeout=30,
                            check=False,
                        )
                        self.due[name] = (interval, time.monotonic() + interval)

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(30)


class PodmanService:
    """`podman system service --time=0` on unix://<dir>/podman.sock, everything under `dir`."""

    def __init__(self, base: Path, image: str) -> None:
        podman = shutil.which("podman")
        if podman is None:
            raise RuntimeError("podman is not installed (Debian package: podman)")
        self.dir = base
        conf = base / "containers.conf"
        conf.write_text(CONTAINERS_CONF)
        self.env = {**os.environ, "CONTAINERS_CONF": str(conf)}
        self.podman = [
            podman,
            "--root",
            str(base / "root"),
            "--runroot",
            str(base / "runroot"),
            "--tmpdir",
            str(base / "tmp"),
            "--network-config-dir",
            str(base / "networks"),
            "--events-backend",
            "file",
            "--cgroup-manager",
            "cgroupfs",
        ]
        self.url = f"unix://{base / 'podman.sock'}"
        self.log = open(base / "service.log", "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [*self.podman, "system", "service", "--time=0", self.url],
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.api = docker.APIClient(base_url=self.url, version="1.41", timeout=60)
        wait_for(self._answers, 60, "podman system service answers", every=0.2)
        saved = subprocess.run(["docker", "save", image], capture_output=True, check=True)
        subprocess.run(
            [*self.podman, "load"],
            input=saved.stdout,
            env=self.env,
            capture_output=True,
            check=True,
        )
        self.healthchecks = HealthChecks(self.podman, self.env)

    def _answers(self) -> bool:
        try:
            return bool(self.api.ping())
        except Exception:  # noqa: BLE001 - not listening yet
            return False

    def close(self) -> None:
        self.healthchecks.close()
        with contextlib.suppress(Exception):
            for c in self.api.containers(all=True):
                self.api.remove_container(c["Id"], force=True)
        self.api.close()
        stop_process(self.proc)
        # Storage holds root-owned overlay mounts: Podman itself takes them down.
        subprocess.run(
            [*self.podman, "system", "reset", "--force"],
            env=self.env,
            capture_output=True,
            timeout=120,
            check=False,
        )
        # Reset leaves the storage driver's own mount of its directory behind.
        subprocess.run(
            ["umount", str(self.dir / "root" / "overlay")], capture_output=True, check=False
        )
        self.log.close()
