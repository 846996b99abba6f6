"""The packing's linear relaxation: what a fractional optimum pays per unit of each resource.

Pure. ``covering_lp`` solves min Σ price_t·x_t subject to Σ alloc_{t,r}·x_t ≥ demand_r for every
resource r, x ≥ 0 — "buy fractional nodes that hold the pending pods' total requests" — and
returns its dual prices y_r: what one more unit of resource r costs in that optimum. No plan can
cost less than the LP optimum, and the duals say which types are worth buying: a type t with
price_t = alloc_t · y is one a fractional optimum may buy; price_t / (alloc_t · y) - 1 is how
much more t charges for what it holds. The solver steers NodeClaims onto types near 1 (see
``Steering.efficient``).

The program has one row per resource (a handful) and one column per instance type (hundreds),
so a revised simplex whose basis is only as wide as the row count is exact enough and fast:
each step inverts an m-by-m matrix and prices every column once. The column with the most
negative reduced cost enters (the lowest index on a tie), so the result is deterministic; an
iteration cap stands in for an anti-cycling rule and reports failure (None), which only turns
steering off.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

_TOL = 1e-9


@attrs.frozen
class CoveringSolution:
    """The LP optimum: its cost, the amount of each column bought and the dual price per row."""

    cost: float
    amounts: tuple[float, ...]
    duals: tuple[float, ...]


def _invert(matrix: list[list[float]]) -> list[list[float]] | None:
    m = len(matrix)
    a = [[*row, *(1.0 if r == c else 0.0 for c in range(m))] for r, row in enumerate(matrix)]
    for c in range(m):
        pivot = max(range(c, m), key=lambda r: abs(a[r][c]))
        if abs(a[pivot][c]) < 1e-12:
            return None
        a[c], a[pivot] = a[pivot], a[c]
        scale = a[c][c]
        a[c] = [v / scale for v in a[c]]
        for r in range(m):
            if r != c and a[r][c] != 0.0:
                f = a[r][c]
                a[r] = [v - f * w for v, w in zip(a[r], a[c], strict=True)]
    return [row[m:] for row in a]


def covering_lp(
    columns: Sequence[Sequence[float]], prices: Sequence[float], demand: Sequence[float]
) -> CoveringSolution | None:
    """min prices·x subject to Σ_j columns[j]·x_j ≥ demand, x ≥ 0.

    ``columns[j]`` is column j's amount of each row. Returns None when the program is
    infeasible (some demanded row is sold by no column) or numerically degenerate.
    """
    m, n = len(demand), len(prices)
    if m == 0:
        return CoveringSolution(0.0, tuple(0.0 for _ in prices), ())
    # Columns: the types, then a surplus per row (-e_r), then an artificial per row (+e_r).
    cols: list[list[float]] = [list(c) for c in columns]
    cols += [[-1.0 if r == k else 0.0 for r in range(m)] for k in range(m)]
    cols += [[1.0 if r == k else 0.0 for r in range(m)] for k in range(m)]
    artificial = set(range(n + m, n + 2 * m))
    basis = list(range(n + m, n + 2 * m))

    def run(cost: list[float], allowed: int) -> list[list[float]] | None:
        for _ in range(50 * (n + m)):
            inv = _invert([[cols[basis[c]][r] for c in range(m)] for r in range(m)])
            if inv is None:
                return None
            duals = [sum(cost[basis[k]] * inv[k][r] for k in range(m)) for r in range(m)]
            entering = -1
            best = -_TOL
            in_basis = set(basis)
            for j in range(allowed):
                col = cols[j]
                reduced = cost[j] - sum([d * c for d, c in zip(duals, col, strict=True)])
                if reduced < best and j not in in_basis:
                    entering, best = j, reduced
            if entering < 0:
                return inv
            values = [sum(inv[r][k] * demand[k] for k in range(m)) for r in range(m)]
            step = [sum(inv[r][k] * cols[entering][k] for k in range(m)) for r in range(m)]
            ratios = [(values[r] / step[r], basis[r], r) for r in range(m) if step[r] > _TOL]
            if not ratios:
                return None  # unbounded: a column with no price
            basis[min(ratios)[2]] = entering
        return None

    phase1 = [0.0] * (n + m) + [1.0] * m
    inv = run(phase1, n + 2 * m)
    if inv is None:
        return None
    values = [sum(inv[r][k] * demand[k] for k in range(m)) for r in range(m)]
    scale = max(1.0, *(abs(d) for d in demand))
    if any(basis[r] in artificial and values[r] > _TOL * scale for r in range(m)):
        return None
    for r in range(m):  # drive artificials left at zero out of the basis
        if basis[r] in artificial:
            step_ok = False
            for j in range(n + m):
                if j in basis:
                    continue
                if abs(sum(inv[r][k] * cols[j][k] for k in range(m))) > _TOL:
                    basis[r] = j
                    step_ok = True
                    break
            if not step_ok:
                return None
            found = _invert([[cols[basis[c]][rr] for c in range(m)] for rr in range(m)])
            if found is None:
                return None
            inv = found
    cost = [*prices, *([0.0] * m), *([0.0] * m)]
    inv = run(cost, n + m)
    if inv is None:
        return None
    values = [sum(inv[r][k] * demand[k] for k in range(m)) for r in range(m)]
    duals = [sum(cost[basis[k]] * inv[k][r] for k in range(m)) for r in range(m)]
    amounts = [0.0] * n
    for r in range(m):
        if basis[r] < n:
            amounts[basis[r]] = max(0.0, values[r])
    total = sum(cost[basis[r]] * values[r] for r in range(m))
    return CoveringSolution(total, tuple(amounts), tuple(max(0.0, y) for y in duals))
