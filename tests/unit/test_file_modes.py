"""Files Guardian creates are private: 0600 in 0700 directories, whatever the umask."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from guardian.adapters.sqlite.store import SqliteStore
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
