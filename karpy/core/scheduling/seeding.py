"""Seeding NodeClaims from node patterns: which pods, together, make a cheap node of each type.

The greedy pass grows each NodeClaim one pod at a time onto the cheapest type that still holds
it, steered by the covering LP's unit prices (``steering``). That LP only sums requests, so it
cannot see that a type is cheap for some shapes only (GPU pods beside plain ones, spot prices
that differ by zone, a DaemonSet that takes much of a small node), nor that a type's capacity
comes in whole nodes: on EC2's catalog two pods of 1 vCPU never share a 2-vCPU t4g.micro, so
the fractional *assignment LP* (which shape goes on which type) buys micro capacity no real
packing can use, and opening the nodes it buys leaves a third of the pods over.

The *pattern LP* (Gilmore and Gomory's, for cutting stock) works in whole nodes instead: a
column is one node of one type with a whole number of pods of each shape that fits it (a
pattern), and

    min  Σ_p price_p · z_p
    s.t. Σ_p a_{s,p} · z_p ≥ n_s      for every shape s (n_s pods of it)
         z ≥ 0.

Its columns are generated: start from each shape alone on the type that holds it cheapest per
pod and from the nodes of the plan the balanced pass made (so the optimum is never dearer than
that plan); then, at the current duals (the price of one more pod of each shape), fill one node
of every type greedily with the shapes worth most per share of it (by the largest share a pod
takes, and by the sum of its shares), fill the ``ADAPTIVE_TYPES`` most promising types again
weighing each resource by how little of it is left, and add the patterns that cost less than
their pods are worth (at most ``ROUNDS`` rounds of ``PER_ROUND`` columns). The fills are
heuristics, so the optimum is a good plan, not a bound. HiGHS solves each restricted LP,
deterministically for the same input.

``patterns`` returns the patterns with their node counts z; the solver (``Solver.seed_pass``)
opens the whole part of each as NodeClaims pinned to its type, one more of each pattern whose
pods are all still pending, each filled through its own ``try_add`` checks (so no constraint can
break), puts the pods left into the room those NodeClaims have, and lets the balanced pass place
the rest. Work is bounded by ``ROUNDS``, ``PER_ROUND``, ``ADAPTIVE_TYPES`` and ``MAX_CELLS``
shape-type pairs (past it only the types cheapest for some shape or resource are priced); pure:
no I/O, clock or logging.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import attrs
import highspy
import numpy as np

from karpy.core.scheduling.pool import PoolIndex, Vector

# Rounds of column generation at most, and the patterns one round may add (the most profitable).
ROUNDS = 40
PER_ROUND = 64
# Above this many (shape, type) pairs only the types cheapest for some shape (per pod, alone)
# and the cheapest per unit of each resource are priced: the pricing step is linear in it.
MAX_CELLS = 60_000
# Types the adaptive fill prices each round (those whose nodes its pods are worth most on).
ADAPTIVE_TYPES = 16
_TOL = 1e-7


@attrs.frozen
class Pattern:
    """One node of the pool's type ``type_index`` holding ``pods`` (shape, count) pairs, and
    how many such nodes the LP buys (``nodes``, fractional)."""

    type_index: int
    nodes: float
    pods: tuple[tuple[int, int], ...]


@attrs.frozen
class Solution:
    """The pattern LP's optimum: its patterns (most bought first) and its price."""

    patterns: tuple[Pattern, ...]
    price: float


def _problem(
    index: PoolIndex, shapes: Sequence[tuple[Vector, int]], allowed: int
) -> tuple[list[int], np.ndarray, np.ndarray, np.ndarray] | None:
    """What both LPs are built from: the candidate types (``allowed``'s undominated ones), the
    room each leaves after the DaemonSets and each shape's requests (whole units, only the
    resources some shape asks for), and each type's cheapest price; None when there is no
    candidate or no shape."""
    base = index.overhead_vec
    candidates = [i for i in index.frontier() if allowed >> i & 1]
    if not candidates or not shapes:
        return None
    rows = [r for r in range(len(base)) if any(v[r] for v, _ in shapes)]
    usable = np.array(
        [[max(0, index.alloc[i][r] - base[r]) for r in rows] for i in candidates], dtype=np.int64
    )
    req = np.array([[v[r] for r in rows] for v, _ in shapes], dtype=np.int64)
    prices = np.array([index.cheapest_price(1 << i, index.template) for i in candidates])
    return candidates, usable, req, prices


