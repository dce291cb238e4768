"""Suite-wide fixtures."""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Iterator

import pytest

from tests.helpers import LIVE, stacks


@pytest.fixture(autouse=True)
def _isolated_guardian_logging() -> Iterator[None]:
    """CLI tests call setup_logging(); undo it so one test's handlers never leak into the next."""
    logger, top = logging.getLogger("guardian"), logging.getLogger()
    saved = (logger.handlers[:], logger.level, logger.propagate)
    saved_top = (top.handlers[:], top.level)
    hooks = (sys.excepthook, threading.excepthook, sys.unraisablehook)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved[0], saved[1], saved[2]
    top.handlers[:], top.level = saved_top[0], saved_top[1]
    sys.excepthook, threading.excepthook, sys.unraisablehook = hooks


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failing test's report carries the stacks and the log's end of every Guardian it left
    running: a wait that timed out then shows whether Guardian was slow or stuck, and where."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.when != "call" or not report.failed:
        return
    for g in list(LIVE.values()):
        if g.proc is None or g.proc.poll() is not None:
            continue
        try:
            tail = g.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            tail = ""
        pid = g.proc.pid
        report.sections.append((f"guardian pid {pid}", f"{stacks(pid)}\n--- log ---\n{tail}"))
