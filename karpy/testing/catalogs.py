"""A realistic, seeded instance-type catalog for benchmarks and packing tests.

Karpenter's fake types (``instancetypes.py``) price every vCPU and GiB the same, so any packing
of them is nearly optimal and a packer's mistakes stay hidden. Real catalogs are not like that:
compute-, general- and memory-optimised families sell 2, 4 and 8 GiB per vCPU at different
prices per vCPU, arm64 is about a fifth cheaper, newer generations cost a little more, and spot
prices are 30-40 % of on-demand and differ by zone. This module builds such a catalog, shaped
and priced after AWS's c/m/r families (us-east-1 list prices per 2 vCPU), with the kubelet's
default reservations (the AWS provider's formulas: kube-reserved CPU by cores, memory by max
pods, 100Mi eviction threshold) and ENI-limited max pods. Seeded: the same seed gives the same
catalog.
"""

from __future__ import annotations

import random
from typing import Final

from karpy.apis.v1 import labels as wk
from karpy.core.instancetypes import InstanceType, Offering
from karpy.core.resources import CPU, MEMORY, PODS, Resources

REALISTIC_ZONES: Final = ("zone-a", "zone-b", "zone-c")

# The AWS provider's instance labels (``karpy_aws.apis.labels``), spelled out because karpy never
# imports a provider: the types are labelled as the AWS provider labels its own.
AWS_INSTANCE_LABELS: Final = (
    "karpenter.k8s.aws/instance-category",
    "karpenter.k8s.aws/instance-family",
    "karpenter.k8s.aws/instance-generation",
    "karpenter.k8s.aws/instance-size",
    "karpenter.k8s.aws/instance-cpu",
    "karpenter.k8s.aws/instance-memory",
)
_CATEGORY, _FAMILY, _GENERATION, _SIZE, _CPU, _MEMORY = AWS_INSTANCE_LABELS

# family letter -> GiB per vCPU
_FAMILIES: Final = (("c", 2), ("m", 4), ("r", 8))
# (generation, suffix, arch, on-demand price per 2 vCPU for c, m, r)
_VARIANTS: Final = (
    (5, "", wk.ARCH_AMD64, (0.085, 0.096, 0.126)),
    (6, "i", wk.ARCH_AMD64, (0.085, 0.096, 0.126)),
    (6, "g", wk.ARCH_ARM64, (0.068, 0.077, 0.1008)),
    (7, "i", wk.ARCH_AMD64, (0.08925, 0.1008, 0.1323)),
    (7, "g", wk.ARCH_ARM64, (0.0725, 0.0816, 0.1071)),
)
# size name -> vCPUs; 24xlarge on every variant, 32xlarge on the amd64 gen 6/7 ones (as AWS)
_SIZES: Final = (
    ("large", 2),
    ("xlarge", 4),
    ("2xlarge", 8),
    ("4xlarge", 16),
    ("8xlarge", 32),
    ("12xlarge", 48),
    ("16xlarge", 64),
    ("24xlarge", 96),
    ("32xlarge", 128),
)
# ENI-limited max pods by vCPU count (AWS's published values for these sizes)
_MAX_PODS: Final = {2: 29, 4: 58, 8: 58, 16: 234, 32: 234, 48: 234, 64: 737, 96: 737, 128: 737}


def kube_reserved_cpu_millis(vcpus: int) -> int:
    """The AWS provider's default: 6 % of the first core, 1 % of the second, 0.5 % of the
    third and fourth, 0.25 % of every further core."""
    millis = 60.0
    if vcpus > 1:
        millis += 10
    millis += 5 * max(0, min(vcpus, 4) - 2)
    millis += 2.5 * max(0, vcpus - 4)
    return int(millis)


def realistic_instance_types(*, seed: int = 1) -> tuple[InstanceType, ...]:
    """The catalog described in the module docstring: c/m/r, gen 5-7, amd64/arm64, large …
    32xlarge, three zones, on-demand everywhere and spot at 30-40 % of on-demand per zone."""
    rng = random.Random(seed)  # noqa: S311 - seeded test data, not security
    out: list[InstanceType] = []
    for letter, gib_per_cpu in _FAMILIES:
        column = "cmr".index(letter)
        for generation, suffix, arch, prices in _VARIANTS:
            family = f"{letter}{generation}{suffix}"
            for size, vcpus in _SIZES:
                if vcpus == 128 and (generation == 5 or arch == wk.ARCH_ARM64):
                    continue
                pods = _MAX_PODS[vcpus]
                on_demand = round(prices[column] * vcpus / 2, 4)
                offerings = [
                    Offering(z, wk.CAPACITY_TYPE_ON_DEMAND, on_demand) for z in REALISTIC_ZONES
                ]
                offerings += [
                    Offering(
                        z, wk.CAPACITY_TYPE_SPOT, round(on_demand * rng.uniform(0.30, 0.40), 4)
                    )
                    for z in REALISTIC_ZONES
                ]
                memory_mib = vcpus * gib_per_cpu * 1024
                overhead = Resources.of(
                    {
                        CPU: f"{kube_reserved_cpu_millis(vcpus)}m",
                        MEMORY: f"{11 * pods + 255 + 100}Mi",
                    }
                )
                capacity = Resources.of({CPU: vcpus, MEMORY: f"{memory_mib}Mi", PODS: pods})
                out.append(
                    InstanceType.make(
                        f"{family}.{size}",
                        capacity,
                        offerings,
                        overhead=overhead,
                        labels={
                            wk.LABEL_ARCH: arch,
                            wk.LABEL_OS: wk.OS_LINUX,
                            _CATEGORY: letter,
                            _FAMILY: family,
                            _GENERATION: str(generation),
                            _SIZE: size,
                            _CPU: str(vcpus),
                            _MEMORY: str(memory_mib),
                        },
                    )
                )
    return tuple(out)
