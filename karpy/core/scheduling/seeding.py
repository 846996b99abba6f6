"""Seeding NodeClaims from the assignment LP: which pod shapes go on which instance types.

The greedy pass grows each NodeClaim one pod at a time onto the cheapest type that still holds
it, steered by the covering LP's unit prices (``steering``). That LP only sums requests, so it
cannot see that a type is cheap for some shapes only: on EC2's catalog the cheapest capacity for
small pods is the smallest burstable types (four pods to a t4g.micro, whose pod limit and
overhead suit them), while the greedy walk grows claims past them onto large types a quarter
dearer per vCPU; with spot prices that differ by zone, or GPU pods beside plain ones, the same
happens with other types. The *assignment LP* knows which shape fits which type:

    min  Σ_t price_t · x_t
    s.t. Σ_t y_{s,t} = n_s                              for every shape s (n_s pods of it)
         Σ_s req_{s,r} · y_{s,t} ≤ usable_{t,r} · x_t   for every type t and resource r
         y, x ≥ 0.

It has a column per (shape, type) pair — hundreds of thousands on EC2's catalog with a wide mix
— so it is solved by column generation: start from each shape on the cheapest type that holds
it, and add the pairs whose reduced cost the current duals make negative until none is left
(at most ``ROUNDS`` rounds; an unfinished one still gives a usable, if dearer, assignment).
HiGHS solves each restricted LP; it is deterministic for the same input, so the seed is too.

``assign`` returns, per type, how many whole pods of each shape the LP puts there and how many
nodes it buys; the solver (``Solver.seed_pass``) opens that many NodeClaims of the type, fills
them through their own ``try_add`` checks (so no constraint can break), and leaves whatever
does not fit — the fractional remainders — to the greedy pass. Pure: no I/O, clock or logging.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import attrs
import highspy
import numpy as np

from karpy.core.scheduling.pool import PoolIndex, Vector

# Rounds of column generation at most.
ROUNDS = 60
_TOL = 1e-7


@attrs.frozen
class TypeSeed:
    """What the LP buys of one instance type (by its index in the pool): ``nodes`` fractional
    nodes, holding ``pods[s]`` whole pods of shape ``s``."""

    type_index: int
    nodes: float
    pods: tuple[tuple[int, int], ...]


def assign(
    index: PoolIndex, shapes: Sequence[tuple[Vector, int]], allowed: int
) -> list[TypeSeed] | None:
    """The assignment LP's solution for ``shapes`` ((requests vector, count) each) on the types
    of ``allowed`` (a bitset of ``index``'s types), largest purchase first; None when some shape
    fits no allowed type or HiGHS does not reach an optimum."""
    base = index.overhead_vec
    candidates = [i for i in index.frontier() if allowed >> i & 1]
    if not candidates or not shapes:
        return None
    rows = [r for r in range(len(base)) if any(v[r] for v, _ in shapes)]
    usable = np.array(
        [[max(0, index.alloc[i][r] - base[r]) for r in rows] for i in candidates], dtype=float
    )
    req = np.array([[v[r] for r in rows] for v, _ in shapes], dtype=float)
    scale = np.maximum(usable.max(axis=0), 1.0)
    usable /= scale
    req /= scale
    prices = np.array([index.cheapest_price(1 << i, index.template) for i in candidates])
    # fits[s, t]: shape s (with the DaemonSets) fits type t.
    fits: np.ndarray = np.all(req[:, None, :] <= usable[None, :, :] + 1e-12, axis=2)
    if not np.all(np.any(fits, axis=1)):
        return None
    n_shapes, n_types, n_res = len(shapes), len(candidates), len(rows)

    h = highspy.Highs()  # type: ignore[no-untyped-call]
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    inf = highspy.kHighsInf
    counts = np.array([float(c) for _, c in shapes])
    cap_lower = np.full(n_types * n_res, -inf)
    h.addRows(
        n_shapes + n_types * n_res,
        np.concatenate([counts, cap_lower]),
        np.concatenate([counts, np.zeros(n_types * n_res)]),
        0,
        np.array([], dtype=np.int32),
        np.array([], dtype=np.int32),
        np.array([], dtype=np.float64),
    )

    def cap_row(t: int, k: int) -> int:
        return n_shapes + t * n_res + k

    # x_t: one column per type.
    x_index = np.array([cap_row(t, k) for t in range(n_types) for k in range(n_res)], np.int32)
    h.addCols(
        n_types,
        prices,
        np.zeros(n_types),
        np.full(n_types, inf),
        n_types * n_res,
        np.arange(0, n_types * n_res, n_res, dtype=np.int32),
        x_index,
        -usable.reshape(-1),
    )
    have = np.zeros((n_shapes, n_types), dtype=bool)
    columns: list[tuple[int, int]] = []

    def add(shape_of: np.ndarray, type_of: np.ndarray) -> None:
        # Each column: its shape's row (1), then its type's row per resource (the request,
        # zero entries included: HiGHS drops nothing, and the LP is the same).
        width = 1 + n_res
        idx = np.empty((len(shape_of), width), dtype=np.int32)
        vals = np.empty((len(shape_of), width))
        idx[:, 0] = shape_of
        vals[:, 0] = 1.0
        idx[:, 1:] = n_shapes + type_of[:, None] * n_res + np.arange(n_res)[None, :]
        vals[:, 1:] = req[shape_of]
        have[shape_of, type_of] = True
        columns.extend(zip(shape_of.tolist(), type_of.tolist(), strict=True))
        h.addCols(
            len(shape_of),
            np.zeros(len(shape_of)),
            np.zeros(len(shape_of)),
            np.full(len(shape_of), inf),
            idx.size,
            np.arange(0, idx.size, width, dtype=np.int32),
            idx.reshape(-1),
            vals.reshape(-1),
        )

    # Each shape on the cheapest type that holds it: a feasible start.
    by_price = np.argsort(prices, kind="stable")
    every = np.arange(n_shapes)
    add(every, by_price[np.argmax(fits[:, by_price], axis=1)])
    for _ in range(ROUNDS):
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None
        dual = np.array(h.getSolution().row_dual)
        u = dual[:n_shapes]
        v = dual[n_shapes:].reshape(n_types, n_res)
        # Reduced cost of y_{s,t}: 0 - (u_s + Σ_k req_{s,k} v_{t,k}); per shape the type that
        # prices it lowest, and per type the shape, enter (a few hundred columns a round keep
        # each restricted LP small).
        reduced = -(u[:, None] + req @ v.T)
        reduced[~fits | have] = 0.0
        best_type = np.argmin(reduced, axis=1)
        best_shape = np.argmin(reduced, axis=0)
        pairs = np.unique(
            np.concatenate(
                [
                    np.stack([every, best_type], axis=1),
                    np.stack([best_shape, np.arange(n_types)], axis=1),
                ]
            ),
            axis=0,
        )
        pairs = pairs[reduced[pairs[:, 0], pairs[:, 1]] < -_TOL]
        if not len(pairs):
            break
        add(pairs[:, 0], pairs[:, 1])
    else:
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None
    values = np.array(h.getSolution().col_value)
    nodes = values[:n_types]
    per_type: dict[int, list[tuple[int, int]]] = {}
    for (s, t), y in zip(columns, values[n_types:].tolist(), strict=True):
        whole = math.floor(y + 1e-6)
        if whole > 0:
            per_type.setdefault(t, []).append((s, whole))
    seeds = [
        TypeSeed(candidates[t], float(nodes[t]), tuple(sorted(pods)))
        for t, pods in per_type.items()
        if nodes[t] > _TOL
    ]
    seeds.sort(
        key=lambda seed: (-seed.nodes * prices[candidates.index(seed.type_index)], seed.type_index)
    )
    return seeds
