"""Scheduling benchmark: Karpenter's scheduling benchmark rebuilt for karpy's pure solver.

Run: ``.venv/bin/python benchmarks/scheduling.py [--sizes 1,100,1000,5000,20000] [--repeat 1]``

Setup as in Karpenter: one NodePool without limits, 400 fake instance types
(``karpy.testing.instancetypes``), no existing nodes; only ``solve()`` is timed. The "diverse" mix
puts a fifth of the pods in each of: plain pods; zonal spread (maxSkew 1, DoNotSchedule); hostname
spread (maxSkew 1); zonal self-affinity; hostname anti-affinity (all sharing ``app=nginx``). CPU
comes from {100m, 250m, 500m, 1, 1.5} and memory from {100Mi, 256Mi, 512Mi, 1Gi, 2Gi, 4Gi}, drawn
with a fixed seed (42). Spread and affinity pods carry one of seven label values and select their
own value, as a Deployment would; each (kind, value) is one owner.

The "plain" mix is plain pods only. For it the report adds a lower bound on cost: the relaxation
that lets every resource be bought fractionally from whichever instance type sells it cheapest
(price / allocatable), taken for the binding resource — max over resources r of
demand_r * min over types of price_t / allocatable_{t,r} — and at least the price of the cheapest
type that holds the largest pod, since some node must hold it. No packing can cost less, so
``plan / bound - 1`` is an upper bound on how far the plan is from optimal.
"""

from __future__ import annotations

import argparse
import random
import time

from karpy.apis.v1 import labels as wk
from karpy.core.instancetypes import InstanceType
from karpy.core.pods import (
    Container,
    LabelSelector,
    Pod,
    PodAffinityTerm,
    PodUID,
    TopologySpreadConstraint,
)
from karpy.core.resources import Resources
from karpy.core.scheduling import SchedulerOptions, solve
from karpy.core.snapshot import ClusterSnapshot, NodePool, NodePoolName
from karpy.testing.instancetypes import make_instance_types

CPUS = ("100m", "250m", "500m", "1", "1.5")
MEMORIES = ("100Mi", "256Mi", "512Mi", "1Gi", "2Gi", "4Gi")
VALUES = ("a", "b", "c", "d", "e", "f", "g")
KINDS = ("plain", "zonal-spread", "hostname-spread", "zonal-affinity", "hostname-anti-affinity")


def _pod(i: int, kind: str, rng: random.Random) -> Pod:
    requests = Resources.of({"cpu": rng.choice(CPUS), "memory": rng.choice(MEMORIES)})
    value = rng.choice(VALUES)
    base = {
        "uid": PodUID(f"pod-{i:06d}"),
        "namespace": "default",
        "name": f"{kind}-{i}",
        "containers": (Container("app", requests),),
        "creation": i,
    }
    if kind == "plain":
        return Pod(**base, labels={"plain": value}, owner=f"plain-{value}")  # type: ignore[arg-type]
    if kind in ("zonal-spread", "hostname-spread"):
        key = wk.LABEL_TOPOLOGY_ZONE if kind == "zonal-spread" else wk.LABEL_HOSTNAME
        labels = {kind: value}
        spread = TopologySpreadConstraint(key, 1, LabelSelector.of(labels))
        return Pod(**base, labels=labels, owner=f"{kind}-{value}", topology_spread=(spread,))  # type: ignore[arg-type]
    if kind == "zonal-affinity":
        labels = {"affinity": value}
        term = PodAffinityTerm(LabelSelector.of(labels), wk.LABEL_TOPOLOGY_ZONE)
        return Pod(**base, labels=labels, owner=f"affinity-{value}", pod_affinity=(term,))  # type: ignore[arg-type]
    labels = {"app": "nginx"}
    term = PodAffinityTerm(LabelSelector.of(labels), wk.LABEL_HOSTNAME)
    return Pod(**base, labels=labels, owner="nginx", pod_anti_affinity=(term,))  # type: ignore[arg-type]


def diverse_pods(count: int, *, seed: int = 42) -> list[Pod]:
    """The diverse mix: a fifth of each kind (remainder plain)."""
    rng = random.Random(seed)
    kinds = [kind for kind in KINDS for _ in range(count // len(KINDS))]
    kinds += ["plain"] * (count - len(kinds))
    return [_pod(i, kind, rng) for i, kind in enumerate(kinds)]


def plain_pods(count: int, *, seed: int = 42) -> list[Pod]:
    """Plain pods only."""
    rng = random.Random(seed)
    return [_pod(i, "plain", rng) for i in range(count)]


def lower_bound(pods: list[Pod], types: tuple[InstanceType, ...]) -> float:
    """The binding-resource fractional relaxation described in the module docstring."""
    demand: dict[str, int] = {}
    for pod in pods:
        for name, amount in pod.requests().items():
            demand[name] = demand.get(name, 0) + amount
    best = 0.0
    for name, amount in demand.items():
        rates = [
            t.offerings[0].price / t.allocatable.get_amount(name)
            for t in types
            if t.allocatable.get_amount(name) > 0
        ]
        best = max(best, amount * min(rates))
    # Integrality: some node must hold the largest pod, so at least the cheapest type that fits it.
    largest = max(pods, key=lambda p: sorted(p.requests().items()))
    fitting = [t.offerings[0].price for t in types if largest.requests().fits(t.allocatable)]
    return max(best, min(fitting)) if fitting else best


def run(mix: str, count: int, repeat: int) -> tuple[int, float, int, float, float | None, int]:
    """Solve ``repeat`` times; returns (pods, pods/s of the best run, nodes, $/h, bound, placed)."""
    types = make_instance_types(400)
    pool = NodePool(NodePoolName("default"))
    snapshot = ClusterSnapshot(nodepools=(pool,), instance_types={pool.name: types})
    pods = diverse_pods(count) if mix == "diverse" else plain_pods(count)
    best = float("inf")
    results = None
    for _ in range(repeat):
        start = time.perf_counter()
        results = solve(snapshot, pods, SchedulerOptions())
        best = min(best, time.perf_counter() - start)
    if results is None:
        raise ValueError("repeat must be at least 1")
    bound = lower_bound(pods, types) if mix == "plain" else None
    placed = len(results.placed())
    return count, count / best, len(results.nodeclaims), results.price, bound, placed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,100,1000,5000,20000")
    parser.add_argument("--mixes", default="diverse,plain")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    header = ("mix", "pods", "placed", "pods/s", "nodes", "$/h", "LP bound", "gap")
    print("{:8} {:>6} {:>6} {:>9} {:>6} {:>10} {:>10} {:>6}".format(*header))
    for mix in args.mixes.split(","):
        for size in sizes:
            pods, rate, nodes, price, bound, placed = run(mix, size, args.repeat)
            gap = f"{(price / bound - 1) * 100:5.2f}%" if bound else "-"
            bound_text = f"{bound:10.2f}" if bound is not None else f"{'-':>10}"
            row = f"{mix:8} {pods:6d} {placed:6d} {rate:9.0f} {nodes:6d} {price:10.2f}"
            print(f"{row} {bound_text} {gap:>6}")


if __name__ == "__main__":
    main()
