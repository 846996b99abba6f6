"""Scheduling benchmark: Karpenter's scheduling benchmark rebuilt for karpy's pure solver, over
several catalogs and pod mixes, with a lower bound on cost beside every plan.

Run: ``.venv/bin/python benchmarks/scheduling.py [--sizes 500,5000,20000] [--catalogs ...]
[--mixes ...] [--packing balanced,karpenter] [--repeat 3]``

One NodePool without limits, no existing nodes; only ``solve()`` is timed (pods/s of the median
of ``--repeat`` runs). Catalogs: ``fake`` (Karpenter's 400 fake types,
``karpy.testing.instancetypes``), ``realistic`` (the seeded c/m/r catalog,
``karpy.testing.catalogs``), ``kwok`` (the kwok provider's shipped AWS-like catalog), ``aws``
(EC2's 1,366 instance types in us-east-1 as moto ships them, built by the AWS provider's own code
with its estimated prices: ``karpy_aws_emulator.catalog``). Mixes:

* ``diverse``: Karpenter's mix, a fifth each of plain pods, zonal spread (maxSkew 1,
  DoNotSchedule), hostname spread, zonal self-affinity and hostname anti-affinity (all sharing
  ``app=nginx``); CPU from {100m, 250m, 500m, 1, 1.5}, memory from {100Mi, 256Mi, 512Mi, 1Gi, 2Gi,
  4Gi}, seed 42. Spread and affinity pods carry one of seven label values and select their own.
* ``plain``: Karpenter's plain ("generic") pods: each draws a label ``my-label`` from seven
  values, then CPU from {100m, 250m, 500m, 1, 1.5} and memory from {100Mi, 256Mi, 512Mi, 1Gi, 2Gi,
  4Gi}, independently and uniformly, as ``makeGenericPods`` in Karpenter's
  scheduling_benchmark_test.go does (same sets, same draw order; Python's generator, not Go's, so
  the same distribution, not the same sequence — ``--dump`` writes the pods for a side-by-side run).
* ``wide``: plain pods whose CPU (100m … 3) and memory (128Mi … 6Gi) are drawn independently:
  larger and more varied than Karpenter's (this was the ``plain`` mix before it followed
  Karpenter).
* ``memory``: plain pods with CPU 100m … 1 and memory 1 … 16 GiB.
* ``daemonset``: the wide mix on a cluster with three DaemonSets (350m / 448Mi per node).

The bound is the assignment LP of ``bounds.py`` (which pod shape fits which type, solved with
HiGHS), and at least the price of the cheapest type that holds the largest pod. No packing can
cost less, so ``plan / bound - 1`` bounds the distance from optimal; ``--integer SECONDS`` adds a
whole-node solution of the same program as a reference. For the diverse mix the bound is loose:
it ignores that hostname anti-affinity forces one node per pod. ``--scenarios`` solves the
scenarios of ``scenarios.py`` on EC2's catalog instead of the catalogs and mixes.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import statistics
import time
from collections.abc import Callable, Sequence

import attrs
from bounds import Bound, assignment_bound
from scenarios import SCENARIOS, Scenario, scenario

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
from karpy.core.scheduling import Packing, SchedulerOptions, solve
from karpy.core.snapshot import ClusterSnapshot, DaemonSet, NodePool, NodePoolName
from karpy.testing.catalogs import realistic_instance_types
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
    """Karpenter's generic pods: a label value, then CPU and memory, each drawn uniformly from
    Karpenter's sets; no owner (each pod stands alone, as in Karpenter's benchmark)."""
    rng = random.Random(seed)
    pods = []
    for i in range(count):
        value = rng.choice(VALUES)
        requests = Resources.of({"cpu": rng.choice(CPUS), "memory": rng.choice(MEMORIES)})
        pods.append(
            Pod(
                uid=PodUID(f"pod-{i:06d}"),
                namespace="default",
                name=f"plain-{i}",
                containers=(Container("app", requests),),
                creation=i,
                labels={"my-label": value},
            )
        )
    return pods


def wide_pods(count: int, *, seed: int = 42) -> list[Pod]:
    """Plain pods whose CPU (100m … 3, in 100m steps) and memory (128Mi … 6Gi, in 128Mi steps)
    are drawn independently, as a cluster of unrelated Deployments requests them."""
    rng = random.Random(seed)
    return [
        _plain(i, f"{rng.randint(1, 30) * 100}m", f"{rng.randint(1, 48) * 128}Mi")
        for i in range(count)
    ]


def memory_pods(count: int, *, seed: int = 42) -> list[Pod]:
    """Memory-heavy plain pods: CPU 100m … 1 (100m steps), memory 1 … 16 GiB (256Mi steps)."""
    rng = random.Random(seed)
    return [
        _plain(i, f"{rng.randint(1, 10) * 100}m", f"{rng.randint(4, 64) * 256}Mi")
        for i in range(count)
    ]


def _plain(i: int, cpu: str, memory: str) -> Pod:
    requests = Resources.of({"cpu": cpu, "memory": memory})
    return Pod(
        uid=PodUID(f"pod-{i:06d}"),
        namespace="default",
        name=f"plain-{i}",
        containers=(Container("app", requests),),
        creation=i,
        labels={"app": f"app-{cpu}-{memory}"},
        owner=f"app-{cpu}-{memory}",
    )


def _cheapest(it: InstanceType) -> float:
    return min(o.price for o in it.offerings if o.available)


def lower_bound(
    pods: list[Pod],
    types: tuple[InstanceType, ...],
    overhead: Resources | None = None,
    *,
    limited: Sequence[tuple[tuple[InstanceType, ...], Resources]] = (),
    integral_seconds: float = 0.0,
) -> Bound:
    """The assignment LP (``bounds.assignment_bound``), and at least the cheapest type that holds
    the largest pod. ``overhead`` (DaemonSet pods) is taken off every type's allocatable;
    ``limited`` are NodePools with limits beside ``types``' unlimited one."""
    extra = overhead or Resources()
    found = assignment_bound(pods, types, extra, limited=limited, integral_seconds=integral_seconds)
    # Integrality: some node must hold the largest pod, so at least the cheapest type that fits it.
    largest = max(pods, key=lambda p: sorted(p.requests().items()))
    every = [*types, *(t for pool, _ in limited for t in pool)]
    fitting = [_cheapest(t) for t in every if (largest.requests() + extra).fits(t.allocatable)]
    return attrs.evolve(found, value=max(found.value, min(fitting))) if fitting else found


