"""Fixtures for tests against a real Docker engine and a real `guardian run` process.

Every container a test creates carries the per-run name prefix and the label
`guardian.test.run=<run id>`; teardown removes exactly those, never anything else.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest
import yaml

from bench.podman import HealthChecks, PodmanService
from tests.helpers import LIVE, require_tool, stacks, wait_until

IMAGE = "guardian-test-busybox:latest"
RUN_ID = uuid.uuid4().hex[:8]
PREFIX = f"gdt-{RUN_ID}-"
REPO = Path(__file__).resolve().parents[2]


def _docker_required() -> bool:
    return bool(os.environ.get("CI") or os.environ.get("GUARDIAN_REQUIRE_DOCKER"))


@pytest.fixture(scope="session")
def docker_api() -> Iterator[docker.APIClient]:
    """A low-level client to the real engine; fails (not skips) when CI requires Docker."""
    try:
        api = docker.APIClient(version="auto", timeout=60)
        api.ping()
    except Exception as exc:  # noqa: BLE001 - any failure means "no engine here"
        if _docker_required():
            pytest.fail(f"a Docker engine is required (CI/GUARDIAN_REQUIRE_DOCKER set): {exc}")
        pytest.skip(f"no Docker engine reachable: {exc}")
    try:
        api.inspect_image(IMAGE)
    except docker.errors.ImageNotFound:
        subprocess.run([str(REPO / "tests/images/build-busybox.sh"), IMAGE], check=True)
    yield api
    api.close()


class Engine:
    """The engine a test runs against: Docker (the default) or the run's Podman service, with
    a low-level client to it (Podman serves the Docker API)."""

    def __init__(
        self, kind: str, api: docker.APIClient, url: str = "", checks: HealthChecks | None = None
    ) -> None:
        self.kind, self.api, self.url, self.checks = kind, api, url, checks

    def config(self) -> dict[str, Any]:
        """The config sections pointing a Guardian at this engine (Docker: DOCKER_HOST/default)."""
        return {"docker": {"url": self.url}} if self.url else {}


ENGINES = ["docker", "podman"]  # for @pytest.mark.parametrize("engine", ENGINES, indirect=True)


@pytest.fixture(scope="session")
def podman_service(
    docker_api: docker.APIClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PodmanService]:
    """One `podman system service` for the whole session, on its own socket and storage."""
    require_tool("podman", "podman")
    service = PodmanService(tmp_path_factory.mktemp("podman"), IMAGE)
    yield service
    service.close()


@pytest.fixture
def engine(request: pytest.FixtureRequest, docker_api: docker.APIClient) -> Engine:
    if getattr(request, "param", "docker") == "docker":
        return Engine("docker", docker_api)
    podman: PodmanService = request.getfixturevalue("podman_service")
    return Engine("podman", podman.api, podman.url, podman.healthchecks)


class Containers:
    """Creates test containers with the run prefix and removes them afterwards."""

    def __init__(
        self, api: docker.APIClient, test_name: str, checks: HealthChecks | None = None
    ) -> None:
        self.api = api
        self.checks = checks  # Podman: who runs the healthchecks
        self.tag = test_name[:20].strip("_").replace("_", "-").lower()
        self.created: list[str] = []
        self.counter = 0
        # The engine's record of this run's containers from the test's start: a state Guardian
        # ends within milliseconds is judged by it, never by polling for the state.
        self.events = EventRecorder(api)

    def name(self, short: str) -> str:
        return f"{PREFIX}{short}"

    def run(
        self,
        short: str,
        command: list[str] | str | None = None,
        *,
        health_cmd: str | None = None,
        health_interval: float = 1.0,
        health_retries: int = 1,
        health_start_period: float = 0.0,
        labels: dict[str, str] | None = None,
        enable: bool | None = True,
        restart_policy: dict[str, Any] | None = None,
        tmpfs_run: bool = True,
        start: bool = True,
        stop_signal: str = "SIGKILL",
        environment: dict[str, str] | None = None,
        **host_config: Any,
    ) -> str:
        """Create and start a container; returns its full name. `enable` sets guardian.enable."""
        all_labels = {"guardian.test.run": RUN_ID}
        if enable is not None:
            all_labels["guardian.enable"] = "true" if enable else "false"
        all_labels.update(labels or {})
        healthcheck = None
        if health_cmd is not None:
            healthcheck = {
                "test": ["CMD-SHELL", health_cmd],
                "interval": int(health_interval * 1e9),
                "timeout": int(2e9),
                "retries": health_retries,
                "start_period": int(health_start_period * 1e9),
            }
        hc = self.api.create_host_config(
            tmpfs={"/run": ""} if tmpfs_run else None,
            restart_policy=restart_policy,
            **host_config,
        )
        name = self.name(short)
        container = self.api.create_container(
            IMAGE,
            command=command or ["sleep", "86400"],
            name=name,
            labels=all_labels,
            healthcheck=healthcheck,
            host_config=hc,
            environment=environment,
            # PID 1 ignores SIGTERM: SIGKILL makes stops instant unless a test wants them slow.
            stop_signal=stop_signal,
        )
        self.created.append(container["Id"])
        if self.checks is not None and health_cmd is not None:
            self.checks.add(name, health_interval)
        if start:
            self.api.start(container["Id"])
        return name

    def inspect(self, name: str) -> dict[str, Any]:
        return self.api.inspect_container(name)  # type: ignore[no-any-return]

    def health(self, name: str) -> str | None:
        health = self.inspect(name)["State"].get("Health")
        return health["Status"] if health else None

    def started_at(self, name: str) -> str:
        return str(self.inspect(name)["State"]["StartedAt"])

    def make_unhealthy(self, name: str) -> float:
        """The standard test health check is `test ! -f /run/sick`; /run is a tmpfs that a
        restart empties, so a restart really heals it. Returns when (engine clock) it did."""
        with self.checks.paused() if self.checks is not None else contextlib.nullcontext():
            self.api.exec_start(self.api.exec_create(name, ["touch", "/run/sick"]))
            return time.time()

    def wait_health(self, name: str, status: str, timeout: float = 20) -> None:
        """Until `name` is `status`; for "unhealthy", until the engine said since the test began
        that it turned unhealthy: a container a Guardian restarts is unhealthy for milliseconds.
        (A healthy container is polled: "healthy" is where a heal ends, and an earlier turn to
        healthy must not count.)"""

        def said() -> bool:
            return status == "unhealthy" and any(
                a == "health_status: unhealthy" for a, _ in self.events.of(name)
            )

        def reached() -> bool:
            return said() or self.health(name) == status

        wait_until(reached, timeout, message=f"{name} {status}")

    def remove_all(self) -> None:
        self.events.close()
        for cid in self.created:
            if self.checks is not None:
                with contextlib.suppress(docker.errors.NotFound):
                    self.checks.remove(self.api.inspect_container(cid)["Name"].lstrip("/"))
            self._remove(cid)

    def _remove(self, cid: str, tries: int = 5) -> None:
        """Force-remove, again on a refusal: Podman 4.3 refuses while its restart policy is
        restarting the container ("could not be stopped ... container state improper")."""
        for attempt in range(tries):
            try:
                self.api.remove_container(cid, force=True, v=True)
                return
            except docker.errors.NotFound:
                return
            except docker.errors.APIError:
                if attempt == tries - 1:
                    raise
                time.sleep(0.5)  # cleanup, not a measurement: let the engine's restart finish


@pytest.fixture
def containers(engine: Engine, request: pytest.FixtureRequest) -> Iterator[Containers]:
    c = Containers(engine.api, request.node.name, engine.checks)
    yield c
    c.remove_all()


class EventRecorder:
    """Records the engine's events for this run's containers as they happen.

    The engine replays past events only from a small ring buffer (256 on 20.10), which a busy
    engine overwrites within seconds, so tests count real restarts from a live subscription.
    """

    def __init__(self, api: docker.APIClient) -> None:
        self.events: list[dict[str, Any]] = []
        self._stream = api.events(
            filters={"type": "container", "label": f"guardian.test.run={RUN_ID}"}, decode=True
        )
        self._thread = threading.Thread(target=self._read, daemon=True, name="event-recorder")
        self._thread.start()

    def _read(self) -> None:
        with contextlib.suppress(Exception):  # the stream ends with an error when closed
            for event in self._stream:
                self.events.append(event)

    def of(self, name: str) -> list[tuple[str, float]]:
        """(action, unix time) of every event of container `name`, in order."""
        return [
            (e["Action"], e["timeNano"] / 1e9)
            for e in list(self.events)
            if (e.get("Actor") or {}).get("Attributes", {}).get("name") == name
        ]

    def count(self, name: str, action: str) -> int:
        return sum(1 for a, _ in self.of(name) if a == action)

    def first(self, name: str, action: str, timeout: float = 20) -> float:
        """The unix time of `name`'s first `action` event (e.g. "health_status: unhealthy",
        "kill"), waiting for it: a state Guardian ends within milliseconds is judged by the
        engine's record of it, never by polling for the state."""

        def seen() -> float | None:
            return next((t for a, t in self.of(name) if a == action), None)

        at: float = wait_until(seen, timeout, message=f"{name} {action}")
        return at

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._stream.close()


