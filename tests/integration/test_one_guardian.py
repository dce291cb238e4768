"""One Guardian per engine, with real `guardian run` processes: a second one refuses with one
line naming the first and exits 1, and the first keeps healing; a container that only claims
to be a Guardian by its label is a warning, never a refusal (docs/design.md rule 19)."""

from __future__ import annotations

import os
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.helpers import wait_until
from tests.integration.conftest import IMAGE, RUN_ID, GuardianProcess, base_config
from tests.integration.see_more import HEALTH

SCOPE = f"guardian.test.run={RUN_ID}"  # base_config's watch.scope
SOCKET = "/var/run/docker.sock"


@pytest.fixture
def second(tmp_path: Path):
    """Factory: a second Guardian in its own directory (config, log; the store as given)."""
    made: list[GuardianProcess] = []

    def make(store: Path) -> GuardianProcess:
        home = tmp_path / f"second-{len(made)}"
        home.mkdir()
        g = GuardianProcess(home, base_config(home, store={"path": str(store)}))
        made.append(g)
        return g.start(wait_ready=False)

    yield make
    for g in made:
        if g.proc is not None and g.proc.poll() is None:
            g.proc.kill()
            g.proc.wait(10)


def refused(g: GuardianProcess) -> str:
    """The one line a refused Guardian printed, after it exited with status 1."""
    assert g.proc is not None
    assert g.proc.wait(60) == 1, g.log()
    lines = [line for line in g.log().splitlines() if line.strip()]
    assert len(lines) == 1, g.log()
    return lines[0]


def test_a_second_guardian_refuses_and_the_first_keeps_healing(
    containers, guardian, second, engine_events, tmp_path
):
    name = containers.run("one", health_cmd=HEALTH)
    containers.wait_health(name, "healthy")
    first = guardian()
    assert first.proc is not None
    wait_until(lambda: first.lines("sweep done"), 30, message="first sweep")

    same_store = refused(second(first.store_path))
    assert same_store.startswith(
        f"guardian: another Guardian is using the store {first.store_path}"
    )
    assert f"pid {first.proc.pid} (" in same_store and "guardian" in same_store

    other_store = refused(second(tmp_path / "elsewhere" / "guardian.db"))
    assert other_store.startswith("guardian: another Guardian watches this engine (watch.scope ")
    assert f"pid {first.proc.pid} (" in other_store
    assert not (tmp_path / "elsewhere" / "guardian.db").exists()  # refused before opening

    before = containers.started_at(name)
    containers.make_unhealthy(name)
    wait_until(lambda: containers.started_at(name) != before, 60, message="first one heals")
    containers.wait_health(name, "healthy", timeout=30)
    assert engine_events.count(name, "restart") == 1
    assert first.proc.poll() is None


def healthz(g: GuardianProcess) -> tuple[int, str]:
    with urllib.request.urlopen(g.http_url + "/healthz", timeout=10) as response:
        return response.status, response.read().decode()


def test_a_container_claiming_guardian_by_label_is_warned_about_and_healing_goes_on(
    containers, guardian, engine_events
):
    # The attack: anyone who can start a container labels a plain busybox as a Guardian of
    # this scope, hoping every later Guardian refuses to run.
    lookalike = containers.run(
        "lookalike", labels={"guardian.self": "true", "guardian.scope": SCOPE}
    )
    app = containers.run("app", health_cmd=HEALTH)
    containers.wait_health(app, "healthy")

    g = guardian()
    assert g.proc is not None
    wait_until(lambda: g.lines("sweep done") or g.proc.poll() is not None, 30, message="sweep")
    assert g.proc.poll() is None, g.log()
    warned = g.lines("claims to be a Guardian")
    assert len(warned) == 1 and f"container={lookalike}" in warned[0], g.log()
    assert not g.lines("refusing to run")
    status, body = healthz(g)
    assert status == 200 and body.startswith("ok: "), body
    assert f"{lookalike}" in body and "claims to be a Guardian" in body, body

    containers.make_unhealthy(app)
    wait_until(lambda: engine_events.count(app, "restart") == 1, 60, message="app restarted")
    actions = [a for a, _ in engine_events.of(app)]
    assert "health_status: unhealthy" in actions
    assert actions.index("health_status: unhealthy") < actions.index("restart"), actions
    containers.wait_health(app, "healthy", timeout=30)
    assert engine_events.count(lookalike, "restart") == 0  # guardian.self: never restarted
    assert g.proc.poll() is None


def guardian_container(containers, home: Path) -> str:
    """A real Guardian as a sidecar: this checkout's `guardian run` in a container of its own
    (its own network and pid namespaces), the engine's socket mounted as the docs say, labelled
    as the image labels it. No image is built (no registry here): the container sees this
    host's files read-only under /host and chroots into them."""
    home.mkdir()
    config_path = home / "config.yaml"
    config_path.write_text(yaml.safe_dump(base_config(home)))
    api = containers.api
    # Mount points resolve symlinks inside the container (/var/run -> /run): the real paths.
    host_config = api.create_host_config(
        binds={
            "/": {"bind": "/host", "mode": "ro"},
            str(home): {"bind": f"/host{os.path.realpath(home)}", "mode": "rw"},
            SOCKET: {"bind": f"/host{os.path.realpath(SOCKET)}", "mode": "rw"},
        },
    )
    command = ["chroot", "/host", sys.executable, "-m", "guardian.entrypoints.cli", "run"]
    created = api.create_container(
        IMAGE,
        command=[*command, "--config", str(config_path)],
        name=containers.name("sidecar"),
        labels={"guardian.test.run": RUN_ID, "guardian.self": "true", "guardian.scope": SCOPE},
        environment={"PYTHONUNBUFFERED": "1"},
        host_config=host_config,
    )
    containers.created.append(created["Id"])
    api.start(created["Id"])
    return containers.name("sidecar")


def test_a_guardian_refuses_to_run_beside_a_guardian_container_of_its_scope(
    containers, guardian, tmp_path
):
    sidecar = guardian_container(containers, tmp_path / "sidecar")

    def sidecar_log() -> str:
        return containers.api.logs(sidecar).decode(errors="replace")  # type: ignore[no-any-return]

    wait_until(lambda: "sweep done" in sidecar_log(), 60, message="the sidecar sweeps")

    g = guardian(start=False).start(wait_ready=False)
    assert g.proc is not None
    assert g.proc.wait(60) == 1, g.log()
    last = g.log().strip().splitlines()[-1]
    sidecar_id = containers.inspect(sidecar)["Id"]
    assert last == (
        f"guardian: another Guardian watches this engine (watch.scope {SCOPE}): "
        f"container {sidecar} ({sidecar_id[:12]})"
    ), g.log()
    assert not g.lines("claims to be a Guardian")
    assert containers.inspect(sidecar)["State"]["Running"], sidecar_log()[-3000:]