CATALOGS = ("fake", "realistic", "kwok", "aws")
MIXES = ("diverse", "plain", "wide", "memory", "daemonset")


def catalog(name: str) -> tuple[InstanceType, ...]:
    """The instance types of one catalog: Karpenter's 400 fake types, the seeded realistic
    catalog (``karpy.testing.catalogs``), or the kwok provider's shipped AWS-like catalog."""
    if name == "fake":
        return make_instance_types(400)
    if name == "realistic":
        return realistic_instance_types(seed=1)
    if name == "kwok":
        from karpy_kwok.catalog import shipped_instance_types

        return shipped_instance_types()
    if name == "aws":
        from karpy_aws_emulator.catalog import offline_instance_types

        return offline_instance_types()
    raise ValueError(f"unknown catalog {name!r}; choose from {', '.join(CATALOGS)}")


def daemonsets() -> tuple[DaemonSet, ...]:
    """Three DaemonSets as a typical cluster runs them (CNI, log shipper, node exporter)."""
    shapes = (("cni", "100m", "128Mi"), ("logs", "200m", "256Mi"), ("metrics", "50m", "64Mi"))
    return tuple(
        DaemonSet(
            "kube-system",
            name,
            Pod(
                uid=PodUID(f"ds-{name}"),
                namespace="kube-system",
                name=name,
                containers=(Container("main", Resources.of({"cpu": cpu, "memory": memory})),),
            ),
        )
        for name, cpu, memory in shapes
    )


def pods_for(mix: str, count: int) -> list[Pod]:
    if mix == "diverse":
        return diverse_pods(count)
    if mix == "plain":
        return plain_pods(count)
    if mix in ("wide", "daemonset"):
        return wide_pods(count)
    if mix == "memory":
        return memory_pods(count)
    raise ValueError(f"unknown mix {mix!r}; choose from {', '.join(MIXES)}")


