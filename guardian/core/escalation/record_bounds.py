"""Sane bounds on an engine record (a `docker inspect`): its labels, names and commands come from
whoever runs the container, so a record beyond these is refused before anything reads it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

MAX_VALUES = 20_000  # keys, items and scalars together; a busy Compose service has ~400
MAX_CHARS = 1_000_000  # characters of text and keys together
MAX_DEPTH = 12  # nesting; an inspect nests 5 deep


def oversize(record: object) -> str:
    """Why `record` is beyond the bounds or not plain JSON ("" when it is within): walked
    without recursion, each container's length checked before its items are queued."""
    values = chars = 0
    stack: list[tuple[object, int]] = [(record, 0)]
    while stack:
        item, depth = stack.pop()
        values += 1
        if depth > MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH}"
        if isinstance(item, Mapping | list):
            if values + len(item) > MAX_VALUES:
                return f"more than {MAX_VALUES} values"
            if isinstance(item, Mapping):
                if not all(isinstance(k, str) for k in item):
                    return "a key that is not text"
                chars += sum(len(k) for k in item)
                stack.extend((v, depth + 1) for v in item.values())
            else:
                stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, str):
            chars += len(item)
        elif isinstance(item, float) and not math.isfinite(item):
            return "a number that is not finite"
        elif isinstance(item, int) and not -(2**63) <= item < 2**64:
            return "a number beyond 64 bits"  # the engine's are; a longer one fails json.dumps
        elif not (item is None or isinstance(item, bool | int | float)):
            return f"a value of type {type(item).__name__}, which JSON has not"
        if chars > MAX_CHARS:
            return f"more than {MAX_CHARS:,} characters"
    return ""
