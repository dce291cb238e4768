"""The bounds of every value that a container's labels can override, shared with the config keys
they override: one table, so a label can never ask for more than the operator could configure.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from guardian.core.durations import format_duration, parse_duration


@dataclass(frozen=True)
class IntRange:
    lo: int
    hi: int

    @property
    def allowed(self) -> str:
        return f"an integer from {self.lo} to {self.hi}"

    def parse(self, raw: object) -> int:
        """An int or its decimal text within [lo, hi]; ValueError otherwise."""
        if isinstance(raw, str):
            text = raw.strip()
            # isascii: str.isdigit() accepts "²", which int() refuses.
            if not (text.isascii() and text.lstrip("-").isdigit()) or len(text) > 20:
                raise ValueError
            raw = int(text)
        if isinstance(raw, bool) or not isinstance(raw, int) or not self.lo <= raw <= self.hi:
            raise ValueError
        return raw


@dataclass(frozen=True)
class DurationRange:
    lo: timedelta
    hi: timedelta

    @property
    def allowed(self) -> str:
        lo, hi = format_duration(self.lo), format_duration(self.hi)
        return f"a duration from {lo} to {hi} (e.g. 500ms, 30s, 5m, 1h)"

    def parse(self, raw: object) -> timedelta:
        """A duration (core.durations) within [lo, hi]; ValueError otherwise."""
        value = parse_duration(raw)
        if not self.lo <= value <= self.hi:
            raise ValueError
        return value


Range = IntRange | DurationRange

S, M, H = timedelta(seconds=1), timedelta(minutes=1), timedelta(hours=1)
YEAR = timedelta(days=365)


@dataclass(frozen=True)
class Limit:
    key: str  # the config key
    label: str  # the label that overrides it for one container
    range: Range


LIMITS: tuple[Limit, ...] = (
    Limit("restart.max_attempts", "guardian.max_attempts", IntRange(1, 1000)),
    Limit("restart.cooldown", "guardian.cooldown", DurationRange(timedelta(0), YEAR)),
    # Docker waits this long for a clean stop on every restart: the longest a restart can take.
    Limit("restart.stop_timeout", "guardian.stop_timeout", DurationRange(timedelta(0), 10 * M)),
    # Patience before acting on a problem: at most a day (a longer wait is a person's job).
    Limit("restart.act_after", "guardian.act_after", DurationRange(timedelta(0), 24 * H)),
    Limit("probe.period", "guardian.probe.period", DurationRange(S, H)),
    Limit("probe.timeout", "guardian.probe.timeout", DurationRange(timedelta(milliseconds=100), M)),
    Limit("probe.failure_threshold", "guardian.probe.failure_threshold", IntRange(1, 100)),
    Limit("probe.success_threshold", "guardian.probe.success_threshold", IntRange(1, 100)),
)
BY_KEY: dict[str, Limit] = {limit.key: limit for limit in LIMITS}
BY_LABEL: dict[str, Limit] = {limit.label: limit for limit in LIMITS}


def from_label(label: str, raw: str) -> tuple[int | timedelta | None, str | None]:
    """(the bounded value of `label`, None) or (None, the one-line warning for a bad value)."""
    limit = BY_LABEL[label]
    try:
        return limit.range.parse(raw), None
    except ValueError:
        return None, f"label {label}={raw[:40]!r}: expected {limit.range.allowed}"
