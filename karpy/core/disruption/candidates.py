"""Disruption candidates: which NodeClaims a disruption method may act on now, and what each would
cost to disrupt. Pure (no I/O, no clock: `now` is UTC epoch seconds, passed in).

The controller reads cluster state into `NodeFacts` (one per NodeClaim) and `PoolDisruption` (one
per live NodePool); `select` applies Karpenter's candidate filter, the same for every method:
managed (nodepool label, NodePool present), registered and Initialized, not deleting, not
already in a disruption command, not nominated for pending pods. Graceful methods (emptiness,
drift, consolidation) are further blocked by `karpenter.sh/do-not-disrupt` on the node or on any
of its pods (`"true"`, or a duration counted from the pod's start) and by a PodDisruptionBudget
that forbids evicting one of its pods. Every NodeClaim left out gets a reason, so the caller can
say why in an event.

Disruption cost is Karpenter's: the sum over the node's reschedulable pods of
1 + deletion-cost/2^27 + priority/2^25 (each clamped to [-10, 10]), times the fraction of the
NodeClaim's lifetime (expireAfter) that remains. Methods disrupt cheaper candidates first.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping, Sequence

import attrs

from karpy.core.disruption.budgets import BudgetSpec
from karpy.core.instancetypes import InstanceType

DELETION_COST_SCALE = 2.0**27
PRIORITY_SCALE = 2.0**25
EVICTION_COST_BOUND = 10.0


class Policy(enum.StrEnum):
    """NodePool `spec.disruption.consolidationPolicy`."""

    WHEN_EMPTY = "WhenEmpty"
    WHEN_EMPTY_OR_UNDERUTILIZED = "WhenEmptyOrUnderutilized"
    BALANCED = "Balanced"


@attrs.frozen(kw_only=True)
class PoolDisruption:
    """A NodePool's disruption settings as the core sees them.

    `consolidate_after` is in seconds, None for Never. `error` carries a translation failure
    (an unparsable consolidateAfter): the pool's nodes are then left alone by consolidation and
    emptiness. `static` marks a NodePool with `spec.replicas`.
    """

    consolidate_after: float | None
    budgets: tuple[BudgetSpec, ...] = (BudgetSpec(),)
    policy: Policy = Policy.WHEN_EMPTY_OR_UNDERUTILIZED
    static: bool = False
    error: str | None = None
    min_improvement: float = 0.0


@attrs.frozen(kw_only=True)
class PodFacts:
    """One reschedulable pod on a candidate's node (DaemonSet, mirror, terminal and terminating
    pods are not passed: they do not need a new home).

    `do_not_disrupt_until` is when the pod's `karpenter.sh/do-not-disrupt` stops protecting it
    (epoch seconds; `math.inf` for "true"; None when the pod is not annotated). `blocking_pdb`
    names a PodDisruptionBudget (`namespace/name`) that forbids evicting it now.
    """

    name: str
    uid: str
    deletion_cost: float = 0.0
    priority: int = 0
    do_not_disrupt_until: float | None = None
    blocking_pdb: str | None = None


@attrs.frozen(kw_only=True)
class NodeFacts:
    """One NodeClaim as disruption sees it, read from cluster state by the caller.

    `disrupting` marks a NodeClaim already in an orchestration command; `ready` is the Node's
    Ready condition (a NotReady node counts against budgets, as in Karpenter); `drifted` is the
    reason of a True `Drifted` condition; `consolidatable` is a True `Consolidatable` condition
    (the nodeclaim.disruption controller sets it once the NodePool's consolidateAfter has
    passed since `quiet_since`; the core reads it and never recomputes it). `pods` are the
    node's reschedulable pods.
    """

    nodeclaim: str
    node: str | None
    nodepool: str | None
    created_at: float
    initialized_at: float | None = None
    last_pod_event_time: float | None = None
    expire_after: float | None = None
    instance_type: str | None = None
    capacity_type: str | None = None
    zone: str | None = None
    price: float | None = None
    ready: bool = True
    deleting: bool = False
    disrupting: bool = False
    do_not_disrupt: bool = False
    nominated: bool = False
    drifted: str | None = None
    consolidatable: bool = False
    pods: tuple[PodFacts, ...] = ()

    @property
    def empty(self) -> bool:
        """No reschedulable pod runs on it."""
        return not self.pods

    @property
    def managed(self) -> bool:
        """Initialized and counted toward its NodePool's budget (Karpenter's rule)."""
        return self.nodepool is not None and self.initialized_at is not None

    @property
    def quiet_since(self) -> float | None:
        """When the node was last busy: lastPodEventTime, or Initialized when no pod event came
        yet (where the `Consolidatable` condition's consolidateAfter counts from; Emptiness
        deletes the longest quiet first)."""
        if self.initialized_at is None:
            return None
        if self.last_pod_event_time is not None:
            return self.last_pod_event_time
        return self.initialized_at


class SkipReason(enum.StrEnum):
    """Why a NodeClaim is not a candidate, or was not chosen."""

    UNMANAGED = "Unmanaged"
    NODEPOOL_NOT_FOUND = "NodePoolNotFound"
    NOT_INITIALIZED = "NotInitialized"
    DELETING = "Deleting"
    DISRUPTING = "Disrupting"
    NOMINATED = "Nominated"
    DO_NOT_DISRUPT = "DoNotDisrupt"
    POD_DO_NOT_DISRUPT = "PodDoNotDisrupt"
    PDB = "PodDisruptionBudget"
    CONSOLIDATION_DISABLED = "ConsolidateAfterNever"
    INVALID_CONSOLIDATE_AFTER = "InvalidConsolidateAfter"
    NOT_CONSOLIDATABLE = "NotConsolidatable"
    BUDGET = "Budget"
    UNSCHEDULABLE = "Unschedulable"
    POLICY = "ConsolidationPolicy"
    NOT_CHEAPER = "NotCheaper"
    BELOW_IMPROVEMENT = "BelowMinimumImprovement"
    SAME_TYPE = "SameInstanceType"
    PRICE_UNKNOWN = "PriceUnknown"
    SPOT_TO_SPOT = "SpotToSpot"


@attrs.frozen(kw_only=True)
class Skip:
    """A NodeClaim left alone, with the reason and a one-line explanation. `blocked` marks
    reasons a user can act on (a budget, a do-not-disrupt annotation, a PDB, pods that would not
    fit): the controller reports those as `DisruptionBlocked` events."""

    nodeclaim: str
    node: str | None
    reason: SkipReason
    message: str

    @property
    def blocked(self) -> bool:
        return self.reason in BLOCKING


BLOCKING = frozenset(
    {
        SkipReason.DO_NOT_DISRUPT,
        SkipReason.POD_DO_NOT_DISRUPT,
        SkipReason.PDB,
        SkipReason.BUDGET,
        SkipReason.UNSCHEDULABLE,
    }
)


@attrs.frozen(kw_only=True)
class Candidate:
    """A NodeClaim a method may disrupt, with its disruption cost."""

    facts: NodeFacts
    pool: PoolDisruption
    cost: float

    @property
    def name(self) -> str:
        return self.facts.nodeclaim

    @property
    def nodepool(self) -> str:
        return self.facts.nodepool or ""


@attrs.frozen(kw_only=True)
class Selection:
    """The candidates (by name) and every NodeClaim left out, with why."""

    candidates: tuple[Candidate, ...]
    skipped: tuple[Skip, ...]


def eviction_cost(pod: PodFacts) -> float:
    """Karpenter's EvictionCost: 1 + deletion-cost/2^27 + priority/2^25, clamped to [-10, 10]."""
    cost = 1.0 + pod.deletion_cost / DELETION_COST_SCALE + pod.priority / PRIORITY_SCALE
    return min(EVICTION_COST_BOUND, max(-EVICTION_COST_BOUND, cost))


