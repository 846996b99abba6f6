"""`karpy simulate --consolidate`: what consolidation would do to a scenario's existing nodes.

The scenario's nodes with their pods are the fleet. Each step runs the disruption controller's
pure pass (karpy.core.disruption.decision.disrupt with the controller's methods: nothing in a
scenario is drifted, so Emptiness, then multi-node and single-node consolidation act, with the
NodePools' `disruption` settings and budgets) against a simulation that answers as the
controller's does: the candidates' pods re-placed by the scheduler over the other
nodes, then new NodeClaims. Each command is applied as the orchestration queue would run it
(replacement launched as its cheapest allowed offering, candidates removed, their pods where the
solve put them) and the next pass runs on the result, until a pass has nothing to do. The last
pass says why each remaining node is kept.

What protects a node is read as the controller reads it (karpy.state.protection): a
`karpenter.sh/do-not-disrupt` node, a pod's do-not-disrupt annotation ("true", or a duration
from its startTime), and PodDisruptionBudgets, whose allowed disruptions are computed against
the scenario's pods as the Kubernetes disruption controller computes them
(karpy.core.disruption.pdb) before every pass.

Time stands still at the scenario's `now` (DEFAULT_NOW unless the scenario or the command line
says): budget schedules are evaluated at it, and every node counts as quiet since long before it
(only a consolidateAfter of `Never` holds a pool back). Pending pods are not placed (plain
`karpy simulate` plans them); they count as expected but unhealthy pods of the PDBs covering
them. Pure, like the core.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence

import attrs

from karpy.apis.kube.workloads import PodDisruptionBudget, PodDisruptionBudgetStatus
from karpy.apis.v1 import labels as wk
from karpy.core.disruption.candidates import (
    Candidate,
    NodeFacts,
    PodFacts,
    PoolDisruption,
    Skip,
    offering_price,
    priced,
)
from karpy.core.disruption.consolidation import Settings, consolidation_solve
from karpy.core.disruption.decision import Memo, disrupt, disruption_methods
from karpy.core.disruption.methods import Command, Simulation, offers
from karpy.core.disruption.pdb import desired_healthy, disruptions_allowed
from karpy.core.instancetypes import InstanceType
from karpy.core.pods import Pod
from karpy.core.scheduling import SchedulerOptions
from karpy.core.scheduling.results import NodeClaimPlan, Results
from karpy.core.snapshot import ClusterSnapshot, Node, NodeName
from karpy.state.protection import Budgets

DEFAULT_NOW = 1_893_456_000.0
"""The scenario's clock when it names none: 2030-01-01T00:00:00Z (a Tuesday). Nodes count as
initialized at the epoch, so any consolidateAfter has passed by then."""
MAX_STEPS = 200
"""Passes at most (every command lowers the price, so the loop ends long before)."""


@attrs.frozen(kw_only=True)
class Protection:
    """What keeps a scenario's nodes from graceful disruption: each annotated pod's
    do-not-disrupt end (by uid, epoch seconds, `math.inf` for "true"), the nodes annotated
    `karpenter.sh/do-not-disrupt: "true"`, and the PodDisruptionBudgets (status unset: it is
    computed against the fleet before every pass)."""

    pods: Mapping[str, float] = attrs.field(factory=dict)
    nodes: frozenset[str] = frozenset()
    pdbs: tuple[PodDisruptionBudget, ...] = ()


@attrs.frozen(kw_only=True)
class Step:
    """One command, the fleet's price after it, and the nodes it launched."""

    command: Command
    price_after: float
    launched: tuple[str, ...]


@attrs.frozen(kw_only=True)
class Report:
    """What consolidation does to a scenario: the steps in order, the nodes and $/h before and
    after, and the reason each node that stays is kept."""

    steps: tuple[Step, ...]
    before: tuple[Node, ...]
    after: tuple[Node, ...]
    price_before: float | None
    price_after: float | None
    kept: tuple[Skip, ...]
    instance_types: Mapping[str, Sequence[InstanceType]]


def _labels(node: Node) -> dict[str, str]:
    return dict(node.labels)


def node_price(node: Node, instance_types: Mapping[str, Sequence[InstanceType]]) -> float | None:
    """The node's price per hour: its NodePool's offering of its instance type, zone and
    capacity type (labels, `offering_price`); None when any is unknown."""
    labels = _labels(node)
    return offering_price(
        instance_types,
        node.nodepool,
        labels.get(wk.LABEL_INSTANCE_TYPE),
        labels.get(wk.LABEL_TOPOLOGY_ZONE),
        labels.get(wk.LABEL_CAPACITY_TYPE),
    )


