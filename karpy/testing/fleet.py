"""A fleet of existing nodes for consolidation tests and benchmarks, with the core's solver.

`Fleet` holds nodes (an instance type, zone, capacity type and bound pods each) of one NodePool
and answers what the disruption controller's simulation answers, from the pure scheduler: where
the candidates' pods would go on the other nodes, plus new NodeClaims. `apply` runs a command
as the orchestration queue would (replacements become nodes holding the pods the solve planned
for them, the candidates go, their other pods land where the solve nominated them), so a test or
benchmark can run consolidation to a fixed point without a cluster.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import attrs

from karpy.apis.v1 import labels as wk
from karpy.core.disruption.candidates import NodeFacts, PodFacts, PoolDisruption
from karpy.core.disruption.consolidation import consolidation_solve
from karpy.core.disruption.methods import Command, Simulation, offers
from karpy.core.instancetypes import InstanceType
from karpy.core.pods import Pod
from karpy.core.scheduling import SchedulerOptions
from karpy.core.scheduling.results import Results
from karpy.core.snapshot import ClusterSnapshot, Node, NodeName, NodePool, NodePoolName


@attrs.frozen(kw_only=True)
class FleetNode:
    """One existing node: what it is and the pods bound to it."""

    name: str
    instance_type: str
    zone: str
    capacity_type: str
    pods: tuple[Pod, ...] = ()


@attrs.frozen(kw_only=True)
class Fleet:
    """Nodes of one NodePool, its instance types, and the pool's disruption settings."""

    pool: NodePool
    types: tuple[InstanceType, ...]
    nodes: tuple[FleetNode, ...]
    disruption: PoolDisruption = attrs.field(factory=lambda: PoolDisruption(consolidate_after=0.0))
    options: SchedulerOptions = attrs.field(factory=SchedulerOptions)

    def type_of(self, node: FleetNode) -> InstanceType:
        return next(t for t in self.types if t.name == node.instance_type)

    def price_of(self, node: FleetNode) -> float:
        return next(
            o.price
            for o in self.type_of(node).offerings
            if o.zone == node.zone and o.capacity_type == node.capacity_type
        )

    @property
    def price(self) -> float:
        """The fleet's price per hour."""
        return sum(self.price_of(n) for n in self.nodes)

    @property
    def pods(self) -> tuple[Pod, ...]:
        return tuple(p for n in self.nodes for p in n.pods)

    def facts(self) -> list[NodeFacts]:
        """NodeFacts as the controller would read them: all initialized long ago (so
        Consolidatable), priced."""
        return [
            NodeFacts(
                nodeclaim=n.name,
                node=n.name,
                nodepool=self.pool.name,
                created_at=0.0,
                initialized_at=0.0,
                consolidatable=True,
                instance_type=n.instance_type,
                capacity_type=n.capacity_type,
                zone=n.zone,
                price=self.price_of(n),
                pods=tuple(
                    PodFacts(name=p.key, uid=p.uid) for p in n.pods
                ),  # as the controller names them
            )
            for n in self.nodes
        ]

    def pools(self) -> dict[str, PoolDisruption]:
        return {self.pool.name: self.disruption}

    def _node(self, n: FleetNode) -> Node:
        it = self.type_of(n)
        labels = {
            wk.LABEL_INSTANCE_TYPE: n.instance_type,
            wk.LABEL_TOPOLOGY_ZONE: n.zone,
            wk.LABEL_CAPACITY_TYPE: n.capacity_type,
            wk.LABEL_NODEPOOL: self.pool.name,
            wk.LABEL_HOSTNAME: n.name,
        }
        return Node(
            name=NodeName(n.name),
            labels=labels,
            allocatable=it.allocatable,
            capacity=it.capacity,
            pods=n.pods,
            nodepool=self.pool.name,
        )

    @functools.cached_property
    def _core_nodes(self) -> dict[str, Node]:
        # Built once per fleet: a pass simulates dozens of times over the same nodes.
        return {n.name: self._node(n) for n in self.nodes}

    def _solve(self, names: set[str]) -> tuple[list[Pod], ClusterSnapshot]:
        moving = [p for n in self.nodes if n.name in names for p in n.pods]
        snapshot = ClusterSnapshot(
            nodepools=(self.pool,),
            instance_types={self.pool.name: self.types},
            nodes=tuple(node for name, node in self._core_nodes.items() if name not in names),
        )
        return moving, snapshot

    def _results(self, names: set[str]) -> tuple[list[Pod], Results]:
        """The controller's consolidation solve: preferences relaxed when that needs fewer new
        nodes (karpy.controllers.disruption.simulation)."""
        moving, snapshot = self._solve(names)
        results = consolidation_solve(snapshot, moving, self.options)
        return moving, results

    def simulate(self, candidates: Sequence[object]) -> Simulation:
        """The controller's simulation: the candidates' pods over the rest, then new nodes."""
        names = {getattr(c, "name", "") for c in candidates}
        _, results = self._results(names)
        plans = results.nodeclaims
        types: dict[str, Sequence[InstanceType]] = {self.pool.name: self.types}
        unplaced = tuple(f"{e.pod}: {e.message}" for e in results.unplaced)
        return Simulation(
            plans=plans, unplaced=unplaced, offers=tuple(offers(p, types) for p in plans)
        )

    def apply(self, command: Command) -> Fleet:
        """The fleet after `command`: candidates gone, their pods re-placed as planned (the
        replacement launches as its plan's cheapest offering)."""
        names = set(command.names)
        moving, results = self._results(names)
        by_uid = {p.uid: p for p in moving}
        kept = {n.name: n for n in self.nodes if n.name not in names}
        placed: dict[str, list[Pod]] = {}
        for nomination in results.nominations:
            placed.setdefault(nomination.node, []).append(by_uid[nomination.pod])
        for name, landed in placed.items():
            node = kept[name]
            kept[name] = attrs.evolve(node, pods=(*node.pods, *landed))
        for i, plan in enumerate(command.replacements):
            offer = _cheapest(self.types, plan.instance_types, plan.capacity_types, plan.zones)
            source = next((c for c in results.nodeclaims if set(c.pods) == set(plan.pods)), None)
            pods = tuple(by_uid[u] for u in (source or plan).pods)
            name = f"{command.names[0]}-r{i}"
            kept[name] = FleetNode(
                name=name,
                instance_type=offer[0],
                zone=offer[1],
                capacity_type=offer[2],
                pods=pods,
            )
        return attrs.evolve(self, nodes=tuple(kept[k] for k in sorted(kept)))


def _cheapest(
    types: Sequence[InstanceType],
    names: Sequence[str],
    capacity_types: Sequence[str],
    zones: Sequence[str],
) -> tuple[str, str, str]:
    """(instance type, zone, capacity type) of the cheapest offering a plan allows."""
    by_name: Mapping[str, InstanceType] = {t.name: t for t in types}
    best = min(
        (o.price, name, o.zone, o.capacity_type)
        for name in names
        for o in by_name[name].offerings
        if o.available and o.capacity_type in capacity_types and o.zone in zones
    )
    return best[1], best[2], best[3]


def pool(name: str = "default", **kwargs: object) -> NodePool:
    """A core NodePool for fleets."""
    return NodePool(NodePoolName(name), **kwargs)  # type: ignore[arg-type]
