"""Helpers shared by every test tier."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T], timeout: float = 10.0, interval: float = 0.1, message: str = ""
) -> T:
    """Poll `condition` until it returns something truthy; fail with `message` after `timeout`.

    For waiting on real effects (a container turning healthy, a log line appearing); unit tests
    of the core use a FakeClock instead.
    """
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = condition()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message or condition}")
        time.sleep(interval)


def require_tool(command: str, package: str) -> str:
    """The path of `command`; a missing tool fails the test under CI (scripts/test.sh installs
    it), so a green CI always means the real tool ran, and skips it elsewhere."""
    import os
    import shutil

    import pytest

    path = shutil.which(command)
    if path is None:
        if os.environ.get("CI") or os.environ.get("GUARDIAN_REQUIRE_DOCKER"):
            pytest.fail(f"{command} is required in CI (Debian package: {package})")
        pytest.skip(f"{command} not installed")
    return path


def run_in_main_thread(
    run_forever: Callable[[], None], scenario: Callable[[], None], end: Callable[[], None]
) -> None:
    """Run a daemon's main loop (it installs signal handlers: it must own the main thread)
    while `scenario` runs on another thread; `end` stops the loop once the scenario is over,
    however it ended. Puts the signal handlers back and re-raises the scenario's failure."""
    failed: list[BaseException] = []

    def drive() -> None:
        try:
            scenario()
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread below
            failed.append(exc)
        finally:
            end()

    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    try:
        run_forever()
    finally:
        # A loop that ended early leaves its handlers until the scenario is over: a signal the
        # scenario still sends must fail the test, not kill the test run.
        driver.join(60)
        for s, h in handlers.items():
            signal.signal(s, h)
    if failed:
        raise failed[0]


def runs(thread_id: int | None) -> int:
    """How many times the kernel put the thread on a CPU so far."""
    return int(Path(f"/proc/self/task/{thread_id}/schedstat").read_text().split()[2])


def python(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """This interpreter run afresh with `argv`, without the test run's GUARDIAN_* variables;
    its output as text."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GUARDIAN_")}
    return subprocess.run(
        [sys.executable, *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )


# Guardians a test started and that still run: a failing test's report shows what they were
# doing (tests/conftest.py), so a wait that timed out in CI can be told from a hang.
LIVE: dict[int, Any] = {}  # id -> a GuardianProcess (its .proc, .log_path)


def stacks(pid: int) -> str:
    """Every thread's Python stack of process `pid` (py-spy dump), or why there is none."""
    spy = Path(sys.executable).with_name("py-spy")
    try:
        done = subprocess.run(
            [str(spy), "dump", "--pid", str(pid)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"py-spy dump --pid {pid}: {exc}"
    return done.stdout + done.stderr