def fleet_price(
    nodes: Sequence[Node], instance_types: Mapping[str, Sequence[InstanceType]]
) -> float | None:
    """The nodes' price per hour together, None when some price is unknown."""
    prices = [node_price(n, instance_types) for n in nodes]
    if any(p is None for p in prices):
        return None
    return math.fsum(p for p in prices if p is not None)


def _facts(node: Node, protection: Protection, budgets: Budgets) -> NodeFacts:
    """The node as the controller's facts describe a NodeClaim (priced afterwards, `priced`)."""
    labels = _labels(node)
    return NodeFacts(
        nodeclaim=node.name,
        node=node.name,
        nodepool=node.nodepool,
        created_at=0.0,
        initialized_at=0.0 if node.initialized else None,
        consolidatable=node.initialized,  # quiet since long before `now`
        instance_type=labels.get(wk.LABEL_INSTANCE_TYPE),
        capacity_type=labels.get(wk.LABEL_CAPACITY_TYPE),
        zone=labels.get(wk.LABEL_TOPOLOGY_ZONE),
        do_not_disrupt=node.name in protection.nodes,
        pods=tuple(
            PodFacts(
                name=p.key,
                uid=p.uid,
                priority=p.priority,
                do_not_disrupt_until=protection.pods.get(p.uid),
                blocking_pdb=budgets.blocking(p.namespace, p.label_map()),
            )
            for p in node.pods
        ),
    )


def pdb_budgets(
    pdbs: Sequence[PodDisruptionBudget], running: Sequence[Pod], pending: Sequence[Pod]
) -> Budgets:
    """The PDBs with the status the Kubernetes disruption controller would give them: the
    pods they cover on nodes are healthy, the pending ones expected but not healthy."""
    index = Budgets(pdbs)
    healthy: Counter[tuple[str | None, str | None]] = Counter()
    expected: Counter[tuple[str | None, str | None]] = Counter()
    for pods, counts in ((running, (healthy, expected)), (pending, (expected,))):
        for pod in pods:
            for pdb in index.covering(pod.namespace, pod.label_map()):
                for count in counts:
                    count[(pdb.metadata.namespace, pdb.metadata.name)] += 1
    evaluated: list[PodDisruptionBudget] = []
    for pdb in pdbs:
        key = (pdb.metadata.namespace, pdb.metadata.name)
        desired = desired_healthy(
            min_available=pdb.spec.min_available,
            max_unavailable=pdb.spec.max_unavailable,
            expected=expected[key],
        )
        status = PodDisruptionBudgetStatus(
            disruptions_allowed=disruptions_allowed(
                healthy=healthy[key], desired=desired, expected=expected[key]
            ),
            current_healthy=healthy[key],
            desired_healthy=desired,
            expected_pods=expected[key],
        )
        evaluated.append(attrs.evolve(pdb, status=status))
    return Budgets(evaluated)


