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


def drop_absent(entries: dict[str, V], present: Set[str]) -> None:
    """Remove from `entries`, in place, the keys not in `present`; beside threads that set or
    pop single keys without a lock. The keys are copied in one operation and each absent one
    popped on its own (each atomic in CPython), so an entry set meanwhile is kept unless its
    container is absent; a narrowed copy assigned back would lose it."""
    if entries.keys() <= present:
        return
    for key in [k for k in list(entries) if k not in present]:
        entries.pop(key, None)
