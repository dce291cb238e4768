"""Crontab lines as operators write them: minute hour day-of-month month day-of-week, with `*`,
`a-b`, `/n`, lists and names; 0 and 7 are Sunday; when both day fields are restricted, a day
matching either counts (Vixie cron's rule). Pure: a parsed line says which days and times match.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_LONGEST_MONTH = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


MAX_QUOTED = 40  # characters of a field quoted back in an error: a field can be any length


def _quoted(text: str) -> str:
    return repr(text if len(text) <= MAX_QUOTED else text[: MAX_QUOTED - 1] + "…")


@dataclass(frozen=True)
class _Field:
    name: str
    lo: int
    hi: int
    names: tuple[str, ...] = ()  # names[i] stands for lo + i

    @property
    def allowed(self) -> str:
        named = f" or {self.names[0]}-{self.names[-1]}" if self.names else ""
        return f"{self.lo}-{self.hi}{named}"

    def value(self, text: str) -> int:
        if text.isascii() and text.isdigit() and len(text) <= 2:
            number = int(text)
            if self.lo <= number <= self.hi:
                return number
        elif text.lower() in self.names:
            return self.lo + self.names.index(text.lower())
        raise ValueError(f"{self.name} {_quoted(text)}: expected {self.allowed}")

    def parse(self, text: str) -> frozenset[int]:
        """The values a crontab field stands for: `*`, `a`, `a-b`, each with `/step`, in a list."""
        values: set[int] = set()
        for part in text.split(","):
            span, _, step_text = part.partition("/")
            if span == "*":
                first, last = self.lo, self.hi
            else:
                first_text, dash, last_text = span.partition("-")
                first = self.value(first_text)
                # "a/n" runs from a to the field's end, as APScheduler and Vixie cron read it.
                last = self.value(last_text) if dash else (self.hi if step_text else first)
                if first > last:
                    raise ValueError(f"{self.name} {_quoted(part)}: the range runs backwards")
            step = 1
            if step_text:
                if not (step_text.isascii() and step_text.isdigit() and 0 < int(step_text) <= 99):
                    raise ValueError(f"{self.name} {_quoted(part)}: expected a step from 1 to 99")
                step = int(step_text)
            values.update(range(first, last + 1, step))
        return frozenset(values)


_FIELDS = (
    _Field("minute", 0, 59),
    _Field("hour", 0, 23),
    _Field("day-of-month", 1, 31),
    _Field("month", 1, 12, _MONTHS),
    _Field("day-of-week", 0, 7, _WEEKDAYS),  # 7 is Sunday as well
)


@dataclass(frozen=True)
class Cron:
    """A crontab line read into the values each field stands for."""

    text: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    either_day: bool  # both day fields restricted: a day matching either counts (crontab's rule)
    every_hour: bool  # a wildcard hour field: a repeated hour's times start in both passes

    @classmethod
    def parse(cls, text: str) -> Cron:
        """Raises ValueError naming the field and what it allows."""
        parts = text.split()
        if len(parts) != 5:
            raise ValueError(
                f"expected 5 fields (minute hour day-of-month month day-of-week), got {len(parts)}"
            )
        minute, hour, day, month, weekday = (
            field.parse(part) for field, part in zip(_FIELDS, parts, strict=True)
        )
        cron = cls(
            text=" ".join(parts),
            minutes=tuple(sorted(minute)),
            hours=tuple(sorted(hour)),
            days=day,
            months=month,
            weekdays=frozenset(d % 7 for d in weekday),
            either_day=not parts[2].startswith("*") and not parts[4].startswith("*"),
            every_hour=parts[1].startswith("*"),
        )
        if not cron.either_day and not any(
            d <= _LONGEST_MONTH[m - 1] for m in cron.months for d in cron.days
        ):
            raise ValueError(f"{_quoted(cron.text)} never happens: no such day in those months")
        return cron

    def on(self, day: date) -> bool:
        """Whether windows start on this calendar day."""
        if day.month not in self.months:
            return False
        by_date = day.day in self.days
        by_weekday = day.isoweekday() % 7 in self.weekdays
        return by_date or by_weekday if self.either_day else by_date and by_weekday
