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
import gzip
from importlib import resources
from typing import Any

import orjson

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
    """Every instance type moto describes in ``region``, as the scheduler sees it.

    Read from moto's packaged data files, not its EC2 models: importing those fixes the AMIs an
    in-process moto server would serve (``karpy_aws_emulator.server``). Zone ids follow the zone
    letters (a -> az1, ...): the real mapping differs per account anyway."""
    rows = _moto_data(f"instance_type_offerings/availability-zone/{region}.json.gz")
    if not rows:
        raise ValueError(f"moto has no instance type offerings for region {region!r}")
    described = _moto_data("instance_types.json.gz")
    offered: dict[str, set[str]] = {}
    for row in rows:
        offered.setdefault(row["InstanceType"], set()).add(row["Location"])
    prefix = "".join(part[0] for part in region.split("-")[:-1]) + region.split("-")[-1]
    zones = [
        Zone(name=name, zone_id=f"{prefix}-az{ord(name[-1]) - ord('a') + 1}")
        for name in sorted({zone for where in offered.values() for zone in where})
    ]
    infos = [parse_instance_type(described[name]) for name in sorted(offered) if name in described]
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


def _moto_data(name: str) -> Any:
    """One of moto's packaged EC2 data files (gzipped JSON)."""
    path = resources.files("moto") / "ec2" / "resources" / name
    return orjson.loads(gzip.decompress(path.read_bytes()))