def dump(pods: list[Pod], path: str) -> None:
    """Write plain pods as JSON (uid, cpu, memory, labels) for a side-by-side run of Karpenter's
    scheduler on the very same pods (benchmarks/README.md, *Side by side with Karpenter*)."""
    rows = []
    for pod in pods:
        requests = pod.requests()
        rows.append(
            {
                "uid": str(pod.uid),
                "cpu": f"{requests.get_amount('cpu')}m",
                "memory": str(requests.get_amount("memory") // 1000),
                "labels": dict(pod.labels),
            }
        )
    with open(path, "w", encoding="utf-8") as f:
        json.dump(rows, f)


@attrs.frozen
class Row:
    catalog: str
    mix: str
    packing: str
    pods: int
    placed: int
    rate: float
    cpu_rate: float
    nodes: int
    price: float
    bound: Bound


def mix_scenario(catalog_name: str, mix: str, count: int) -> Scenario:
    """One of the catalogs and mixes above as a scenario: one NodePool without limits."""
    types = catalog(catalog_name)
    pool = NodePool(NodePoolName("default"))
    ds = daemonsets() if mix == "daemonset" else ()
    snapshot = ClusterSnapshot(nodepools=(pool,), instance_types={pool.name: types}, daemonsets=ds)
    overhead = Resources()
    for d in ds:
        overhead = overhead + d.pod.requests()
    return Scenario(mix, snapshot, pods_for(mix, count), types, overhead)


def run(
    catalog_name: str, problem: Scenario, repeat: int, packing: str, integral_seconds: float = 0.0
) -> Row:
    """Solve ``repeat`` times; pods/s is the median run's."""
    times: list[float] = []
    cpu_times: list[float] = []
    results = None
    options = SchedulerOptions(packing=Packing(packing))
    for _ in range(repeat):
        start, cpu_start = time.perf_counter(), time.process_time()
        results = solve(problem.snapshot, problem.pods, options)
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
    if results is None:
        raise ValueError("repeat must be at least 1")
    bound = lower_bound(
        problem.pods,
        problem.types,
        problem.overhead,
        limited=problem.limited,
        integral_seconds=integral_seconds,
    )
    count = len(problem.pods)
    return Row(
        catalog_name,
        problem.name,
        packing,
        count,
        len(results.placed()),
        count / statistics.median(times),
        count / max(statistics.median(cpu_times), 1e-9),
        len(results.nodeclaims),
        results.price,
        bound,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="500,5000,20000")
    parser.add_argument("--catalogs", default=",".join(CATALOGS))
    parser.add_argument("--mixes", default=",".join(MIXES))
    parser.add_argument("--packing", default="balanced,karpenter")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument(
        "--scenarios",
        help=f"solve these scenarios on EC2's catalog instead ({', '.join(SCENARIOS)})",
    )
    parser.add_argument(
        "--integer",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="also solve the bound's program in whole nodes for SECONDS (an integer reference)",
    )
    parser.add_argument(
        "--dump", metavar="DIR", help="write each mix and size's pods to DIR/<mix>-<size>.json"
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.dump:
        for mix in args.mixes.split(","):
            for size in sizes:
                dump(pods_for(mix, size), os.path.join(args.dump, f"{mix}-{size}.json"))
        return
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    header = (
        "catalog",
        "mix",
        "packing",
        "pods",
        "placed",
        "pods/s",
        "pods/cpu-s",
        "nodes",
        "$/h",
        "bound",
        "gap",
        "int ref",
        "gap",
    )
    line = "{:9} {:12} {:9} {:>6} {:>6} {:>8} {:>10} {:>6} {:>10} {:>10} {:>7} {:>10} {:>7}"
    print(line.format(*header))
    problems: list[tuple[str, Callable[[int], Scenario]]] = []
    if args.scenarios:
        ec2 = catalog("aws")
        for name in args.scenarios.split(","):
            problems.append(("aws", functools.partial(scenario, name, catalog=ec2)))
    else:
        for catalog_name in args.catalogs.split(","):
            for mix in args.mixes.split(","):
                problems.append((catalog_name, functools.partial(mix_scenario, catalog_name, mix)))
    for catalog_name, make in problems:
        for size in sizes:
            problem = make(size)
            for packing in args.packing.split(","):
                r = run(catalog_name, problem, args.repeat, packing, args.integer)
                integer = r.bound.integer
                print(
                    line.format(
                        r.catalog,
                        r.mix,
                        r.packing,
                        r.pods,
                        r.placed,
                        f"{r.rate:.0f}",
                        f"{r.cpu_rate:.0f}",
                        r.nodes,
                        f"{r.price:.2f}",
                        f"{r.bound.value:.2f}",
                        f"{(r.price / r.bound.value - 1) * 100:.2f}%",
                        "-" if integer is None else f"{integer:.2f}",
                        "-" if integer is None else f"{(r.price / integer - 1) * 100:.2f}%",
                    ),
                    flush=True,
                )
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
