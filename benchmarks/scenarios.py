"""Packing scenarios generated apart from the catalogs and mixes karpy's packing was tuned on.

``scheduling.py``'s catalogs and mixes are the ones the balanced packing was developed against.
These scenarios pose what real clusters add on EC2's catalog (``karpy_aws_emulator.catalog``,
1,366 types with burstable and GPU families and spot beside on-demand in every zone):

* ``bimodal``: seven pods in ten small web pods (100m … 1 CPU, 128Mi … 1Gi), three in ten
  memory-heavy (250m … 1 CPU, 6 … 16 GiB), where burstable types compete with r-family ones.
* ``daemonset-2``, ``-10``, ``-30``: the wide mix with DaemonSets taking 2 %, 10 % or 30 % of an
  xlarge (4 vCPU, 16 GiB) on every node, small types' share growing with it.
* ``spot-zones``: the wide mix where spot prices differ by zone (25-60 % of on-demand, drawn per
  type and zone, seeded), so the cheapest offering of a type is in one zone only.
* ``gpu``: a tenth of the pods ask for one ``nvidia.com/gpu`` (4 CPU, 16 GiB), the rest plain.
* ``limits``: two NodePools, ``cheap`` (arm64, a fifth cheaper; weight 10, a limit of 200
  vCPU) and ``fallback`` (amd64), so the wide mix overflows the cheap pool into the dearer one.
* ``grouped`` / ``individual``: the same 2,000 pods as Deployments of identical replicas
  (shared owner and labels) and as pods on their own: a packing should not care.

Each scenario is a snapshot and its pods; the bound (``bounds.assignment_bound``) is told the
limited pool apart.
"""

from __future__ import annotations

import random

import attrs

from karpy.core.instancetypes import InstanceType
from karpy.core.pods import Container, Pod, PodUID
from karpy.core.requirements import Requirements
from karpy.core.resources import Resources
from karpy.core.snapshot import ClusterSnapshot, DaemonSet, NodePool, NodePoolName

SCENARIOS = (
    "bimodal",
    "daemonset-2",
    "daemonset-10",
    "daemonset-30",
    "spot-zones",
    "gpu",
    "limits",
    "grouped",
    "individual",
)


@attrs.frozen
class Scenario:
    """One packing problem: the snapshot to solve, its pods, and what the bound needs."""

    name: str
    snapshot: ClusterSnapshot
    pods: list[Pod]
    types: tuple[InstanceType, ...]
    overhead: Resources
    limited: tuple[tuple[tuple[InstanceType, ...], Resources], ...] = ()


def _pod(i: int, requests: dict[str, str], owner: str | None) -> Pod:
    labels = {"app": owner or f"pod-{i}"}
    return Pod(
        uid=PodUID(f"pod-{i:06d}"),
        namespace="default",
        name=f"pod-{i}",
        containers=(Container("app", Resources.of(requests)),),
        creation=i,
        labels=labels,
        owner=owner,
    )


def _wide(i: int, rng: random.Random, grouped: bool = True) -> Pod:
    cpu, memory = f"{rng.randint(1, 30) * 100}m", f"{rng.randint(1, 48) * 128}Mi"
    return _pod(i, {"cpu": cpu, "memory": memory}, f"app-{cpu}-{memory}" if grouped else None)


def _bimodal(count: int, rng: random.Random) -> list[Pod]:
    pods = []
    for i in range(count):
        if rng.random() < 0.7:
            cpu, memory = f"{rng.randint(1, 10) * 100}m", f"{rng.randint(1, 8) * 128}Mi"
        else:
            cpu, memory = f"{rng.randint(1, 4) * 250}m", f"{rng.randint(12, 32) * 512}Mi"
        pods.append(_pod(i, {"cpu": cpu, "memory": memory}, f"app-{cpu}-{memory}"))
    return pods