def patterns(
    index: PoolIndex,
    shapes: Sequence[tuple[Vector, int]],
    allowed: int,
    hints: Sequence[Sequence[tuple[int, int]]] = (),
) -> Solution | None:
    """The pattern LP over ``shapes`` ((requests vector, count) each) on the types of
    ``allowed`` (a bitset of ``index``'s types), starting from the nodes ``hints`` ((shape,
    count) pairs each, on the cheapest type that holds them: a plan's nodes, so that the optimum
    is never dearer than that plan); None when some shape fits no allowed type or HiGHS does not
    reach an optimum."""
    problem = _problem(index, shapes, allowed)
    if problem is None:
        return None
    candidates, usable, req, prices = problem
    counts = np.array([c for _, c in shapes], dtype=np.int64)
    # most[s, t]: how many pods of shape s alone fit one node of type t (at most n_s).
    with np.errstate(divide="ignore"):
        ratio = np.where(
            req[:, None, :] > 0, usable[None, :, :] // np.maximum(req, 1)[:, None, :], 1 << 62
        )
    most = np.minimum(ratio.min(axis=2), counts[:, None])
    if not np.all(most.max(axis=1) > 0):
        return None
    per_pod = np.where(most > 0, prices[None, :] / np.maximum(most, 1), np.inf)
    types = np.arange(len(candidates))
    if len(shapes) * len(candidates) > MAX_CELLS:
        keep = set(np.argmin(per_pod, axis=1).tolist())
        share = prices[:, None] / np.maximum(usable, 1)
        keep |= set(np.argmin(share, axis=0).tolist())
        types = np.array(sorted(keep))
    usable_f = usable[types].astype(float)
    sizes_max = (req[:, None, :] / np.maximum(usable_f, 1.0)[None, :, :]).max(axis=2)
    sizes_sum = (req[:, None, :] / np.maximum(usable_f, 1.0)[None, :, :]).sum(axis=2)
    n_shapes = len(shapes)

    h = highspy.Highs()  # type: ignore[no-untyped-call]
    h.setOptionValue("output_flag", False)
    inf = highspy.kHighsInf
    h.addRows(
        n_shapes,
        counts.astype(float),
        np.full(n_shapes, inf),
        0,
        np.array([], dtype=np.int32),
        np.array([], dtype=np.int32),
        np.array([], dtype=np.float64),
    )
    columns: list[tuple[int, tuple[tuple[int, int], ...]]] = []
    seen: set[tuple[int, tuple[tuple[int, int], ...]]] = set()

    def add(found: list[tuple[int, tuple[tuple[int, int], ...]]]) -> int:
        fresh = [f for f in found if f not in seen]
        if not fresh:
            return 0
        starts: list[int] = []
        idx: list[int] = []
        vals: list[float] = []
        for t, pods in fresh:
            seen.add((t, pods))
            columns.append((t, pods))
            starts.append(len(idx))
            for s, a in pods:
                idx.append(s)
                vals.append(float(a))
        h.addCols(
            len(fresh),
            np.array([prices[t] for t, _ in fresh]),
            np.zeros(len(fresh)),
            np.full(len(fresh), inf),
            len(idx),
            np.array(starts, dtype=np.int32),
            np.array(idx, dtype=np.int32),
            np.array(vals),
        )
        return len(fresh)

    # Each shape alone on the type that holds it cheapest per pod: a feasible start.
    best = np.argmin(per_pod, axis=1)
    add([(int(best[s]), ((s, int(most[s, best[s]])),)) for s in range(n_shapes)])
    known: list[tuple[int, tuple[tuple[int, int], ...]]] = []
    for hint in hints:
        need = np.zeros(len(req[0]), dtype=np.int64)
        for s, count in hint:
            need += req[s] * count
        holds = np.nonzero(np.all(usable >= need, axis=1))[0]
        if len(holds):
            t = int(holds[np.argmin(prices[holds])])
            known.append((t, tuple(sorted(hint))))
    add(known)
    for _ in range(ROUNDS):
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None
        worth = np.maximum(np.array(h.getSolution().row_dual), 0.0)
        found: list[tuple[float, int, tuple[tuple[int, int], ...]]] = []
        for sizes in (sizes_max, sizes_sum):
            found += _fill(worth, sizes, req, usable[types], counts, types, prices)
        # The adaptive fill costs a step per pod it adds: only for the types the static fills
        # find most profitable (or that the current solution buys).
        # At most what any one resource of the node is worth at the best rate a shape pays.
        rate = np.where(req > 0, worth[:, None] / np.maximum(req, 1), 0.0).max(axis=0)
        ceiling = np.where(rate > 0, usable[types] * rate, np.inf).min(axis=1)
        near = np.argsort(prices[types] / np.maximum(ceiling, 1e-12), kind="stable")
        near = near[:ADAPTIVE_TYPES]
        found += _fill_adaptive(worth, req, usable[types[near]], counts, types[near], prices)
        found.sort(key=lambda f: (f[0], f[1], f[2]))
        if not add([(t, pods) for _, t, pods in found[:PER_ROUND]]):
            break
    else:
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None
    solution = h.getSolution()
    values = list(solution.col_value)
    chosen = [
        Pattern(candidates[t], float(z), pods)
        for (t, pods), z in zip(columns, values, strict=True)
        if z > _TOL
    ]
    chosen.sort(key=lambda p: (-p.nodes, p.type_index, p.pods))
    return Solution(tuple(chosen), float(h.getInfo().objective_function_value))


