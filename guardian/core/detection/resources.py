"""Resource rules: memory above a size, or CPU above a share of a core, held for a duration.

Written as labels on a container (`guardian.memory.max=256MiB`, `guardian.memory.for=2m`,
`guardian.cpu.max=90%`, `guardian.cpu.for=5m`) or as config rules by name glob
(`resources.rules`). Each limit is judged on its own: a container breaches when any limit that
applies to it is exceeded at every sample for its whole `for` (service.watchers.resources samples).
Labels only add limits for their own container; they never lift the operator's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from fnmatch import fnmatchcase

from guardian.core.durations import format_duration, parse_duration

MEMORY_MAX = "guardian.memory.max"
MEMORY_FOR = "guardian.memory.for"
CPU_MAX = "guardian.cpu.max"
CPU_FOR = "guardian.cpu.for"
LABELS = (MEMORY_MAX, MEMORY_FOR, CPU_MAX, CPU_FOR)
CONFIG_KEYS = ("containers", "memory_max", "memory_for", "cpu_max", "cpu_for")

MEMORY, CPU = "memory", "cpu"
DEFAULT_FOR = {MEMORY: timedelta(minutes=1), CPU: timedelta(minutes=5)}  # without a `for`
MIN_SIZE = 1024 * 1024  # 1 MiB
MAX_SIZE = 1 << 50  # 1 PiB: beyond any host
MAX_PERCENT = 25600.0  # 256 cores
MAX_FOR = timedelta(days=1)
MAX_TEXT = 200  # a label value, a glob

_UNITS = {
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}
_SIZE = re.compile(r"(\d{1,12}(?:\.\d{1,6})?) ?([KMGT]i?B|B)", re.IGNORECASE)
_PERCENT = re.compile(r"(\d{1,6}(?:\.\d{1,3})?) ?%")
SIZE_ALLOWED = "a size from 1MiB to 1PiB such as 256MiB, 2GiB or 500MB"
PERCENT_ALLOWED = (
    f"a share of one core above 0% and at most {MAX_PERCENT:g}% such as 90% (250%: 2.5 cores)"
)
FOR_ALLOWED = f"a duration of at most {format_duration(MAX_FOR)} such as 30s, 2m or 1h"


class ResourceError(ValueError):
    """A bad resource rule; the message names the key or label and what is allowed."""


@dataclass(frozen=True)
class Limit:
    """One limit on one container: `kind` (memory or cpu) above `max` (bytes, or percent of
    one core) at every sample for `held` at least. `origin` names where it was written, for
    the incident's detail ("guardian.memory.max", "resources.rules[0].memory_max")."""

    kind: str
    max: float
    held: timedelta
    origin: str

    def describe(self) -> str:
        shown = format_size(int(self.max)) if self.kind == MEMORY else f"{self.max:g}%"
        return f"{self.origin} {shown} for {format_duration(self.held)}"


@dataclass(frozen=True)
class ResourceRule:
    """A config rule: the containers its glob matches get its limits."""

    containers: str
    limits: tuple[Limit, ...]

    def applies_to(self, name: str) -> bool:
        return fnmatchcase(name, self.containers)


def parse_size(raw: object) -> int:
    """Bytes of "256MiB", "2GiB", "500MB" (units B, KB..TB by 1000, KiB..TiB by 1024)."""
    if not isinstance(raw, str) or len(raw) > 40:
        raise ValueError(f"expected {SIZE_ALLOWED}")
    match = _SIZE.fullmatch(raw.strip())
    if match is None:
        raise ValueError(f"expected {SIZE_ALLOWED}")
    size = int(float(match.group(1)) * _UNITS[match.group(2).lower()])
    if not MIN_SIZE <= size <= MAX_SIZE:
        raise ValueError(f"expected {SIZE_ALLOWED}")
    return size


def parse_percent(raw: object) -> float:
    """The percent of one core of "90%" (above 100% for more than one core)."""
    if not isinstance(raw, str) or len(raw) > 20:
        raise ValueError(f"expected {PERCENT_ALLOWED}")
    match = _PERCENT.fullmatch(raw.strip())
    if match is None:
        raise ValueError(f"expected {PERCENT_ALLOWED}")
    value = float(match.group(1))
    if not 0 < value <= MAX_PERCENT:
        raise ValueError(f"expected {PERCENT_ALLOWED}")
    return value