def lifetime_remaining(facts: NodeFacts, *, now: float) -> float:
    """The fraction of the NodeClaim's expireAfter still ahead of it (1 without expiry)."""
    if facts.expire_after is None or facts.expire_after <= 0:
        return 1.0
    remaining = (facts.expire_after - (now - facts.created_at)) / facts.expire_after
    return min(1.0, max(0.0, remaining))


def disruption_cost(facts: NodeFacts, *, now: float) -> float:
    """Karpenter's disruption cost: rescheduling cost of the pods x lifetime remaining."""
    return math.fsum(eviction_cost(p) for p in facts.pods) * lifetime_remaining(facts, now=now)


def _skip(facts: NodeFacts, reason: SkipReason, message: str) -> Skip:
    return Skip(nodeclaim=facts.nodeclaim, node=facts.node, reason=reason, message=message)


def _ineligible(facts: NodeFacts, pools: Mapping[str, PoolDisruption]) -> Skip | None:
    """Why no method may touch `facts` at all, if any."""
    if facts.nodepool is None:
        return _skip(facts, SkipReason.UNMANAGED, "nodeclaim has no karpenter.sh/nodepool label")
    if facts.nodepool not in pools:
        return _skip(facts, SkipReason.NODEPOOL_NOT_FOUND, f"nodepool {facts.nodepool} not found")
    if facts.deleting:
        return _skip(facts, SkipReason.DELETING, "nodeclaim is already being deleted")
    if facts.disrupting:
        return _skip(facts, SkipReason.DISRUPTING, "nodeclaim is already being disrupted")
    if facts.initialized_at is None or facts.node is None:
        return _skip(facts, SkipReason.NOT_INITIALIZED, "nodeclaim is not initialized")
    if facts.nominated:
        return _skip(facts, SkipReason.NOMINATED, "node is nominated for pending pods")
    return None


