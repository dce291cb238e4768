"""The repo's Dockerfile, built here and run as a sidecar with the Docker socket mounted.

No registry is reachable from CI: the base image is a Debian bookworm root filesystem with
python3 (tests/images/build-python-base.sh, cached by tag), and the build gets prebuilt wheels
from a server on 127.0.0.1 through pip's own build arguments. The Dockerfile stays the one a
user builds.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import platform
import subprocess
import sys
import threading
import tomllib
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest

from tests.helpers import wait_until
from tests.integration.conftest import REPO, RUN_ID

BASE = "guardian-test-python-base:bookworm"
IMAGE = "guardian-test-sidecar:latest"
HEALTH = "test ! -f /run/sick"
SOCKET = "/var/run/docker.sock"


def _requirements() -> list[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    return [*project["project"]["dependencies"], *project["build-system"]["requires"]]


def _download_wheels(dest: Path) -> None:
    """Binary wheels of every dependency for the base image's Python, fetched on the host."""
    out = subprocess.run(
        [
            "docker",
            "run",
            "--rm",
            BASE,
            "python3",
            "-c",
            "import sys; print(*sys.version_info[:2])",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    machine = platform.machine()
    result = subprocess.run(
        [
            sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(dest),
            "--only-binary=:all:", "--python-version", "".join(out), "--implementation", "cp",
            "--platform", f"manylinux2014_{machine}", "--platform", f"manylinux_2_28_{machine}",
            *_requirements(),
        ],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    if result.returncode != 0:
        pytest.fail("pip download failed:\n" + result.stderr[-3000:])


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def guardian_image(docker_api: docker.APIClient, tmp_path_factory: pytest.TempPathFactory) -> str:
    subprocess.run([str(REPO / "tests/images/build-python-base.sh"), BASE], check=True)
    wheels = tmp_path_factory.mktemp("wheels")
    _download_wheels(wheels)
    handler = functools.partial(QuietHandler, directory=str(wheels))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        previous = docker_api.images(name=IMAGE, quiet=True)
        log: list[str] = []
        for chunk in docker_api.build(
            path=str(REPO),
            tag=IMAGE,
            buildargs={
                "BASE_IMAGE": BASE,
                "PIP_NO_INDEX": "1",
                "PIP_FIND_LINKS": f"http://127.0.0.1:{server.server_address[1]}/",
            },
            network_mode="host",  # the build's pip reaches the wheel server on 127.0.0.1
            rm=True,
            forcerm=True,
            decode=True,
        ):
            log.append(chunk.get("stream", "") or chunk.get("error", ""))
            if "error" in chunk:
                pytest.fail("docker build failed:\n" + "".join(log)[-4000:])
    finally:
        server.shutdown()
        server.server_close()
    for old in set(previous) - set(docker_api.images(name=IMAGE, quiet=True)):
        with contextlib.suppress(docker.errors.APIError):  # an older build of ours, now untagged
            docker_api.remove_image(old)
    return IMAGE


def _exec(api: docker.APIClient, container: str, cmd: list[str]) -> str:
    return api.exec_start(api.exec_create(container, cmd)).decode().strip()  # type: ignore[no-any-return]


def _run_image(containers: Any, short: str, image: str, **kwargs: Any) -> str:
    api = containers.api
    labels = {"guardian.test.run": RUN_ID, "guardian.enable": "true", **kwargs.pop("labels", {})}
    host_config = api.create_host_config(**kwargs.pop("host_config", {}))
    created = api.create_container(
        image, name=containers.name(short), labels=labels, host_config=host_config, **kwargs
    )
    containers.created.append(created["Id"])
    api.start(created["Id"])
    return containers.name(short)


def test_sidecar_heals_a_labelled_container_and_never_restarts_a_guardian(
    containers, engine_events, docker_api, guardian_image
):
    image = docker_api.inspect_image(guardian_image)
    assert image["Config"]["User"] not in ("", "0", "root")
    assert image["Config"]["Labels"]["guardian.self"] == "true"
    assert "/var/lib/guardian" in image["Config"]["Volumes"]
    assert "9321/tcp" in image["Config"]["ExposedPorts"]

    app = containers.run("app", health_cmd=HEALTH)
    # Another container from the Guardian image, unhealthy: the image's guardian.self label must
    # keep every Guardian from restarting it (as it keeps Guardian from restarting itself).
    twin = _run_image(
        containers,
        "twin",
        guardian_image,
        entrypoint=["sleep", "86400"],
        command=[],
        healthcheck={  # start_period: the image's own is 30 s; 0 would inherit it
            "test": ["CMD", "false"],
            "interval": int(1e9),
            "retries": 1,
            "start_period": int(1e6),
        },
    )
    guardian = _run_image(
        containers,
        "guardian",
        guardian_image,
        environment={
            # This run's containers only, so the sidecar never touches anyone else's.
            "GUARDIAN_WATCH_SCOPE": f"guardian.test.run={RUN_ID}",
            "GUARDIAN_WATCH_INTERVAL": "2s",
            "GUARDIAN_RESTART_STOP_TIMEOUT": "1s",
            "GUARDIAN_LOG_LEVEL": "debug",
        },
        host_config={
            "binds": [f"{SOCKET}:{SOCKET}"],
            "group_add": [str(os.stat(SOCKET).st_gid)],
        },
    )
    containers.wait_health(app, "healthy")
    containers.wait_health(twin, "unhealthy")

    # Docker's own health status, from the image's HEALTHCHECK (`guardian healthcheck`).
    containers.wait_health(guardian, "healthy", timeout=90)
    assert _exec(docker_api, guardian, ["id", "-u"]) != "0"

    before = containers.started_at(app)
    containers.make_unhealthy(app)
    wait_until(lambda: containers.started_at(app) != before, 30, message="app restarted")
    containers.wait_health(app, "healthy")
    held_back = [
        line
        for line in _logs(docker_api, guardian).splitlines()
        if "restart held back" in line and f"container={twin}" in line
    ]
    assert held_back and "reason=self" in held_back[0], _logs(docker_api, guardian)[-3000:]

    assert engine_events.count(app, "restart") == 1
    assert engine_events.count(twin, "restart") == 0
    assert engine_events.count(guardian, "restart") == 0
    assert containers.health(twin) == "unhealthy"
    state = containers.inspect(guardian)["State"]
    assert state["Running"] and state["Health"]["Status"] == "healthy"
    assert containers.inspect(guardian)["RestartCount"] == 0


def _logs(api: docker.APIClient, name: str) -> str:
    return api.logs(name).decode(errors="replace")  # type: ignore[no-any-return]
