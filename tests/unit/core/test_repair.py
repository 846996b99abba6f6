"""Node repair decisions: the policy whose toleration runs out first, and the pool threshold."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.core.repair import (
    ConditionState,
    Policy,
    allowed_unhealthy,
    repair_allowed,
    unhealthy,
)

POLICIES = (
    Policy("Ready", "False", 1800.0),
    Policy("Ready", "Unknown", 1800.0),
    Policy("AcceleratedHardwareReady", "False", 600.0),
)


def test_a_healthy_node_matches_no_policy() -> None:
    assert unhealthy([ConditionState("Ready", "True", 0.0)], POLICIES) is None


def test_the_earliest_toleration_end_wins() -> None:
    found = unhealthy(
        [
            ConditionState("Ready", "False", 100.0),
            ConditionState("AcceleratedHardwareReady", "False", 500.0),
        ],
        POLICIES,
    )
    assert found is not None
    assert found.policy.type == "AcceleratedHardwareReady"
    assert found.repair_at == 1100.0


@pytest.mark.parametrize(
    ("threshold", "total", "allowed"),
    [
        pytest.param("20%", 3, 1, id="rounds-up"),
        pytest.param("20%", 10, 2, id="exact"),
        pytest.param("20%", 0, 0, id="empty"),
        pytest.param("100%", 4, 4, id="all"),
        pytest.param("2", 50, 2, id="count"),
    ],
)
def test_allowed_unhealthy_is_a_count_or_a_percentage_rounded_up(
    threshold: str, total: int, allowed: int
) -> None:
    assert allowed_unhealthy(threshold, total) == allowed


@given(st.integers(0, 200), st.integers(0, 100))
def test_repair_is_allowed_exactly_up_to_the_threshold(total: int, percent: int) -> None:
    limit = allowed_unhealthy(f"{percent}%", total)
    assert repair_allowed(unhealthy_count=limit, total=total, threshold=f"{percent}%")
    assert not repair_allowed(unhealthy_count=limit + 1, total=total, threshold=f"{percent}%")


@pytest.mark.parametrize("bad", ["x", "%", "1.5", "-1"])
def test_a_bad_threshold_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid threshold"):
        allowed_unhealthy(bad, 10)
