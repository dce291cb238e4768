"""Edges: what a built Guardian holds open beyond its own memory (the engine's connections, the
store, the systemd socket, the instance lock), released at close() in the order they were held:
the lock last, since another Guardian may start once it is released."""

from __future__ import annotations

from collections.abc import Callable


class Edges:
    def __init__(self, *releases: Callable[[], None]) -> None:
        self._releases = list(releases)

    def hold(self, release: Callable[[], None]) -> None:
        """Also release this at close(), after what is held already."""
        self._releases.append(release)

    def close(self) -> None:
        for release in self._releases:
            release()
