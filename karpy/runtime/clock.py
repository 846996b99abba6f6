"""Wall-clock time, injected.

Conditions, TTLs and lease stamps need the wall clock, and tests need to move it at will. Everything
that stamps a time takes a `Clock`; durations and sleeps use the event loop's clock instead (house
rule 9).
"""

from __future__ import annotations

import datetime
from typing import Protocol

import attrs


class Clock(Protocol):
    """A source of timezone-aware UTC wall-clock time."""

    def now(self) -> datetime.datetime:
        """Return the current time in UTC (always timezone-aware)."""
        ...


@attrs.frozen
class SystemClock:
    """The real clock."""

    def now(self) -> datetime.datetime:
        return datetime.datetime.now(tz=datetime.UTC)  # noqa: TID251 -- the one real clock


@attrs.define
class FakeClock:
    """A clock that only moves when told to; for tests.

    Side effects: `step()` and `set()` mutate the instance.
    """

    _now: datetime.datetime = attrs.field(
        default=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
    )

    def __attrs_post_init__(self) -> None:
        _require_aware(self._now)

    def now(self) -> datetime.datetime:
        return self._now

    def step(self, delta: datetime.timedelta) -> datetime.datetime:
        """Move forward by `delta` (never backwards) and return the new time."""
        if delta < datetime.timedelta(0):
            msg = f"FakeClock.step: delta must not be negative, got {delta}"
            raise ValueError(msg)
        self._now += delta
        return self._now

    def set(self, value: datetime.datetime) -> None:
        """Jump to `value`, which must be timezone-aware."""
        _require_aware(value)
        self._now = value


def _require_aware(value: datetime.datetime) -> None:
    if value.tzinfo is None:
        msg = f"FakeClock: time must be timezone-aware, got naive {value.isoformat()}"
        raise ValueError(msg)
