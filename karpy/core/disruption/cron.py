"""A pure 5-field cron matcher (UTC), for disruption budget windows.

Budgets are active for `duration` after each hit of `schedule`. Only minute matching is needed:
a budget is active at `now` when some minute in (now - duration, now] matches. Times are UTC
epoch seconds and the calendar is computed arithmetically, so the core stays pure (no clock, no
datetime, no cron library) and the accepted syntax is exactly Karpenter's: numbers, `*`, ranges,
steps, lists, month/day names, and the @yearly/@monthly/... macros.
"""

from __future__ import annotations

from typing import Final

import attrs

MACROS: Final = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS: Final = (
    "jan",
    "feb",
    "mar",
    "apr",
    "may",
    "jun",
    "jul",
    "aug",
    "sep",
    "oct",
    "nov",
    "dec",
)
_DAYS: Final = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# (low, high, names offset by low) per field: minute, hour, day of month, month, day of week
_FIELDS: Final[tuple[tuple[str, int, int, tuple[str, ...]], ...]] = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day-of-month", 1, 31, ()),
    ("month", 1, 12, _MONTHS),
    ("day-of-week", 0, 7, _DAYS),
)


class CronError(ValueError):
    """A schedule that is not a valid 5-field cron expression or macro."""


@attrs.frozen
class Schedule:
    """A parsed cron schedule: the allowed values of each field."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    days_any: bool
    weekdays_any: bool

    def matches(self, epoch_minute: int) -> bool:
        """Whether the UTC minute `epoch_minute` (minutes since 1970-01-01) is a hit.
        Day-of-month and day-of-week are OR-ed when both are restricted, as in standard cron."""
        days, minute_of_day = divmod(epoch_minute, 24 * 60)
        hour, minute = divmod(minute_of_day, 60)
        if minute not in self.minutes or hour not in self.hours:
            return False
        _, month, day = civil_from_days(days)
        if month not in self.months:
            return False
        day_ok = day in self.days
        weekday_ok = (days + 4) % 7 in self.weekdays  # 1970-01-01 was a Thursday (4)
        if self.days_any or self.weekdays_any:
            return day_ok and weekday_ok
        return day_ok or weekday_ok


def _value(token: str, *, low: int, names: tuple[str, ...], name: str) -> int:
    lowered = token.lower()
    if lowered in names:
        return names.index(lowered) + low
    if not token.isdigit():
        msg = f"cron {name} field: {token!r} is not a number"
        raise CronError(msg)
    return int(token)


def _field(text: str, *, name: str, low: int, high: int, names: tuple[str, ...]) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        base, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) == 0:
                msg = f"cron {name} field: step {step_text!r} must be a positive number"
                raise CronError(msg)
            step = int(step_text)
        if base in ("*", "?"):
            start, end = low, high
        elif "-" in base:
            first, _, last = base.partition("-")
            start = _value(first, low=low, names=names, name=name)
            end = _value(last, low=low, names=names, name=name)
        else:
            start = _value(base, low=low, names=names, name=name)
            end = high if step_text else start
        if not low <= start <= end <= high:
            msg = f"cron {name} field: {part!r} is outside {low}-{high}"
            raise CronError(msg)
        values.update(range(start, end + 1, step))
    return frozenset(values)


def parse_schedule(text: str) -> Schedule:
    """Parse `text`; raises CronError naming the bad field."""
    expanded = MACROS.get(text.strip().lower(), text)
    parts = expanded.split()
    if len(parts) != len(_FIELDS):
        msg = f"cron schedule {text!r} must have 5 fields or be a macro like @daily"
        raise CronError(msg)
    parsed = [
        _field(part, name=name, low=low, high=high, names=names)
        for part, (name, low, high, names) in zip(parts, _FIELDS, strict=True)
    ]
    weekdays = frozenset(d % 7 for d in parsed[4])
    return Schedule(
        minutes=parsed[0],
        hours=parsed[1],
        days=parsed[2],
        months=parsed[3],
        weekdays=weekdays,
        days_any=parts[2] in ("*", "?"),
        weekdays_any=parts[4] in ("*", "?"),
    )


def civil_from_days(days: int) -> tuple[int, int, int]:
    """(year, month, day) of the proleptic Gregorian date `days` after 1970-01-01."""
    shifted = days + 719468
    era = shifted // 146097
    day_of_era = shifted - era * 146097
    year_of_era = (
        day_of_era - day_of_era // 1460 + day_of_era // 36524 - day_of_era // 146096
    ) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    month_index = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * month_index + 2) // 5 + 1
    month = month_index + 3 if month_index < 10 else month_index - 9
    year = year_of_era + era * 400 + (1 if month <= 2 else 0)
    return year, month, day


def active(schedule: Schedule, duration: float, *, now: float) -> bool:
    """Whether a window of `duration` seconds opened by a hit of `schedule` contains `now`
    (UTC epoch seconds): some whole minute in (now - duration, now] matches."""
    minute = int(now // 60)
    earliest = now - duration
    while minute * 60 > earliest:
        if schedule.matches(minute):
            return True
        minute -= 1
    return False
