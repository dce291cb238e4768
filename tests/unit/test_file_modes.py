"""Files Guardian creates are private: 0600 in 0700 directories, whatever the umask."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from guardian.adapters.host_lock import HostLock
from guardian.adapters.sqlite.store import SqliteStore
from guardian.logs import FIELDS
from tests.app import make_app


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The loosest umask there is, as a careless service manager or shell may leave it."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.usefixtures("open_umask")
def test_the_store_and_its_new_directories_are_private_whatever_the_umask(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    path = tmp_path / "state" / "guardian" / "guardian.db"
    store = SqliteStore(path)
    t = make_app(tmp_path / "app", sqlite=store)
    t.engine.add("app", health="unhealthy")
    t.healer.sweep()  # writes: the WAL and its shared-memory index exist now
    files = sorted(p.name for p in path.parent.iterdir())
    assert files == ["guardian.db", "guardian.db-shm", "guardian.db-wal"]
    assert {name: mode(path.parent / name) for name in files} == dict.fromkeys(files, 0o600)
    assert mode(tmp_path / "state") == mode(path.parent) == 0o700
    assert mode(tmp_path) == 0o755  # a directory that existed is the operator's business
    store.close()


@pytest.mark.usefixtures("open_umask")
def test_an_existing_store_keeps_the_mode_its_operator_gave_it(tmp_path: Path) -> None:
    path = tmp_path / "guardian.db"
    SqliteStore(path).close()
    path.chmod(0o640)
    SqliteStore(path).close()
    assert mode(path) == 0o640


@pytest.fixture
def usual_umask() -> Iterator[None]:
    """The umask most shells and service managers leave: 022."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.usefixtures("usual_umask")
def test_the_instance_lock_is_first_to_touch_the_store_and_creates_it_private(
    tmp_path: Path,
) -> None:
    path = tmp_path / "new" / "sub" / "guardian.db"
    lock = HostLock(path, "unix:///nowhere.sock", "")
    lock.acquire()
    try:
        store = SqliteStore(path)  # the database finds the file the lock made
        store.close()
        assert mode(path) == 0o600
        assert mode(tmp_path / "new") == mode(tmp_path / "new" / "sub") == 0o700
    finally:
        lock.release()


@pytest.mark.usefixtures("usual_umask")
def test_a_store_readable_by_others_is_warned_about_once_at_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "guardian.db"
    SqliteStore(path).close()
    path.chmod(0o644)
    make_app(tmp_path / "app", sqlite=SqliteStore(path), daemon=True).app.edges.close()
    [warning] = [r for r in caplog.records if "readable by other users" in r.getMessage()]
    assert getattr(warning, FIELDS)["mode"] == "0644"
    assert mode(path) == 0o644  # the operator's choice is kept
