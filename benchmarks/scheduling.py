"""Scheduling benchmark: Karpenter's scheduling benchmark rebuilt for karpy's pure solver.

Run: ``.venv/bin/python benchmarks/scheduling.py [--sizes 1,100,1000,5000,20000] [--repeat 1]``

Setup as in Karpenter: one NodePool without limits, 400 fake instance types
(``karpy.testing.instancetypes``), no existing nodes; only ``solve()`` is timed. The "diverse" mix
puts a fifth of the pods in each of: plain pods; zonal spread (maxSkew 1, DoNotSchedule); hostname
spread (maxSkew 1); zonal self-affinity; hostname anti-affinity (all sharing ``app=nginx``). CPU
comes from {100m, 250m, 500m, 1, 1.5} and memory from {100Mi, 256Mi, 512Mi, 1Gi, 2Gi, 4Gi}, drawn
with a fixed seed (42). Spread and affinity pods carry one of seven label values and select their
own value, as a Deployment would; each (kind, value) is one owner.

The "plain" mix is plain pods only. For it the report adds a lower bound on cost: the LP
relaxation of the packing — buy fractional nodes, min sum_t price_t * x_t subject to
sum_t allocatable_{t,r} * x_t >= demand_r for every resource r (cpu, memory, pods), x >= 0 — solved
exactly (two-phase simplex in rational arithmetic; with three resources an optimal mix uses at
most three types), and at least the price of the cheapest type that holds the largest pod, since
some node must hold it. No packing can cost less, so ``plan / bound - 1`` is an upper bound on
how far the plan is from optimal.
"""

from __future__ import annotations

import argparse
import os
import random
import time
from collections.abc import Sequence
from fractions import Fraction

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


def _cheapest(it: InstanceType) -> float:
    return min(o.price for o in it.offerings if o.available)


def _solve(
    rows: Sequence[Sequence[Fraction]], costs: Sequence[Fraction], demand: Sequence[Fraction]
) -> Fraction:
    """min costs . x subject to rows @ x >= demand, x >= 0, exactly (rows: one per resource).

    Two-phase revised simplex with Bland's rule (no cycling). Columns are the types, then a
    surplus per row, then an artificial per row that starts as the basis; the basis is only
    len(demand) wide, so each step is a small exact inverse and one pricing pass.
    """
    m, n = len(demand), len(costs)
    cols: list[list[Fraction]] = [[rows[r][j] for r in range(m)] for j in range(n)]
    cols += [[Fraction(-1 if r == k else 0) for r in range(m)] for k in range(m)]
    artificial = range(n + m, n + 2 * m)
    cols += [[Fraction(1 if r == k else 0) for r in range(m)] for k in range(m)]
    basis = list(artificial)

    def inverse() -> list[list[Fraction]]:
        a = [
            [cols[basis[c]][r] for c in range(m)] + [Fraction(r == i) for i in range(m)]
            for r in range(m)
        ]
        for c in range(m):
            pivot = next(r for r in range(c, m) if a[r][c] != 0)
            a[c], a[pivot] = a[pivot], a[c]
            a[c] = [v / a[c][c] for v in a[c]]
            for r in range(m):
                if r != c and a[r][c] != 0:
                    f = a[r][c]
                    a[r] = [v - f * w for v, w in zip(a[r], a[c], strict=True)]
        return [row[m:] for row in a]

    def times(inv: list[list[Fraction]], col: Sequence[Fraction]) -> list[Fraction]:
        return [sum((inv[r][k] * col[k] for k in range(m)), Fraction(0)) for r in range(m)]

    def run(cost: list[Fraction], allowed: range) -> None:
        while True:
            inv = inverse()
            duals = [
                sum((cost[basis[k]] * inv[k][r] for k in range(m)), Fraction(0)) for r in range(m)
            ]
            entering = next(
                (
                    j
                    for j in allowed
                    if j not in basis
                    and cost[j] - sum((duals[r] * cols[j][r] for r in range(m)), Fraction(0)) < 0
                ),
                None,
            )
            if entering is None:
                return
            values, step = times(inv, demand), times(inv, cols[entering])
            ratios = [(values[r] / step[r], basis[r], r) for r in range(m) if step[r] > 0]
            if not ratios:
                raise ValueError("the LP is unbounded (a type with no price?)")
            basis[min(ratios)[2]] = entering

    run([Fraction(0)] * (n + m) + [Fraction(1)] * m, range(n + 2 * m))
    inv = inverse()
    if any(basis[r] in artificial and times(inv, demand)[r] > 0 for r in range(m)):
        raise ValueError("the LP is infeasible: some resource is sold by no type")
    for r in range(m):  # drive artificials left at zero out of the basis
        if basis[r] in artificial:
            inv = inverse()
            basis[r] = next(j for j in range(n + m) if j not in basis and times(inv, cols[j])[r])
    cost = [*costs, *([Fraction(0)] * m), *([Fraction(0)] * m)]
    run(cost, range(n + m))
    values = times(inverse(), demand)
    return sum((cost[basis[r]] * values[r] for r in range(m)), Fraction(0))


def lower_bound(pods: list[Pod], types: tuple[InstanceType, ...]) -> float:
    """The LP relaxation described in the module docstring, and at least the cheapest type that
    holds the largest pod."""
    demand: dict[str, int] = {}
    for pod in pods:
        for name, amount in pod.requests().items():
            demand[name] = demand.get(name, 0) + amount
    names = sorted(n for n, amount in demand.items() if amount > 0)
    rows = [[Fraction(t.allocatable.get_amount(n)) for t in types] for n in names]
    prices = [Fraction(_cheapest(t)) for t in types]
    best = float(_solve(rows, prices, [Fraction(demand[n]) for n in names]))
    # Integrality: some node must hold the largest pod, so at least the cheapest type that fits it.
    largest = max(pods, key=lambda p: sorted(p.requests().items()))
    fitting = [_cheapest(t) for t in types if largest.requests().fits(t.allocatable)]
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
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    header = ("mix", "pods", "placed", "pods/s", "nodes", "$/h", "LP bound", "gap")
    print("{:8} {:>6} {:>6} {:>9} {:>6} {:>10} {:>10} {:>6}".format(*header))
    for mix in args.mixes.split(","):
        for size in sizes:
            pods, rate, nodes, price, bound, placed = run(mix, size, args.repeat)
            gap = f"{(price / bound - 1) * 100:5.2f}%" if bound else "-"
            bound_text = f"{bound:10.2f}" if bound is not None else f"{'-':>10}"
            row = f"{mix:8} {pods:6d} {placed:6d} {rate:9.0f} {nodes:6d} {price:10.2f}"
            print(f"{row} {bound_text} {gap:>6}", flush=True)
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
