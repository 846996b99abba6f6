"""EC2's instance types offline: moto's copy of DescribeInstanceTypes, through the provider's code.

Benchmarks and tests need a catalog shaped like the real one — 1,400 types, their true vCPU,
memory, ENI limits and architectures, and the zones each is offered in — without an account.
moto ships exactly that data (a snapshot of DescribeInstanceTypes and
DescribeInstanceTypeOfferings per region). This module feeds it through the AWS provider's own
parsing, capacity, overhead and offering code (``build_instance_types`` and
``to_core_instance_type``), so the instance types are the ones karpy would build on EC2 with the
default AL2023 NodeClass. Prices are the provider's *estimates* (``EstimatedPrices``: moto has no
Pricing API), with spot at the provider's fallback ratio: real shapes, estimated prices.
"""

from __future__ import annotations

import functools

from karpy.core.instancetypes import InstanceType
from karpy.runtime.clock import FakeClock
from karpy_aws.providers.amifamily.amis import AMIFamily
from karpy_aws.providers.instancetype.coretypes import to_core_instance_type
from karpy_aws.providers.instancetype.instancetypes import KubeletSettings, parse_instance_type
from karpy_aws.providers.instancetype.offerings import Zone, build_instance_types, shape_of
from karpy_aws.providers.instancetype.unavailable import UnavailableOfferings
from karpy_aws.providers.pricing import EstimatedPrices

DEFAULT_REGION = "us-east-1"


@functools.cache
def offline_instance_types(region: str = DEFAULT_REGION) -> tuple[InstanceType, ...]:
    """Every instance type moto describes in ``region``, as the scheduler sees it."""
    from moto.ec2.models.availability_zones_and_regions import RegionsAndZonesBackend
    from moto.ec2.models.instance_types import INSTANCE_TYPE_OFFERINGS, INSTANCE_TYPES

    rows = INSTANCE_TYPE_OFFERINGS["availability-zone"].get(region)
    if not rows:
        raise ValueError(f"moto has no instance type offerings for region {region!r}")
    offered: dict[str, set[str]] = {}
    for row in rows:
        offered.setdefault(row["InstanceType"], set()).add(row["Location"])
    zones = [
        Zone(name=z.name, zone_id=z.zone_id)
        for z in RegionsAndZonesBackend.zones.get(region, [])
        if any(z.name in where for where in offered.values())
    ]
    infos = [parse_instance_type(INSTANCE_TYPES[name]) for name in sorted(offered)]
    prices = EstimatedPrices({info.name: shape_of(info) for info in infos})
    unavailable = UnavailableOfferings(FakeClock())
    return tuple(
        to_core_instance_type(it)
        for info in infos
        for it in build_instance_types(
            info,
            zones=zones,
            offered_in=frozenset(offered[info.name]),
            family=AMIFamily.AL2023,
            kubelet=KubeletSettings(),
            prices=prices,
            unavailable=unavailable,
        )
    )
