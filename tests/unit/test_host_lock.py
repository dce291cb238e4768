"""The host's engine lock judged by who holds it: a holder that can reach the engine is another
Guardian, any other holder a squatter to warn about; what a holder set (its command line)
is escaped before a log line quotes it. Holders of another user:
tests/faults/test_lock_squatters.py."""

from __future__ import annotations

import contextlib
import socket
import uuid
from pathlib import Path

import pytest

from guardian.adapters.host_lock import (
    SQUATTERS_SHOWN,
    EngineAccess,
    HostLock,
    Peer,
    describe_pid,
    lock_address,
    names_under,
    peer_at,
    printable,
)
from guardian.ports import InstanceConflict

ME = 1000
DOCKER = 106
SOCKET = (0, DOCKER, 0o660)  # root:docker srw-rw----, as Docker makes it


@pytest.mark.parametrize(
    ("peer", "access", "reaches"),
    [
        (Peer(1, 0, 0), EngineAccess(ME, SOCKET), True),  # root
        (Peer(1, ME, ME), EngineAccess(ME, SOCKET), True),  # this Guardian's own user
        (Peer(1, 2000, 2000, frozenset({DOCKER})), EngineAccess(ME, SOCKET), True),  # docker
        (Peer(1, 2000, DOCKER), EngineAccess(ME, SOCKET), True),  # docker as primary group
        (Peer(1, 65534, 65534), EngineAccess(ME, SOCKET), False),  # nobody
        (Peer(1, 65534, 65534, frozenset({4, 24})), EngineAccess(ME, SOCKET), False),
        (Peer(1, 2000, 2000), EngineAccess(ME, (2000, DOCKER, 0o660)), True),  # its owner
        (Peer(1, 2000, 2000), EngineAccess(ME, (2000, DOCKER, 0o060)), False),  # owner, no w
        (Peer(1, 2000, 2000, frozenset({DOCKER})), EngineAccess(ME, (0, DOCKER, 0o600)), False),
        (Peer(1, 65534, 65534), EngineAccess(ME, (0, DOCKER, 0o666)), True),  # open to all
        (Peer(1, 2000, 2000, frozenset({DOCKER})), EngineAccess(ME, None), False),  # TCP engine
        (Peer(1, 0, 0), EngineAccess(ME, None), True),
    ],
)
def test_a_holder_is_a_guardian_only_when_it_can_reach_the_engine(
    peer: Peer, access: EngineAccess, reaches: bool
) -> None:
    assert access.reaches(peer) is reaches


def test_the_engines_access_is_read_from_its_socket(tmp_path: Path) -> None:
    path = tmp_path / "engine.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        path.chmod(0o660)
        st = path.stat()
        assert EngineAccess.of(f"unix://{path}", uid=ME) == EngineAccess(
            ME, (st.st_uid, st.st_gid, 0o660)
        )
    assert EngineAccess.of("tcp://proxy:2375", uid=ME) == EngineAccess(ME, None)
    assert EngineAccess.of(f"unix://{tmp_path}/none.sock", uid=ME) == EngineAccess(ME, None)


def test_a_holders_command_line_is_escaped_and_bounded(tmp_path: Path) -> None:
    (tmp_path / "42").mkdir()
    argv = [b"sleep", b"1\nguardian: another Guardian watches\x1b[31m", b"x" * 5000]
    (tmp_path / "42" / "cmdline").write_bytes(b"\0".join(argv) + b"\0")
    described = describe_pid(42, tmp_path)
    assert described.startswith("pid 42 (sleep 1\\nguardian: another Guardian watches\\x1b[31m x")
    assert "\n" not in described and "\x1b" not in described
    assert len(described) <= len("pid 42 ()") + 120 and described.endswith("…)")
    assert describe_pid(43, tmp_path) == "pid 43"
    assert printable("tab\there\u202eleft") == "tab\\there\\u202eleft"


@pytest.fixture
def engine() -> str:
    return f"tcp://engine-{uuid.uuid4().hex}:2375"


def test_each_guardian_binds_a_name_of_its_own_under_the_engines_prefix(
    tmp_path: Path, engine: str
) -> None:
    lock = HostLock(tmp_path / "a.db", engine, "")
    lock.acquire()
    try:
        prefix = lock_address(engine, "")
        assert lock.address.startswith(prefix + "-") and lock.address in names_under(prefix)
        assert lock.squatters == () and lock.warning() == ""
    finally:
        lock.release()
    assert lock.address not in names_under(prefix)


def test_probes_never_fill_a_held_locks_backlog(tmp_path: Path, engine: str) -> None:
    """Every Guardian that starts reads the holder's credentials; a holder that stopped
    answering after a few would be taken for a squatter."""
    lock = HostLock(tmp_path / "a.db", engine, "")
    lock.acquire()
    try:
        assert all(peer_at(lock.address) is not None for _ in range(500))
        with pytest.raises(InstanceConflict):
            HostLock(tmp_path / "b.db", engine, "").acquire()
    finally:
        lock.release()


def test_a_name_where_nothing_answers_proves_nothing(tmp_path: Path, engine: str) -> None:
    """A socket bound and never listening, or one whose backlog is full, gives no credentials:
    not another Guardian (a squatter can make either)."""
    prefix = lock_address(engine, "")
    silent = socket.socket(socket.AF_UNIX)
    silent.bind(prefix)  # the bare name, as a Guardian before these held it: never listens
    full = socket.socket(socket.AF_UNIX)
    full.bind(prefix + "-1-full")
    full.listen(0)
    fillers = [socket.socket(socket.AF_UNIX) for _ in range(2)]
    for f in fillers:
        f.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            f.connect(prefix + "-1-full")
    try:
        assert peer_at(prefix) is None and peer_at(prefix + "-1-full") is None
        lock = HostLock(tmp_path / "a.db", engine, "")
        lock.acquire()
        assert lock.squatters == ()
        lock.release()
    finally:
        for s in (silent, full, *fillers):
            s.close()


def test_the_warning_names_a_few_squatters_and_counts_the_rest(tmp_path: Path) -> None:
    lock = HostLock(tmp_path / "a.db", "tcp://e", "")
    lock.squatters = tuple(f"uid 65534, pid {n}" for n in range(SQUATTERS_SHOWN))
    lock.squatted = SQUATTERS_SHOWN + 2
    assert lock.warning() == (
        "warning: processes that cannot reach the engine hold names of Guardian's engine lock "
        "(uid 65534, pid 0; uid 65534, pid 1; uid 65534, pid 2 and 2 more): not rivals"
    )