def _fill(
    worth: np.ndarray,
    sizes: np.ndarray,
    req: np.ndarray,
    usable: np.ndarray,
    counts: np.ndarray,
    types: np.ndarray,
    prices: np.ndarray,
) -> list[tuple[float, int, tuple[tuple[int, int], ...]]]:
    """One node of every type in ``types`` filled greedily with the shapes worth most per
    ``sizes`` (their share of the type), as many of each as fit; the fills that cost less than
    their pods are worth, as (reduced cost, candidate, pattern)."""
    n_shapes, n_types = sizes.shape
    density = np.where(worth[:, None] > _TOL, worth[:, None] / np.maximum(sizes, 1e-12), -1.0)
    order = np.argsort(-density, axis=0, kind="stable")
    room = usable.copy()
    taken = np.zeros((n_shapes, n_types), dtype=np.int64)
    cols = np.arange(n_types)
    for k in range(n_shapes):
        s = order[k]
        r = req[s]
        with np.errstate(divide="ignore"):
            fit = np.where(r > 0, room // np.maximum(r, 1), 1 << 62).min(axis=1)
        fit = np.minimum(fit, counts[s])
        fit[density[s, cols] <= 0] = 0
        taken[s, cols] = fit
        room -= fit[:, None] * r
    return _columns(worth, taken, types, prices)


def _columns(
    worth: np.ndarray, taken: np.ndarray, types: np.ndarray, prices: np.ndarray
) -> list[tuple[float, int, tuple[tuple[int, int], ...]]]:
    """The filled nodes (one per type, pods per shape in ``taken``) worth more than their
    price at the LP's duals: each as (reduced cost per unit of price, type, pods per shape)."""
    gain = prices[types] - worth @ taken
    out: list[tuple[float, int, tuple[tuple[int, int], ...]]] = []
    for j in np.nonzero(gain < -_TOL * np.maximum(prices[types], 1e-9))[0].tolist():
        pods = tuple((s, int(taken[s, j])) for s in np.nonzero(taken[:, j])[0].tolist())
        out.append((float(gain[j] / prices[types[j]]), int(types[j]), pods))
    return out


def _fill_adaptive(
    worth: np.ndarray,
    req: np.ndarray,
    usable: np.ndarray,
    counts: np.ndarray,
    types: np.ndarray,
    prices: np.ndarray,
) -> list[tuple[float, int, tuple[tuple[int, int], ...]]]:
    """Like ``_fill``, but each step adds the shape worth most per share of the room the node
    has *left* (so the resource running out weighs most), an eighth of what of it still fits
    at a time (at least one pod), until nothing more fits any type."""
    n_shapes = len(worth)
    n_types = len(types)
    room = usable.copy()
    taken = np.zeros((n_shapes, n_types), dtype=np.int64)
    wanted = worth > _TOL
    cols = np.arange(n_types)
    reqf = req.astype(float)
    while True:
        with np.errstate(divide="ignore", invalid="ignore"):
            fit = np.where(
                req[:, None, :] > 0, room[None, :, :] // np.maximum(req, 1)[:, None, :], 1 << 62
            ).min(axis=2)
        fit = np.minimum(fit, counts[:, None] - taken)
        fit[~wanted] = 0
        if not fit.any():
            break
        share = (reqf[:, None, :] / np.maximum(room, 1)[None, :, :].astype(float)).sum(axis=2)
        density = np.where(fit > 0, worth[:, None] / np.maximum(share, 1e-12), -1.0)
        pick = np.argmax(density, axis=0)
        step = fit[pick, cols]
        step = np.where(step > 0, np.maximum(step // 8, 1), 0)
        taken[pick, cols] += step
        room -= step[:, None] * req[pick]
    return _columns(worth, taken, types, prices)


# ---------------------------------------------------------------- the assignment LP
# Where pods come in too many shapes for whole-node patterns (each pod its own shape), the
# assignment LP still tells which type is right for which shape (GPU pods, the cheap zone of a
# spot type, a large DaemonSet): a column per (shape, type) pair, its own rounds of generation.
# Rounds of its column generation at most.
ASSIGN_ROUNDS = 60


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
    problem = _problem(index, shapes, allowed)
    if problem is None:
        return None
    candidates, whole_usable, whole_req, prices = problem
    scale = np.maximum(whole_usable.max(axis=0), 1).astype(float)
    usable = whole_usable / scale
    req = whole_req / scale
    # fits[s, t]: shape s (with the DaemonSets) fits type t.
    fits: np.ndarray = np.all(req[:, None, :] <= usable[None, :, :] + 1e-12, axis=2)
    if not np.all(np.any(fits, axis=1)):
        return None
    n_shapes, n_types, n_res = len(shapes), len(candidates), len(whole_req[0])

    h = highspy.Highs()  # type: ignore[no-untyped-call]
    h.setOptionValue("output_flag", False)
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
    for _ in range(ASSIGN_ROUNDS):
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
