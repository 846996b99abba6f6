"""Small builders for core values, so each test states only what it is about."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from karpy.apis.v1 import labels as wk
from karpy.core.instancetypes import InstanceType, Offering
from karpy.core.pods import Container, Pod, PodUID
from karpy.core.requirements import Requirement, Requirements
from karpy.core.resources import Resources
from karpy.core.scheduling import Results, SchedulerOptions, solve
from karpy.core.snapshot import ClusterSnapshot, DaemonSet, Node, NodeName, NodePool, NodePoolName
from karpy.core.taints import Taint

ZONES = ("zone-a", "zone-b", "zone-c")
_counter = iter(range(1, 10**9))


def pod(
    name: str = "",
    *,
    cpu: str = "100m",
    memory: str = "128Mi",
    extra: Mapping[str, str] | None = None,
    namespace: str = "default",
    **fields: object,
) -> Pod:
    """A pod with one container requesting ``cpu``/``memory``; other fields as keywords."""
    n = next(_counter)
    name = name or f"pod-{n}"
    requests = Resources.of({"cpu": cpu, "memory": memory, **(extra or {})})
    fields.setdefault("containers", (Container("app", requests),))
    return Pod(
        uid=PodUID(f"{namespace}/{name}"),
        namespace=namespace,
        name=name,
        creation=n,
        **fields,  # type: ignore[arg-type]
    )


def pods(count: int, prefix: str = "p", **fields: object) -> list[Pod]:
    """``count`` identical pods from one owner."""
    fields.setdefault("owner", f"rs/{prefix}")
    return [pod(f"{prefix}-{i}", **fields) for i in range(count)]  # type: ignore[arg-type]


def instance_type(
    name: str,
    cpu: int,
    memory_gi: int,
    *,
    price: float | None = None,
    zones: Iterable[str] = ZONES,
    capacity_types: Iterable[str] = (wk.CAPACITY_TYPE_ON_DEMAND,),
    pods_: int = 110,
    labels: Mapping[str, str] | None = None,
    extra: Mapping[str, str] | None = None,
    unavailable: Iterable[tuple[str, str]] = (),
) -> InstanceType:
    """An instance type with an offering per zone and capacity type (price defaults to cpu)."""
    base = price if price is not None else float(cpu) * 0.05 + memory_gi * 0.005
    off = [
        Offering(
            z,
            ct,
            base * (0.4 if ct == wk.CAPACITY_TYPE_SPOT else 1.0),
            (z, ct) not in set(unavailable),
        )
        for z in zones
        for ct in capacity_types
    ]
    capacity = Resources.of(
        {"cpu": cpu, "memory": f"{memory_gi}Gi", "pods": pods_, **(extra or {})}
    )
    return InstanceType.make(name, capacity, off, labels=dict(labels or {}))


def catalog() -> tuple[InstanceType, ...]:
    """A small catalog: 1, 2, 4, 8 and 16 CPU types."""
    return tuple(instance_type(f"it-{c}", c, 2 * c) for c in (1, 2, 4, 8, 16))


def nodepool(name: str = "default", **fields: object) -> NodePool:
    """A NodePool."""
    return NodePool(NodePoolName(name), **fields)  # type: ignore[arg-type]


def node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "8Gi",
    zone: str = "zone-a",
    labels: Mapping[str, str] | None = None,
    pods_: Iterable[Pod] = (),
    taints: tuple[Taint, ...] = (),
    nodepool_name: str | None = None,
    **fields: object,
) -> Node:
    """An existing node in ``zone``."""
    all_labels = {wk.LABEL_TOPOLOGY_ZONE: zone, wk.LABEL_HOSTNAME: name, **(labels or {})}
    alloc = Resources.of({"cpu": cpu, "memory": memory, "pods": 110})
    return Node(
        NodeName(name),
        labels=all_labels,
        taints=taints,
        allocatable=alloc,
        capacity=alloc,
        pods=tuple(pods_),
        nodepool=NodePoolName(nodepool_name) if nodepool_name else None,
        **fields,  # type: ignore[arg-type]
    )


def snapshot(
    pools: Iterable[NodePool] = (),
    types: Iterable[InstanceType] | None = None,
    *,
    nodes: Iterable[Node] = (),
    daemonsets: Iterable[DaemonSet] = (),
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
) -> ClusterSnapshot:
    """A snapshot where every pool is offered the same catalog."""
    pool_list = tuple(pools) or (nodepool(),)
    cat = tuple(types) if types is not None else catalog()
    return ClusterSnapshot(
        nodepools=pool_list,
        instance_types={p.name: cat for p in pool_list},
        nodes=tuple(nodes),
        daemonsets=tuple(daemonsets),
        namespaces={k: tuple(sorted(v.items())) for k, v in (namespaces or {}).items()},
    )


def req(key: str, op: str, *values: str, min_values: int | None = None) -> Requirement:
    """A requirement."""
    return Requirement.new(key, op, values, min_values=min_values)


def reqs(*items: Requirement) -> Requirements:
    """Requirements."""
    return Requirements(items)


def run(snap: ClusterSnapshot, pending: list[Pod], **options: object) -> Results:
    """solve() with options as keywords."""
    return solve(snap, pending, SchedulerOptions(**options))  # type: ignore[arg-type]


def claim_of(results: Results, pod_: Pod) -> str | None:
    """Where a pod went (nodeclaim or node name)."""
    return results.placed().get(pod_.uid)
