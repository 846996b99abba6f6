"""karpy.testing.instancetypes makes instance types the way Karpenter's fake provider does."""

from __future__ import annotations

import pytest

from karpy.apis.v1 import labels as wk
from karpy.core.resources import parse_quantity
from karpy.testing.instancetypes import make_instance_types


def test_type_i_has_i_plus_one_vcpus_twice_the_gib_and_ten_times_the_pods() -> None:
    types = make_instance_types(400)
    assert len(types) == 400
    for i in (0, 1, 199, 399):
        it = types[i]
        assert it.name == f"fake-it-{i}"
        assert it.capacity.get_amount("cpu") == parse_quantity(i + 1)
        assert it.capacity.get_amount("memory") == parse_quantity(f"{2 * (i + 1)}Gi")
        assert it.capacity.get_amount("pods") == parse_quantity(10 * (i + 1))
        assert it.overhead.get_amount("cpu") == 100
        expected = 0.1 * (i + 1) + 0.1 * 2 * (i + 1) * 2**30 / 1e9
        assert all(o.price == pytest.approx(expected, abs=1e-6) for o in it.offerings)


def test_offerings_are_spot_in_two_zones_and_on_demand_in_three() -> None:
    (it,) = make_instance_types(1)
    pairs = sorted((o.capacity_type, o.zone) for o in it.offerings)
    assert pairs == [
        (wk.CAPACITY_TYPE_ON_DEMAND, "test-zone-1"),
        (wk.CAPACITY_TYPE_ON_DEMAND, "test-zone-2"),
        (wk.CAPACITY_TYPE_ON_DEMAND, "test-zone-3"),
        (wk.CAPACITY_TYPE_SPOT, "test-zone-1"),
        (wk.CAPACITY_TYPE_SPOT, "test-zone-2"),
    ]
    assert it.requirements.single_value(wk.LABEL_INSTANCE_TYPE) == "fake-it-0"


def test_negative_counts_are_rejected() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        make_instance_types(-1)
