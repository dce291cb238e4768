"""One Guardian per engine: the store lock, the host-wide engine lock, a Guardian container on
the engine proven by what a label cannot fake (a container that only claims it is a warning),
and a clean takeover from a dead predecessor."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from guardian.adapters.engine.engine_payloads import (
    MAX_ARGS,
    MAX_MOUNTS,
    MAX_PATH,
    inspect_snapshot,
)
from guardian.adapters.host_lock import HostLock, engine_key, lock_address
from guardian.adapters.instance import (
    CLAIMS_SHOWN,
    MAX_INSPECTED,
    Claim,
    Rivals,
    find_rivals,
    holds_lock,
    runs_guardian,
)
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
        "from guardian.adapters.host_lock import HostLock\n"
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


SOCKET_MOUNT = (("/var/run/docker.sock", "/var/run/docker.sock"),)
URL = "unix:///var/run/docker.sock"  # docker.url's default


def guardian_container(engine: FakeEngine, name: str, **fields: object) -> str:
    """A real Guardian container as the engine shows it: the image's label, `guardian run`, the
    engine's socket mounted (fields override any of these)."""
    labels = {"guardian.self": "true", **fields.pop("labels", {})}  # type: ignore[dict-item]
    base: dict[str, object] = {"command": ("guardian", "run"), "mounts": SOCKET_MOUNT, "pid": 0}
    return engine.add(name, labels=labels, **{**base, **fields}).id


def lookalike(engine: FakeEngine, name: str, scope: str = "") -> str:
    """A plain busybox that only says it is a Guardian (of `scope`) by its labels."""
    labels = {"guardian.self": "true", **({"guardian.scope": scope} if scope else {})}
    return engine.add(name, labels=labels, command=("sleep", "86400")).id


def fake_proc(tmp: Path, pid: int, sockets: list[str], same_netns: bool = False) -> Path:
    """A /proc with this process's network namespace and process `pid`'s Unix socket table."""
    proc = tmp / "proc"
    (proc / "self" / "ns").mkdir(parents=True, exist_ok=True)
    (proc / "self" / "ns" / "net").touch()
    (proc / str(pid) / "ns").mkdir(parents=True)
    if same_netns:
        os.link(proc / "self" / "ns" / "net", proc / str(pid) / "ns" / "net")
    else:
        (proc / str(pid) / "ns" / "net").touch()
    (proc / str(pid) / "net").mkdir()
    rows = ["Num       RefCount Protocol Flags    Type St Inode Path"]
    rows += [f"0000000000000000: 00000002 00000000 00010000 0001 01 {n + 100} {s}" for n, s in
             enumerate(sockets)]  # fmt: skip
    rows.append("0000000000000000: 00000003 00000000 00000000 0001 03 99")  # an unnamed socket
    (proc / str(pid) / "net" / "unix").write_text("\n".join(rows) + "\n")
    return proc


def at(address: str) -> str:
    return "@" + address.removeprefix("\0")


def test_a_running_guardian_container_with_the_engine_socket_is_a_rival() -> None:
    engine = FakeEngine(FakeClock())
    engine.add("app")
    cid = guardian_container(engine, "guardian-a")
    assert find_rivals(engine, set(), "", URL) == Rivals(f"container guardian-a ({cid[:12]})")


@pytest.mark.parametrize(
    ("command", "mounts"),
    [
        (("sleep", "86400"), ()),  # the busybox look-alike
        (("guardian", "run"), ()),  # Guardian's image run without the engine: holds nothing
        (("sh", "-c", "sleep 86400"), SOCKET_MOUNT),  # the socket, but no Guardian in it
        (("guardian", "check"), SOCKET_MOUNT),  # a one-off sweep, not the daemon
        (("guardian", "run"), (("/srv/other.sock", "/var/run/docker.sock"),)),  # another engine
    ],
)
def test_a_container_without_proof_is_a_claim_never_a_rival(
    command: tuple[str, ...], mounts: tuple[tuple[str, str], ...]
) -> None:
    engine = FakeEngine(FakeClock())
    cid = guardian_container(
        engine, "fake", command=command, mounts=mounts, labels={"guardian.scope": "p=shop"}
    )
    found = find_rivals(engine, set(), "p=shop", URL)
    assert found == Rivals(claims=(Claim("fake", cid),))
    assert found.warning() == (
        f"warning: container fake ({cid[:12]}) claims to be a Guardian by label alone "
        "(no proof: not a rival)"
    )


@pytest.mark.parametrize(
    "command",
    [
        ("guardian", "run"),
        ("/opt/guardian/bin/guardian", "run", "--config", "/etc/guardian/config.yaml"),
        ("/sbin/tini", "--", "guardian", "run"),
        ("python3", "-m", "guardian.entrypoints.cli", "run"),
    ],
)
def test_guardian_run_is_recognised_however_it_is_started(command: tuple[str, ...]) -> None:
    assert runs_guardian(command)


