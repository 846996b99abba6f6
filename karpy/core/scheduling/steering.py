"""Steering NodeClaims towards the instance types the LP would buy for the batch.

A greedy NodeClaim grows one pod at a time onto the cheapest type that still holds its pods; on
a catalog with many families that walk can end on a type that fits the pods poorly (a CPU-shaped
claim on a memory-optimised type because its compute-optimised one ran out of memory). The
covering LP over each NodePool's types (``lp.covering_lp``) prices every resource for the whole
batch (``unit_weights``); ``Steering.efficient`` then lets a claim grow onto a type only when
that type is worth its price for the claim's mix of pods. The same prices rank NodeClaims for
the repack step (``repack.Shape.weights``). Pure; the answers it keeps are per solve.
"""

from __future__ import annotations

from collections.abc import Sequence

from karpy.core.requirements import Requirements
from karpy.core.resources import CPU, MEMORY
from karpy.core.scheduling.existingnode import Placement
from karpy.core.scheduling.lp import covering_lp
from karpy.core.scheduling.nodeclaim import NodeClaim
from karpy.core.scheduling.pool import PoolIndex
from karpy.core.scheduling.queue import PodClass

Weights = dict[str, list[list[float]]]
"""Per NodePool name, the LP's prices per unit of each resource, one list per valuation."""


class Steering:
    """The LP's unit prices for one solve, and the test a growing NodeClaim must pass.

    ``weights`` is empty when the solve is not steered (Karpenter's packing, the unsteered
    small-batch order) or no pool's LP has a solution: every growth is then allowed. ``slack``
    and ``reach_slack`` are how far from 1 a type's shape ratio may be (``efficient``).
    """

    def __init__(self, weights: Weights, *, slack: float, reach_slack: float) -> None:
        self.weights = weights
        self.slack = slack
        self.reach_slack = reach_slack
        self._reach: dict[tuple[int, int], bool] = {}

    def efficient(self, claim: NodeClaim, placement: Placement) -> bool:
        """May ``claim`` take a pod at a price (onto the type ``placement`` leaves cheapest)?

        The LP's unit prices (``unit_weights``) give the claim's pods a worth, and every type a
        *shape ratio* for them: its price over the worth of the largest scaled copy of those
        pods it holds (``shape_ratio``; 1 is a type the LP would buy for that mix). The claim
        may move onto the new type when its ratio is at most 1 + ``slack`` or no
        worse than the ratio of the type it is on now. The slack absorbs how spot prices differ
        between sizes of one family; a dearer family is further off: a CPU-shaped claim does not
        grow onto a memory-optimised type when its compute-optimised one runs out of memory,
        nor onto amd64 because arm64 has no type that large. The pod opens a new NodeClaim
        instead, which can land on a cheap type again.
        """
        weights = self.weights.get(claim.index.pool.name)
        if weights is None:
            return True
        index = claim.index
        base = index.overhead_vec
        content = [u - o for u, o in zip(placement.used, base, strict=True)]
        worth = _worth(weights, content)
        if worth <= 0:
            return True
        after = index.cheapest_index(placement.mask, placement.requirements)
        if after is None:
            return True
        ratio = shape_ratio(index, after, placement.requirements, content, worth)
        if ratio <= 1 + self.slack:
            return True
        now = index.cheapest_index(claim.mask, claim.requirements)
        if now is None:
            return True
        if ratio <= shape_ratio(index, now, claim.requirements, content, worth):
            return True
        # The cheapest type that holds the pods now may be a poor fit while a larger one the
        # LP would buy still holds them (a CPU-shaped claim past the largest general-purpose
        # size, on its way to the compute-optimised one twice as large): grow towards it.
        # Only frontier types can score best (``PoolIndex.frontier``).
        # Answers are kept per claim and type set: a claim's mask changes only when it grows,
        # and its shape barely moves with one more pod.
        key = (id(claim), placement.mask)
        found = self._reach.get(key)
        if found is None:
            limit = 1 + self.reach_slack
            reqs = placement.requirements
            found = any(
                placement.mask >> i & 1 and shape_ratio(index, i, reqs, content, worth) <= limit
                for i in index.frontier()
            )
            self._reach[key] = found
        return found


