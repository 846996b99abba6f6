"""The PodDisruptionBudget arithmetic of the Kubernetes disruption controller and Karpenter's
eviction rule, as `karpy simulate --consolidate` and the disruption controller share them."""

from __future__ import annotations

import pytest

from karpy.core.disruption.pdb import blocking, desired_healthy, disruptions_allowed, scaled


def test_percentages_round_up_and_integers_pass_through() -> None:
    assert scaled("25%", 10, field="f") == 3
    assert scaled("100%", 3, field="f") == 3
    assert scaled("0%", 3, field="f") == 0
    assert scaled(4, 3, field="f") == 4


@pytest.mark.parametrize("value", ["101%", "x%", "5", -1, True])
def test_bad_int_or_percent_is_refused_naming_the_field(value: object) -> None:
    with pytest.raises(ValueError, match=r"^spec\.minAvailable: "):
        scaled(value, 3, field="spec.minAvailable")  # type: ignore[arg-type]


def test_desired_healthy_from_min_available_or_max_unavailable() -> None:
    assert desired_healthy(min_available=2, max_unavailable=None, expected=5) == 2
    assert desired_healthy(min_available="50%", max_unavailable=None, expected=5) == 3
    assert desired_healthy(min_available=None, max_unavailable=1, expected=5) == 4
    assert desired_healthy(min_available=None, max_unavailable="30%", expected=5) == 3
    assert desired_healthy(min_available=None, max_unavailable=9, expected=5) == 0
    with pytest.raises(ValueError, match="cannot both be set"):
        desired_healthy(min_available=1, max_unavailable=1, expected=5)
    with pytest.raises(ValueError, match="set minAvailable or maxUnavailable"):
        desired_healthy(min_available=None, max_unavailable=None, expected=5)


def test_allowed_disruptions_are_healthy_less_desired_and_none_without_expected_pods() -> None:
    assert disruptions_allowed(healthy=5, desired=3, expected=5) == 2
    assert disruptions_allowed(healthy=2, desired=3, expected=5) == 0
    assert disruptions_allowed(healthy=0, desired=0, expected=0) == 0


def test_a_pod_is_blocked_by_a_pdb_allowing_none_or_by_two_pdbs() -> None:
    assert blocking([]) is None
    assert blocking([("ns/a", 1)]) is None
    assert blocking([("ns/a", 0)]) == "ns/a"
    assert blocking([("ns/a", 1), ("ns/b", 1)]) == "ns/a"
    assert blocking([("ns/a", 1), ("ns/b", 0)]) == "ns/a"
