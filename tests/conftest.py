"""Suite-wide fixtures."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _isolated_guardian_logging() -> Iterator[None]:
    """CLI tests call setup_logging(); undo it so one test's handlers never leak into the next."""
    logger = logging.getLogger("guardian")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved[0], saved[1], saved[2]
