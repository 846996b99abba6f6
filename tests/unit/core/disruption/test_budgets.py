"""Budgets and cron windows: percent rounding, most restrictive wins, reasons, windows, fail
closed; the cron calendar arithmetic is checked against the standard library."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.core.disruption.budgets import BudgetSpec, allowance, budget_limit
from karpy.core.disruption.cron import CronError, active, civil_from_days, parse_schedule

# 2026-01-05 is a Monday.
MONDAY_0905 = datetime.datetime(2026, 1, 5, 9, 5, tzinfo=datetime.UTC).timestamp()


@pytest.mark.parametrize(
    ("nodes", "total", "expected"),
    [
        pytest.param("3", 10, 3, id="integer"),
        pytest.param("10%", 10, 1, id="percent-exact"),
        pytest.param("10%", 11, 2, id="percent-rounds-up"),
        pytest.param("0%", 5, 0, id="zero-percent"),
        pytest.param("100%", 7, 7, id="all"),
        pytest.param("0", 7, 0, id="zero"),
    ],
)
def test_budget_limit(nodes: str, total: int, expected: int) -> None:
    assert budget_limit(BudgetSpec(nodes=nodes), total=total) == expected


def test_most_restrictive_active_budget_wins_and_deleting_counts() -> None:
    budgets = [BudgetSpec(nodes="50%"), BudgetSpec(nodes="3"), BudgetSpec(nodes="100%")]
    grant = allowance(budgets, reason="Empty", total=10, disrupting=1, now=MONDAY_0905)
    assert (grant.limit, grant.allowed, grant.error) == (3, 2, None)


def test_budget_for_other_reasons_does_not_constrain_empty() -> None:
    budgets = [BudgetSpec(nodes="0", reasons=frozenset({"Drifted"}))]
    assert allowance(budgets, reason="Empty", total=4, disrupting=0, now=MONDAY_0905).allowed == 4
    budgets = [BudgetSpec(nodes="0", reasons=frozenset({"Empty"}))]
    assert allowance(budgets, reason="Empty", total=4, disrupting=0, now=MONDAY_0905).allowed == 0


@pytest.mark.parametrize(
    ("schedule", "duration", "expected"),
    [
        pytest.param("0 9 * * *", 600.0, True, id="inside-daily-window"),
        pytest.param("0 9 * * *", 300.0, False, id="window-just-closed"),
        pytest.param("0 9 * * 1-5", 3600.0, True, id="weekday-range"),
        pytest.param("0 9 * * sat,sun", 3600.0, False, id="weekend-only"),
        pytest.param("@daily", 10 * 3600.0, True, id="macro"),
        pytest.param("*/15 * * * *", 60.0, False, id="step-miss"),
        pytest.param("5 9 5 jan *", 60.0, True, id="month-name-and-day"),
    ],
)
def test_scheduled_budget_is_active_only_in_its_window(
    schedule: str, duration: float, expected: bool
) -> None:
    budgets = [BudgetSpec(nodes="0", schedule=schedule, duration=duration)]
    grant = allowance(budgets, reason="Empty", total=4, disrupting=0, now=MONDAY_0905)
    assert (grant.allowed == 0) is expected


@pytest.mark.parametrize(
    "budget",
    [
        pytest.param(BudgetSpec(nodes="lots"), id="bad-nodes"),
        pytest.param(BudgetSpec(nodes="1", schedule="61 * * * *", duration=60.0), id="bad-cron"),
        pytest.param(BudgetSpec(nodes="1", schedule="@daily"), id="schedule-without-duration"),
        pytest.param(BudgetSpec(error="budgets[].duration: 'x' is not a duration"), id="error"),
    ],
)
def test_invalid_budget_fails_closed_naming_the_field(budget: BudgetSpec) -> None:
    grant = allowance([budget], reason="Empty", total=4, disrupting=0, now=MONDAY_0905)
    assert grant.allowed == 0
    assert grant.error is not None
    assert "budgets[]" in grant.error


def test_bad_cron_names_the_field() -> None:
    with pytest.raises(CronError, match="hour"):
        parse_schedule("0 24 * * *")
    with pytest.raises(CronError, match="5 fields"):
        parse_schedule("0 9 * *")


@given(st.integers(min_value=-700_000, max_value=800_000))
def test_civil_from_days_matches_the_calendar(days: int) -> None:
    date = datetime.date(1970, 1, 1) + datetime.timedelta(days=days)
    assert civil_from_days(days) == (date.year, date.month, date.day)


@given(
    st.integers(min_value=0, max_value=4_000_000_000).map(
        lambda s: datetime.datetime.fromtimestamp(s, tz=datetime.UTC)
    )
)
def test_hourly_window_of_one_minute_matches_only_minute_zero(at: datetime.datetime) -> None:
    assert active(parse_schedule("@hourly"), 60.0, now=at.timestamp()) is (at.minute == 0)
