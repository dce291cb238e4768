"""The Patterns port over RE2 (google-re2): matching in time linear in the text whatever the
pattern, so a pattern from a label (`(a+)+$`) cannot stall Guardian as a backtracking engine
(the standard library's `re`) would. RE2 is loaded at the first compile: a Guardian without a
log rule never loads it.
"""

from __future__ import annotations

from typing import Any

# Not from guardian.ports: `guardian config validate` compiles the config's patterns, and the
# ports would load the model (tests/unit/test_cli_imports.py).
from guardian.core.detection.log_rules import PatternError
from guardian.core.redaction import untrusted

MAX_PROGRAM_MEMORY = 1 << 20  # bytes RE2 may spend on one compiled pattern (its default: 8 MiB)
# `^`/`$` at line ends: a search runs over many lines at once (service/watchers/log_watch.py).
MULTILINE = "(?m)"


class Re2Pattern:
    def __init__(self, compiled: Any) -> None:
        self._compiled = compiled

    def search(self, text: bytes, start: int = 0) -> tuple[int, int] | None:
        found = self._compiled.search(text, start)
        return None if found is None else (found.start(), found.end())


class Re2Patterns:
    """Compiles log rules' patterns: UTF-8, no match across a newline, no captures, bounded
    program memory, and no line of RE2's own on stderr for a bad one."""

    def __init__(self) -> None:
        self._re2: Any = None
        self._options: Any = None

    def compile(self, pattern: str) -> Re2Pattern:
        if self._re2 is None:
            import re2  # loaded only once a rule exists

            options = re2.Options()
            options.log_errors = False
            options.never_nl = True
            options.never_capture = True
            options.max_mem = MAX_PROGRAM_MEMORY
            self._re2, self._options = re2, options
        try:
            return Re2Pattern(self._re2.compile(MULTILINE + pattern, self._options))
        except self._re2.error as exc:
            raise PatternError(_reason(exc)) from None


def _reason(exc: BaseException) -> str:
    reason = exc.args[0] if exc.args else ""
    if isinstance(reason, bytes):
        reason = reason.decode("utf-8", errors="replace")
    # RE2 quotes the pattern, which a label may have filled with escape sequences.
    text = untrusted(str(reason).replace(MULTILINE, "", 1), 160)
    return f"invalid RE2 pattern: {text}" if text else "invalid RE2 pattern"