class _Fleet:
    """The scenario's snapshot as consolidation changes it."""

    def __init__(self, snapshot: ClusterSnapshot, options: SchedulerOptions) -> None:
        self.snapshot = snapshot
        self.options = options

    def results(self, names: set[str]) -> tuple[list[Pod], Results]:
        """The controller's solve: the named nodes' pods over the rest, preferences relaxed
        when that needs fewer new nodes."""
        moving = [p for n in self.snapshot.nodes if n.name in names for p in n.pods]
        rest = attrs.evolve(
            self.snapshot, nodes=tuple(n for n in self.snapshot.nodes if n.name not in names)
        )
        results = consolidation_solve(rest, moving, self.options)
        return moving, results

    def simulate(self, candidates: Sequence[Candidate]) -> Simulation:
        _, results = self.results({c.name for c in candidates})
        types = self.snapshot.instance_types
        return Simulation(
            plans=results.nodeclaims,
            unplaced=tuple(e.message for e in results.unplaced),
            offers=tuple(offers(plan, types) for plan in results.nodeclaims),
        )

    def apply(self, command: Command) -> tuple[str, ...]:
        """Run `command`; the names of the nodes it launched."""
        names = set(command.names)
        moving, results = self.results(names)
        by_uid = {p.uid: p for p in moving}
        kept = {n.name: n for n in self.snapshot.nodes if n.name not in names}
        for nomination in results.nominations:
            node = kept[NodeName(nomination.node)]
            kept[node.name] = attrs.evolve(node, pods=(*node.pods, by_uid[nomination.pod]))
        launched: list[str] = []
        for i, plan in enumerate(command.replacements):
            source = next((c for c in results.nodeclaims if set(c.pods) == set(plan.pods)), plan)
            node = self._launch(plan.nodepool, plan, name=f"{command.names[0]}-r{i}")
            kept[node.name] = attrs.evolve(node, pods=tuple(by_uid[u] for u in source.pods))
            launched.append(node.name)
        self.snapshot = attrs.evolve(self.snapshot, nodes=tuple(kept[k] for k in sorted(kept)))
        return tuple(launched)

    def _launch(self, pool_name: str, plan: NodeClaimPlan, *, name: str) -> Node:
        """The node a replacement launches as: its plan's cheapest allowed offering."""
        types = {it.name: it for it in self.snapshot.instance_types.get(pool_name, ())}
        _, it_name, zone, capacity = min(
            (o.price, n, o.zone, o.capacity_type)
            for n in plan.instance_types
            if n in types
            for o in types[n].offerings
            if o.available and o.capacity_type in plan.capacity_types and o.zone in plan.zones
        )
        it = types[it_name]
        pool = next(p for p in self.snapshot.nodepools if p.name == pool_name)
        labels = {
            **dict(pool.labels),
            wk.LABEL_INSTANCE_TYPE: it_name,
            wk.LABEL_TOPOLOGY_ZONE: zone,
            wk.LABEL_CAPACITY_TYPE: capacity,
            wk.LABEL_NODEPOOL: pool_name,
            wk.LABEL_HOSTNAME: name,
        }
        return Node(
            name=NodeName(name),
            labels=labels,
            taints=pool.taints,
            allocatable=it.allocatable,
            capacity=it.capacity,
            nodepool=pool.name,
        )


def _merged(earlier: Sequence[Skip], later: Sequence[Skip]) -> tuple[Skip, ...]:
    """Reasons from passes over the same fleet: a later pass's reason for a node wins, and a
    node cleared by an earlier pass keeps the reason it got there."""
    found = {k.nodeclaim: k for k in earlier}
    found.update((k.nodeclaim, k) for k in later)
    return tuple(found[n] for n in sorted(found))


def consolidate(
    snapshot: ClusterSnapshot,
    pools: Mapping[str, PoolDisruption],
    *,
    options: SchedulerOptions,
    settings: Settings | None = None,
    now: float = DEFAULT_NOW,
    protection: Protection | None = None,
    pending: Sequence[Pod] = (),
) -> Report:
    """Run consolidation over `snapshot`'s nodes to a fixed point at `now` (epoch seconds),
    with what `protection` protects; `pending` pods count toward the PDBs covering them."""
    protection = protection or Protection()
    settings = settings or Settings()
    methods = disruption_methods(settings)
    fleet = _Fleet(snapshot, options)
    types = snapshot.instance_types
    steps: list[Step] = []
    kept: tuple[Skip, ...] = ()
    memo = Memo()  # what the controller remembers between passes
    for _ in range(MAX_STEPS):
        running = [p for n in fleet.snapshot.nodes for p in n.pods]
        budgets = pdb_budgets(protection.pdbs, running, pending)
        facts = priced(
            (_facts(n, protection, budgets) for n in fleet.snapshot.nodes if not n.in_flight),
            types,
        )
        decision = disrupt(
            facts, pools, now=now, simulate=fleet.simulate, methods=methods, cleared=memo.cleared
        )
        kept = decision.kept if not memo.cleared else _merged(kept, decision.kept)
        memo.record(decision.outcome, now)
        if not decision.outcome.commands:
            if decision.outcome.complete:
                break
            continue  # stopped at the single-node limit: go on past what it cleared
        for command in decision.outcome.commands:
            launched = fleet.apply(command)
            price = fleet_price(fleet.snapshot.nodes, types)
            steps.append(Step(command=command, price_after=price or math.nan, launched=launched))
    return Report(
        steps=tuple(steps),
        before=snapshot.nodes,
        after=fleet.snapshot.nodes,
        price_before=fleet_price(snapshot.nodes, types),
        price_after=fleet_price(fleet.snapshot.nodes, types),
        kept=kept,
        instance_types=types,
    )