@pytest.mark.parametrize(
    "command", [(), ("guardian",), ("guardian", "check"), ("sh", "-c", "guardian run"), ("run",)]
)
def test_other_commands_do_not_run_guardian(command: tuple[str, ...]) -> None:
    assert not runs_guardian(command)


def test_a_container_holding_this_engine_and_scopes_lock_with_the_socket_is_a_rival(
    tmp_path: Path,
) -> None:
    """A Guardian on the engine's host sees the lock a sidecar's process holds in its own
    network namespace; with the engine's socket mounted, that is a Guardian whatever its
    labels or command."""
    engine = FakeEngine(FakeClock())
    scope = "p=shop"
    name = lock_address(engine_key(URL), scope) + "-7-0123456789abcdef"
    proc = fake_proc(tmp_path, 4242, [at(name)])
    cid = guardian_container(engine, "sidecar", command=("/init",), pid=4242)
    assert find_rivals(engine, set(), scope, URL, proc) == Rivals(f"container sidecar ({cid[:12]})")


def test_a_container_holding_the_lock_without_the_engines_socket_is_a_claim(
    tmp_path: Path,
) -> None:
    """Anyone who can start a container can bind any abstract name in it (a busybox with
    socat): the name proves nothing without the engine."""
    engine = FakeEngine(FakeClock())
    scope = "p=shop"
    bare = lock_address(engine_key(URL), scope)
    proc = fake_proc(tmp_path, 4242, [at(bare), at(bare + "-1-00")])
    cid = guardian_container(
        engine, "lookalike", mounts=(), pid=4242, labels={"guardian.scope": scope}
    )
    assert find_rivals(engine, set(), scope, URL, proc) == Rivals(claims=(Claim("lookalike", cid),))


def test_a_lock_of_another_scope_or_engine_proves_nothing(tmp_path: Path) -> None:
    engine = FakeEngine(FakeClock())
    others = [lock_address(engine_key(URL), "p=blog"), lock_address("tcp://elsewhere:2375", "")]
    proc = fake_proc(tmp_path, 4242, [at(a) for a in others])
    cid = guardian_container(
        engine, "x", command=("/init",), pid=4242, labels={"guardian.scope": ""}
    )
    assert find_rivals(engine, set(), "", URL, proc) == Rivals(claims=(Claim("x", cid),))


def test_the_lock_in_this_processs_own_network_namespace_is_its_own(tmp_path: Path) -> None:
    address = lock_address("tcp://e:2375", "")
    assert holds_lock(4242, address, fake_proc(tmp_path / "a", 4242, [at(address)]))
    assert holds_lock(4242, address, fake_proc(tmp_path / "c", 4242, [at(address) + "-9-ab"]))
    assert not holds_lock(4242, address, fake_proc(tmp_path / "d", 4242, [at(address) + "9"]))
    shared = fake_proc(tmp_path / "b", 4242, [at(address)], same_netns=True)
    assert not holds_lock(4242, address, shared)
    assert not holds_lock(4343, address, shared)  # not visible here (another pid namespace)
    assert not holds_lock(0, address, shared)  # not running


def test_a_sidecar_restarted_by_docker_is_not_its_own_rival() -> None:
    engine = FakeEngine(FakeClock())
    cid = guardian_container(engine, "guardian")
    assert find_rivals(engine, {cid}, "", URL) == Rivals()
    assert find_rivals(engine, {cid[:12]}, "", URL) == Rivals()  # the hostname Docker gives it


def test_a_sidecar_knows_the_engine_socket_by_the_host_path_it_mounts() -> None:
    """In a container, docker.url's path is the container's; the host's path is the source of
    its own mount, which another Guardian container mounts too."""
    engine = FakeEngine(FakeClock())
    me = guardian_container(engine, "me", mounts=(("/srv/engine", "/var/run"),))
    same = guardian_container(engine, "twin", mounts=(("/srv/engine/docker.sock", "/d.sock"),))
    assert find_rivals(engine, {me}, "", URL).proven == f"container twin ({same[:12]})"
    engine.remove("twin")
    other = guardian_container(engine, "other")  # mounts /var/run/docker.sock: not our engine's
    assert find_rivals(engine, {me}, "", URL) == Rivals(claims=(Claim("other", other),))


def test_behind_a_socket_proxy_a_container_is_proven_by_its_lock_alone() -> None:
    engine = FakeEngine(FakeClock())
    cid = guardian_container(engine, "guardian")
    found = find_rivals(engine, set(), "", "tcp://socket-proxy:2375")
    assert found == Rivals(claims=(Claim("guardian", cid),))


