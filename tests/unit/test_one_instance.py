"""One Guardian per engine: the store lock, the host-wide engine lock, a Guardian container on
the engine, and a clean takeover from a dead predecessor."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from guardian.adapters.instance import HostLock, rival_container
from guardian.entrypoints.daemon import Daemon
from guardian.ports import InstanceConflict
from tests.app import make_app
from tests.fakes import FakeClock, FakeEngine
from tests.helpers import wait_until


@pytest.fixture
def engine_url() -> str:
    """An engine of this test only, so parallel test runs never share the host-wide lock."""
    return f"tcp://engine-{uuid.uuid4().hex}:2375"


def held(store: Path, url: str, scope: str = "") -> HostLock:
    lock = HostLock(store, url, scope)
    lock.acquire()
    return lock


def test_a_second_guardian_on_the_same_store_is_refused_naming_the_first(
    tmp_path: Path, engine_url: str
) -> None:
    first = held(tmp_path / "guardian.db", engine_url)
    with pytest.raises(InstanceConflict) as err:
        held(tmp_path / "guardian.db", engine_url + "-other")
    assert str(err.value).startswith(f"another Guardian is using the store {tmp_path}/guardian.db")
    assert f"pid {os.getpid()}" in str(err.value) and "\n" not in str(err.value)
    first.release()
    held(tmp_path / "guardian.db", engine_url).release()  # free again once released


def test_a_second_guardian_on_the_same_engine_with_another_store_is_refused(
    tmp_path: Path, engine_url: str
) -> None:
    first = held(tmp_path / "a" / "guardian.db", engine_url)
    with pytest.raises(InstanceConflict) as err:
        held(tmp_path / "b" / "guardian.db", engine_url)
    assert str(err.value).startswith("another Guardian watches this engine: pid ")
    assert f"pid {os.getpid()}" in str(err.value)
    # The refused one left the store it tried free for whoever comes next.
    held(tmp_path / "b" / "guardian.db", engine_url + "-x").release()
    first.release()


def test_guardians_with_different_scopes_share_an_engine(tmp_path: Path, engine_url: str) -> None:
    a = held(tmp_path / "a.db", engine_url, "com.docker.compose.project=shop")
    b = held(tmp_path / "b.db", engine_url, "com.docker.compose.project=blog")
    with pytest.raises(InstanceConflict) as err:
        held(tmp_path / "c.db", engine_url, "com.docker.compose.project=shop")
    assert "(watch.scope com.docker.compose.project=shop)" in str(err.value)
    a.release()
    b.release()


def test_a_guardian_takes_over_from_a_predecessor_killed_with_sigkill(
    tmp_path: Path, engine_url: str
) -> None:
    store = tmp_path / "guardian.db"
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from guardian.adapters.instance import HostLock\n"
        "HostLock(Path(sys.argv[1]), sys.argv[2], '').acquire()\n"
        "print('held', flush=True)\n"
        "time.sleep(600)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(store), engine_url], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        with pytest.raises(InstanceConflict) as err:
            held(store, engine_url)
        assert f"pid {proc.pid}" in str(err.value)
    finally:
        proc.kill()
        proc.wait(10)
    lock = wait_until(lambda: _try(store, engine_url), 10, message="lock taken over")
    lock.release()


def _try(store: Path, url: str) -> HostLock | None:
    try:
        return held(store, url)
    except InstanceConflict:
        return None


def guardian_container(engine: FakeEngine, name: str, **labels: str) -> str:
    return engine.add(name, labels={"guardian.self": "true", **labels}).id


def test_a_running_guardian_container_on_the_engine_is_a_rival() -> None:
    engine = FakeEngine(FakeClock())
    engine.add("app")
    cid = guardian_container(engine, "guardian-a")
    assert rival_container(engine, set(), "") == f"container guardian-a ({cid[:12]})"


def test_a_sidecar_restarted_by_docker_is_not_its_own_rival() -> None:
    engine = FakeEngine(FakeClock())
    cid = guardian_container(engine, "guardian")
    assert rival_container(engine, {cid}, "") == ""
    assert rival_container(engine, {cid[:12]}, "") == ""  # the hostname Docker gives it


def test_stopped_or_differently_scoped_guardian_containers_are_no_rivals() -> None:
    engine = FakeEngine(FakeClock())
    stopped = guardian_container(engine, "old")
    engine.set("old", state="exited")
    guardian_container(engine, "shop", **{"guardian.scope": "project=shop"})
    assert rival_container(engine, set(), "") == ""
    assert rival_container(engine, set(), "project=shop").startswith("container shop")
    assert stopped not in rival_container(engine, set(), "project=shop")


def test_guardian_run_stops_at_its_first_sweep_beside_a_guardian_container(
    tmp_path: Path,
) -> None:
    t = make_app(tmp_path, daemon=True)
    guardian_container(t.engine, "guardian-sidecar")
    sick = t.engine.add("app", health="unhealthy")
    daemon = Daemon(t.app)
    daemon.sweep()
    assert daemon.refused == (
        "another Guardian watches this engine: container guardian-sidecar "
        f"({t.engine.id_of('guardian-sidecar')[:12]})"
    )
    assert daemon.stopping.is_set() and not daemon.first_sweep_done.is_set()
    assert t.engine.restarts == [] and sick.id not in t.engine.restarts
    assert t.store.open_incidents(t.host) == []  # it acted on nothing before stopping


def test_guardian_run_goes_on_when_no_guardian_container_runs(tmp_path: Path) -> None:
    t = make_app(tmp_path, daemon=True)
    guardian_container(t.engine, "old-guardian")
    t.engine.set("old-guardian", state="exited")
    daemon = Daemon(t.app)
    daemon.sweep()
    assert daemon.refused is None and daemon.first_sweep_done.is_set()
