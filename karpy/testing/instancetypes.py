"""Karpenter's fake instance types, for tests, benchmarks and ``provider: fake`` scenarios.

Type ``i`` (``fake-it-i``) has i+1 vCPU, 2(i+1) GiB of memory and 10(i+1) pods, 100m cpu and
10Mi memory of kube-reserved overhead, and five offerings — spot in test-zone-1 and test-zone-2,
on-demand in test-zone-1, test-zone-2 and test-zone-3 — all at 0.1 per vCPU plus 0.1 per 10^9
bytes of memory, as Karpenter's fake cloud provider prices them. Deterministic: no randomness.
"""

from __future__ import annotations

from typing import Final

from karpy.apis.v1 import labels as wk
from karpy.core.instancetypes import InstanceType, Offering
from karpy.core.resources import CPU, MEMORY, PODS, Resources

FAKE_ZONES: Final = ("test-zone-1", "test-zone-2", "test-zone-3")
_GIB: Final = 2**30

# (capacity type, zone) of every fake offering, in Karpenter's order.
FAKE_OFFERINGS: Final = (
    (wk.CAPACITY_TYPE_SPOT, "test-zone-1"),
    (wk.CAPACITY_TYPE_SPOT, "test-zone-2"),
    (wk.CAPACITY_TYPE_ON_DEMAND, "test-zone-1"),
    (wk.CAPACITY_TYPE_ON_DEMAND, "test-zone-2"),
    (wk.CAPACITY_TYPE_ON_DEMAND, "test-zone-3"),
)


def fake_price(vcpus: int, memory_bytes: int) -> float:
    """0.1 per vCPU plus 0.1 per 10^9 bytes of memory."""
    return round(0.1 * vcpus + 0.1 * memory_bytes / 1e9, 6)


def make_instance_type(name: str, vcpus: int, memory_gib: int, pods: int) -> InstanceType:
    """One fake instance type with the standard five offerings."""
    memory = memory_gib * _GIB
    price = fake_price(vcpus, memory)
    capacity = Resources.of({CPU: vcpus, MEMORY: f"{memory_gib}Gi", PODS: pods})
    return InstanceType.make(
        name,
        capacity,
        (Offering(zone, ct, price) for ct, zone in FAKE_OFFERINGS),
        overhead=Resources.of({CPU: "100m", MEMORY: "10Mi"}),
        labels={wk.LABEL_ARCH: wk.ARCH_AMD64, wk.LABEL_OS: wk.OS_LINUX},
    )


def make_instance_types(n: int) -> tuple[InstanceType, ...]:
    """``fake-it-0`` … ``fake-it-{n-1}`` with growing resources (see the module docstring)."""
    if n < 0:
        raise ValueError(f"instance type count must be non-negative, got {n}")
    return tuple(
        make_instance_type(f"fake-it-{i}", i + 1, 2 * (i + 1), 10 * (i + 1)) for i in range(n)
    )
