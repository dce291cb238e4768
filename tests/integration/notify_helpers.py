"""Helpers shared by the notification integration tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tests.integration.conftest import RUN_ID

# Other test runs share the engine: these tests watch only their own run's containers.
WATCH = f"gdt.notify.{RUN_ID}"


def run(containers: Any, short: str, **kw: Any) -> str:
    return str(containers.run(short, labels={WATCH: "true"}, **kw))


@contextmanager
def notifying(
    guardian: Any,
    notify: dict[str, Any],
    env: dict[str, str] | None = None,
    absent: tuple[str, ...] = ("gdtSecret",),
) -> Iterator[Callable[..., Any]]:
    """A factory of Guardians watching this run's containers with the `notify` section (a test
    may override keys of it); at the end, each log shows the worker started and no `absent`."""
    started: list[Any] = []

    def make(**sections: Any) -> Any:
        sections["notify"] = {**notify, **sections.get("notify", {})}
        sections.setdefault("watch", {})["label"] = WATCH
        g = guardian(env=env, **sections)
        started.append(g)
        return g

    yield make
    for g in started:
        g.stop()
        text = g.full_log()
        assert "notification worker started" in text
        for secret in absent:
            assert secret not in text