def test_stopped_or_differently_scoped_guardian_containers_are_no_rivals() -> None:
    engine = FakeEngine(FakeClock())
    stopped = guardian_container(engine, "old")
    engine.set("old", state="exited")
    guardian_container(engine, "shop", labels={"guardian.scope": "project=shop"})
    assert find_rivals(engine, set(), "", URL) == Rivals()
    assert find_rivals(engine, set(), "project=shop", URL).proven.startswith("container shop")
    assert stopped not in find_rivals(engine, set(), "project=shop", URL).proven


def test_a_flood_of_lookalikes_costs_a_bounded_look_and_one_warning() -> None:
    engine = FakeEngine(FakeClock())
    for n in range(MAX_INSPECTED + 8):
        lookalike(engine, f"fake-{n:02}")
    found = find_rivals(engine, set(), "", URL)
    assert engine.inspect_calls <= MAX_INSPECTED and not found.proven
    assert len(found.claims) == MAX_INSPECTED + 8
    assert found.warning().endswith(
        f"and {MAX_INSPECTED + 5} more claim to be a Guardian by label alone (no proof: not a "
        "rival)"
    )


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


def test_guardian_run_heals_beside_a_container_that_only_claims_to_be_guardian(
    tmp_path: Path,
) -> None:
    t = make_app(tmp_path, daemon=True)
    fake = lookalike(t.engine, "guardian-lookalike")
    sick = t.engine.add("app", health="unhealthy")
    daemon = Daemon(t.app)
    daemon.sweep()
    assert daemon.refused is None and not daemon.stopping.is_set()
    assert daemon.first_sweep_done.is_set()
    assert sick.id in t.engine.restarts and fake not in t.engine.restarts
    ok, reason = daemon.healthz()
    assert ok and reason.startswith("ok: ")
    assert reason.endswith(
        f"; warning: container guardian-lookalike ({fake[:12]}) claims to be a Guardian by label "
        "alone (no proof: not a rival)"
    )


def test_guardian_run_goes_on_when_no_guardian_container_runs(tmp_path: Path) -> None:
    t = make_app(tmp_path, daemon=True)
    guardian_container(t.engine, "old-guardian")
    t.engine.set("old-guardian", state="exited")
    daemon = Daemon(t.app)
    daemon.sweep()
    assert daemon.refused is None and daemon.first_sweep_done.is_set()
    assert daemon.healthz()[1].startswith("ok: ") and "warning" not in daemon.healthz()[1]


def test_an_inspect_gives_the_evidence_bounded() -> None:
    data = {
        "Id": "c" * 64,
        "Name": "/sidecar",
        "Path": "guardian",
        "Args": ["run", *["x" * 10_000] * 1_000],
        "State": {"Status": "running", "Pid": 4242},
        "Mounts": [
            {"Type": "bind", "Source": "/var/run/docker.sock", "Destination": "/d.sock"},
            {"Type": "volume", "Name": "state", "Destination": "/var/lib/guardian"},  # no Source
            *[{"Source": "/s", "Destination": "/d"}] * 1_000,
        ],
    }
    snap = inspect_snapshot(data)
    assert snap.pid == 4242 and snap.command[:2] == ("guardian", "run")
    assert len(snap.command) <= MAX_ARGS + 1 and max(map(len, snap.command)) <= MAX_PATH
    assert snap.mounts[0] == ("/var/run/docker.sock", "/d.sock") and len(snap.mounts) <= MAX_MOUNTS
    bare = inspect_snapshot({"Id": "c" * 64, "Args": "not a list", "Mounts": None})
    assert (bare.pid, bare.command, bare.mounts) == (0, (), ())


def test_many_lookalikes_are_named_a_few_at_a_time_in_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    t = make_app(tmp_path, daemon=True)
    for n in range(CLAIMS_SHOWN + 4):
        lookalike(t.engine, f"fake-{n}")
    daemon = Daemon(t.app)
    with caplog.at_level(logging.WARNING, logger="guardian.daemon"):
        daemon.sweep()
    assert daemon.refused is None and daemon.first_sweep_done.is_set()
    claims = [r for r in caplog.records if "claim to be a Guardian" in r.getMessage()]
    named = [r for r in caplog.records if "claims to be a Guardian" in r.getMessage()]
    assert len(named) == CLAIMS_SHOWN and len(claims) == 1
    assert "and 4 more claim to be a Guardian" in daemon.healthz()[1]


def test_a_hostile_mount_source_is_no_evidence_and_no_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path.anchor)  # a relative source from / would name the whole host
    engine = FakeEngine(FakeClock())
    cid = guardian_container(
        engine, "odd", mounts=(("/var/run/docker.sock\0x", "/d"), ("", "/e"), ("../..", "/f"))
    )
    assert find_rivals(engine, set(), "", URL) == Rivals(claims=(Claim("odd", cid),))
