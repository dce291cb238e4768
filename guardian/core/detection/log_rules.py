"""Log rules: a pattern on a container's output that opens a `log_match` incident.

From a label (`guardian.logs.match=<pattern>`, its own container) or from config
(`logs.rules: [{containers: "api-*", match: "OutOfMemoryError"}]`). Patterns are RE2 syntax; they
are compiled where RE2 lives (adapters/re2_patterns.py), this module holds their shape, bounds and
how a matched line is quoted. Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from guardian.core.redaction import untrusted

LABEL = "guardian.logs.match"
CONFIG_KEYS = ("containers", "match")
MAX_RULES = 50  # logs.rules
MAX_PATTERN = 512  # characters of one pattern, from a label or config
MAX_GLOB = 256  # characters of a rule's container glob
MAX_QUOTE = 200  # characters of the matched line an incident quotes
MAX_LINE = 8192  # bytes of one line that are matched; the rest of a longer line is not read


class LogRuleError(ValueError):
    """A rule that cannot be used; str() is the tail of one line naming the field."""


class PatternError(Exception):
    """A pattern the pattern engine refuses (ports.Patterns); str() says why, in one line."""


@dataclass(frozen=True)
class LogRule:
    """One pattern on the output of the containers whose name matches `containers` (a glob;
    "*" for a label's own container). `origin` names it for people: the label or the key."""

    containers: str
    match: str
    origin: str = LABEL

    def applies_to(self, name: str) -> bool:
        return fnmatchcase(name, self.containers)


def _pattern(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise LogRuleError(f"{where}: expected a non-empty RE2 pattern")
    if len(value) > MAX_PATTERN:
        raise LogRuleError(f"{where}: pattern longer than {MAX_PATTERN} characters")
    if "\x00" in value:
        raise LogRuleError(f"{where}: pattern holds a NUL character")
    return value


def from_label(value: str) -> LogRule:
    """The rule of a `guardian.logs.match` label: its pattern, for its own container. Raises
    LogRuleError (its text names the label)."""
    return LogRule("*", _pattern(value, f"label {LABEL}={value[:40]!r}"), LABEL)


def from_config(entry: Mapping[str, Any], where: str) -> LogRule:
    """One entry of logs.rules, `where` naming it (`[0]`). Raises LogRuleError naming the
    field."""
    unknown = sorted(str(k) for k in entry if k not in CONFIG_KEYS)
    if unknown:
        raise LogRuleError(
            f"{where}.{unknown[0][:40]}: unknown key; allowed: {', '.join(CONFIG_KEYS)}"
        )
    containers = entry.get("containers", "*")
    if not isinstance(containers, str) or not containers or len(containers) > MAX_GLOB:
        raise LogRuleError(
            f"{where}.containers: expected a container name or glob of at most {MAX_GLOB} "
            "characters (e.g. api-*)"
        )
    if "match" not in entry:
        raise LogRuleError(f"{where}.match: missing; expected an RE2 pattern")
    return LogRule(containers, _pattern(entry["match"], f"{where}.match"), where)


def by_operator(rules: Iterable[LogRule]) -> bool:
    """Whether any of these rules is the operator's (logs.rules), not a container's label."""
    return any(r.origin != LABEL for r in rules)


@dataclass(frozen=True)
class Wanted:
    """A running container with a log rule, as the slots are shared out (allot)."""

    id: str
    name: str
    operator: bool  # a rule of logs.rules applies to it, not only its own label's


def rank(w: Wanted) -> tuple[bool, str, str]:
    """The order slots are given in: the operator's rules first, then by name. A label is
    written by whoever runs the container, so no number of labelled containers can take the
    slot of a container the operator named."""
    return (not w.operator, w.name, w.id)


def allot(wanted: Iterable[Wanted], slots: int) -> tuple[list[Wanted], list[Wanted]]:
    """(the containers followed, those whose rules wait for a slot), in rank order."""
    ordered = sorted(wanted, key=rank)
    return ordered[:slots], ordered[slots:]


def rules_for(name: str, rules: Iterable[LogRule]) -> tuple[LogRule, ...]:
    """The operator's rules that apply to the container called `name`."""
    return tuple(r for r in rules if r.applies_to(name))


def shown(pattern: str) -> str:
    """A pattern as a log line or an incident shows it: bounded, without control characters."""
    return untrusted(pattern, 80)


def quote(line: str) -> str:
    """A matched line as an incident quotes it: control sequences stripped, secrets redacted,
    one line of at most MAX_QUOTE characters. Cut before redaction, whose cost grows with the
    text (a longer line's tail is not quoted)."""
    return untrusted(line[: MAX_QUOTE * 4], MAX_QUOTE)


def detail(rule: LogRule, line: str) -> str:
    """An incident's detail for a match of `rule` on `line`."""
    return f"log line matched /{shown(rule.match)}/ ({rule.origin}): {quote(line)}"
