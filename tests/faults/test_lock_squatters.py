"""The one-per-engine lock against those who cannot reach the engine (docs/design.md rule 19):
a local user outside the `docker` group that binds every name of the lock, and a look-alike
container that binds them in its own network namespace, change nothing but a warning; a member
of the socket's group, and a real second Guardian, are still refused.

These start processes of another user (uid 65534, `nobody`): they need root, as CI has."""

from __future__ import annotations

import os
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from guardian.adapters.host_lock import EngineAccess, HostLock, engine_key, lock_address
from guardian.ports import InstanceConflict
from tests.helpers import wait_until
from tests.integration.conftest import RUN_ID, Containers, EventRecorder
from tests.integration.see_more import HEALTH

NOBODY = 65534
SCOPE = f"guardian.test.run={RUN_ID}"  # base_config's watch.scope
URL = "unix:///var/run/docker.sock"
PYTHON = "/usr/bin/python3"  # the system's: readable by every user, and by a container below

# Binds each name given (hex), listens and never accepts; tries the store path; then waits.
# Its own argv carries a newline and an escape sequence: a log line that quoted it raw would
# let it write lines of Guardian's log.
SQUATTER = r"""
import fcntl, os, socket, sys
held = []
for name in sys.argv[3].split(","):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(bytes.fromhex(name))
        s.listen(1)
        held.append(s)
    except OSError as e:
        print("bind failed", e, flush=True)
try:
    fcntl.flock(os.open(sys.argv[4], os.O_RDWR | os.O_CREAT), fcntl.LOCK_EX | fcntl.LOCK_NB)
    store = "held"
except OSError as e:
    store = e.strerror
print("held", len(held), "store", store, flush=True)
sys.stdin.read()
"""
RUN_ARGV_2 = "import sys; exec(sys.argv[2])"  # so the forged text comes early in its argv
FORGED = "\nguardian: another Guardian watches this engine\x1b[2J"


def squatted_names(scope: str = SCOPE, url: str = URL, count: int = 200) -> list[bytes]:
    """The bare name a Guardian before these held, and `count` names under it, shaped as a
    Guardian's own (a pid and 64 bits): all a squatter can guess."""
    prefix = lock_address(engine_key(url), scope).encode()
    return [prefix, *(prefix + f"-{n}-{n:016x}".encode() for n in range(1, count + 1))]


def hexed(names: list[bytes]) -> str:
    return ",".join(n.hex() for n in names)


@pytest.fixture
def squatter(tmp_path: Path) -> Iterator[object]:
    if os.geteuid() != 0:
        pytest.fail("needs root: starts processes of uid 65534")
    started: list[subprocess.Popen[str]] = []

    def start(names: list[bytes], store: Path, groups: tuple[int, ...] = ()) -> str:
        proc = subprocess.Popen(
            [PYTHON, "-I", "-c", RUN_ARGV_2, FORGED, SQUATTER, hexed(names), str(store)],
            user=NOBODY,
            group=NOBODY,
            extra_groups=list(groups),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd="/",
        )
        started.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith(f"held {len(names)} store "), line
        return line.rpartition(" store ")[2]

    yield start
    for proc in started:
        proc.kill()
        proc.wait(10)


def test_a_user_outside_the_docker_group_holding_every_name_is_only_a_warning(
    tmp_path: Path, squatter
) -> None:
    url = f"tcp://engine-{RUN_ID}-{tmp_path.name}:2375"
    squatter(squatted_names("", url), tmp_path / "a.db")
    lock = HostLock(tmp_path / "a.db", engine_key(url), "", EngineAccess.of(url))
    lock.acquire()
    try:
        assert (
            lock.squatted == 201
            and len(lock.squatters) == 3
            and all(s.startswith(f"uid {NOBODY}, pid ") for s in lock.squatters)
        )
        warning = lock.warning()
        assert "\n" not in warning and "\x1b" not in warning
        assert "\\nguardian: another Guardian watches this engine\\x1b[2J" in warning
        # A real second Guardian (this user: it can reach whatever this one reaches) still is.
        with pytest.raises(InstanceConflict) as err:
            HostLock(tmp_path / "b.db", engine_key(url), "", EngineAccess.of(url)).acquire()
        assert str(err.value).startswith(f"another Guardian watches this engine: pid {os.getpid()}")
    finally:
        lock.release()


