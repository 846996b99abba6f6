"""Disruption simulation benchmark: what the controller's Simulate costs per call.

Run: ``.venv/bin/python benchmarks/disruption_simulation.py [--nodes 2000] [--pods-per-node 10]
[--pending 20] [--single 20] [--multi 5] [--multi-size 10]``

Builds the API objects one consistent read of a cluster gives the disruption controller
(`karpy.state.snapshot.ClusterObjects`): one NodePool, N registered Nodes of the fake instance
types (karpy.testing.instancetypes, 4-16 vCPU, three zones) each with its NodeClaim and about
``--pods-per-node`` bound pods of eight ReplicaSets (100m-1 CPU, 128Mi-2Gi), plus ``--pending``
unbound pods (waiting pods, solved first in every simulation). Seeded (42).

Times, with the real closure (`karpy.controllers.disruption.simulation.simulator`, relaxed as
consolidation uses it): building the simulator, then ``--single`` simulations of one candidate
(single-node consolidation's shape) and ``--multi`` of ``--multi-size`` candidates (multi-node
consolidation's), on different nodes each time. Prints the mean and worst time per call of each.
The first call is reported on its own: it pays for any per-pass work done lazily.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs

from karpy.apis.codec import from_dict
from karpy.apis.kube.node import Node
from karpy.apis.kube.pod import Pod
from karpy.apis.v1 import labels as wk
from karpy.apis.v1.nodeclaim import NodeClaim
from karpy.apis.v1.nodepool import NodePool
from karpy.controllers.disruption.simulation import simulator
from karpy.core.disruption.candidates import Candidate, NodeFacts, PoolDisruption
from karpy.core.disruption.methods import Simulation
from karpy.core.scheduling.options import SchedulerOptions
from karpy.state.snapshot import ClusterObjects
from karpy.testing.instancetypes import FAKE_ZONES, make_instance_types

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TYPES = make_instance_types(16)
SHAPES = (
    ("100m", "128Mi"),
    ("250m", "256Mi"),
    ("250m", "1Gi"),
    ("500m", "512Mi"),
    ("500m", "2Gi"),
    ("750m", "1Gi"),
    ("1", "1Gi"),
    ("1", "2Gi"),
)


def nodepool() -> NodePool:
    return from_dict(
        NodePool,
        {
            "metadata": {"name": "apps"},
            "spec": {
                "template": {
                    "metadata": {"labels": {"intent": "apps"}},
                    "spec": {
                        "requirements": [
                            {
                                "key": wk.LABEL_CAPACITY_TYPE,
                                "operator": "In",
                                "values": [wk.CAPACITY_TYPE_ON_DEMAND],
                            }
                        ],
                        "nodeClassRef": {"group": "karpy.sh", "kind": "K", "name": "default"},
                    },
                }
            },
        },
    )


def _templates() -> list[Pod]:
    """One pod per ReplicaSet, each with its requests; every pod is an evolved copy."""
    out = []
    for i, (cpu, memory) in enumerate(SHAPES):
        spec: dict[str, Any] = {
            "nodeSelector": {"intent": "apps"},
            "containers": [
                {"name": "app", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
            ],
        }
        owner = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": f"app-{i}",
            "uid": f"rs-{i}",
            "controller": True,
        }
        meta = {"name": f"app-{i}", "namespace": f"ns-{i % 3}", "uid": f"app-{i}"}
        out.append(
            from_dict(
                Pod,
                {
                    "metadata": {**meta, "labels": {"app": f"app-{i}"}, "ownerReferences": [owner]},
                    "spec": spec,
                },
            )
        )
    return out


def _pod(template: Pod, index: int, node_name: str | None) -> Pod:
    name = f"{template.metadata.name}-{index}"
    meta = attrs.evolve(
        template.metadata,
        name=name,
        uid=f"uid-{name}",
        creation_timestamp=T0 + timedelta(seconds=index),
    )
    return attrs.evolve(
        template, metadata=meta, spec=attrs.evolve(template.spec, node_name=node_name)
    )


def cluster(nodes: int, per_node: int, pending: int, seed: int = 42) -> ClusterObjects:
    rng = random.Random(seed)
    templates = _templates()
    kube_nodes: list[Node] = []
    claims: list[NodeClaim] = []
    pods: list[Pod] = []
    index = 0
    for n in range(nodes):
        it = TYPES[rng.choice((3, 5, 7, 11, 15))]
        name = f"node-{n:05d}"
        labels = {
            "intent": "apps",
            wk.LABEL_NODEPOOL: "apps",
            wk.LABEL_NODE_INITIALIZED: "true",
            wk.LABEL_INSTANCE_TYPE: it.name,
            wk.LABEL_CAPACITY_TYPE: wk.CAPACITY_TYPE_ON_DEMAND,
            wk.LABEL_TOPOLOGY_ZONE: FAKE_ZONES[n % len(FAKE_ZONES)],
            wk.LABEL_HOSTNAME: name,
        }
        allocatable = it.allocatable.render()
        kube_nodes.append(
            from_dict(
                Node,
                {
                    "metadata": {"name": name, "labels": labels},
                    "status": {"allocatable": allocatable, "capacity": allocatable},
                },
            )
        )
        claims.append(
            from_dict(
                NodeClaim,
                {
                    "metadata": {"name": name, "labels": labels},
                    "spec": {
                        "requirements": [],
                        "nodeClassRef": {"group": "karpy.sh", "kind": "K", "name": "default"},
                    },
                    "status": {"nodeName": name, "allocatable": allocatable},
                },
            )
        )
        for _ in range(max(1, per_node + rng.randint(-3, 3))):
            pods.append(_pod(rng.choice(templates), index, name))
            index += 1
    for _ in range(pending):
        pods.append(_pod(rng.choice(templates), index, None))
        index += 1
    return ClusterObjects(nodepools=[nodepool()], nodes=kube_nodes, nodeclaims=claims, pods=pods)


def candidate(name: str) -> Candidate:
    facts = NodeFacts(nodeclaim=name, node=name, nodepool="apps", created_at=0)
    return Candidate(facts=facts, pool=PoolDisruption(consolidate_after=0.0), cost=1.0)


def _timed(call: Callable[[], Simulation]) -> tuple[float, Simulation]:
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result


def _report(label: str, times: Sequence[float]) -> None:
    if not times:
        return
    print(
        f"{label:<28} calls {len(times):>3}  mean {statistics.mean(times) * 1000:8.1f} ms"
        f"  max {max(times) * 1000:8.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--pods-per-node", type=int, default=10)
    parser.add_argument("--pending", type=int, default=20)
    parser.add_argument("--single", type=int, default=20)
    parser.add_argument("--multi", type=int, default=5)
    parser.add_argument("--multi-size", type=int, default=10)
    args = parser.parse_args()

    start = time.perf_counter()
    objects = cluster(args.nodes, args.pods_per_node, args.pending)
    print(
        f"cluster: {len(objects.nodes)} nodes, {len(objects.pods)} pods"
        f" ({args.pending} unbound), built in {time.perf_counter() - start:.1f} s"
    )
    types = {"apps": TYPES}
    start = time.perf_counter()
    simulate = simulator(objects, types, SchedulerOptions(), relax=True)
    print(f"{'simulator()':<28} {(time.perf_counter() - start) * 1000:8.1f} ms")

    rng = random.Random(7)
    names = [n.metadata.name or "" for n in objects.nodes]
    picks = rng.sample(names, min(len(names), args.single + args.multi * args.multi_size))
    first, result = _timed(lambda: simulate([candidate(picks[0])]))
    _report("first call (1 candidate)", [first])
    single: list[float] = []
    replaced = 0
    for name in picks[1 : args.single]:
        took, result = _timed(lambda name=name: simulate([candidate(name)]))  # type: ignore[misc]
        single.append(took)
        replaced += bool(result.plans)
    _report("single (1 candidate)", single)
    multi: list[float] = []
    rest = picks[args.single :]
    for i in range(args.multi):
        group = rest[i * args.multi_size : (i + 1) * args.multi_size]
        if not group:
            break
        took, result = _timed(lambda group=group: simulate([candidate(n) for n in group]))  # type: ignore[misc]
        multi.append(took)
    _report(f"multi ({args.multi_size} candidates)", multi)
    print(f"single simulations that need a replacement: {replaced} of {len(single)}")


if __name__ == "__main__":
    main()
