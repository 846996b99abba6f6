"""Generates catalog.json, the kwok provider's AWS-like instance types, from fixed formulas.

The catalog is data, not code, so scale runs can swap it for another file; this script is how the
shipped one was made, so every number in it can be explained and regenerated:

    python -m karpy_kwok.gencatalog > providers/kwok/karpy_kwok/catalog.json

Shapes. Families c (2 GiB per vCPU), m (4), r (8) and t (4, burstable), each in sizes large (2
vCPU), xlarge (4), 2xlarge (8), 4xlarge (16) and 8xlarge (32); each family exists for amd64
(c5, m5, r5, t3) and for arm64, whose family name ends in "g" (c6g, m6g, r6g, t4g). 110 pods
per node, kwok's default.

Overhead. kube-reserved as the AWS provider computes it: cpu 6% of the first core, 1% of the
second, 0.5% of the next two and 0.25% of the rest; memory 11 MiB per pod plus 255 MiB. Plus the
kubelet's default hard eviction threshold, memory.available 100Mi.

Prices (per hour, rounded to 4 decimals). On-demand = 0.031 per vCPU + 0.0043 per GiB, times
0.85 for the burstable t families and 0.8 for arm64. Spot = on-demand x (0.30 + 0.05 x zone
index), so spot is cheapest in test-zone-a and every zone has a distinct price. On-demand is the
same in every zone. Zones: test-zone-a, test-zone-b, test-zone-c.
"""

from __future__ import annotations

import sys
from typing import Any, Final

import orjson

ZONES: Final = ("test-zone-a", "test-zone-b", "test-zone-c")
# family letter -> (GiB per vCPU, amd64 family, arm64 family, price factor)
FAMILIES: Final = {
    "c": (2, "c5", "c6g", 1.0),
    "m": (4, "m5", "m6g", 1.0),
    "r": (8, "r5", "r6g", 1.0),
    "t": (4, "t3", "t4g", 0.85),
}
SIZES: Final = (("large", 2), ("xlarge", 4), ("2xlarge", 8), ("4xlarge", 16), ("8xlarge", 32))
PODS: Final = 110
ARM64_FACTOR: Final = 0.8
PRICE_PER_VCPU: Final = 0.031
PRICE_PER_GIB: Final = 0.0043
EVICTION_MEMORY_MIB: Final = 100


def kube_reserved_cpu_millis(vcpus: int) -> int:
    """6% of the first core, 1% of the second, 0.5% of cores 3-4, 0.25% of the rest."""
    tiers = ((1, 60), (1, 10), (2, 5))
    left = vcpus
    millis = 0.0
    for cores, per_core in tiers:
        used = min(left, cores)
        millis += used * per_core
        left -= used
    millis += left * 2.5
    return int(millis)


def kube_reserved_memory_mib(pods: int) -> int:
    return 11 * pods + 255


def on_demand_price(vcpus: int, memory_gib: int, *, factor: float, arm64: bool) -> float:
    price = (PRICE_PER_VCPU * vcpus + PRICE_PER_GIB * memory_gib) * factor
    return round(price * (ARM64_FACTOR if arm64 else 1.0), 4)


def generate() -> list[dict[str, Any]]:
    """Every instance type of the catalog, sorted by name."""
    types: list[dict[str, Any]] = []
    for gib_per_vcpu, amd64_family, arm64_family, factor in FAMILIES.values():
        for family, arch in ((amd64_family, "amd64"), (arm64_family, "arm64")):
            for size, vcpus in SIZES:
                memory_gib = vcpus * gib_per_vcpu
                od = on_demand_price(vcpus, memory_gib, factor=factor, arm64=arch == "arm64")
                offerings = [
                    {"zone": zone, "capacity_type": "on-demand", "price": od} for zone in ZONES
                ]
                offerings += [
                    {
                        "zone": zone,
                        "capacity_type": "spot",
                        "price": round(od * (0.30 + 0.05 * i), 4),
                    }
                    for i, zone in enumerate(ZONES)
                ]
                reserved_mib = kube_reserved_memory_mib(PODS) + EVICTION_MEMORY_MIB
                types.append(
                    {
                        "name": f"{family}.{size}",
                        "family": family,
                        "size": size,
                        "arch": arch,
                        "cpu": vcpus,
                        "memory_mib": memory_gib * 1024,
                        "pods": PODS,
                        "overhead": {
                            "cpu_millis": kube_reserved_cpu_millis(vcpus),
                            "memory_mib": reserved_mib,
                        },
                        "offerings": offerings,
                    }
                )
    return sorted(types, key=lambda t: str(t["name"]))


def main() -> None:
    sys.stdout.buffer.write(orjson.dumps(generate(), option=orjson.OPT_INDENT_2) + b"\n")


if __name__ == "__main__":
    main()
