"""Lines out of blocks of a container's output, matched in bulk: one search per pattern over a
whole block (RE2, linear in the block), not a call per line, so a flood costs little more than
its reading. A line is matched on its first MAX_LINE bytes; of a longer one the rest is never
held (between two blocks at most MAX_LINE bytes of an unfinished line are kept).
"""

from __future__ import annotations

from collections.abc import Sequence

from guardian.core.detection.log_rules import MAX_LINE, LogRule
from guardian.ports import LogPattern

# After the head of a line cut at MAX_LINE: a byte that is not UTF-8 and not a newline, so `$`
# does not match where the line was cut (`(a+)+$` on a long run of a's followed by b).
CUT = b"\xff"


class LineScanner:
    """Feed it blocks in order; it says the first line that a pattern matches."""

    def __init__(self, patterns: Sequence[tuple[LogRule, LogPattern]]) -> None:
        self.patterns = tuple(patterns)
        self._carry = b""  # the start of a line not ended yet, shorter than MAX_LINE
        self._skipping = False  # inside a line longer than MAX_LINE: the rest is not read

    def feed(self, block: bytes) -> tuple[LogRule, bytes] | None:
        """The first line of `block` (with what came before it) that a pattern matches, and
        the rule; the line without its newline, at most MAX_LINE bytes."""
        start = 0
        if self._skipping:
            start = block.find(b"\n") + 1
            if not start:
                return None
            self._skipping = False
        end = block.rfind(b"\n", start) + 1  # after the last complete line; 0: none
        found = None
        if end:
            text, rest = self._carry + block[start:end], block[end:]
            found = self._search(text)
        else:
            rest = self._carry + block[start:]
        self._carry = b""
        if len(rest) >= MAX_LINE:  # cut: its head is matched as a line now, the rest skipped
            head, self._skipping = rest[:MAX_LINE], True
            if found is None:
                found = self._search_head(head)
        else:
            self._carry = rest
        return found

    def _search(self, text: bytes) -> tuple[LogRule, bytes] | None:
        for rule, pattern in self.patterns:
            pos = 0
            while pos < len(text):
                span = pattern.search(text, pos)
                if span is None:
                    break
                line_start = text.rfind(b"\n", 0, span[0]) + 1
                line_end = text.find(b"\n", span[0])
                line_end = len(text) if line_end < 0 else line_end
                if span[1] - line_start <= MAX_LINE:
                    return rule, text[line_start : min(line_end, line_start + MAX_LINE)]
                # The match reaches past the line's head: only the head counts.
                head = text[line_start : min(line_end, line_start + MAX_LINE)]
                if pattern.search(head + CUT) is not None:
                    return rule, head
                pos = line_end + 1
        return None

    def _search_head(self, head: bytes) -> tuple[LogRule, bytes] | None:
        for rule, pattern in self.patterns:
            if pattern.search(head + CUT) is not None:
                return rule, head
        return None