@pytest.fixture
def engine_events(engine: Engine) -> Iterator[EventRecorder]:
    recorder = EventRecorder(engine.api)
    yield recorder
    recorder.close()


@pytest.fixture(scope="session", autouse=True)
def _remove_leftovers() -> Iterator[None]:
    """After the session, remove any container of this run that a failed test left behind."""
    yield
    try:
        api = docker.APIClient(version="auto", timeout=30)
        for c in api.containers(all=True, filters={"label": f"guardian.test.run={RUN_ID}"}):
            api.remove_container(c["Id"], force=True)
    except Exception:  # noqa: BLE001 - no engine: nothing to clean
        pass


class GuardianProcess:
    """A real `guardian run` subprocess with its own config, store and captured log."""

    def __init__(self, tmp: Path, config: dict[str, Any], env: dict[str, str] | None = None):
        self.tmp = tmp
        self.config = config
        self.config_path = tmp / "config.yaml"
        self.log_path = tmp / "guardian.log"
        self.extra_env = env or {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.runs = 0
        self.wrapper: list[str] = []  # e.g. prlimit: the command that execs Guardian

    def write_config(self) -> None:
        self.config_path.write_text(yaml.safe_dump(self.config))

    def start(self, wait_ready: bool = True) -> GuardianProcess:
        self.write_config()
        env = {**os.environ, **self.extra_env, "PYTHONUNBUFFERED": "1"}
        self.runs += 1
        with open(self.log_path, "ab") as log:
            log.write(f"--- run {self.runs} ---\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                [
                    *self.wrapper,
                    sys.executable,
                    "-m",
                    "guardian.entrypoints.cli",
                    "run",
                    "--config",
                    str(self.config_path),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=REPO,
            )
        LIVE[id(self)] = self
        if wait_ready:
            wait_until(lambda: "guardian started" in self.log(), 20, message="guardian started")
        return self

    def full_log(self) -> str:
        """Everything every run of this Guardian logged."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log(self) -> str:
        """What the current (latest) run logged."""
        return self.full_log().rpartition(f"--- run {self.runs} ---\n")[2]

    def lines(self, needle: str) -> list[str]:
        return [line for line in self.log().splitlines() if needle in line]

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, timeout: float = 30) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            # What held the stop, for the failure's report: every thread's stack, then the log.
            held = stacks(self.proc.pid)
            self.proc.kill()
            self.proc.wait(10)
            raise AssertionError(
                f"guardian did not stop within {timeout}s of SIGTERM\n{held}"
                f"\n--- log ---\n{self.log()[-6000:]}"
            ) from None

    @property
    def http_url(self) -> str:
        """Base URL of this run's HTTP server (tests listen on port 0: the kernel picks one)."""
        line = wait_until(lambda: self.lines("http server listening"), 10, message="http up")[-1]
        address = line.split("address=")[1].split()[0]
        return f"http://{address}"

    @property
    def store_path(self) -> Path:
        return Path(self.config["store"]["path"])


def base_config(tmp: Path, **sections: dict[str, Any]) -> dict[str, Any]:
    """A config for tests: fast sweeps, short cooldowns, a store in tmp; override per test."""
    config: dict[str, Any] = {
        # The scope keeps this run's Guardians to this run's containers, so test runs sharing an
        # engine never touch each other's containers.
        "watch": {
            "label": "guardian.enable",
            "interval": "2s",
            "events": True,
            "scope": f"guardian.test.run={RUN_ID}",
        },
        "restart": {
            "cooldown": "2s",
            "max_attempts": 3,
            "window": "1h",
            "stop_timeout": "1s",
            "verify_timeout": "20s",
            "reset_after": "600s",
        },
        "store": {"path": str(tmp / "guardian.db")},
        "http": {"listen": "127.0.0.1:0"},
        "log": {"level": "debug"},
    }
    for section, values in sections.items():
        config.setdefault(section, {}).update(values)
    return config


@pytest.fixture
def guardian(tmp_path: Path, engine: Engine) -> Iterator[Any]:
    """Factory: guardian(**sections) -> a started GuardianProcess watching the test's engine;
    stopped at teardown."""
    started: list[GuardianProcess] = []

    def make(
        env: dict[str, str] | None = None, start: bool = True, **sections: dict[str, Any]
    ) -> GuardianProcess:
        g = GuardianProcess(tmp_path, base_config(tmp_path, **{**engine.config(), **sections}), env)
        started.append(g)
        return g.start() if start else g

    yield make
    for g in started:
        LIVE.pop(id(g), None)
        if g.proc is not None and g.proc.poll() is None:
            g.proc.kill()
            g.proc.wait(10)


def only_ours(names: list[str]) -> list[str]:
    return [n for n in names if n.startswith(PREFIX)]


def seconds_since(t0: float) -> float:
    return time.monotonic() - t0


# Every secret the notification tests hand to Guardian contains this marker (issue 3).
SECRET_MARKER = "gdtSecret"


@pytest.fixture(scope="session", autouse=True)
def _no_secret_in_any_log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """After the session: no log of any Guardian run of the whole suite holds a test secret."""
    yield
    base = tmp_path_factory.getbasetemp()
    leaks = [p for p in base.rglob("*.log") if SECRET_MARKER in p.read_text(errors="replace")]
    assert not leaks, f"a secret reached a log: {leaks}"