def _gpu(count: int, rng: random.Random) -> list[Pod]:
    pods = []
    for i in range(count):
        if i % 10 == 0:
            pods.append(_pod(i, {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"}, "train"))
        else:
            pods.append(_wide(i, rng))
    return pods


def _daemonset(share: float) -> DaemonSet:
    cpu, memory = round(4000 * share), round(16 * 1024 * share)
    pod = Pod(
        uid=PodUID(f"ds-{share}"),
        namespace="kube-system",
        name="agent",
        containers=(Container("main", Resources.of({"cpu": f"{cpu}m", "memory": f"{memory}Mi"})),),
    )
    return DaemonSet("kube-system", "agent", pod)


def _spot_by_zone(types: tuple[InstanceType, ...], seed: int) -> tuple[InstanceType, ...]:
    rng = random.Random(seed)
    out = []
    for t in types:
        demand = {o.zone: o.price for o in t.offerings if o.capacity_type == "on-demand"}
        offerings = tuple(
            attrs.evolve(o, price=round(demand[o.zone] * rng.uniform(0.25, 0.6), 6))
            if o.capacity_type == "spot" and o.zone in demand
            else o
            for o in t.offerings
        )
        out.append(attrs.evolve(t, offerings=offerings))
    return tuple(out)


def _arch(types: tuple[InstanceType, ...], arch: str) -> tuple[InstanceType, ...]:
    def has(t: InstanceType) -> bool:
        req = t.requirements.get("kubernetes.io/arch")
        return req is not None and req.has(arch)

    return tuple(t for t in types if has(t))


def scenario(
    name: str, count: int, catalog: tuple[InstanceType, ...], *, seed: int = 42
) -> Scenario:
    """The named scenario with ``count`` pods over ``catalog`` (EC2's, normally)."""
    rng = random.Random(seed)
    pool = NodePool(NodePoolName("default"))
    types, daemonsets, pools = catalog, (), (pool,)
    limited: tuple[tuple[tuple[InstanceType, ...], Resources], ...] = ()
    if name == "bimodal":
        pods = _bimodal(count, rng)
    elif name.startswith("daemonset-"):
        pods = [_wide(i, rng) for i in range(count)]
        daemonsets = (_daemonset(int(name.split("-")[1]) / 100),)
    elif name == "spot-zones":
        pods = [_wide(i, rng) for i in range(count)]
        types = _spot_by_zone(catalog, seed)
    elif name == "gpu":
        pods = _gpu(count, rng)
    elif name == "limits":
        pods = [_wide(i, rng) for i in range(count)]
        arm = Requirements.from_labels({"kubernetes.io/arch": "arm64"})
        limits = Resources.of({"cpu": "200"})
        cheap = NodePool(NodePoolName("cheap"), requirements=arm, limits=limits, weight=10)
        amd = Requirements.from_labels({"kubernetes.io/arch": "amd64"})
        fallback = NodePool(NodePoolName("fallback"), requirements=amd)
        pools = (cheap, fallback)
        instance_types = {
            cheap.name: _arch(catalog, "arm64"),
            fallback.name: _arch(catalog, "amd64"),
        }
        snapshot = ClusterSnapshot(nodepools=pools, instance_types=instance_types)
        limited = ((instance_types[cheap.name], limits),)
        return Scenario(name, snapshot, pods, instance_types[fallback.name], Resources(), limited)
    elif name in ("grouped", "individual"):
        pods = [_wide(i, rng, grouped=name == "grouped") for i in range(count)]
    else:
        raise ValueError(f"unknown scenario {name!r}; choose from {', '.join(SCENARIOS)}")
    overhead = Resources()
    for d in daemonsets:
        overhead = overhead + d.pod.requests()
    snapshot = ClusterSnapshot(
        nodepools=pools, instance_types={pool.name: types}, daemonsets=daemonsets
    )
    return Scenario(name, snapshot, pods, types, overhead, limited)
