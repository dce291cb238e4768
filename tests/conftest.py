"""Suite-wide fixtures."""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Iterator

import pytest


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
