"""Helpers shared by the notification integration tests."""

from __future__ import annotations

from typing import Any

from tests.integration.conftest import RUN_ID

# Other test runs share the engine: these tests watch only their own run's containers.
WATCH = f"gdt.notify.{RUN_ID}"


def run(containers: Any, short: str, **kw: Any) -> str:
    return str(containers.run(short, labels={WATCH: "true"}, **kw))