def parse_for(raw: object) -> timedelta:
    """How long a breach must hold: a duration from 0s to a day."""
    if isinstance(raw, str) and len(raw) > 40:
        raise ValueError(f"expected {FOR_ALLOWED}")
    try:
        held = parse_duration(raw)
    except ValueError:
        raise ValueError(f"expected {FOR_ALLOWED}") from None
    if held > MAX_FOR:
        raise ValueError(f"expected {FOR_ALLOWED}")
    return held


def format_size(size: int) -> str:
    """For people: 301 MiB, 1.5 GiB, 900 KiB."""
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= scale:
            value = size / scale
            return f"{value:.1f} {unit}" if value < 10 and unit == "GiB" else f"{value:.0f} {unit}"
    return f"{size} B"


def _parse_max(kind: str, raw: object) -> float:
    return float(parse_size(raw)) if kind == MEMORY else parse_percent(raw)


def from_labels(labels: Mapping[str, str]) -> tuple[tuple[Limit, ...], tuple[str, ...]]:
    """The limits a container's labels ask for, and one warning per bad label (that limit is
    then ignored; the container's other limits and the operator's still apply)."""
    limits: list[Limit] = []
    warnings: list[str] = []
    for kind, max_label, for_label in ((MEMORY, MEMORY_MAX, MEMORY_FOR), (CPU, CPU_MAX, CPU_FOR)):
        raw_max, raw_for = labels.get(max_label), labels.get(for_label)
        if raw_max is None:
            if raw_for is not None:
                warnings.append(f"label {for_label}: ignored without {max_label}")
            continue
        try:
            top = _parse_max(kind, raw_max)
        except ValueError as exc:
            warnings.append(f"label {max_label}={raw_max[:40]!r}: {exc}; rule ignored")
            continue
        try:
            held = DEFAULT_FOR[kind] if raw_for is None else parse_for(raw_for)
        except ValueError as exc:
            shown = (raw_for or "")[:40]
            warnings.append(f"label {for_label}={shown!r}: {exc}; rule ignored")
            continue
        limits.append(Limit(kind, top, held, max_label))
    return tuple(limits), tuple(warnings)


def from_config(entry: Mapping[str, object], where: str, origin: str = "") -> ResourceRule:
    """A rule from a config entry {containers, memory_max, memory_for, cpu_max, cpu_for};
    `where` names it in errors ("[0]"), `origin` in incidents ("resources.rules[0]"; default
    `where`). Raises ResourceError naming the key."""
    unknown = sorted(str(k) for k in entry if k not in CONFIG_KEYS)
    if unknown:
        raise ResourceError(
            f"{where}.{unknown[0][:40]}: unknown key; expected {', '.join(CONFIG_KEYS)}"
        )
    glob = entry.get("containers")
    if not isinstance(glob, str) or not glob.strip() or len(glob) > MAX_TEXT:
        raise ResourceError(
            f"{where}.containers: expected a container name or glob such as db-* "
            f"(at most {MAX_TEXT} characters)"
        )
    limits: list[Limit] = []
    for kind in (MEMORY, CPU):
        key_max, key_for = f"{kind}_max", f"{kind}_for"
        if key_max not in entry:
            if key_for in entry:
                raise ResourceError(f"{where}.{key_for}: given without {key_max}")
            continue
        key = key_max
        try:
            top = _parse_max(kind, entry[key_max])
            key = key_for
            held = parse_for(entry[key_for]) if key_for in entry else DEFAULT_FOR[kind]
        except ValueError as exc:
            raise ResourceError(f"{where}.{key}: {exc}") from None
        limits.append(Limit(kind, top, held, f"{origin or where}.{key_max}"))
    if not limits:
        raise ResourceError(f"{where}: expected memory_max, cpu_max or both")
    return ResourceRule(glob, tuple(limits))


def limits_for(name: str, rules: Iterable[ResourceRule]) -> tuple[Limit, ...]:
    """The operator's limits on the container called `name`."""
    return tuple(limit for rule in rules if rule.applies_to(name) for limit in rule.limits)
