"""The offline EC2 catalog (moto's DescribeInstanceTypes snapshot through the provider's code):
the same instance types the provider builds against EC2, and a plan on it that the balanced
packing makes no dearer than Karpenter's order."""

from __future__ import annotations

import random

from karpy.apis.v1 import labels as wk
from karpy.core.scheduling import Packing, SchedulerOptions, solve
from karpy_aws_emulator.catalog import offline_instance_types
from tests.unit.core import builders as b
from tests.unit.core.validate import check

MIB = 1024 * 1024 * 1000  # core Resources hold milli-units


def test_the_offline_catalog_is_what_the_provider_builds_for_ec2() -> None:
    catalog = offline_instance_types()
    assert len(catalog) > 1000
    (m5,) = [t for t in catalog if t.name == "m5.large"]
    # As test_aws_instancetypes.py derives it: 29 ENI-limited pods, AL2023 overhead.
    assert m5.capacity.get_amount("pods") == 29_000
    assert m5.allocatable.get_amount("cpu") == 1930
    assert m5.allocatable.get_amount("memory") == (8192 - 615 - 574 - 100) * MIB
    zones = {o.zone for o in m5.offerings}
    assert {"us-east-1a", "us-east-1b"} <= zones
    assert all(o.price > 0 for o in m5.offerings if o.available)
    spot = min(o.price for o in m5.offerings if o.capacity_type == wk.CAPACITY_TYPE_SPOT)
    on_demand = min(o.price for o in m5.offerings if o.capacity_type == "on-demand")
    assert spot < on_demand


def test_balanced_packing_is_no_dearer_than_karpenters_order_on_ec2_types() -> None:
    catalog = offline_instance_types()
    rng = random.Random(5)  # noqa: S311 - seeded test data
    pending = [
        b.pod(f"p-{i}", cpu=f"{rng.randint(1, 30) * 100}m", memory=f"{rng.randint(1, 48) * 128}Mi")
        for i in range(600)
    ]
    snap = b.snapshot([b.nodepool()], catalog)
    balanced = solve(snap, pending, SchedulerOptions())
    karpenter = solve(snap, pending, SchedulerOptions(packing=Packing.KARPENTER))
    check(snap, pending, balanced, 60)
    assert not karpenter.unplaced
    assert balanced.price <= karpenter.price
