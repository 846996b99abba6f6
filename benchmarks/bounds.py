"""Lower bounds on a packing's cost that know which pod fits which type, for the benchmarks.

The aggregate LP ``scheduling.py`` used before (buy fractional capacity per resource) lets a type
too small for most pods lend its cheap cpu and memory to all of them: on EC2's catalog it bought
fractions of t4g.nano, whose 74 MiB hold no pod at all. The bound here is the *assignment LP*: a
variable per (pod shape, type) where the shape fits the type, and one per type for its
fractional node count,

    min  sum_t price_t * x_t
    s.t. sum_t y_{s,t} = n_s                                for every shape s (n_s pods of it)
         sum_s req_{s,r} * y_{s,t} <= usable_{t,r} * x_t    for every type t and resource r
         y, x >= 0,

solved with HiGHS. Every integer packing is a feasible point (y counts the pods of a shape on
nodes of a type, x the nodes), so it is a valid lower bound, and never looser than the aggregate
LP (summing its rows over types gives the aggregate's). Pods only differ here by their requests:
scheduling constraints (selectors, spread, anti-affinity) are not modelled, so for the diverse
mix it stays loose.

Whether a gap is the plan's or the bound's, the optional MIP (``integral_seconds``) tells: its
whole-node solution is close to a real plan, so a plan far above it is far from optimal.

HiGHS solves in floating point; the bound is reduced by its dual feasibility tolerance's worth
(one part in 10⁶) so rounding can only make it lower.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import attrs
import highspy
import numpy as np

from karpy.core.instancetypes import InstanceType
from karpy.core.pods import Pod
from karpy.core.resources import Resources


def _cheapest(it: InstanceType) -> float:
    return min(o.price for o in it.offerings if o.available)


def assignment_bound(
    pods: list[Pod],
    types: tuple[InstanceType, ...],
    overhead: Resources | None = None,
    *,
    limited: Sequence[tuple[tuple[InstanceType, ...], Resources]] = (),
    integral_seconds: float = 0.0,
) -> Bound:
    """The assignment LP of the module docstring over ``pods`` and ``types``; ``overhead``
    (DaemonSet pods) comes off every type's allocatable. ``limited`` adds NodePools with limits:
    their types are columns of their own, and the capacity bought from each may not exceed its
    limits (a row per limited resource), as a NodePool's limits cap what provisioning launches.

    With ``integral_seconds`` > 0 the same program is also solved with whole nodes and whole
    pods (a MIP, for at most that long): its dual bound is a tighter valid bound, and its best
    solution an *integer reference* — what a plan could cost if each type's pods packed into its
    nodes as the aggregate capacity says (no per-node check, so it may be a little below any
    real plan)."""
    extra = overhead or Resources()
    shapes = Counter(tuple(sorted(p.requests().items())) for p in pods)
    names = sorted({name for shape in shapes for name, amount in shape if amount > 0})

    def entries(
        pool: tuple[InstanceType, ...], prune: bool
    ) -> list[tuple[float, dict[str, int], InstanceType]]:
        found = []
        for t in pool:
            if not extra.fits(t.allocatable) or not any(o.available for o in t.offerings):
                continue
            room = {n: t.allocatable.get_amount(n) - extra.get_amount(n) for n in names}
            found.append((_cheapest(t), room, t))
        # A type another dominates (no cheaper, no larger in any resource) cannot lower the
        # optimum; with limits a larger type also uses more of them, so those pools keep all.
        return _undominated(found, names) if prune else found

    usable = entries(types, True)
    limit_of: list[int | None] = [None] * len(usable)
    for k, (pool, _limits) in enumerate(limited):
        found = entries(pool, False)
        usable += found
        limit_of += [k] * len(found)
    counts = list(shapes.items())
    # HiGHS refuses coefficients near 1e15 (memory is in milli-bytes): measure every resource in
    # units of the largest room any type has of it, so every coefficient is at most 1.
    scale = {n: float(max(room[n] for _, room, _t in usable) or 1) for n in names}
    inf = highspy.kHighsInf

    # Rows: one equality per shape, then per type one row per resource.
    lower: list[float] = [float(n) for _, n in counts]
    upper: list[float] = [float(n) for _, n in counts]
    resource_row: dict[tuple[int, str], int] = {}
    for t in range(len(usable)):
        for name in names:
            resource_row[t, name] = len(lower)
            lower.append(-inf)
            upper.append(0.0)
    fits: list[list[int]] = [[] for _ in usable]  # the shapes that fit each type
    for s, (shape, _n) in enumerate(counts):
        need = dict(shape)
        for t, (_price, room, _t) in enumerate(usable):
            if all(need.get(n, 0) <= room[n] for n in names):
                fits[t].append(s)
    limit_row: dict[tuple[int, str], int] = {}
    for k, (_pool, limits) in enumerate(limited):
        for name, amount in limits.items():
            limit_row[k, name] = len(lower)
            lower.append(-inf)
            upper.append(amount / scale.get(name, 1.0))
    if {s for fits_t in fits for s in fits_t} != set(range(len(counts))):
        raise ValueError("a pod shape fits no type, so no plan places every pod")

    cost: list[float] = []
    starts: list[int] = []
    index: list[int] = []
    value: list[float] = []

    def column(price: float, entries: list[tuple[int, float]]) -> None:
        cost.append(price)
        starts.append(len(index))
        for row, coefficient in entries:
            index.append(row)
            value.append(coefficient)

    for t, (price, room, it) in enumerate(usable):  # x_t
        items = [(resource_row[t, n], -room[n] / scale[n]) for n in names]
        k = limit_of[t]
        if k is not None:
            items += [
                (row, it.capacity.get_amount(name) / scale.get(name, 1.0))
                for (pool, name), row in limit_row.items()
                if pool == k and it.capacity.get_amount(name)
            ]
        column(price, items)
    for t in range(len(usable)):  # y_{s,t}
        for s in fits[t]:
            need = dict(counts[s][0])
            entries = [(s, 1.0)]
            entries += [(resource_row[t, n], need[n] / scale[n]) for n in names if need.get(n, 0)]
            column(0.0, entries)

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.addRows(
        len(lower),
        np.array(lower),
        np.array(upper),
        0,
        np.array([], dtype=np.int32),
        np.array([], dtype=np.int32),
        np.array([], dtype=np.float64),
    )
    width = len(cost)
    h.addCols(
        width,
        np.array(cost),
        np.zeros(width),
        np.full(width, inf),
        len(index),
        np.array(starts, dtype=np.int32),
        np.array(index, dtype=np.int32),
        np.array(value),
    )
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        status = h.modelStatusToString(h.getModelStatus())
        raise ValueError(f"the assignment LP did not solve: {status}")
    relaxed = float(h.getInfo().objective_function_value) * (1 - 1e-6)
    if integral_seconds <= 0:
        return Bound(relaxed, None)
    h.changeColsIntegrality(
        width, np.arange(width, dtype=np.int32), np.full(width, highspy.HighsVarType.kInteger)
    )
    h.setOptionValue("time_limit", float(integral_seconds))
    h.run()
    info = h.getInfo()
    found = float(info.objective_function_value) if info.primal_solution_status == 2 else None
    return Bound(max(relaxed, float(info.mip_dual_bound) * (1 - 1e-6)), found)


@attrs.frozen
class Bound:
    """A valid lower bound on any plan's price, and (when a MIP ran) the best whole-node
    solution it found: an integer reference that no per-node packing check has confirmed."""

    value: float
    integer: float | None


Entry = tuple[float, dict[str, int], InstanceType]


def _undominated(usable: list[Entry], names: list[str]) -> list[Entry]:
    """Drop every type that another is at most as dear as and at least as large as in every
    resource (ties keep the first)."""
    if not usable:
        return usable
    prices = np.array([p for p, _, _t in usable])
    rooms = np.array([[room[n] for n in names] for _, room, _t in usable], dtype=np.int64)
    keep: list[Entry] = []
    for i, item in enumerate(usable):
        no_dearer = prices <= prices[i]
        no_smaller = (rooms >= rooms[i]).all(axis=1)
        strictly = (prices < prices[i]) | (rooms > rooms[i]).any(axis=1)
        others = no_dearer & no_smaller & strictly
        ties = no_dearer & no_smaller & ~strictly
        ties[i:] = False
        if not (others.any() or ties.any()):
            keep.append(item)
    return keep