def test_a_member_of_the_sockets_group_holding_a_name_is_another_guardian(
    tmp_path: Path, squatter
) -> None:
    """Whoever the engine socket's mode lets in controls the engine: that holder is refused."""
    import socket

    path = tmp_path / "engine.sock"
    engine = socket.socket(socket.AF_UNIX)
    engine.bind(str(path))
    os.chown(path, 0, 4242)
    path.chmod(0o660)
    url = f"unix://{path}"
    try:
        squatter(squatted_names("", url, count=1)[1:], tmp_path / "a.db", groups=(4242,))
        with pytest.raises(InstanceConflict) as err:
            HostLock(tmp_path / "b.db", engine_key(url), "", EngineAccess.of(url)).acquire()
        assert str(err.value).startswith("another Guardian watches this engine: pid ")
        assert "\\nguardian:" in str(err.value) and "\n" not in str(err.value)
        path.chmod(0o600)  # the same holder, now that the group cannot reach the engine
        lock = HostLock(tmp_path / "c.db", engine_key(url), "", EngineAccess.of(url))
        lock.acquire()
        assert lock.squatted == 1
        lock.release()
    finally:
        engine.close()


def lookalike(containers: Containers, names: list[bytes]) -> str:
    """A busybox labelled as a Guardian of this scope that binds `names` in its own network
    namespace with the host's python (its /usr mounted read-only; no engine socket)."""
    script = (
        "import socket, time\n"
        "held = []\n"
        f"for n in {[n.hex() for n in names]!r}:\n"
        "    s = socket.socket(socket.AF_UNIX); s.bind(bytes.fromhex(n)); s.listen(1)\n"
        "    held.append(s)\n"
        "print('bound', len(held), flush=True)\n"
        "time.sleep(86400)\n"
    )
    name = containers.run(
        "lookalike",
        [PYTHON, "-I", "-c", script],
        labels={"guardian.self": "true", "guardian.scope": SCOPE},
        binds={
            "/usr": {"bind": "/usr", "mode": "ro"},
            os.path.realpath("/lib"): {"bind": "/lib", "mode": "ro"},
            os.path.realpath("/lib64"): {"bind": "/lib64", "mode": "ro"},
        },
    )
    wait_until(
        lambda: f"bound {len(names)}" in containers.api.logs(name).decode(errors="replace"),
        30,
        message="the look-alike binds the lock's names",
    )
    return name


def test_guardian_starts_and_heals_beside_a_squatter_and_a_lookalike_and_refuses_a_real_second(
    tmp_path: Path, squatter, containers: Containers, guardian, engine_events: EventRecorder
) -> None:
    names = squatted_names()
    first_store = tmp_path / "g0" / "guardian.db"
    assert squatter(names, first_store) == "Permission denied"  # the store is not its to lock
    fake = lookalike(containers, names[:20])
    app = containers.run("app", health_cmd=HEALTH)
    containers.wait_health(app, "healthy")

    g = guardian()
    assert g.proc is not None and g.store_path == first_store
    wait_until(lambda: g.lines("sweep done") or g.proc.poll() is not None, 30, message="sweep")
    assert g.proc.poll() is None, g.log()
    assert not any(line.startswith("guardian: another") for line in g.log().splitlines())
    assert "\x1b" not in g.log()
    assert len(g.lines("names of the engine lock are held by processes")) == 1, g.log()
    assert len(g.lines("claims to be a Guardian")) == 1, g.log()  # the look-alike: a claim
    with urllib.request.urlopen(g.http_url + "/healthz", timeout=10) as answer:
        body = answer.read().decode()
    assert answer.status == 200 and body.startswith("ok: "), body
    assert f"uid {NOBODY}, pid " in body and "claims to be a Guardian" in body, body

    containers.make_unhealthy(app)
    wait_until(lambda: engine_events.count(app, "restart") == 1, 60, message="app restarted")
    actions = [a for a, _ in engine_events.of(app)]
    assert actions.index("health_status: unhealthy") < actions.index("restart"), actions
    containers.wait_health(app, "healthy", timeout=30)
    assert engine_events.count(fake, "restart") == 0

    second = guardian(start=False).start(wait_ready=False)
    assert second.proc is not None and second.proc.wait(60) == 1, second.log()
    last = second.log().strip().splitlines()[-1]
    assert last.startswith(
        f"guardian: another Guardian watches this engine (watch.scope {SCOPE}): pid {g.proc.pid} ("
    ), second.log()
    assert g.proc.poll() is None
