"""When unchanged facts could be decided differently: a scheduled budget turning, a pod's
do-not-disrupt duration running out (what ends the disruption pass's rest)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from karpy.core.disruption.budgets import BudgetSpec, budget_active
from karpy.core.disruption.candidates import NodeFacts, PodFacts, PoolDisruption
from karpy.core.disruption.due import budget_turns, next_due

NOW = 1_800_000_030.0  # 30 s into a minute


def test_an_unscheduled_or_invalid_budget_never_turns() -> None:
    assert budget_turns(BudgetSpec(nodes="10%"), now=NOW) is None
    broken = BudgetSpec(schedule="@daily", duration=600.0, error="bad")
    assert budget_turns(broken, now=NOW) is None


def test_a_scheduled_budget_turns_at_the_next_minute_or_when_its_oldest_minute_leaves() -> None:
    whole = BudgetSpec(nodes="0", schedule="* * * * *", duration=600.0)
    assert budget_turns(whole, now=NOW) == NOW + 30  # the next minute boundary
    odd = BudgetSpec(nodes="0", schedule="* * * * *", duration=585.0)
    assert budget_turns(odd, now=NOW) == NOW + 15  # 585 s after the minute 570 s ago ends


@given(
    minute=st.integers(min_value=0, max_value=59),
    duration=st.integers(min_value=60, max_value=7200),
    offset=st.floats(min_value=0, max_value=86_400, allow_nan=False),
)
def test_a_budget_does_not_turn_before_its_next_turn(
    minute: int, duration: int, offset: float
) -> None:
    """Sampled between now and the turn, the budget is active exactly as it is now."""
    budget = BudgetSpec(nodes="0", schedule=f"{minute} * * * *", duration=float(duration))
    now = 1_800_000_000.0 + offset
    turn = budget_turns(budget, now=now)
    assert turn is not None
    assert turn > now
    was = budget_active(budget, reason="Underutilized", now=now)
    for fraction in (0.25, 0.5, 0.99):
        at = now + (turn - now) * fraction
        assert budget_active(budget, reason="Underutilized", now=at) == was


def test_next_due_is_the_first_budget_turn_or_do_not_disrupt_end() -> None:
    pods = (
        PodFacts(name="p", uid="u", do_not_disrupt_until=NOW + 5),
        PodFacts(name="q", uid="v", do_not_disrupt_until=NOW - 5),
    )
    node = NodeFacts(nodeclaim="c", node="n", nodepool="p", created_at=NOW - 100, pods=pods)
    plain = {"p": PoolDisruption(consolidate_after=30.0)}
    assert next_due([node], plain, now=NOW) == NOW + 5
    assert next_due([], plain, now=NOW) is None
    scheduled = {
        "p": PoolDisruption(
            consolidate_after=30.0,
            budgets=(BudgetSpec(nodes="0", schedule="@hourly", duration=3600.0),),
        )
    }
    assert next_due([], scheduled, now=NOW) == NOW + 30
