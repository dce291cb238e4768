"""What the loop keeps per container, narrowed to the containers a sweep still lists."""

from __future__ import annotations

from collections.abc import Set
from typing import TypeVar

V = TypeVar("V")


def only_present(entries: dict[str, V], present: Set[str]) -> dict[str, V]:
    """`entries` without the keys not in `present`: the very dict when none is to be dropped,
    so an idle sweep over an unchanged list builds nothing."""
    if entries.keys() <= present:
        return entries
    return {k: v for k, v in entries.items() if k in present}