def shape_ratio(
    index: PoolIndex, i: int, reqs: Requirements, content: list[int], worth: float
) -> float:
    """Type ``i``'s price over what it is worth for pods shaped like ``content``: the largest
    scaled copy of ``content`` it holds, at the LP's prices (``worth`` is ``content``'s). 1 is
    a type the LP would buy for that mix; a memory-optimised type holding a CPU-shaped mix
    scores its whole idle memory against it."""
    base = index.overhead_vec
    copies = min(
        ((a - o) / c for a, o, c in zip(index.alloc[i], base, content, strict=True) if c > 0),
        default=0.0,
    )
    if copies <= 0:
        return float("inf")
    return index.cheapest_price(1 << i, reqs) / (copies * worth)


def unit_weights(pools: Sequence[PoolIndex], classes: Sequence[PodClass]) -> Weights:
    """Per NodePool, the LP's prices per unit of each resource (``lp.covering_lp``: buy
    fractional nodes of the pool's types, each less its DaemonSet overhead, to hold every
    pending pod's requests); pools whose LP has no solution are left out (no steering there).

    When the optimum fills its types in CPU and memory at once, the dual prices are not
    unique: any split of a type's price between its CPU and its memory is optimal, and one that
    puts it all on memory would call a memory-optimised type as cheap as the compute-optimised
    one the LP buys. So the LP is solved once with CPU and once with memory demand raised by
    1 %, which makes each dual unique, and a type is worth the *smaller* of its two valuations
    (``_worth``): what it is surely worth, whichever resource turns out scarce.

    NodePools that offer the same types at the same prices less the same overhead pose the same
    LP: it is solved once for all of them (hundreds of NodePools are often a few templates that
    differ in labels and taints)."""
    if not classes or not pools:
        return {}
    space = pools[0].space
    size = len(space.names)
    demand = [0] * size
    for cls in classes:
        vec = space.vector(cls.requests)
        for r in range(size):
            demand[r] += vec[r] * len(cls.pods)
    rows = [r for r in range(size) if demand[r] > 0]
    bumps = [k for k, r in enumerate(rows) if space.names[r] in (CPU, MEMORY)] or [-1]
    out: Weights = {}
    solved: dict[tuple[tuple[tuple[float, ...], ...], tuple[float, ...]], list[list[float]] | None]
    solved = {}
    for index in pools:
        if not index.types:
            continue
        frontier = index.frontier()
        columns = tuple(
            tuple(max(0, index.alloc[i][r] - index.overhead_vec[r]) / demand[r] for r in rows)
            for i in frontier
        )
        prices = tuple(index.cheapest_price(1 << i, index.template) for i in frontier)
        key = (columns, prices)
        if key not in solved:
            solved[key] = _valuations(columns, prices, rows, demand, bumps, size)
        found_all = solved[key]
        if found_all is not None:
            out[index.pool.name] = [list(weights) for weights in found_all]
    return out


def _valuations(
    columns: Sequence[Sequence[float]],
    prices: Sequence[float],
    rows: Sequence[int],
    demand: Sequence[int],
    bumps: Sequence[int],
    size: int,
) -> list[list[float]] | None:
    """One pool's valuations for `unit_weights` (one LP per bump), None when an LP has no
    solution."""
    found_all: list[list[float]] = []
    for bump in bumps:
        want = [1.01 if k == bump else 1.0 for k in range(len(rows))]
        found = covering_lp(columns, prices, want)
        if found is None:
            return None
        weights = [0.0] * size
        for k, r in enumerate(rows):
            weights[r] = found.duals[k] / demand[r]
        found_all.append(weights)
    return found_all


def _worth(weights: Sequence[Sequence[float]], content: list[int]) -> float:
    """What ``content`` is surely worth at the LP's prices (the smaller valuation)."""
    return min(sum(w * c for w, c in zip(ws, content, strict=True)) for ws in weights)
