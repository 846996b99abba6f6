"""Capacity buffers in scheduling: how many chunks a buffer holds, and solving with them.

A CapacityBuffer keeps room for N pods that are never created. Its size follows Karpenter
v1.14's reading of the SIG Autoscaling API: `replicas` and `percentage` (of the referenced
workload's replicas, rounded up, at least one while the workload has any) combine by taking the
larger, and `limits` caps the result at the chunks whose summed requests fit (alone, they size
the buffer). The chunks enter the solver as pods — virtual pods — behind every real pod: the
real pods are placed on existing and in-flight room first, so a pending pod never waits for a
launch because a buffer sits in the room it could use; then the virtual pods and whatever real
pods still need new capacity are solved together (they may share new NodeClaims).

Pure: no I/O, clock or logging.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence

import attrs

from karpy.core.pods import Pod, PodUID
from karpy.core.resources import Resources
from karpy.core.scheduling.options import SchedulerOptions
from karpy.core.scheduling.results import Results
from karpy.core.scheduling.scheduler import reserve_nominated, solve
from karpy.core.snapshot import ClusterSnapshot

MAX_REPLICAS = 2**31 - 1
"""The API's int32 bound on a buffer's replicas."""


class BufferSizeError(ValueError):
    """The buffer's size cannot be computed; the message names the field."""


def percentage_replicas(percentage: int, workload_replicas: int) -> int:
    """`percentage` of `workload_replicas`, rounded up; at least 1 when both are positive."""
    if percentage <= 0 or workload_replicas <= 0:
        return 0
    return max(1, math.ceil(workload_replicas * percentage / 100))


def limit_replicas(limits: Mapping[str, int], chunk: Resources) -> int:
    """How many chunks of requests `chunk` fit in `limits` (milli-units per resource).

    Only resources the chunk requests constrain; raises BufferSizeError when none of `limits`
    is one of them (the limit would then hold nothing back)."""
    fits: list[int] = []
    for name, limit in limits.items():
        request = chunk.get_amount(name)
        if request > 0:
            fits.append(max(0, limit) // request)
    if not fits:
        names = ", ".join(sorted(limits))
        msg = f"spec.limits: the pod template requests none of {names}"
        raise BufferSizeError(msg)
    return min(fits)


def buffer_replicas(
    *,
    replicas: int | None,
    percentage: int | None,
    workload_replicas: int | None,
    limits: Mapping[str, int] | None,
    chunk: Resources,
) -> int:
    """The chunks a buffer holds room for. `workload_replicas` is its scalableRef's replicas
    (None for a podTemplateRef buffer); `limits` in milli-units; `chunk` one pod's requests.

    Raises BufferSizeError naming the field when nothing sizes the buffer or its limits
    constrain nothing."""
    wanted: list[int] = []
    if replicas is not None:
        wanted.append(max(0, replicas))
    if percentage is not None and workload_replicas is not None:
        wanted.append(percentage_replicas(percentage, workload_replicas))
    if limits is None:
        if not wanted:
            msg = "one of spec.replicas, spec.percentage or spec.limits must size the buffer"
            raise BufferSizeError(msg)
        return min(max(wanted), MAX_REPLICAS)
    cap = limit_replicas(limits, chunk)
    return min(max(wanted), cap, MAX_REPLICAS) if wanted else min(cap, MAX_REPLICAS)


def solve_with_buffers(
    snapshot: ClusterSnapshot,
    pods: Sequence[Pod],
    virtual: Sequence[Pod],
    options: SchedulerOptions | None = None,
) -> Results:
    """Solve `pods` (real, pending) and `virtual` (buffer chunks) against `snapshot`.

    The real pods take existing and in-flight room first; the virtual pods then go where room
    is left, and with the real pods that still need it onto new NodeClaims. The result holds
    every nomination of both solves and the second solve's NodeClaims and explanations."""
    if not virtual:
        return solve(snapshot, list(pods), options)
    if not pods:
        return solve(snapshot, list(virtual), options)
    first = solve(snapshot, list(pods), options)
    placed = {n.pod for n in first.nominations}
    second = solve(
        reserve_nominated(snapshot, first, pods),
        [*(p for p in pods if p.uid not in placed), *virtual],
        options,
    )
    return attrs.evolve(
        second,
        nominations=(*first.nominations, *second.nominations),
        relaxed=(*(r for r in first.relaxed if r.pod in placed), *second.relaxed),
    )


def held_room(
    snapshot: ClusterSnapshot,
    waiting: Sequence[Pod],
    virtual: Sequence[Pod],
    options: SchedulerOptions | None = None,
) -> dict[PodUID, str]:
    """Where each virtual pod sits now: the existing or in-flight node the solver puts it on
    once the `waiting` (real, unbound) pods have taken their room. A virtual pod with no room
    yet is left out (provisioning is launching it, or cannot)."""
    if not virtual:
        return {}
    ours: Collection[PodUID] = {p.uid for p in virtual}
    results = solve_with_buffers(attrs.evolve(snapshot, nodepools=()), waiting, virtual, options)
    return {n.pod: n.node for n in results.nominations if n.pod in ours}


def with_buffers(
    snapshot: ClusterSnapshot,
    waiting: Sequence[Pod],
    virtual: Sequence[Pod],
    options: SchedulerOptions | None = None,
) -> ClusterSnapshot:
    """`snapshot` with each virtual pod bound to the node whose room it holds (`held_room`):
    what consolidation weighs, so a node holding a buffer's room is not empty."""
    where = held_room(snapshot, waiting, virtual, options)
    onto: dict[str, list[Pod]] = {}
    for pod in virtual:
        node = where.get(pod.uid)
        if node is not None:
            onto.setdefault(node, []).append(pod)
    if not onto:
        return snapshot
    return attrs.evolve(
        snapshot,
        nodes=tuple(
            attrs.evolve(n, pods=(*n.pods, *onto[n.name])) if n.name in onto else n
            for n in snapshot.nodes
        ),
    )