def _gracefully_blocked(facts: NodeFacts, *, now: float) -> Skip | None:
    """Why a graceful method may not touch `facts`, if any: do-not-disrupt or a PDB."""
    if facts.do_not_disrupt:
        return _skip(
            facts,
            SkipReason.DO_NOT_DISRUPT,
            "disruption is blocked by the karpenter.sh/do-not-disrupt annotation on the node",
        )
    for pod in facts.pods:
        if pod.do_not_disrupt_until is not None and now < pod.do_not_disrupt_until:
            return _skip(
                facts,
                SkipReason.POD_DO_NOT_DISRUPT,
                f'pod "{pod.name}" has "karpenter.sh/do-not-disrupt" annotation',
            )
    for pod in facts.pods:
        if pod.blocking_pdb is not None:
            return _skip(
                facts,
                SkipReason.PDB,
                f'pdb "{pod.blocking_pdb}" prevents pod evictions (pod "{pod.name}")',
            )
    return None


def select(
    nodes: Iterable[NodeFacts],
    pools: Mapping[str, PoolDisruption],
    *,
    now: float,
    graceful: bool = True,
) -> Selection:
    """The NodeClaims any method may disrupt now, cheapest to disrupt first (ties by name), and
    every NodeClaim left out. `graceful=False` drops the do-not-disrupt and PDB checks."""
    found: list[Candidate] = []
    skipped: list[Skip] = []
    for facts in nodes:
        skip = _ineligible(facts, pools)
        if skip is None and graceful:
            skip = _gracefully_blocked(facts, now=now)
        if skip is not None:
            skipped.append(skip)
            continue
        pool = pools[facts.nodepool or ""]
        found.append(Candidate(facts=facts, pool=pool, cost=disruption_cost(facts, now=now)))
    found.sort(key=lambda c: (c.cost, c.name))
    return Selection(candidates=tuple(found), skipped=tuple(skipped))


def offering_price(
    instance_types: Mapping[str, Sequence[InstanceType]],
    nodepool: str | None,
    instance_type: str | None,
    zone: str | None,
    capacity_type: str | None,
) -> float | None:
    """The price per hour of `nodepool`'s offering of `instance_type` in `zone` and
    `capacity_type` (available or not: a node already bought is priced at what it runs on);
    None when any is unknown."""
    for it in instance_types.get(nodepool or "", ()):
        if it.name == instance_type:
            for o in it.offerings:
                if o.zone == zone and o.capacity_type == capacity_type:
                    return o.price
    return None


def priced(
    found: Iterable[NodeFacts], instance_types: Mapping[str, Sequence[InstanceType]]
) -> list[NodeFacts]:
    """`found` with each NodeClaim's price (`offering_price`), where it is known: how the
    controller, `karpy explain` and `karpy simulate --consolidate` price the nodes they decide
    on."""
    prices: dict[tuple[str, str, str, str], float] = {}
    for pool, types in instance_types.items():
        for it in types:
            for o in it.offerings:
                prices.setdefault((pool, it.name, o.zone, o.capacity_type), o.price)
    out: list[NodeFacts] = []
    for f in found:
        key = (f.nodepool or "", f.instance_type or "", f.zone or "", f.capacity_type or "")
        out.append(attrs.evolve(f, price=prices[key]) if key in prices else f)
    return out
