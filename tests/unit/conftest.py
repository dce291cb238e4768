"""Fixtures of the unit tier: Guardian built through bootstrap over fakes (tests/app.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.app import TestApp, make_world


@pytest.fixture
def w(tmp_path: Path) -> TestApp:
    return make_world(tmp_path)
