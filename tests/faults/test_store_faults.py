"""Store faults: a read-only state directory, a corrupt database, a full disk."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from guardian.adapters.sqlite.store import SqliteStore
from tests.faults.conftest import Factory, container_env, fill_disk, run_cli, sample, scrape
from tests.faults.exposure import Exposure
from tests.helpers import wait_until
from tests.integration.conftest import Containers, EventRecorder, base_config


def write_config(tmp_path: Path, store: Path) -> Path:
    config = base_config(tmp_path, store={"path": str(store)})
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def assert_one_line_failure(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    """`guardian run` cannot open its store: exit 3, which the unit does not restart."""
    assert proc.returncode == 3, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("where", ["state dir itself", "below it"])
def test_read_only_state_directory_is_one_clear_line_and_exit_3(
    tmp_path: Path, mount_tmpfs: Callable[..., Path], exposure: Exposure, where: str
) -> None:
    # Tests run as root, which ignores permission bits: a read-only mount is really read-only.
    ro = mount_tmpfs("ro", "1m", ro=True)
    store = ro / "guardian.db" if where == "state dir itself" else ro / "state" / "guardian.db"
    proc = run_cli(exposure, "run", "--config", str(write_config(tmp_path, store)), timeout=30)
    line = assert_one_line_failure(proc, str(store))
    assert "not writable" in line or "Read-only file system" in line


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _garbage(path: Path) -> None:
    path.write_bytes(bytes(range(256)) * 64)


def _damaged_page(path: Path) -> None:
    store = SqliteStore(path)  # a real Guardian store, then a page of it overwritten
    store.close()
    with open(path, "r+b") as f:
        f.seek(4096)
        f.write(b"\xa5" * 3000)


@pytest.mark.parametrize("damage", [_garbage, _damaged_page], ids=["garbage", "damaged-page"])
def test_corrupt_database_names_the_file_exits_3_and_leaves_it_untouched(
    tmp_path: Path, exposure: Exposure, damage: Callable[[Path], None]
) -> None:
    store = tmp_path / "state" / "guardian.db"
    store.parent.mkdir()
    damage(store)
    before, mtime = _digest(store), store.stat().st_mtime_ns
    proc = run_cli(exposure, "run", "--config", str(write_config(tmp_path, store)), timeout=30)
    assert_one_line_failure(proc, str(store), "left untouched")
    assert _digest(store) == before, "the corrupt file was modified"
    assert store.stat().st_mtime_ns == mtime
    assert sorted(p.name for p in store.parent.iterdir()) == ["guardian.db"]


def _restart_actions(store: Path, container: str) -> int:
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return int(
            db.execute(
                "SELECT count(*) FROM actions WHERE container=? AND kind='restart'", (container,)
            ).fetchone()[0]
        )
    finally:
        db.close()


def test_disk_full_healing_continues_failure_counted_recording_resumes(
    guardian: Factory,
    containers: Containers,
    engine_events: EventRecorder,
    mount_tmpfs: Callable[..., Path],
    exposure: Exposure,
) -> None:
    disk = mount_tmpfs("disk", "4m")
    name = containers.run("diskfull", health_cmd="test ! -f /run/sick", environment=container_env())
    containers.wait_health(name, "healthy")
    g = guardian(store={"path": str(disk / "guardian.db")})
    url = g.http_url
    wait_until(lambda: g.lines("sweep done"), 20, message="first sweep")

    filler = fill_disk(disk)
    containers.make_unhealthy(name)
    # Healing continues: Docker itself reports the restart.
    wait_until(lambda: engine_events.count(name, "restart") >= 1, 40, message="restart (full)")
    containers.wait_health(name, "healthy", timeout=30)
    wait_until(lambda: g.lines("store write failed"), 10, message="store failure logged")
    errors = sample(scrape(url, exposure), "guardian_store_errors_total")
    assert errors is not None and errors >= 1
    assert _restart_actions(g.store_path, name) == 0  # nothing could be recorded

    filler.unlink()
    containers.make_unhealthy(name)
    wait_until(lambda: engine_events.count(name, "restart") >= 2, 40, message="restart (space)")
    # Recording resumed, and the restart made while the disk was full was written too.
    wait_until(lambda: _restart_actions(g.store_path, name) >= 2, 20, message="recorded")
    assert g.lines("recording resumed")
    assert g.proc is not None and g.proc.poll() is None, "guardian died"
    assert engine_events.count(name, "restart") == 2
