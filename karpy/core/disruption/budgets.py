"""Disruption budgets: how many more of a NodePool's NodeClaims may start disrupting now. Pure:
values in, values out; `now` is UTC epoch seconds passed by the caller.

Karpenter's rules: each budget allows `nodes` NodeClaims (an integer, or a percentage of the
pool's NodeClaims rounded up) to be disrupting at once; a budget with `schedule` + `duration`
only constrains inside its UTC cron window; a budget with `reasons` only constrains those
reasons; the most restrictive active budget wins; NodeClaims already being deleted count against
it. An invalid budget fails closed (allows nothing), so a typo never unleashes disruption.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import attrs

from karpy.core.disruption.cron import CronError, active, parse_schedule

PERCENT_MAX = 100


@attrs.frozen(kw_only=True)
class BudgetSpec:
    """One budget of a NodePool, as the core sees it.

    `nodes` is Karpenter's string ("3" or "10%"); `duration` is in seconds (None with no
    schedule); `reasons` are the disruption reasons it limits (empty = all); `error` carries a
    translation failure (e.g. an unparsable duration), which makes the budget fail closed.
    """

    nodes: str = "10%"
    schedule: str | None = None
    duration: float | None = None
    reasons: frozenset[str] = frozenset()
    error: str | None = None


@attrs.frozen(kw_only=True)
class Allowance:
    """The outcome for one pool and reason: how many more may start disrupting, and why."""

    allowed: int
    limit: int
    disrupting: int
    error: str | None = None


def count_or_percent(text: str, total: int) -> int:
    """Kubernetes' int-or-percent against `total`: "3" is 3, "25%" is a quarter of `total`
    rounded up (budgets' `nodes`, a PDB's `minAvailable`/`maxUnavailable`). Raises ValueError
    for anything but digits or a percentage 0%-100%; callers name the field."""
    value = text.strip()
    if value.endswith("%"):
        number = value[:-1]
        if not number.isdigit() or int(number) > PERCENT_MAX:
            msg = f"{text!r} is not a percentage 0%-100%"
            raise ValueError(msg)
        return math.ceil(int(number) * total / PERCENT_MAX)
    if not value.isdigit():
        msg = f"{text!r} is not an integer or a percentage"
        raise ValueError(msg)
    return int(value)


def budget_limit(budget: BudgetSpec, *, total: int) -> int:
    """The NodeClaims `budget` lets be disrupting in a pool of `total`; raises ValueError naming
    the field when `nodes` is neither an integer nor a percentage."""
    try:
        return count_or_percent(budget.nodes, total)
    except ValueError as error:
        raise ValueError(f"budgets[].nodes: {error}") from None


def budget_active(budget: BudgetSpec, *, reason: str, now: float) -> bool:
    """Whether `budget` constrains `reason` at `now`; raises ValueError naming the field when
    the budget is invalid (translation error, bad cron, or only one of schedule/duration)."""
    if budget.error is not None:
        raise ValueError(budget.error)
    if budget.reasons and reason not in budget.reasons:
        return False
    if budget.schedule is None and budget.duration is None:
        return True
    if budget.schedule is None or budget.duration is None:
        msg = "budgets[]: 'schedule' must be set with 'duration'"
        raise ValueError(msg)
    try:
        schedule = parse_schedule(budget.schedule)
    except CronError as error:
        msg = f"budgets[].schedule: {error}"
        raise ValueError(msg) from error
    return active(schedule, budget.duration, now=now)


def allowance(
    budgets: Sequence[BudgetSpec],
    *,
    reason: str,
    total: int,
    disrupting: int,
    now: float,
) -> Allowance:
    """How many more of a pool's `total` NodeClaims may start disrupting for `reason`, with
    `disrupting` of them already being deleted. No active budget means no limit (`total`)."""
    limit = total
    try:
        for budget in budgets:
            if budget_active(budget, reason=reason, now=now):
                limit = min(limit, budget_limit(budget, total=total))
    except ValueError as error:
        return Allowance(allowed=0, limit=0, disrupting=disrupting, error=str(error))
    return Allowance(allowed=max(0, limit - disrupting), limit=limit, disrupting=disrupting)


@attrs.frozen(kw_only=True)
class PoolCount:
    """A NodePool's NodeClaims as budgets count them: `total` managed and Initialized,
    `disrupting` of those already deleting, in a disruption command, or not Ready."""

    total: int = 0
    disrupting: int = 0


def allowances(
    budgets: Mapping[str, Sequence[BudgetSpec]],
    counts: Mapping[str, PoolCount],
    *,
    reason: str,
    now: float,
) -> dict[str, Allowance]:
    """Each NodePool's allowance for `reason` (Karpenter's BuildDisruptionBudgetMapping)."""
    found: dict[str, Allowance] = {}
    for pool, specs in sorted(budgets.items()):
        count = counts.get(pool, PoolCount())
        found[pool] = allowance(
            specs, reason=reason, total=count.total, disrupting=count.disrupting, now=now
        )
    return found
