"""After the solve: repack the worst-shaped NodeClaims together (a large-neighbourhood search).

The greedy pass fills NodeClaims in the batch's memory:CPU shape, and ``improve``/``peel`` move
pods one at a time; neither can fix a group of NodeClaims that each ended lopsided — say CPU-full
general-purpose nodes beside memory-full compute-optimised ones, left by the tail of the greedy
order. Solved on their own, the pods of those NodeClaims form a new, small batch with its own LP
shape, and the solver often packs them onto fewer or cheaper types.

``repack`` ranks the plan's NodeClaims by waste — one minus what their pods are worth at the
LP's unit prices (``Steering.weights``) over the NodeClaim's price — takes a window of the worst,
solves their pods alone (new NodeClaims only, the NodePools' limits less what the rest of the
plan and the existing nodes already hold) and keeps the result when it is strictly cheaper and
places every pod. A window that does not pay slides on by half its width. Only NodeClaims whose
pods are all *simple* (no topology that constrains or counts them, no host ports, no relaxed
preference) take part, so moving them cannot change any other pod's constraints. Pure and
deterministic; bounded by ``MAX_ROUNDS`` windows and by re-solving at most as many pods as the
batch holds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import attrs

from karpy.core.instancetypes import InstanceType
from karpy.core.pods import Pod, PodUID
from karpy.core.resources import Resources
from karpy.core.scheduling.pool import ResourceSpace
from karpy.core.scheduling.results import NodeClaimPlan, Results
from karpy.core.snapshot import NODES_LIMIT, ClusterSnapshot, NodePool

# Windows tried in all; the widest window; how far down the ranking windows may start (a share
# of the candidates: the rest are well-shaped already).
MAX_ROUNDS = 16
MAX_WINDOW = 40
REACH = 3
_EPSILON = 1e-6

Solve = Callable[[ClusterSnapshot, list[Pod]], Results]


@attrs.frozen
class Shape:
    """What ``repack`` needs from the solve that made ``Results``: which pods may move, and the
    LP's unit prices per NodePool in the solver's resource space."""

    space: ResourceSpace
    weights: Mapping[str, Sequence[Sequence[float]]]
    movable: frozenset[PodUID]


def repack(
    snapshot: ClusterSnapshot, pods: Sequence[Pod], results: Results, shape: Shape, solve: Solve
) -> Results:
    """``results`` with windows of its worst-shaped NodeClaims re-solved where that is cheaper."""
    if results.unplaced or not shape.weights:
        return results
    by_uid = {pod.uid: pod for pod in pods}
    scores = _Scores(shape, by_uid)
    plans = list(results.nodeclaims)
    budget = len(pods)
    offset = rounds = 0
    renamed = 0
    while rounds < MAX_ROUNDS and budget > 0:
        ranked = scores.ranked(plans)
        width = max(2, min(len(plans) // 10, MAX_WINDOW))
        if offset >= max(1, len(ranked) // REACH) or len(ranked) < 2:
            break
        rounds += 1
        window = ranked[offset : offset + width]
        moving = [by_uid[uid] for plan in window for uid in plan.pods]
        if len(moving) == len(by_uid) and not snapshot.nodes:
            # Every pod of the batch and nothing else in the cluster: the window is the solve's
            # own problem (the pods' order does not matter to it), and solving it again gives
            # the plan it started from, never a cheaper one.
            offset += max(1, width // 2)
            continue
        budget -= len(moving)
        kept = [p for p in plans if not any(p is w for w in window)]
        found = solve(_rest(snapshot, kept), moving)
        before = sum(p.price for p in window)
        if found.unplaced or found.price >= before - _EPSILON:
            offset += max(1, width // 2)
            continue
        fresh = []
        for plan in found.nodeclaims:
            renamed += 1
            fresh.append(attrs.evolve(plan, name=f"{plan.nodepool}-r{renamed:05d}"))
        plans = kept + fresh
        offset = 0
    if plans == list(results.nodeclaims):
        return results
    return attrs.evolve(results, nodeclaims=tuple(plans))


class _Scores:
    """Each plan's waste, computed once: a window replaces plans, it never changes the others,
    and summing every pod's requests again each round cost more than the windows' solves."""

    def __init__(self, shape: Shape, by_uid: Mapping[PodUID, Pod]) -> None:
        self.shape = shape
        self.by_uid = by_uid
        self.vectors: dict[Resources, tuple[int, ...]] = {}
        self.known: dict[int, tuple[NodeClaimPlan, float | None]] = {}

    def waste(self, plan: NodeClaimPlan) -> float | None:
        """One minus what the plan's pods are worth at the LP's unit prices over its price;
        None when it may not take part."""
        found = self.known.get(id(plan))
        if found is not None and found[0] is plan:
            return found[1]
        score = self._score(plan)
        self.known[id(plan)] = (plan, score)
        return score

    def _score(self, plan: NodeClaimPlan) -> float | None:
        shape = self.shape
        weights = shape.weights.get(plan.nodepool)
        if weights is None or plan.price <= 0 or plan.min_values_relaxed:
            return None
        if not all(uid in shape.movable for uid in plan.pods):
            return None
        total = [0] * len(shape.space.names)
        for uid in plan.pods:
            requests = self.by_uid[uid].requests()
            vec = self.vectors.get(requests)
            if vec is None:
                vec = self.vectors[requests] = shape.space.vector(requests)
            for r, amount in enumerate(vec):
                total[r] += amount
        worth = min(sum(w * v for w, v in zip(ws, total, strict=True)) for ws in weights)
        return 1 - worth / plan.price

    def ranked(self, plans: list[NodeClaimPlan]) -> list[NodeClaimPlan]:
        """Plans that may take part, worst-shaped first."""
        scored: list[tuple[float, str, NodeClaimPlan]] = []
        for plan in plans:
            score = self.waste(plan)
            if score is not None:
                scored.append((score, plan.name, plan))
        scored.sort(key=lambda s: (-s[0], s[1]))
        return [plan for _, _, plan in scored]


def _rest(snapshot: ClusterSnapshot, kept: list[NodeClaimPlan]) -> ClusterSnapshot:
    """The snapshot a window is re-solved in: no existing nodes (their room is spoken for), and
    each NodePool's limits less what its existing nodes and the kept NodeClaims hold — a
    NodeClaim counts the largest capacity among its instance types, as launching may pick any."""
    if not any(pool.limits for pool in snapshot.nodepools):
        return attrs.evolve(snapshot, nodes=())
    held: dict[str, dict[str, int]] = {}
    count: dict[str, int] = {}

    def charge(pool: str, capacity: Mapping[str, int]) -> None:
        ledger = held.setdefault(pool, {})
        for name, amount in capacity.items():
            ledger[name] = ledger.get(name, 0) + amount
        count[pool] = count.get(pool, 0) + 1

    for node in snapshot.nodes:
        if node.nodepool is not None:
            charge(node.nodepool, node.capacity)
    types: dict[str, dict[str, InstanceType]] = {
        str(pool.name): {it.name: it for it in snapshot.types_for(pool)}
        for pool in snapshot.nodepools
    }
    for plan in kept:
        largest: dict[str, int] = {}
        for name in plan.instance_types:
            it = types.get(plan.nodepool, {}).get(name)
            if it is None:
                continue
            for resource, amount in it.capacity.items():
                largest[resource] = max(largest.get(resource, 0), amount)
        charge(plan.nodepool, largest)
    pools = tuple(
        _less(pool, held.get(pool.name, {}), count.get(pool.name, 0)) for pool in snapshot.nodepools
    )
    return attrs.evolve(snapshot, nodes=(), nodepools=pools)


def _less(pool: NodePool, held: Mapping[str, int], nodes: int) -> NodePool:
    """``pool`` with its limits reduced by ``held`` and ``nodes`` (never below zero)."""
    if not pool.limits:
        return pool
    left: dict[str, int] = {}
    for name, limit in pool.limits.items():
        used = nodes * 1000 if name == NODES_LIMIT else held.get(name, 0)
        left[name] = max(0, limit - used)
    return attrs.evolve(pool, limits=Resources.milli(left))
