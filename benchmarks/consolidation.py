"""Consolidation benchmark: karpy's search against Karpenter's, on the same generated fleets.

Run: ``.venv/bin/python benchmarks/consolidation.py [--fleets plain-200,diverse-200,plain-2000]
[--max-commands 400]``

Each fleet is one NodePool of on-demand nodes over the scheduling benchmark's fake instance
types (karpy.testing.instancetypes), with consolidateAfter 0s and Karpenter's default budget
(10 % of nodes):
- ``plain-N``: N nodes of types drawn from fake-it-1..fake-it-15 (2-16 vCPU), each filled with
  the scheduling benchmark's plain pods to a random 30-60 % of its CPU;
- ``diverse-N``: the scheduling benchmark's diverse mix (spread, affinity, anti-affinity), placed
  by the solver in batches of 50 pods onto a growing fleet (so types vary), then 40-70 % of each
  node's pods removed at random (a scale-in).
Seeded (42, or ``--seeds 1,2,3``): the same fleet for both searches.

From that fleet, Emptiness, multi-node and single-node consolidation run pass after pass, each
pass's command applied at once (karpy.testing.fleet), until a pass yields nothing (a fixed
point) or ``--max-commands`` consolidation commands (0: time one consolidation pass only;
Emptiness commands are applied as they come and not counted). Reported per search: $/h
before -> after, nodes before -> after, pods moved (the disruption), commands, the mean and
worst time per consolidation pass, and for plain fleets the LP lower bound on any packing of
the pods (the scheduling benchmark's bound). ``--trace`` prints every command as it is applied
(the candidates with their types, the replacement's cheapest types, $/h saved, pods moved and
the fleet's price after it), so two searches' paths on one seed can be diffed.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

import attrs

from karpy.apis.v1 import labels as wk
from karpy.core.disruption.budgets import BudgetSpec
from karpy.core.disruption.candidates import PoolDisruption
from karpy.core.disruption.consolidation import (
    FIXED_POINT_SHARE,
    Search,
    Settings,
    moved,
    savings,
)
from karpy.core.disruption.decision import Memo, disrupt, disruption_methods
from karpy.core.disruption.methods import Command, Emptiness
from karpy.core.pods import Pod
from karpy.core.requirements import Requirement, Requirements
from karpy.core.resources import CPU
from karpy.core.scheduling import solve
from karpy.core.snapshot import ClusterSnapshot
from karpy.testing.fleet import Fleet, FleetNode, pool
from karpy.testing.instancetypes import make_instance_types

sys.path.insert(0, str(Path(__file__).parent))
from scheduling import _pod, diverse_pods, lower_bound

ZONES = ("test-zone-1", "test-zone-2", "test-zone-3")


def _pool() -> Fleet:
    on_demand = Requirement(wk.LABEL_CAPACITY_TYPE, False, frozenset({wk.CAPACITY_TYPE_ON_DEMAND}))
    types = make_instance_types(64)
    disruption = PoolDisruption(consolidate_after=0.0, budgets=(BudgetSpec(nodes="10%"),))
    return Fleet(
        pool=pool(requirements=Requirements([on_demand])),
        types=types,
        nodes=(),
        disruption=disruption,
    )


def plain_fleet(count: int, seed: int = 42) -> Fleet:
    base = _pool()
    rng = random.Random(seed)
    nodes: list[FleetNode] = []
    index = 0
    for n in range(count):
        it = base.types[rng.randint(1, 15)]
        target = it.allocatable.get_amount(CPU) * rng.uniform(0.3, 0.6)
        pods: list[Pod] = []
        used = 0
        while True:
            pod = _pod(index, "plain", rng)
            cpu = pod.requests().get_amount(CPU)
            if used + cpu > target or not (pod.requests() + _sum(pods)).fits(it.allocatable):
                break
            pods.append(pod)
            used += cpu
            index += 1
        nodes.append(
            FleetNode(
                name=f"node-{n:05d}",
                instance_type=it.name,
                zone=ZONES[n % len(ZONES)],
                capacity_type=wk.CAPACITY_TYPE_ON_DEMAND,
                pods=tuple(pods),
            )
        )
    return Fleet(pool=base.pool, types=base.types, nodes=tuple(nodes), disruption=base.disruption)


def _sum(pods: list[Pod]):  # type: ignore[no-untyped-def]
    from karpy.core.resources import EMPTY

    total = EMPTY
    for p in pods:
        total = total + p.requests()
    return total


def diverse_fleet(count: int, seed: int = 42) -> Fleet:
    """Place the diverse mix batch by batch until the fleet has `count` nodes, then scale in."""
    base = _pool()
    rng = random.Random(seed)
    fleet = base
    pods = diverse_pods(count * 12, seed=seed)
    for start in range(0, len(pods), 50):
        if len(fleet.nodes) >= count:
            break
        batch = pods[start : start + 50]
        snapshot = ClusterSnapshot(
            nodepools=(fleet.pool,),
            instance_types={fleet.pool.name: fleet.types},
            nodes=tuple(fleet._node(n) for n in fleet.nodes),
        )
        results = solve(snapshot, batch, fleet.options)
        by_uid = {p.uid: p for p in batch}
        kept = {n.name: n for n in fleet.nodes}
        for nomination in results.nominations:
            node = kept[nomination.node]
            kept[node.name] = FleetNode(
                name=node.name,
                instance_type=node.instance_type,
                zone=node.zone,
                capacity_type=node.capacity_type,
                pods=(*node.pods, by_uid[nomination.pod]),
            )
        for plan in results.nodeclaims:
            name = f"node-{len(kept):05d}"
            kept[name] = FleetNode(
                name=name,
                instance_type=plan.instance_types[0],
                zone=plan.zones[0],
                capacity_type=wk.CAPACITY_TYPE_ON_DEMAND,
                pods=tuple(by_uid[u] for u in plan.pods),
            )
        fleet = Fleet(
            pool=base.pool,
            types=base.types,
            nodes=tuple(kept[k] for k in sorted(kept)),
            disruption=base.disruption,
        )
    scaled = []
    for node in fleet.nodes:
        share = rng.uniform(0.4, 0.7)
        keep = [p for p in node.pods if rng.random() >= share] or list(node.pods[:1])
        scaled.append(
            FleetNode(
                name=node.name,
                instance_type=node.instance_type,
                zone=node.zone,
                capacity_type=node.capacity_type,
                pods=tuple(keep),
            )
        )
    return Fleet(pool=base.pool, types=base.types, nodes=tuple(scaled), disruption=base.disruption)


def _trace(fleet: Fleet, command: Command, after: float) -> str:
    types = {n.name: n.instance_type for n in fleet.nodes}
    gone = "+".join(f"{c.name}({types[c.name]})" for c in command.candidates)
    new = " ".join(",".join(r.instance_types[:3]) for r in command.replacements) or "-"
    return (
        f"  {command.method:28} {after:9.2f} saves {savings(command):6.3f} "
        f"moves {moved(command):3} {gone} -> {new}"
    )


def consolidate(
    fleet: Fleet,
    search: Search,
    max_commands: int,
    *,
    trace: bool = False,
    settings: Settings | None = None,
) -> dict[str, float]:
    methods = disruption_methods(attrs.evolve(settings or Settings(), search=search))
    start_price, start_nodes = fleet.price, len(fleet.nodes)
    pods_moved = commands = passes = 0
    times: list[float] = []
    now = 1_800_000_000.0
    memo = Memo()  # as the controller remembers between passes
    while True:
        began = time.perf_counter()
        decision = disrupt(
            fleet.facts(), fleet.pools(), now=now, simulate=fleet.simulate, methods=methods,
            cleared=memo.cleared,
        )  # fmt: skip
        elapsed = time.perf_counter() - began
        passes += 1
        memo.record(decision.outcome, now)
        if decision.outcome.method != Emptiness.name:
            times.append(elapsed)  # a consolidation pass (or one finding nothing)
            if not decision.outcome.commands and not decision.outcome.complete:
                continue  # stopped at its limit: go on past what it cleared
            if not decision.outcome.commands or commands >= max_commands:
                break
        for command in decision.outcome.commands:
            pods_moved += moved(command)
            commands += command.method != Emptiness.name
            applied = fleet.apply(command)
            if trace:
                print(_trace(fleet, command, applied.price), flush=True)
            fleet = applied
    return {
        "before": start_price,
        "after": fleet.price,
        "nodes_before": start_nodes,
        "nodes_after": len(fleet.nodes),
        "moved": pods_moved,
        "commands": commands,
        "pass_mean": sum(times) / len(times),
        "pass_max": max(times),
        "first_pass": times[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fleets", default="plain-200,diverse-200")
    parser.add_argument("--max-commands", type=int, default=400)
    parser.add_argument("--searches", default="karpenter,karpy")
    parser.add_argument("--seeds", default="42", help="comma-separated fleet seeds")
    parser.add_argument("--trace", action="store_true", help="print every command applied")
    parser.add_argument(
        "--fixed-point-share",
        type=float,
        default=FIXED_POINT_SHARE,
        help="share of its candidates' price a merge past the fixed point must save",
    )
    args = parser.parse_args()
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    header = (
        "fleet", "search", "$/h before", "$/h after", "nodes", "moved", "cmds",
        "pass 1st", "pass mean", "pass max", "LP bound", "gap",
    )  # fmt: skip
    print(
        "{:12} {:9} {:>10} {:>9} {:>11} {:>6} {:>5} {:>8} {:>9} {:>8} {:>8} {:>6}".format(*header)
    )
    for spec, seed in ((f, int(s)) for f in args.fleets.split(",") for s in args.seeds.split(",")):
        kind, _, size = spec.partition("-")
        build = plain_fleet if kind == "plain" else diverse_fleet
        fleet = build(int(size), seed=seed)
        bound = lower_bound(list(fleet.pods), fleet.types).value if kind == "plain" else None
        if seed != 42:
            spec = f"{kind}-{size}/s{seed}"
        for search in args.searches.split(","):
            r = consolidate(
                fleet,
                Search(search),
                args.max_commands,
                trace=args.trace,
                settings=Settings(fixed_point_share=args.fixed_point_share),
            )
            gap = f"{(r['after'] / bound - 1) * 100:5.1f}%" if bound else "-"
            nodes = f"{r['nodes_before']:.0f}->{r['nodes_after']:.0f}"
            print(
                f"{spec:12} {search:9} {r['before']:10.2f} {r['after']:9.2f} {nodes:>11} "
                f"{r['moved']:6.0f} {r['commands']:5.0f} {r['first_pass']:7.2f}s "
                f"{r['pass_mean']:8.2f}s "
                f"{r['pass_max']:7.2f}s {bound if bound is not None else 0:8.2f} {gap:>6}",
                flush=True,
            )
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
